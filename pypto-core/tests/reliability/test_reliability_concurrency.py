"""Concurrency and long runs: one kernel from eight threads on every backend, backends interleaved in one
process, the resident memory of many calls and of many distinct kernels, and native kernels unloaded
when nothing refers to them (also while other threads still call them).

Native backends release the GIL while a kernel runs (openmp and tbb around the C call, opencl while it
waits for the device, numba's compiled loops are ``nogil``); the reference backend runs NumPy, which
releases it inside its own loops. docs/reliability.md states this.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pypto as pt

BACKENDS = ("reference", "openmp", "tbb", "opencl", "numba")
M, N = pt.dims("M N")


def _softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    r, c = pt.axis(0), pt.axis(1)
    m = pt.reduce_max(x[r, c], axis=c)
    e = pt.exp(x[r, c] - m)
    y[r, c] = e / pt.reduce_sum(e, axis=c)


def _want(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _available(name: str) -> None:
    if name not in pt.list_backends():
        pytest.skip(f"backend '{name}' is not installed in this environment")
    info = pt.get_runtime_info()["backends"][name]
    if not info.get("available"):
        pytest.skip(f"backend '{name}' is unavailable here: {info.get('reason')}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_kernel_from_eight_threads(backend):
    _available(backend)
    k = pt.kernel(_softmax, executor=backend)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((64, 200)).astype(np.float32) * (t + 1) for t in range(8)]
    k(inputs[0], np.empty_like(inputs[0]))  # compiled once, before the threads start
    errors: list[BaseException] = []
    results: dict[tuple[int, int], np.ndarray] = {}
    start = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            start.wait()
            for rep in range(25):
                y = np.empty_like(inputs[t])
                k(inputs[t], y)
                results[(t, rep)] = y
        except BaseException as e:  # reported below, with the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors, errors[:2]
    assert len(results) == 8 * 25
    for (t, _), y in results.items():
        np.testing.assert_allclose(y, _want(inputs[t]), rtol=1e-5, atol=1e-6)


def test_backends_interleaved_in_one_process():
    names = [b for b in BACKENDS if b in pt.list_backends() and pt.get_runtime_info()["backends"][b].get("available")]
    kernels = {b: pt.kernel(_softmax, executor=b) for b in names}
    x = np.random.default_rng(1).standard_normal((16, 33)).astype(np.float32)
    for _ in range(5):
        for b in names:
            y = np.empty_like(x)
            kernels[b](x, y)
            np.testing.assert_allclose(y, _want(x), rtol=1e-5, atol=1e-6, err_msg=b)


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def record(name: str, what: str, **figures: object) -> None:
    """Keep a long run's figures in the JSON file named by ``PYPTO_LONGRUN_RECORD`` (``nox -s longrun`` sets it),
    from which ``report.py`` writes the long-run table of docs/reliability.md."""
    path = os.environ.get("PYPTO_LONGRUN_RECORD")
    if not path:
        return
    import datetime
    import json
    import platform

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    runs[name] = {"what": what, **figures, "date": datetime.date.today().isoformat(), "pypto": pt.__version__,
                  "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"}  # fmt: skip
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


CALLS = int(os.environ.get("PYPTO_LONGRUN_CALLS", "100000"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads resident memory from /proc")
def test_resident_memory_stays_flat_over_many_calls():
    """``PYPTO_LONGRUN_CALLS`` calls (10⁵ here; ``nox -s longrun`` runs 10⁶) grow RSS by at most 1 MiB."""
    backend = "openmp" if "openmp" in pt.list_backends() else "reference"
    k = pt.kernel(_softmax, executor=backend)
    x = np.ones((4, 8), np.float32)
    y = np.empty_like(x)
    for _ in range(1000):  # warm: caches, pools, the allocator's arenas
        k(x, y)
    before = _rss_kib()
    start = time.perf_counter()
    for _ in range(CALLS):
        k(x, y)
    grown, seconds = _rss_kib() - before, time.perf_counter() - start
    print(f"\n{CALLS} calls ({backend}): RSS {grown:+d} KiB, {seconds:.1f} s")
    record(f"calls-{backend}", f"{CALLS:,} calls of a 4×8 softmax kernel ({backend})", count=CALLS, rss_kib=grown,
           seconds=round(seconds, 1))  # fmt: skip
    assert grown <= 1024, f"RSS grew by {grown} KiB over {CALLS} calls"
    np.testing.assert_allclose(y, _want(x), rtol=1e-6)


# -- distinct kernels: compiled, called, dropped -----------------------------------------------------------
KERNELS = int(os.environ.get("PYPTO_LONGRUN_KERNELS", "40"))
NATIVE = ("openmp", "tbb")  # the shared objects the core's loader opens and closes


def _distinct(c: int, backend: str) -> pt.Kernel:
    """A kernel of its own for every ``c``: the constant is part of the traced IR, so of the cache key."""

    def scale(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] * float(c) + 1.0

    return pt.kernel(scale, executor=backend)


def _mapped(path: str) -> bool:
    """Whether ``path`` is mapped into this process (a loaded shared object)."""
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(real) for line in f)


def _loaded() -> int:
    from pypto.targets.cpu import loader

    return loader.loaded_count()


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the mappings from /proc")
@pytest.mark.parametrize("backend", NATIVE)
def test_a_dropped_kernel_is_unloaded(backend, tmp_path, monkeypatch):
    _available(backend)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    before = _loaded()
    x = np.arange(1000, dtype=np.float32)
    y = np.empty_like(x)
    k = _distinct(3, backend)
    k(x, y)
    np.testing.assert_array_equal(y, x * 3 + 1)
    launcher = k._launchers[(backend, True)]
    path, entry = launcher.path, launcher.fast_entry
    del k, launcher
    gc.collect()
    # the fast entry alone keeps the object loaded (a call in progress holds it the same way)
    assert _mapped(path) and _loaded() == before + 1
    np.testing.assert_array_equal(entry(x, np.empty_like(x)), x * 3 + 1)
    del entry
    gc.collect()
    assert not _mapped(path), f"{path} is still mapped after the kernel was dropped"
    assert _loaded() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the mappings from /proc")
@pytest.mark.parametrize("backend", NATIVE)
def test_a_kernel_in_a_reference_cycle_is_unloaded_after_the_collection(backend):
    """The collector finalizes a cycle's objects before it frees them: the library of a kernel found in
    cyclic garbage is unloaded once the collection is over, not while its fast entry still exists."""
    _available(backend)
    before = _loaded()
    x = np.arange(100, dtype=np.float32)
    k = _distinct(11, backend)
    k(x, np.empty_like(x))
    path = k._launchers[(backend, True)].path
    k.cycle = [k, k._launchers[(backend, True)].fast_entry]  # kernel -> list -> kernel
    del k
    gc.collect()
    assert not _mapped(path) and _loaded() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the mappings from /proc")
def test_an_entry_resurrected_by_a_finalizer_keeps_its_library():
    """A finalizer in the cycle saves the fast entry: the library stays loaded and the entry runs; once the
    entry is dropped, the next collection unloads it."""
    _available("openmp")
    saved: list = []

    class Saver:
        def __del__(self) -> None:
            saved.append(self.entry)

    before = _loaded()
    x = np.arange(100, dtype=np.float32)
    k = _distinct(13, "openmp")
    k(x, np.empty_like(x))
    launcher = k._launchers[("openmp", True)]
    path, saver = launcher.path, Saver()
    saver.entry, saver.kernel, k.saver = launcher.fast_entry, k, saver  # kernel <-> saver
    del k, launcher, saver
    gc.collect()
    assert saved and _mapped(path)
    np.testing.assert_array_equal(saved[0](x, np.empty_like(x)), x * 13 + 1)
    saved.clear()
    gc.collect()
    assert not _mapped(path) and _loaded() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the mappings from /proc")
@pytest.mark.parametrize("backend", NATIVE)
def test_a_kernel_dropped_while_threads_call_it_is_unloaded_after_them(backend, tmp_path, monkeypatch):
    """Four threads call a kernel while the main thread drops every reference of its own and collects:
    the calls go on giving the right results, and the object is unloaded once the last of them ends."""
    _available(backend)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    before = _loaded()
    x = np.arange(4096, dtype=np.float32)
    k = _distinct(7, backend)
    k(x, np.empty_like(x))
    path = k._launchers[(backend, True)].path
    start = threading.Barrier(5)
    errors: list[str] = []

    def caller(fn) -> None:
        start.wait()
        y = np.empty_like(x)
        for _ in range(200):
            fn(x, y)
            if not np.array_equal(y, x * 7 + 1):
                errors.append("wrong result")
                return

    threads = [threading.Thread(target=caller, args=(k,)) for _ in range(2)]
    threads += [threading.Thread(target=caller, args=(k._launchers[(backend, True)].fast_entry,)) for _ in range(2)]
    for t in threads:
        t.start()
    del k
    start.wait()
    while any(t.is_alive() for t in threads):
        gc.collect()
        time.sleep(0.002)
    for t in threads:
        t.join()
    del threads
    gc.collect()
    assert not errors
    assert not _mapped(path) and _loaded() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads resident memory from /proc")
@pytest.mark.parametrize("backend", ["reference", "openmp", "tbb"])  # tbb: an arena made and freed per kernel
def test_resident_memory_stays_flat_over_distinct_kernels(backend, tmp_path, monkeypatch):
    """``PYPTO_LONGRUN_KERNELS`` distinct kernels (40 here, 400 on reference; ``nox -s longrun`` runs 10⁴ each),
    each compiled, called once and dropped, grow RSS by at most 1 MiB; no native object stays loaded."""
    _available(backend)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    count = KERNELS * 10 if backend == "reference" and "PYPTO_LONGRUN_KERNELS" not in os.environ else KERNELS
    x = np.arange(16, dtype=np.float32)
    y = np.empty_like(x)
    _distinct(-1, backend)(x, y)  # warm: imports, the toolchain probe, the allocator's arenas
    np.testing.assert_array_equal(y, 1 - x)  # and numpy.testing's lazy imports, before the first measurement
    gc.collect()
    before, loaded, start = _rss_kib(), _loaded(), time.perf_counter()
    steps = []  # growth after every tenth of the run, to tell a plateau from a slope
    for c in range(count):
        _distinct(c, backend)(x, y)
        if c % 100 == 99:
            gc.collect()
        if count >= 1000 and (c + 1) % (count // 10) == 0:
            steps.append((c + 1, _rss_kib() - before))
    gc.collect()
    grown, seconds = _rss_kib() - before, time.perf_counter() - start
    np.testing.assert_array_equal(y, x * (count - 1) + 1)
    print(f"\n{count} distinct {backend} kernels: RSS {grown:+d} KiB, {seconds:.0f} s")
    if steps:
        print("  RSS growth (KiB) after " + ", ".join(f"{n}: {kib:+d}" for n, kib in steps))
    record(f"kernels-{backend}", f"{count:,} distinct kernels, each compiled, called once and dropped ({backend})",
           count=count, rss_kib=grown, seconds=round(seconds), steps=steps, loaded_after=_loaded() - loaded)  # fmt: skip
    assert _loaded() == loaded, f"{_loaded() - loaded} shared objects of dropped kernels are still loaded"
    assert grown <= 1024, f"RSS grew by {grown} KiB over {count} distinct {backend} kernels"


@pytest.mark.parametrize("backend", ["reference", "openmp", "tbb"])
def test_a_new_kernel_interns_no_strings_through_pathlib(backend, tmp_path, monkeypatch):
    """Compiling, caching and loading a new kernel interns no new string through pathlib, which interns
    every path component it parses: a cache key or a temporary directory's name per kernel churned the
    interpreter's table of interned strings, which then resized (a step of about 1 MiB over a few thousand
    kernels in the long run). Cache and build paths are strings; only the cache's root is a Path."""
    _available(backend)
    import sys

    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    x = np.arange(16, dtype=np.float32)
    y = np.empty_like(x)
    _distinct(-2, backend)(x, y)  # warm: the probe, the cache root, the TBB runtime library
    interned: list[str] = []
    real = sys.intern

    def intern(s: str) -> str:
        interned.append(s)
        return real(s)

    monkeypatch.setattr(sys, "intern", intern)  # what pathlib calls for each component
    got = {}
    for c in (-3, -4):
        _distinct(c, backend)(x, y)  # a cache miss: built, stored, loaded
        got[c] = y.copy()
    monkeypatch.setattr(sys, "intern", real)
    for c, out in got.items():
        np.testing.assert_array_equal(out, x * c + 1)
    assert interned == [], f"paths parsed by pathlib while compiling new {backend} kernels: {interned[:8]}"


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the mappings from /proc")
def test_a_jit_function_keeps_its_most_recent_programs_and_unloads_the_rest(monkeypatch):
    """A jit function called with ever new shapes keeps ``JIT_CACHE_SIZE`` programs (2 here): the least
    recently used is dropped and its kernel unloaded; called again, it is traced and loaded again."""
    _available("openmp")
    from pypto.array import function

    monkeypatch.setattr(function, "JIT_CACHE_SIZE", 2)
    f = pt.jit(lambda a: a * 2.0 + 1.0, executor="openmp")
    before = _loaded()
    for n in (3, 4, 3, 5, 4):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(f(x), x * 2 + 1)
        gc.collect()
        assert len(f._cache) <= 2 and _loaded() - before <= 2, (n, len(f._cache), _loaded() - before)
    # 3 was used more recently than 4 when 5 came: 4 was dropped, then brought back in place of 3
    assert [key[0][0] for key in f._cache] == [(5,), (4,)]
