"""Stacks of small linear systems: ``np.linalg.solve`` inside ``@pt.jit`` against NumPy's batched LAPACK, in one run.

    python benchmarks/linalg_small.py

``np.linalg.solve(a, b)`` for stacks of n x n float64 systems with one right-hand side each (n = 3, 8, 16;
200000, 20000 and 4000 systems), and ``np.linalg.cholesky`` of the same stacks made positive definite. pypto
unrolls Gauss-Jordan elimination with partial pivoting (Cholesky: column by column) over the n columns, the
stack on threads (:mod:`pypto.array.linalg`); NumPy calls LAPACK once per matrix. Medians of 9 calls after a
warm-up, 2 threads; results checked against NumPy. ``NumPy / pypto`` above 1: pypto faster.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(0)
    print("| case | pypto | NumPy | NumPy / pypto |")
    print("|---|---|---|---|")
    for n, batch in ((3, 200_000), (8, 20_000), (16, 4_000)):
        a = rng.standard_normal((batch, n, n)) + n * np.eye(n)
        b = rng.standard_normal((batch, n, 1))
        spd = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
        solve = pt.jit(lambda a, b: np.linalg.solve(a, b))
        chol = pt.jit(lambda s: np.linalg.cholesky(s))
        np.testing.assert_allclose(solve(a, b), np.linalg.solve(a, b), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(chol(spd), np.linalg.cholesky(spd), rtol=1e-10, atol=1e-12)
        for name, fn, ref, args in (("solve", solve, np.linalg.solve, (a, b)),
                                    ("cholesky", chol, np.linalg.cholesky, (spd,))):  # fmt: skip
            tp, tn = median_ms(fn, *args), median_ms(ref, *args)
            print(f"| {name}, {batch} systems of {n} x {n} | {tp:.2f} ms | {tn:.2f} ms | {tn / tp:.2f}x |")


if __name__ == "__main__":
    main()
