"""The runtime API: inspection, benchmarking, runtime info, allocation, argument kinds."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pypto as pt
from pypto.testing import N, softmax, sum_exp, vector_add


def test_ir_every_stage_is_printable():
    assert softmax.stages[0] == "traced" and softmax.stages[-2:] == ("lower", "optimize_loops")
    for stage in softmax.stages:
        text = softmax.ir(stage)
        assert "softmax" in text
    loops = softmax.ir("optimize_loops")
    assert "parallel for row" in loops
    assert "* inv" in loops and "/ sum" in softmax.ir("lower")  # reciprocal of the row sum
    # fusion: the row max and row sum are computed per row, before the loop that writes the row
    lowered = loops
    assert lowered.index("var max_") < lowered.index("var sum_") < lowered.rindex("y[row, col] =")


def test_sum_exp_needs_no_temporary():
    assert "temp " not in sum_exp.ir("materialize")
    assert "alloc _t" not in sum_exp.ir("optimize_loops")


def test_ir_shows_by_default_the_stage_the_backend_renders():
    import dataclasses
    import types

    from pypto.backends.reference import ReferenceBackend
    from pypto.passes import REFERENCE_STAGE
    from pypto.plugins import get_registry

    assert get_registry().backends["reference"].spec.stage == REFERENCE_STAGE
    ref = pt.kernel(executor="reference")(softmax.fn)
    assert ref.ir() == ref.ir(REFERENCE_STAGE) and "reduce_sum" in ref.ir()  # what the NumPy code evaluates
    # a backend that names no stage renders the loop IR after its target's last pass (here: no target)
    plugin = types.ModuleType("loops_backend")

    class Loops(ReferenceBackend):
        spec = dataclasses.replace(ReferenceBackend.spec, name="refloops", stage=None, priority=-99)

    plugin.pypto_backends = pt.hookimpl(lambda: [Loops()])
    pt.register_plugin(plugin, "refloops")
    try:
        assert ref.ir(backend="refloops") == ref.ir("optimize_loops") != ref.ir()
    finally:
        pt.unregister_plugin("refloops")


def test_dump_ir_prints_every_pass(monkeypatch, capsys):
    monkeypatch.setenv("PYPTO_DUMP_IR", "1")

    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] + 1.0

    k.ir()
    err = capsys.readouterr().err
    for stage in k.stages:
        assert f"--- pypto IR after {stage} ---" in err


def test_get_code_reference_is_numpy_source():
    code = softmax.get_code(backend="reference")
    assert code.startswith("def softmax(x, y, M, N):") and "_np.exp" in code
    assert softmax.get_code() == code  # PYPTO_EXECUTOR=reference in these tests


def test_benchmark_result_fields():
    a = np.ones(1000, np.float32)
    c = np.empty_like(a)
    r = pt.benchmark(vector_add, (a, a, c), warmup=2, repeat=5)
    assert len(r.times) == 5 and r.repeat == 5 and r.warmup == 2
    assert 0 < r.min <= r.median <= max(r.times) and r.min <= r.mean and r.std >= 0
    assert "median" in str(r)
    r2 = pt.benchmark(lambda x: x + 1, (a,), warmup=0, repeat=3, number=4)
    assert r2.number == 4
    with pytest.raises(pt.ArgumentError, match="repeat must be an int >= 1"):
        pt.benchmark(vector_add, (a, a, c), repeat=0)


def test_runtime_info_contents():
    info = pt.get_runtime_info()
    json.dumps(info)  # plain data
    assert info["pypto"] == pt.__version__
    ref = info["backends"]["reference"]
    assert ref["available"] is True and ref["version"] == pt.__version__ and ref["plugin"] == "reference"
    assert ref["threads"] == 1 and "device" in ref and "float32" in ref["dtypes"]
    assert info["default_executor"] == "reference"
    assert info["cache_dir"] and isinstance(info["cache_enabled"], bool)
    assert info["env"]["PYPTO_EXECUTOR"] == "reference"


def test_list_backends_includes_reference_last():
    names = pt.list_backends()
    assert names[-1] == "reference" or "reference" in names


@pytest.mark.parametrize("fn", [pt.empty, pt.zeros])
def test_aligned_allocation(fn):
    for shape in [(1,), (3, 5), (0,), 17]:
        a = fn(shape, float)
        assert a.dtype == np.float32 and a.flags.c_contiguous and (a.size == 0 or a.ctypes.data % 64 == 0)
    z = pt.zeros((2, 3), pt.int64, align=128)
    assert z.ctypes.data % 128 == 0 and z.dtype == np.int64 and not z.any()
    e = pt.empty_like(np.ones((4, 4), np.float64))
    assert e.shape == (4, 4) and e.dtype == np.float64 and e.ctypes.data % 64 == 0
    assert pt.zeros_like(np.ones(3, np.int32)).dtype == np.int32
    with pytest.raises(pt.ArgumentError, match="power of two"):
        pt.empty(3, align=48)
    with pytest.raises(pt.ArgumentError, match="negative"):
        pt.empty((-1,))


class ArrayInterfaceOnly:
    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


def test_inputs_via_array_interface_dlpack_and_lists():
    a = np.arange(4, dtype=np.float32)
    c = np.empty_like(a)
    vector_add(ArrayInterfaceOnly(a), _DLPackOnly(a), c)
    np.testing.assert_array_equal(c, 2 * a)
    vector_add([1.0, 2.0, 3.0, 4.0], a, c)
    np.testing.assert_array_equal(c, a + [1, 2, 3, 4])
    # an output given through __array_interface__ is written in place
    out = np.zeros(4, np.float32)
    vector_add(a, a, ArrayInterfaceOnly(out))
    np.testing.assert_array_equal(out, 2 * a)


class _DLPackOnly:
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_non_contiguous_inputs_and_outputs_are_handled():
    base = np.arange(20, dtype=np.float32)
    a = base[::2]  # strided view
    out_base = np.zeros(20, np.float32)
    c = out_base[1::2]
    vector_add(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
    np.testing.assert_array_equal(out_base[::2], 0)  # neighbours untouched
    x = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = np.empty((3, 4), np.float32, order="F")
    softmax(x, y)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=2e-6)


def test_arguments_copied_on_every_call_are_named_once_per_kernel():
    import warnings

    k = pt.kernel(softmax.fn)
    x = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = np.empty((3, 4), np.float32)
    with pytest.warns(
        pt.PerformanceWarning, match=r"'x' \(Fortran-ordered, shape \(3, 4\).*copied to a C-ordered"
    ) as w:
        k(x, y)
    assert w[0].filename == __file__  # points at the call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k(x, y)  # once per kernel
        k(np.ascontiguousarray(x), y)
    v = pt.kernel(vector_add.fn)
    a = np.arange(20, dtype=np.float32)[::2]
    with pytest.warns(pt.PerformanceWarning, match=r"'c' \(strided.*copied back after the call"):
        v(a, a, np.zeros(20, np.float32)[::2])


def test_kernel_repr_and_name():
    k = pt.kernel(executor="reference", fastmath=True)(vector_add.fn)
    assert "executor='reference'" in repr(k) and "fastmath=True" in repr(k)
    assert k.name == "vector_add" and k.__name__ == "vector_add"
    with pytest.raises(pt.ArgumentError, match="fastmath must be True or False"):
        pt.kernel(fastmath="yes")(vector_add.fn)


def test_compile_warms_up():
    k = pt.kernel(vector_add.fn)
    assert k.compile() is k


def test_failed_launch_poisons_float_outputs(monkeypatch):
    k = pt.kernel(vector_add.fn)
    a = np.ones(3, np.float32)
    c = np.zeros(3, np.float32)

    def boom(*args):
        args[2][0] = 42.0  # half-written
        raise MemoryError("device ran out of memory")

    monkeypatch.setattr(k, "_launcher", lambda backend, noalias: boom)
    with pytest.raises(MemoryError) as ei:
        k(a, a, c)
    assert np.isnan(c).all()
    assert any("filled with NaN" in n for n in getattr(ei.value, "__notes__", []))


def test_import_is_fast_and_lazy():
    code = (
        "import time, sys; t = time.perf_counter(); import numpy; t1 = time.perf_counter(); import pypto; "
        "t2 = time.perf_counter(); import pypto.plugins as p; "
        "print(t1 - t, t2 - t, p._registry is None, 'cffi' in sys.modules, 'pycparser' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            .stdout.split() for _ in range(4)]  # fmt: skip
    numpy_s = min(float(r[0]) for r in runs)
    total_s = min(float(r[1]) for r in runs)
    assert runs[-1][2:] == ["True", "False", "False"]  # no plugin loaded, no compiler toolchain imported
    # `import pypto` may add at most 0.05 s to NumPy's import (it loads its public names on first use);
    # NumPy's own import time depends on the machine's load and is not pypto's to check
    assert total_s - numpy_s < 0.05, f"pypto adds {total_s - numpy_s:.3f} s to NumPy's import"


_M, _N = pt.dims("M N")


@pt.kernel(executor="reference")
def _column_variance(x: pt.Tensor[float, (_M, _N)], v: pt.Tensor[float, (_N,)]):
    i, j = pt.axis(0), pt.axis(1)
    d = x[i, j] - pt.reduce_mean(x[i, j], axis=i)
    v[j] = pt.reduce_sum(d * d, axis=i)


def test_block_columns_walks_rows_for_cpu_targets_only():
    from pypto.ir.loops import Loop, walk
    from pypto.ir.printer import format_loops
    from pypto.targets.cpu.columns import block_columns
    from pypto.testing import column_stats

    loops = column_stats.program(backend="reference").loops
    # lowered for every target: a parallel loop over columns, each reduction walking down a column
    (top,) = [s for s in loops.body.body if isinstance(s, Loop)]
    assert top.var == "j" and top.kind == "parallel"
    out = block_columns(loops)
    text = format_loops(out)
    assert "i in blocks of _rowblk rows reduced in parallel into partial rows of j" in text
    # one walk along each row block folds all three reductions; then the partial rows are combined
    (fold,) = [s for s in walk(out.body) if isinstance(s, Loop) and s.var == "i"]
    assert fold.body.var == "j" and fold.body.kind == "vector" and len(fold.body.body.body) == 4
    # several phases down each column (the column mean feeds the sum of squares): blocks of columns instead
    assert "rows walked along each block" in format_loops(
        block_columns(_column_variance.program(backend="reference").loops)
    )
    # row reductions and device targets are left alone
    from pypto.passes import pipeline
    from pypto.plugins import get_target

    assert "block_columns" not in [name for name, _ in pipeline(get_target("simt"))]
    assert block_columns(softmax.program(backend="reference").loops) == softmax.program(backend="reference").loops


def test_streams_are_passed_through_and_ignored_by_cpu_backends():
    a = np.arange(8, dtype=np.float32)
    c = np.empty_like(a)
    assert pt.current_stream() is None
    with pt.stream(7) as s:
        assert s == 7 and pt.current_stream() == 7
        with pt.stream("inner"):
            assert pt.current_stream() == "inner"
        assert pt.current_stream() == 7
    assert pt.current_stream() is None
    vector_add(a, a, c, stream=3)  # a host backend has no streams: the call runs as usual
    np.testing.assert_array_equal(c, 2 * a)
    assert pt.current_stream() is None


class _DeviceArray:
    """Something in GPU memory as the core sees it: only ``__cuda_array_interface__``."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (4096, False), "version": 3}


