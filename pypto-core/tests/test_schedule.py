"""The schedule stage: every nest's schedule is data printed by ``kernel.ir("schedule")``, derived from the
access pattern and the target's machine, and the user's hints (``@pt.tile``, ``schedule=``) override it or
fail with a :class:`pt.ScheduleError` naming the hint.

These run without any backend installed: a kernel with no resolvable backend is scheduled for this host.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pypto as pt
from pypto.passes.schedule import REDUCTION_BLOCK, register_tile, transpose_tile
from pypto.targets.machine import SIMT_DEVICE, Machine, host_cpu
from pypto.testing import column_stats, dense_relu, matmul, softmax, sum_exp, transpose_add, vector_add

M, N, K = pt.dims("M", "N", "K")


def nest_lines(kernel, stage: str = "schedule") -> list[str]:
    return [line.strip() for line in kernel.ir(stage).splitlines() if line.strip().startswith("nest ")]


def test_each_access_pattern_gets_its_schedule():
    mr, nr = register_tile(host_cpu(), 4)
    side = transpose_tile(host_cpu())
    (mm,) = nest_lines(matmul)
    assert (
        f"schedule: contraction order=(i, j) parallel=i vector=j tile(j={nr}, k={REDUCTION_BLOCK}) register={mr}x{nr} pack=(b)"
        in mm
    )
    (dense,) = nest_lines(dense_relu)
    assert "pack=(w)" in dense and "contraction" in dense
    (cols,) = nest_lines(column_stats)
    assert "schedule: columns order=(j) parallel=j vector=j" in cols
    (tr,) = nest_lines(transpose_add)
    assert f"schedule: transpose order=(c, r) parallel=c vector=r tile(c={side}, r={side})" in tr
    (sm,) = nest_lines(softmax)
    assert "schedule: rows order=(row, col) parallel=row vector=col" in sm
    (add,) = nest_lines(vector_add)
    assert "schedule: map order=(i) parallel=i vector=i" in add
    assert "schedule: full-reduction" in nest_lines(sum_exp)[0]
    assert "machine: " + host_cpu().describe() in matmul.ir("schedule")


def test_a_scan_down_columns_walks_the_rows_along_blocks_of_columns(pypto_executor, rng):
    """``pt.cumsum(x, axis=0)`` of a row-major array: its nest is a ``column-scan``, which the CPU target walks
    row by row along blocks of columns (each column's running sum in a vector) instead of down each column; a
    scan along the rows stays a ``scan``. The results are NumPy's."""

    @pt.kernel(executor=pypto_executor)
    def down(x: pt.Tensor[pt.float64, (M, N)], y: pt.Tensor[pt.float64, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.cumsum(x[r, c], axis=r)

    @pt.kernel(executor=pypto_executor)
    def along(x: pt.Tensor[pt.float64, (M, N)], y: pt.Tensor[pt.float64, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.cumsum(x[r, c], axis=c)

    assert "schedule: column-scan order=(c, r) parallel=c" in nest_lines(down)[0]
    assert "schedule: scan order=(r, c) parallel=r" in nest_lines(along)[0]
    if "openmp" in pt.get_runtime_info()["backends"]:
        text = down.ir(backend="openmp")
        assert "rows walked along each block" in text and "vector for c in" in text
    for shape in [(37, 300), (1, 5), (300, 3)]:
        x = rng.standard_normal(shape)
        y, z = np.empty_like(x), np.empty_like(x)
        down(x, y)
        along(x, z)
        np.testing.assert_allclose(y, np.cumsum(x, 0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(z, np.cumsum(x, 1), rtol=1e-12, atol=1e-12)


def test_schedules_come_from_the_machine():
    avx2 = Machine("x86_64 avx2", 32, 16, 32 << 10, 1 << 20, 4)
    assert register_tile(avx2, 4) == (6, 16)  # 12 accumulators + a row of b + a broadcast in 16 registers
    assert register_tile(avx2, 8) == (6, 8)
    avx512 = Machine("x86_64 avx512", 64, 32, 48 << 10, 2 << 20, 4)
    assert register_tile(avx512, 4) == (8, 32)
    assert transpose_tile(avx512) == 128 and transpose_tile(Machine("small", 16, 16, 16 << 10, 1 << 20, 1)) == 64
    m = host_cpu()
    assert m.vector_bytes in (16, 32, 64) and m.l1 >= 4096 and m.l2 >= m.l1 and m.threads >= 1
    assert host_cpu() is m  # probed once
    assert SIMT_DEVICE.lanes(4) == 32


def matmul_h(a: pt.Tensor[float, (M, K)], b: pt.Tensor[float, (K, N)], c: pt.Tensor[float, (M, N)]):
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    c[i, j] = pt.reduce_sum(a[i, k] * b[k, j], axis=k)


def scale_h(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    r, c = pt.axis(0), pt.axis(1)
    y[r, c] = x[r, c] * 2.0


def test_tile_hints_override_the_choice_in_either_decorator_order():
    under = pt.kernel(pt.tile(i=64, j=256)(_copy(matmul_h)))
    over = pt.tile(i=64, j=256)(pt.kernel(matmul_h))
    for k in (under, over):
        (line,) = nest_lines(k)
        assert "tile(i=64, j=256, k=1024)" in line and "hinted=(tile i, tile j)" in line  # k: the default block
        assert "hints: Schedule(tile={'i': 64, 'j': 256})" in k.ir("schedule")
    k = pt.tile(i=64, j=256, k=128)(pt.kernel(matmul_h))  # blocks of the reduced axis too
    assert "tile(i=64, j=256, k=128)" in nest_lines(k)[0]
    # the hints reach the loop IR a backend compiles (so they are part of its cache key)
    assert "tile(i=64, j=256, k=1024)" in under.ir("lower") and "tile(i=64" not in pt.kernel(matmul_h).ir("lower")
    # schedule= is laid over @pt.tile; size= tiles every axis a nest tiles
    k = pt.kernel(pt.tile(i=64)(_copy(matmul_h)), schedule={"tile": {"i": 32}, "size": 96})
    assert "tile(i=32, j=96, k=96)" in nest_lines(k)[0]


def _copy(fn):
    """A fresh function object (so that one test's hints do not stick to a shared function)."""
    import types

    f = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    f.__annotations__ = fn.__annotations__
    return f


def test_order_and_parallel_hints():
    k = pt.kernel(_copy(scale_h), schedule=pt.Schedule(order=("c", "r"), parallel=False))
    (line,) = nest_lines(k)
    assert "map order=(c, r) parallel=none vector=r" in line and "hinted=(order, parallel)" in line
    lowered = k.ir("lower")
    assert re.search(r"^\s+for c in", lowered, re.M) and "parallel for" not in lowered
    k = pt.kernel(_copy(scale_h), schedule=pt.Schedule(parallel="r", tile={"r": 16, "c": 32}))
    assert "map order=(r, c) parallel=r vector=c tile(r=16, c=32)" in nest_lines(k)[0]


@pytest.mark.parametrize(
    "make, param, words",
    [
        (lambda: pt.kernel(pt.tile(q=8)(_copy(matmul_h))), "q", ["kernel 'matmul_h' has no axis 'q'", "i, j, k"]),
        (
            lambda: pt.tile(col=8)(softmax),
            "col",
            ["no loop nest", "tiles axis 'col'", "none (a rows nest has no tiles)"],
        ),
        (lambda: pt.kernel(_copy(scale_h), schedule={"parallel": "c"}), "parallel", ["outermost loop", "'r' or False"]),
        (
            lambda: pt.kernel(_copy(matmul_h), schedule={"order": ("j", "i")}),
            "order",
            ["contraction nest", "without reductions"],
        ),
        (lambda: pt.kernel(_copy(matmul_h), schedule={"order": ("i", "k")}), "order", ["no loop nest", ": (i, j)"]),
        (lambda: pt.kernel(_copy(matmul_h), schedule={"register": (8, 3)}), "register", ["multiple of"]),
        (lambda: pt.kernel(_copy(matmul_h), schedule={"register": (64, 64)}), "register", ["at most 16 rows"]),
    ],
)
def test_invalid_hints_name_the_hint_and_the_allowed_values(make, param, words):
    kernel = make()
    with pytest.raises(pt.ScheduleError) as err:
        kernel.ir("schedule")
    assert err.value.param == param
    for w in words:
        assert w in str(err.value), str(err.value)


def test_hints_of_the_wrong_type_fail_at_the_decorator():
    with pytest.raises(pt.ScheduleError, match=r"tile\['i'\] must be a positive integer"):
        pt.tile(i=0)
    with pytest.raises(pt.ScheduleError, match="must be a positive integer"):
        pt.tile(i=True)
    with pytest.raises(pt.ScheduleError, match="size must be a positive integer"):
        pt.tile(size=2.5)
    with pytest.raises(pt.ScheduleError, match="unknown keys"):
        pt.kernel(matmul_h, schedule={"tiles": {"i": 4}})
    with pytest.raises(pt.ScheduleError, match="order must be a sequence"):
        pt.Schedule(order="ij")
    with pytest.raises(pt.ScheduleError, match="order names an axis twice"):
        pt.Schedule(order=("i", "i"))
    with pytest.raises(pt.ScheduleError, match="register must be"):
        pt.Schedule(register=8)
    with pytest.raises(pt.ScheduleError, match="pt.Schedule or a dict"):
        pt.kernel(matmul_h, schedule=[("i", 4)])


def test_a_tile_hint_on_a_kernel_without_source_says_why_its_axes_are_numbered():
    namespace: dict = {"pt": pt}
    exec(  # noqa: S102 - a kernel without readable source (as typed at a prompt)
        "N = pt.dim('N')\n"
        "def flip(x: pt.Tensor[pt.float32, (N, N)], y: pt.Tensor[pt.float32, (N, N)]):\n"
        "    i, j = pt.axis(0), pt.axis(1)\n"
        "    y[i, j] = x[j, i]\n",
        namespace,
    )
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.raises(pt.ScheduleError, match="its axes are i0, i1 .its source could not be read") as e:
        pt.tile(i=2)(pt.kernel(namespace["flip"], executor="reference"))(x, np.zeros_like(x))
    assert "pt.axis(0) is i0" in str(e.value)
    y = np.zeros_like(x)
    pt.tile(i0=2)(pt.kernel(namespace["flip"], executor="reference"))(x, y)
    np.testing.assert_array_equal(y, x.T)
