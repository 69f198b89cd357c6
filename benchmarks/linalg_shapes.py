"""Dense float64 products of the shapes published NumPy programs use, pypto's @pt.jit against NumPy (OpenBLAS).

    python benchmarks/linalg_shapes.py

Medians of 9 calls after one warm-up, 2 threads (set OMP_NUM_THREADS / PYPTO_NUM_THREADS /
OPENBLAS_NUM_THREADS to change), OpenBLAS's workers spinning briefly (``OPENBLAS_THREAD_TIMEOUT=4``) as in
``bench.py``: matrix-vector products both ways on 4000 x 4000, and a skinny (8 x 30,000) @ (30,000 x 2,000).
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
        ("A @ x, A 4000x4000", pt.jit(lambda a, x: a @ x), lambda a, x: a @ x, (a, x)),
        ("A.T @ y, A 4000x4000", pt.jit(lambda a, y: a.T @ y), lambda a, y: a.T @ y, (a, y)),
        ("(8 x 30,000) @ (30,000 x 2,000)", pt.jit(lambda s, w: s @ w), lambda s, w: s @ w, (s, w)),
    ]
    print("| float64 | pypto | NumPy | NumPy / pypto |\n|---|---|---|---|")
    for name, ours, theirs, args in cases:
        np.testing.assert_allclose(ours(*args), theirs(*args), rtol=1e-9, atol=1e-9)
        tp, tn = median_ms(ours, *args), median_ms(theirs, *args)
        print(f"| {name} | {tp:.2f} ms | {tn:.2f} ms | {tn / tp:.2f}x |")


if __name__ == "__main__":
    main()
