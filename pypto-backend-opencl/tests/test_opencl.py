"""The OpenCL backend: results against NumPy, generated code, device choice, cache and failures.

Runs on whatever OpenCL device the backend picks (PoCL's CPU device in CI); every test is
skipped, with the reason, when there is none. float32 results: rtol 1e-5 unless noted.
"""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pt
from pypto.plugins import get_registry
from pypto.testing import (
    N,
    assert_column_reductions_match_numpy,
    assert_contractions_match_numpy,
    assert_nan_poisons_only_its_row,
    assert_softmax_matches_numpy,
    layernorm,
    matmul,
    np_layernorm,
    np_softmax,
    np_sum_exp,
    run_python,
    softmax,
    sum_exp,
    unavailable_script,
    vector_add,
)
from pypto_opencl.target import cpu_lanes

_available = get_registry().backends.get("opencl")
pytestmark = pytest.mark.skipif(
    _available is None or not _available.availability.available,
    reason=f"OpenCL backend unavailable: {_available.availability.reason if _available else 'not installed'}",
)


def device():
    from pypto_opencl.device import get_device

    return get_device()


# -- results ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 1031), (300, 130), (2, 40000)])
def test_softmax_matches_numpy(shape):
    assert_softmax_matches_numpy(shape, rtol=1e-5, atol=1e-7)


def test_long_rows_take_the_online_variant():
    assert_softmax_matches_numpy((2, 150_000), rtol=1e-5, atol=1e-9, seed=1)


@pytest.mark.parametrize("n", [0, 1, 17, 16384, 16385, 1_000_003])
def test_full_reduction_matches_numpy(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.full(1, np.nan, np.float32)
    sum_exp(x, out)
    np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=2e-5)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000])
def test_vector_add_every_tail_length(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    vector_add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_layernorm_and_matmul_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 257)).astype(np.float32)
    g, bias = rng.random(257, dtype=np.float32), rng.random(257, dtype=np.float32)
    y = pt.empty_like(x)
    layernorm(x, g, bias, y)
    np.testing.assert_allclose(y, np_layernorm(x, g, bias), rtol=1e-4, atol=1e-5)
    a, b = rng.standard_normal((17, 40)).astype(np.float32), rng.standard_normal((40, 23)).astype(np.float32)
    c = pt.empty((17, 23))
    matmul(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mkn", [(1, 1, 1), (8, 1, 32), (9, 3, 33), (5, 0, 7), (130, 64, 257)])
def test_contractions_run_in_tiles_and_match_numpy(mkn):
    assert_contractions_match_numpy(*mkn, rtol=1e-5, atol=1e-5, executor="opencl")


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (3, 7), (64, 1031), (1031, 65), (5, 0)])
def test_column_reductions_run_in_column_groups_and_match_numpy(shape):
    # the rows are split over 8 threads per column and their partials combined in order: a float32 sum of up to
    # 1031 standard normals is compared with float64 to 1e-5 absolute
    assert_column_reductions_match_numpy(shape, rtol=2e-5, atol=1e-5, executor="opencl")
    from pypto.testing import column_stats

    assert "[columns: a work-group per block of columns" in column_stats.ir("plan_launch", backend="opencl")


def test_cpu_vectors_are_256_bits_of_the_widest_type_computed():
    @pt.kernel
    def with_index(a: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] + pt.cast(i, pt.float32)  # the loop variable as a value: int64 lanes

    @pt.kernel
    def doubles(a: pt.Tensor[pt.float64, (N,)], c: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] * 2.0

    def lanes(k):
        return cpu_lanes(k.program(backend="opencl").loops)

    assert (lanes(vector_add), lanes(softmax), lanes(with_index), lanes(doubles)) == (8, 8, 4, 4)
    if device().is_cpu:  # the target's vector_lanes pass records them; kernel.ir shows the stage
        assert with_index.program(backend="opencl").loops.device.lanes == 4
        assert "vector form printed over 4 lanes" in with_index.ir("vector_lanes", backend="opencl")
    a = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(with_index(a, pt.empty(1000)), a + np.arange(1000, dtype=np.float32))


def test_float64_when_the_device_has_it():
    if not device().fp64:
        pytest.skip("the device has no cl_khr_fp64")

    @pt.kernel
    def total(x: pt.Tensor[pt.float64, (N,)], out: pt.Tensor[pt.float64, (1,)]):
        i = pt.axis(0)
        out[0] = pt.reduce_sum(x[i] * x[i], axis=i)

    x = np.random.default_rng(4).standard_normal(50_000)
    out = np.zeros(1)
    total(x, out)
    np.testing.assert_allclose(out[0], (x * x).sum(), rtol=1e-12)


