"""The array API namespace (``pypto.array_api``) called eagerly on NumPy arrays, against NumPy, in one run.

    python benchmarks/array_api_eager.py

* ``add 8 values``: the cost of one eager call (the namespace's dispatch, the cached program's lookup and its
  call) on a tiny array, where nothing but the overhead counts;
* ``exp 16M float32``: one elementwise function on a large array (one compiled program, threaded);
* ``standardize 100000 x 64 float64``: a function written against a namespace (``xp.mean``, ``xp.std``,
  ``xp.where``, arithmetic), called with ``xp`` eagerly (one program per call inside it), under ``@pt.jit``
  (one fused program) and with NumPy.

Medians of 9 calls after a warm-up, 2 threads; every result checked against NumPy. The speed column is
``t_numpy / t_pypto`` (above 1: pypto faster).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402
import pypto.array_api as xp  # noqa: E402


def standardize(x, ns):
    mu = ns.mean(x, axis=0)
    sd = ns.std(x, axis=0, correction=1)
    return ns.where(sd > 0, (x - mu) / sd, 0.0)


def main() -> None:
    rng = np.random.default_rng(0)
    tiny = rng.standard_normal(8).astype(np.float32)
    big = rng.standard_normal(1 << 24).astype(np.float32)
    table = rng.standard_normal((100_000, 64))
    fused = pt.jit(lambda t: standardize(t, xp))
    np.testing.assert_allclose(xp.add(tiny, tiny), tiny + tiny)
    np.testing.assert_allclose(xp.exp(big), np.exp(big), rtol=1e-6)
    want = standardize(table, np)
    np.testing.assert_allclose(standardize(table, xp), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fused(table), want, rtol=1e-10, atol=1e-12)
    rows = [
        ("add 8 values (eager)", median_ms(xp.add, tiny, tiny, n=200), median_ms(np.add, tiny, tiny, n=200)),
        ("exp 16M float32 (eager)", median_ms(xp.exp, big), median_ms(np.exp, big)),
        ("standardize 100000 x 64 (eager, xp)", median_ms(standardize, table, xp), median_ms(standardize, table, np)),
        ("standardize 100000 x 64 (@pt.jit)", median_ms(fused, table), median_ms(standardize, table, np)),
    ]
    print("| case | pypto | NumPy | NumPy / pypto |")
    print("|---|---|---|---|")
    for name, p, n in rows:
        unit = "us" if p < 0.1 else "ms"
        scale = 1e3 if unit == "us" else 1
        print(f"| {name} | {p * scale:.2f} {unit} | {n * scale:.2f} {unit} | {n / p:.2f}x |")


if __name__ == "__main__":
    main()
