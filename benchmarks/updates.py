"""NumPy code with in-place updates under ``@pt.jit``, and numbers as runtime arguments, in one run.

    python benchmarks/updates.py

* ``jacobi``: one Jacobi step with boundaries on 2048 x 2048 float32, written as NumPy code
  (``v[1:-1, 1:-1] = 0.25 * (...)``, a boundary row set to 0, a boundary column copied from its neighbour),
  compiled unchanged by ``@pt.jit``, against NumPy, torch eager (the same slicing code on tensors) and Numba
  (``@njit(parallel=True)`` loops written by hand).
* ``heat``: 10 explicit steps of the 1-D heat equation on 4M float32 in a Python loop inside one ``@pt.jit``
  function (``u[1:-1] = un[1:-1] + a * (...)``), against NumPy and torch eager running the same loop.
* ``new numbers``: 20 calls of ``x - lr * g`` (1M float32), each with a new learning rate: ``lr`` a runtime
  argument (one program) against ``static_argnames=("lr",)`` (each value its own program, traced, lowered and
  built: the behaviour before numbers were runtime arguments), the total time of the 20 calls.

Medians of 9 calls after a warm-up, 2 threads; every result checked against NumPy. Speed columns are
``t_other / t_pypto`` (above 1: pypto faster).
"""

from __future__ import annotations

import os
import time

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402


def jacobi(u, f):
    v = u * 1  # (a copy in NumPy and torch alike)
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) + f[1:-1, 1:-1]
    v[0] = 0
    v[:, -1] = v[:, -2]
    return v


def heat(u, alpha=0.1):
    for _ in range(10):
        un = u * 1
        u[1:-1] = un[1:-1] + alpha * (un[2:] - 2 * un[1:-1] + un[:-2])
    return u


def sgd(x, g, lr):
    return x - lr * g


def _numba_jacobi():
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def jac(u, f):
        n, m = u.shape
        v = np.empty_like(u)
        for i in numba.prange(n):
            for j in range(m):
                if i == 0:
                    v[i, j] = 0
                elif i == n - 1 or j == 0 or j == m - 1:
                    v[i, j] = u[i, j]
                else:
                    v[i, j] = np.float32(0.25) * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) + f[i, j]
        for i in numba.prange(1, n):
            v[i, m - 1] = v[i, m - 2]
        return v

    return jac


def main() -> None:
    import torch

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    rows = []

    u = rng.standard_normal((2048, 2048)).astype(np.float32)
    f = rng.standard_normal((2048, 2048)).astype(np.float32)
    want = jacobi(u, f)
    pj = pt.jit(jacobi)
    np.testing.assert_allclose(pj(u, f), want, rtol=1e-5, atol=1e-5)
    nj = _numba_jacobi()
    np.testing.assert_allclose(nj(u, f), want, rtol=1e-5, atol=1e-5)
    tu, tf = torch.from_numpy(u), torch.from_numpy(f)
    tj = lambda a, b: jacobi(a, b)  # noqa: E731  (torch's tensors take the same slicing code)
    np.testing.assert_allclose(tj(tu, tf).numpy(), want, rtol=1e-5, atol=1e-5)
    rows.append(("jacobi step 2048 x 2048 with boundaries", median_ms(pj, u, f), median_ms(jacobi, u, f),
                 median_ms(tj, tu, tf), median_ms(nj, u, f)))  # fmt: skip

    x = rng.standard_normal(4 * 2**20).astype(np.float32)
    want = heat(x * 1)
    ph = pt.jit(heat)
    np.testing.assert_allclose(ph(x), want, rtol=1e-4, atol=1e-5)
    tx = torch.from_numpy(x)
    rows.append(("heat 1-D, 10 steps, 4M", median_ms(ph, x), median_ms(lambda a: heat(a * 1), x),
                 median_ms(lambda a: heat(a * 1), tx), None))  # fmt: skip

    print("| case | pypto | NumPy | torch eager | Numba | NumPy / pypto | torch / pypto | Numba / pypto |")
    print("|---|---|---|---|---|---|---|---|")
    for name, p, n, t, nb in rows:
        nb_s = f"{nb:.2f} ms" if nb is not None else "-"
        nb_r = f"{nb / p:.2f}x" if nb is not None else "-"
        print(f"| {name} | {p:.2f} ms | {n:.2f} ms | {t:.2f} ms | {nb_s} | {n / p:.2f}x | {t / p:.2f}x | {nb_r} |")

    x = rng.standard_normal(2**20).astype(np.float32)
    g = rng.standard_normal(2**20).astype(np.float32)
    rates = [0.001 * (k + 1) for k in range(20)]
    totals = {}
    for label, fn in (("runtime lr", pt.jit(sgd)), ("static lr", pt.jit(sgd, static_argnames=("lr",)))):
        fn(x, g, 0.5)  # the first program (and the kernel build it needs) is not counted
        start = time.perf_counter()
        for lr in rates:
            got = fn(x, g, lr)
        totals[label] = (time.perf_counter() - start) * 1e3
        np.testing.assert_allclose(got, x - np.float32(rates[-1]) * g, rtol=1e-6, atol=1e-6)  # (fused multiply-add)
    print()
    print("| 20 calls of x - lr * g (1M float32), each a new lr | total |")
    print("|---|---|")
    for label, ms in totals.items():
        print(f"| {label} | {ms:.1f} ms |")
    print(f"| static / runtime | {totals['static lr'] / totals['runtime lr']:.0f}x |")


if __name__ == "__main__":
    main()
