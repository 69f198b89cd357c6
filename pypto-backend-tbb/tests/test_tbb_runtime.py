"""Running TBB kernels: fast dispatch, thread count, clean interpreter exit, the shared compile cache."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import pypto as pt
from pypto.testing import CUBE_SCRIPT, N, counting_compiler, vector_add


def test_fast_entry_is_set_after_the_first_call_and_falls_back_correctly():
    @pt.kernel
    def scale(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] * 3.0

    a = np.arange(6, dtype=np.float32)
    c = np.empty_like(a)
    assert scale._fast is None
    assert scale(a, c) is c
    np.testing.assert_array_equal(c, 3 * a)
    assert scale._fast is not None
    entry = scale._fast[1]
    c2 = np.zeros_like(a)
    assert entry(a, c2) is c2 and (c2 == 3 * a).all()
    # anything unusual goes back to the full binder, which converts or raises typed errors
    assert entry(a[::2], np.empty(3, np.float32)) is NotImplemented
    strided = np.zeros(12, np.float32)[::2]
    scale(a, strided)
    np.testing.assert_array_equal(strided, 3 * a)
    with pytest.raises(pt.DTypeError, match="'x' has dtype float64"):
        scale(a.astype(np.float64), c)
    with pytest.raises(pt.ShapeError):
        scale(a, c[:5])


def test_aliasing_call_goes_through_cffi_without_restrict():
    a = np.arange(10, dtype=np.float32)
    vector_add(a, a, a)  # allowed: pointwise
    np.testing.assert_array_equal(a, 2 * np.arange(10))
    launcher = vector_add._launchers[("tbb", False)]
    assert getattr(launcher, "fast_entry", None) is None


def test_dispatch_overhead_is_small():
    import timeit

    a = np.ones(4, np.float32)
    c = np.empty_like(a)
    vector_add(a, a, c)
    best = min(timeit.repeat(lambda: vector_add(a, a, c), number=20000, repeat=5)) / 20000
    assert best < 5e-6, f"{best * 1e6:.2f} us per call"  # generous: CI machines are shared


def test_runtime_info_and_priority(monkeypatch):
    monkeypatch.setenv("PYPTO_NUM_THREADS", "1")
    info = pt.get_runtime_info()
    tbb = info["backends"]["tbb"]
    assert tbb["available"] and tbb["threads"] == 1 and tbb["priority"] == 90
    assert tbb["tbb"] == metadata.version("tbb-devel")
    assert "-std=gnu++17" in tbb["flags"] and "-fopenmp-simd" in tbb["flags"] and "-fopenmp " not in tbb["flags"]
    assert Path(tbb["tbb_library"]).name.startswith("libtbb.so.")
    monkeypatch.delenv("PYPTO_EXECUTOR")
    openmp = info["backends"].get("openmp", {})
    assert pt.get_runtime_info()["default_executor"] == ("openmp" if openmp.get("available") else "tbb")


_THREADS = """
import os, sys
if len(sys.argv) > 1:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # before TBB starts
import cffi, numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel
def twice(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * 2.0
x = np.ones(1 << 20, np.float32)
y = np.empty_like(x)
twice(x, y)
assert (y == 2).all()
ffi = cffi.FFI()
ffi.cdef("int pt_get_num_threads(void);")
lib = ffi.dlopen(twice._launchers[("tbb", True)].path)  # the object already loaded: same arena
print(pt.get_runtime_info()["backends"]["tbb"]["threads"], lib.pt_get_num_threads())
"""


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"PYPTO_NUM_THREADS": "1"}, 1),
        ({"PYPTO_NUM_THREADS": "2"}, 2),
        ({"PYPTO_NUM_THREADS": "5"}, 5),  # more than the CPUs: TBB's worker limit is raised
        ({"OMP_NUM_THREADS": "1"}, None),  # means nothing to TBB: every CPU of the process
    ],
)
def test_reported_thread_count_is_the_arenas(run_py, env, expected):
    r = run_py(_THREADS, env, drop=("OMP_NUM_THREADS",))
    assert r.returncode == 0, r.stderr
    reported, actual = map(int, r.stdout.split())
    assert reported == actual
    if expected is not None:
        assert actual == expected
    else:
        import os

        assert actual == len(os.sched_getaffinity(0))


def test_thread_count_follows_the_process_affinity(run_py, tmp_path):
    code = _THREADS.replace("if len(sys.argv) > 1:", "if True:")
    r = run_py(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1"]


_EXIT = """
import threading
import numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel
def add(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    c[i] = a[i] + b[i]
a = np.ones(1 << 21, np.float32)
c = pt.empty_like(a)
add(a, a, c)          # fast entry, tasks on every thread
add(a, a, a)          # aliasing call: the cffi-loaded variant
t = threading.Thread(target=add, args=(a, a, c))
t.start(); t.join()   # from another Python thread
assert (c == 4).all() and (a == 2).all()
print("done", flush=True)
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_interpreter_exits_cleanly_after_tbb_kernels(run_py, threads):
    r = run_py(_EXIT, {"PYPTO_NUM_THREADS": threads})
    assert r.returncode == 0, f"exit status {r.returncode}\n{r.stderr}"
    assert r.stdout.strip() == "done"
    assert "Segmentation" not in r.stderr and "Fatal" not in r.stderr and "terminate" not in r.stderr


# -- the compile cache (the core's, shared with the OpenMP backend) ----------------------------------


def test_compiled_kernels_are_cached_across_processes(run_py, tmp_path):
    cxx = counting_compiler(tmp_path, "c++")
    env = {"CXX": cxx.path, "PYPTO_CACHE_DIR": str(tmp_path / "cache")}
    for expected in (1, 1):
        r = run_py(CUBE_SCRIPT, env)
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
        assert cxx.count("cube.cpp") == expected  # the second process loads the cached object: no compiler run
        assert cxx.count("pt_tbb_runtime.cpp") == 1  # the runtime library too, built once and cached beside
    assert len(list((tmp_path / "cache").glob("tbb/*/*.so"))) == 1
    assert len(list((tmp_path / "cache").glob("runtime/tbb/*/*.so"))) == 1


_UNBOUND = """
import sys, cffi, numpy as np
ffi = cffi.FFI()
ffi.cdef("int twice(const float *x, float *y, int64_t N); int pt_get_num_threads(void);")
lib = ffi.dlopen(sys.argv[1])  # not through pypto: no runtime library bound
x = np.arange(1 << 20, dtype=np.float32)
y = np.zeros_like(x)
status = lib.twice(ffi.from_buffer("float[]", x), ffi.from_buffer("float[]", y), x.size)
print(status, lib.pt_get_num_threads(), bool((y == 2 * x).all()))
"""


def test_a_kernel_opened_without_pypto_runs_its_loops_on_one_thread(run_py):
    """A kernel's object opened by other code (cffi here) has no runtime bound: it still computes the right
    result, serially, and reports one thread, instead of calling through a null table."""
    r = run_py(_THREADS.split("ffi = cffi.FFI()")[0] + "print(twice._launchers[('tbb', True)].path)")
    assert r.returncode == 0, r.stderr
    import subprocess
    import sys

    path = r.stdout.split()[-1]  # the cached object, opened by a fresh interpreter that never imports pypto
    out = subprocess.run([sys.executable, "-c", _UNBOUND, path], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1", "True"]


def test_set_num_threads_gives_loaded_kernels_an_arena_of_that_size():
    import ctypes

    from pypto.targets import machine
    from pypto.targets.cpu.backend import apply_threads

    a = np.arange(6, dtype=np.float32)
    k = pt.kernel(executor="tbb")(vector_add.fn)
    k(a, a, np.empty_like(a))
    symbol = k._launchers[("tbb", True)].library.symbol("pt_get_num_threads")
    arena = ctypes.CFUNCTYPE(ctypes.c_int)(symbol)
    try:
        pt.set_num_threads(1)
        assert arena() == 1 and pt.get_runtime_info()["backends"]["tbb"]["threads"] == 1
        np.testing.assert_array_equal(k(a, a, np.empty_like(a)), 2 * a)
        pt.set_num_threads(2)
        assert arena() == 2
    finally:
        machine.set_threads(None)
        apply_threads(0)