def test_integers_wrap_and_divide_like_numpy():
    @pt.kernel
    def ops(a: pt.Tensor[int, (N,)], b: pt.Tensor[int, (N,)], s: pt.Tensor[int, (N,)], q: pt.Tensor[int, (N,)]):
        i = pt.axis(0)
        s[i] = a[i] * b[i] + a[i]
        q[i] = a[i] // b[i] + a[i] % b[i]

    a = np.array([2**31 - 1, -(2**31), 7, -7, 7, 0, 5], np.int32)
    b = np.array([2, -1, -2, 2, 0, 0, 3], np.int32)
    s, q = np.empty_like(a), np.empty_like(a)
    ops(a, b, s, q)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(s, a * b + a)
        np.testing.assert_array_equal(q, np.where(b == 0, 0, a // np.where(b == 0, 1, b) + a % np.where(b == 0, 1, b)))


def test_nan_propagates_through_row_and_full_maxima():
    @pt.kernel
    def peak(x: pt.Tensor[float, (N,)], out: pt.Tensor[float, (1,)]):
        i = pt.axis(0)
        out[0] = pt.reduce_max(x[i], axis=i)

    assert_nan_poisons_only_its_row(seed=5)
    flat = np.random.default_rng(6).standard_normal(40_000).astype(np.float32)
    flat[33_333] = np.nan
    out = np.zeros(1, np.float32)
    peak(flat, out)
    assert np.isnan(out[0])


def test_full_reductions_are_deterministic():
    x = np.random.default_rng(7).standard_normal(3_000_001).astype(np.float32)
    outs = []
    for _ in range(3):
        out = np.zeros(1, np.float32)
        sum_exp(x, out)
        outs.append(out.view(np.uint32)[0])
    assert len(set(outs)) == 1


def test_scalars_and_strided_arguments():
    @pt.kernel
    def axpy(alpha: float, x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)], flag: bool):
        i = pt.axis(0)
        y[i] = pt.where(flag, alpha * x[i], x[i])

    x = np.arange(10, dtype=np.float32)[::2]
    y = np.zeros(10, np.float32)[::2]
    axpy(2.5, x, y, True)
    np.testing.assert_array_equal(y, np.float32(2.5) * x)
    axpy(2.5, x, y, False)
    np.testing.assert_array_equal(y, x)


# -- generated code ---------------------------------------------------------------------------------------


def test_generated_code_is_opencl_with_a_launch_plan():
    code = softmax.get_code()
    assert "__kernel void softmax_k1(" in code and "pt_group_max_f32" in code
    assert "/* pypto launch plan: " in code
    if device().is_cpu:  # CPU drivers get explicit vectors
        assert "vload8(0, x + row * N + col)" in code and "float8" in code  # 256-bit vectors of float32
    assert "cl_khr_fp64" not in code


def test_runtime_info_shows_the_device_and_its_limits():
    info = pt.get_runtime_info()["backends"]["opencl"]
    assert info["available"] and info["device"] and info["platform"]
    assert info["max_work_group_size"] >= 1 and info["local_mem_bytes"] > 0
    assert ("float64" in info["dtypes"]) == info["fp64"] == device().fp64


# -- processes, cache and failures ---------------------------------------------------------------------------


def _run_py(code: str, env: dict[str, str]):
    return run_python(code, env, drop=("POCL_CACHE_DIR",))


_CUBE = """
import numpy as np, pypto as pt, os
N = pt.dim("N")
@pt.kernel(executor="opencl")
def cube(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * x[i] * x[i] + 1.0
if os.environ.get("FORBID_BUILD"):
    import pypto_opencl.build as b
    def no(*a, **k):
        raise AssertionError("built again")
    b.build_binary = no
x = np.arange(100, dtype=np.float32)
y = np.empty_like(x)
cube(x, y)
assert np.allclose(y, x ** 3 + 1)
print("ok", os.environ.get("POCL_CACHE_DIR"))
"""