def test_device_arrays_are_described_not_read():
    from pypto.runtime.device_arrays import describe, empty_like_device, is_device_array, probe

    d = _DeviceArray((3, 4))
    assert is_device_array(d) and not is_device_array(np.zeros(3)) and not is_device_array(3.0)
    assert describe(d) == ((3, 4), np.dtype(np.float32)) and describe(np.zeros(3)) is None
    p = probe((3, 4), np.dtype(np.float64))
    assert p.shape == (3, 4) and p.dtype == np.float64 and p.nbytes == 96 and p.strides == (0, 0)
    with pytest.raises(pt.ArgumentError, match="cannot allocate results on the device of a _DeviceArray"):
        empty_like_device(d, (2,), np.dtype(np.float32))


def test_jit_functions_key_device_arrays_by_shape_and_dtype():
    @pt.jit
    def double(x):
        return x * 2

    host = double(np.ones((3, 4), np.float32))
    with pytest.raises(pt.ArgumentError, match="cannot allocate results on the device"):
        double(_DeviceArray((3, 4)))  # traced like the host array's signature, then no allocator for it
    assert len(double._cache) == 1 and host.shape == (3, 4)


def test_profile_counts_operations_with_the_op_table_costs():
    """pt.profile's operation count is the op table's costs times the points each node is computed at:
    here per element of an M x N input a sigmoid (a formula of 4 operations: neg, exp, add, div), a multiply,
    a conversion (none) and the sum's combine (1), and per row a maximum (1)."""
    from pypto.ir.ops import BINARY, CAST, MATH, REDUCERS

    M, N = pt.dims("M N")

    @pt.kernel(executor="reference")
    def costs(x: pt.Tensor[pt.float32, (M, N)], y: pt.Tensor[pt.float64, (M,)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r] = pt.maximum(pt.reduce_sum(pt.cast(pt.sigmoid(x[r, c]) * x[r, c], pt.float64), axis=c), 0.0)

    x = np.random.default_rng(0).normal(size=(7, 9)).astype(np.float32)
    y = np.empty(7)
    with pt.profile() as prof:
        costs(x, y)
    per_element = MATH["sigmoid"].flops + BINARY["mul"].flops + CAST.flops + REDUCERS["sum"].flops
    assert (MATH["sigmoid"].flops, CAST.flops) == (4, 0)
    assert prof.stats["costs"].flops == x.size * per_element + 7 * BINARY["maximum"].flops
    s = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(y, np.maximum((s * x).sum(axis=1), 0), rtol=1e-6)


def test_the_driver_compiles_ir_through_every_stage(monkeypatch):
    """pypto.driver.compile: IR and a backend in, every stage's IR, the program and a launcher out; a Kernel
    reaches the backend through the same driver functions."""
    from pypto import driver

    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    compiled = driver.compile(vector_add.traced, "reference")
    assert compiled.backend == "reference" and compiled.program.name == "vector_add"
    assert list(compiled.compilation.loop_stages) == ["lower", "optimize_loops"]
    c = np.empty_like(a)
    compiled.launcher(a, b, c, 5)  # validated arguments in loop-IR order: buffers, then dims
    np.testing.assert_array_equal(c, a + b)
    kernel = pt.kernel(executor="reference")(vector_add.fn)
    assert kernel.program().loops == compiled.program.loops and kernel.program().ir_text == compiled.program.ir_text
    seen = []
    real = driver.launcher
    monkeypatch.setattr(
        driver, "launcher", lambda prog, backend: seen.append((prog.name, backend)) or real(prog, backend)
    )
    np.testing.assert_array_equal(kernel(a, b, pt.empty(5)), a + b)
    assert seen == [("vector_add", "reference")]
    with pytest.raises(pt.BackendNotFound):
        driver.compile(vector_add.traced, "no-such-backend")


def test_profile_counts_each_value_once_against_the_analytic_count():
    """Operations per call against the analytic count, each value computed once: a matmul's 2·M·N·K; softmax's
    max and sum per element reduced, and per element a subtraction, an exp and a division; RMSNorm's square and
    sum per element, per row the mean's division, + eps and a reciprocal square root (2), per element two
    products (a row's statistics are not counted again for every element that uses them)."""
    from pypto.testing import matmul, softmax

    M, N = pt.dims("M N")

    @pt.kernel(executor="reference")
    def rmsnorm(x: pt.Tensor[float, (M, N)], g: pt.Tensor[float, (N,)], y: pt.Tensor[float, (M, N)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = x[r, c] * pt.rsqrt(pt.reduce_mean(x[r, c] * x[r, c], axis=c) + 1e-6) * g[c]

    rng = np.random.default_rng(1)
    m, n, k = 12, 40, 24
    a, w = rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32)
    x, g = rng.normal(size=(m, n)).astype(np.float32), rng.normal(size=n).astype(np.float32)
    mm, sm = pt.kernel(executor="reference")(matmul.fn), pt.kernel(executor="reference")(softmax.fn)
    with pt.profile() as prof:
        mm(a, w, np.empty((m, n), np.float32))
        sm(x, np.empty_like(x))
        rmsnorm(x, g, np.empty_like(x))
    assert prof.stats["matmul"].flops == 2 * m * n * k
    assert prof.stats["softmax"].flops == 5 * m * n
    assert prof.stats["rmsnorm"].flops == 4 * m * n + 4 * m


def test_a_long_compile_shows_one_progress_line(monkeypatch, capsys):
    import contextlib
    import time

    from pypto import compiler
    from pypto.runtime import kernel as kernel_module

    monkeypatch.setattr(compiler, "PROGRESS_AFTER", 0.05)
    monkeypatch.setenv("PYPTO_PROGRESS", "1")  # stderr is not a terminal here
    with compiler.progress("compiling kernel 'slow' for openmp"):
        with compiler.progress("an inner step"):  # inside other work: only the outer line
            time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "pypto: compiling kernel 'slow' for openmp ..."
    assert err[1].startswith("pypto: compiling kernel 'slow' for openmp: done in ") and len(err) == 2
    with compiler.progress("fast"):
        pass
    monkeypatch.setenv("PYPTO_PROGRESS", "0")
    with compiler.progress("switched off"):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""
    seen = []

    @contextlib.contextmanager
    def record(what):
        seen.append(what)
        yield

    monkeypatch.setattr(kernel_module, "progress", record)
    pt.kernel(executor="reference")(vector_add.fn)(np.ones(3, np.float32), np.ones(3, np.float32), pt.empty(3))
    assert seen == ["compiling kernel 'vector_add' for reference"]
