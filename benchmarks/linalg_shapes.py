"""Dense float64 products of the shapes published NumPy programs use, pypto's @pt.jit against NumPy (OpenBLAS).

    python benchmarks/linalg_shapes.py

Medians of 9 calls after one warm-up, 2 threads (set OMP_NUM_THREADS / PYPTO_NUM_THREADS /
OPENBLAS_NUM_THREADS to change), OpenBLAS's workers spinning briefly (``OPENBLAS_THREAD_TIMEOUT=4``) as in
``bench.py``: matrix-vector products both ways on 4000 x 4000, and a skinny (8 x 30,000) @ (30,000 x 2,000);
then float32 products of a small batch through a dense layer (8 and 64 rows of 4096 times a 4096 x 11008 weight,
stored either way: ``x @ w`` and ``x @ w.T``).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import time  # noqa: E402

import numpy as np  # noqa: E402

import pypto as pt  # noqa: E402


def median_ms(fn, *args, n: int = 9) -> float:
    fn(*args)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4000, 4000))
    x, y = rng.standard_normal(4000), rng.standard_normal(4000)
    s, w = rng.standard_normal((8, 30000)), rng.standard_normal((30000, 2000))
    cases = [
        ("float64 A @ x, A 4000x4000", pt.jit(lambda a, x: a @ x), lambda a, x: a @ x, (a, x)),
        ("float64 A.T @ y, A 4000x4000", pt.jit(lambda a, y: a.T @ y), lambda a, y: a.T @ y, (a, y)),
        ("float64 (8 x 30,000) @ (30,000 x 2,000)", pt.jit(lambda s, w: s @ w), lambda s, w: s @ w, (s, w)),
    ]
    w32 = rng.standard_normal((4096, 11008)).astype(np.float32)
    w32t = np.ascontiguousarray(w32.T)
    for m in (8, 64):
        x32 = rng.standard_normal((m, 4096)).astype(np.float32)
        cases += [
            (f"float32 ({m} x 4096) @ w, w 4096 x 11008", pt.jit(lambda x, w: x @ w), lambda x, w: x @ w, (x32, w32)),
            (f"float32 ({m} x 4096) @ w.T, w 11008 x 4096", pt.jit(lambda x, w: x @ w.T), lambda x, w: x @ w.T,
             (x32, w32t)),
        ]  # fmt: skip
    print("| product | pypto | NumPy | NumPy / pypto |\n|---|---|---|---|")
    for name, ours, theirs, args in cases:
        tol = 1e-9 if args[0].dtype == np.float64 else 2e-3  # float32: sums of 4096 products
        np.testing.assert_allclose(ours(*args), theirs(*args), rtol=tol, atol=tol)
        tp, tn = median_ms(ours, *args), median_ms(theirs, *args)
        print(f"| {name} | {tp:.2f} ms | {tn:.2f} ms | {tn / tp:.2f}x |")


if __name__ == "__main__":
    main()