def test_program_binaries_are_cached_across_processes(tmp_path):
    env = {"PYPTO_CACHE_DIR": str(tmp_path / "cache")}
    first = _run_py(_CUBE, env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["ok", str(tmp_path / "cache" / "pocl")]  # POCL_CACHE_DIR defaults there
    assert len(list((tmp_path / "cache").glob("opencl/*/*.clbin"))) == 1
    second = _run_py(_CUBE, {**env, "FORBID_BUILD": "1"})
    assert second.returncode == 0, second.stderr  # served from the cache: no build


def test_no_platform_names_the_pocl_extra(tmp_path):
    code = unavailable_script("opencl", "__kernel void")
    r = _run_py(code, {"OCL_ICD_VENDORS": str(tmp_path / "none"), "PYPTO_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "UNAVAILABLE backend 'opencl' is installed but unavailable: no OpenCL platform found" in r.stdout
    assert "pip install pypto-backend-opencl[pocl]" in r.stdout and r.stdout.endswith("\nCODE\n")


def test_build_failure_shows_the_log_and_the_source():
    from pypto_opencl.build import build_binary, build_options

    source = "__kernel void ok(__global float *x) { x[0] = 1.0f; }\n__kernel void bad(__global float *x) {\n    x[0] = undefined_name;\n}\n"
    with pytest.raises(pt.CompileError) as ei:
        build_binary(device(), source, "bad", build_options(False))
    msg = str(ei.value)
    assert "building OpenCL kernel 'bad'" in msg and "undefined_name" in msg
    assert ">>     3 |     x[0] = undefined_name;" in msg


def test_out_of_resources_reports_the_limits():
    from pypto.errors import LaunchError

    x = np.ones((4, 8), np.float32)
    y = np.empty_like(x)
    softmax(x, y)
    from pypto.targets.simt.runner import LaunchPolicy

    class Oversized(LaunchPolicy):
        def group(self, hint, limit):
            return 1 << 20  # more work-items than any device allows

    launcher = softmax._launchers[("opencl", True)]
    launcher.runner.policy = Oversized()
    try:
        with pytest.raises(LaunchError, match="device limits .*work-groups of at most"):
            softmax(x, y)
    finally:
        softmax._launchers.clear()


def test_device_buffers_are_reused_between_calls():
    add = pt.kernel(vector_add.fn)
    a = np.ones(1000, np.float32)
    c = np.empty_like(a)
    add(a, a, c)
    launcher = add._launchers[("opencl", True)]
    if device().unified_memory:
        assert launcher.copies == {}  # host memory used in place
    else:
        first = dict(launcher.copies)
        add(a, a, c)
        assert launcher.copies == first


def test_pyopencl_arrays_are_used_in_place():
    import pyopencl.array as cla

    import pypto_opencl

    q = pypto_opencl.queue()
    add = pt.kernel(vector_add.fn)
    a = cla.to_device(q, np.arange(100, dtype=np.float32))
    c = cla.empty_like(a)
    assert add(a, a, c) is c  # the first call already: no host copy, no binder error
    np.testing.assert_array_equal(c.get(), 2 * np.arange(100, dtype=np.float32))
    launcher = add._launchers[("opencl", True)]
    assert launcher.copies == {}
    base = cla.to_device(q, np.arange(300, dtype=np.float32))
    step = device().device.mem_base_addr_align // 32  # the alignment of sub-buffers, in float32 elements
    out = cla.zeros(q, 16, np.float32)
    add(base[step : step + 16], base[step : step + 16], out)  # a view at an aligned offset: a sub-buffer
    np.testing.assert_array_equal(out.get(), 2 * np.arange(step, step + 16, dtype=np.float32))
    if step > 1:
        with pytest.raises(pt.ArgumentError, match="pass a copy of the view"):
            add(base[1:17], base[1:17], out)
    with pytest.raises(pt.ShapeError):
        add(a, a, cla.empty(q, 99, np.float32))
    with pytest.raises(pt.DTypeError):
        add(a, a, cla.empty(q, 100, np.float64))
    with pytest.raises(pt.AliasingError):
        add(a, a, a)


def test_gpu_style_kernels_and_group_sizes(monkeypatch, tmp_path):
    """The code and launch sizes a GPU gets (groups of 32 to 256 work-items reducing in local memory,
    rows cached in local memory), run on this device whatever it is."""
    from pypto_opencl import launcher, target

    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))  # binaries of CPU-style code must not be reused
    monkeypatch.setattr(target, "device_is_cpu", lambda: False)  # vector_lanes records 1: GPU-style code
    monkeypatch.setattr(launcher, "policy_for", lambda dev: launcher.GPU_POLICY)
    fits = launcher._Kernel.fits
    cached = []
    monkeypatch.setattr(launcher._Kernel, "fits", lambda self, *a: cached.append(fits(self, *a)) or cached[-1])
    rng = np.random.default_rng(11)
    sm = pt.kernel(softmax.fn)
    for shape in [(3, 7), (64, 1031), (2, 150_000)]:
        x = rng.standard_normal(shape).astype(np.float32)
        y = pt.empty_like(x)
        sm(x, y)
        np.testing.assert_allclose(y, np_softmax(x), rtol=1e-5, atol=1e-8)
    assert "pt_row_x" in sm.get_code() and "vload8" not in sm.get_code()
    assert True in cached  # the variant reading each row once ran
    total = pt.kernel(sum_exp.fn)
    for n in (1, 16385, 1_000_003):
        x = rng.standard_normal(n).astype(np.float32)
        out = np.zeros(1, np.float32)
        total(x, out)
        np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=2e-5)


