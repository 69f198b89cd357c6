"""Concurrency and long runs: one kernel from eight threads on every backend, backends interleaved in one
process, and the resident memory of many calls.

Native backends release the GIL while a kernel runs (openmp and tbb around the C call, opencl while it
waits for the device, numba's compiled loops are ``nogil``); the reference backend runs NumPy, which
releases it inside its own loops. docs/reliability.md states this.
"""

from __future__ import annotations

import os
import threading

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
    for _ in range(CALLS):
        k(x, y)
    grown = _rss_kib() - before
    assert grown <= 1024, f"RSS grew by {grown} KiB over {CALLS} calls"
    np.testing.assert_allclose(y, _want(x), rtol=1e-6)