R, C = pt.dims("R C")


@pt.kernel(executor="opencl")
def running(x: pt.Tensor[pt.float64, (R, C)], s: pt.Tensor[pt.float64, (R, C)], back: pt.Tensor[pt.float64, (R, C)],
            hi: pt.Tensor[pt.float64, (R, C)], lo: pt.Tensor[pt.float64, (R, C)], pos: pt.Tensor[pt.int32, (R, C)],
            share: pt.Tensor[pt.float64, (R, C)]):  # fmt: skip
    r, c = pt.axis(0), pt.axis(1)
    s[r, c] = pt.cumsum(x[r, c], axis=c)
    back[r, c] = pt.cumprod(1.0 + 0.01 * x[r, c], axis=c, reverse=True)
    hi[r, c] = pt.cummax(x[r, c], axis=c)
    lo[r, c] = pt.cummin(x[r, c], axis=c)
    pos[r, c] = pt.cumsum(pt.cast(x[r, c] > 0, pt.int32), axis=c)
    share[r, c] = pt.cumsum(x[r, c] * x[r, c], axis=c) / pt.reduce_sum(x[r, c] * x[r, c], axis=c)


@pt.kernel(executor="opencl")
def running_1d(x: pt.Tensor[pt.float32, (C,)], y: pt.Tensor[pt.float32, (C,)]):
    i = pt.axis(0)
    y[i] = pt.cumsum(x[i], axis=i)


def test_gpu_style_scans_are_group_prefixes(monkeypatch, tmp_path):
    """With a GPU's launch sizes, running reductions are prefixes over work-groups of 32 to 256 work-items
    (each step a work-item, the group's total carried to its next steps), on rows shorter and longer than a
    group and on a long scan in blocks; against NumPy, the float sums within the tolerance of a different
    order of additions, everything else exact."""
    from pypto_opencl import launcher, target

    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(target, "device_is_cpu", lambda: False)
    monkeypatch.setattr(launcher, "policy_for", lambda dev: launcher.GPU_POLICY)
    rng = np.random.default_rng(5)
    k = pt.kernel(running.fn)
    for shape in [(3, 1), (4, 7), (5, 300), (2, 1025)]:
        x = rng.standard_normal(shape)
        x[0, shape[1] // 2] = np.nan
        outs = [np.empty(shape) for _ in range(4)] + [np.empty(shape, np.int32), np.empty(shape)]
        k(x, *outs)
        s, back, hi, lo, pos, share = outs
        np.testing.assert_allclose(s, np.cumsum(x, 1), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(back, np.flip(np.cumprod(np.flip(1 + 0.01 * x, 1), 1), 1), rtol=1e-12)
        np.testing.assert_array_equal(hi, np.maximum.accumulate(x, 1))
        np.testing.assert_array_equal(lo, np.minimum.accumulate(x, 1))
        np.testing.assert_array_equal(pos, np.cumsum(x > 0, 1))
        np.testing.assert_allclose(share, np.cumsum(x * x, 1) / np.sum(x * x, 1, keepdims=True), rtol=1e-12)
    code = k.get_code()
    assert "pt_groupscan_sum_f64" in code and "pt_groupscan_max_f64" in code
    one = pt.kernel(running_1d.fn)
    for n in (1, 257, 65536 * 2 + 3):
        x = rng.standard_normal(n).astype(np.float32)
        y = np.empty_like(x)
        one(x, y)
        np.testing.assert_allclose(y, np.cumsum(x.astype(np.float64)), rtol=0, atol=2e-6 * np.sqrt(n))
    assert "pt_groupscan_sum_f32" in one.get_code()


def test_without_a_linker_pocl_is_unavailable_not_a_crash(run_py):
    """PoCL's CPU device links kernels with `ld`: without it, a build would abort the process."""
    code = """
import numpy as np, pypto as pt
N = pt.dim("N")

@pt.kernel(executor="opencl")
def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * 3.5

x = np.ones(4, np.float32)
try:
    k(x, np.empty_like(x))
    print("ran")
except pt.BackendUnavailable as e:
    print("unavailable:", e)
"""
    r = run_py(code, {"PATH": ""})
    assert r.returncode == 0, r.stderr[-2000:]
    from pypto_opencl.device import get_device

    if "portable computing language" in get_device().platform.lower():
        assert "unavailable: backend 'opencl' is installed but unavailable: " in r.stdout
        assert "PoCL's CPU device links kernels with the system linker 'ld'" in r.stdout
    else:  # a vendor driver needs no system linker
        assert "ran" in r.stdout or "unavailable" in r.stdout
