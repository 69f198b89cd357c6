"""Precision modes and integer contractions against float32, torch and NumPy, in one run.

    python benchmarks/integer_precision.py

1. The matrix product 1024^3 of float32 operands in pypto's three precision modes (``pt.set_precision``:
   float32, mixed = bfloat16 operands with float32 sums, highest = float64 sums), beside torch's float32 and
   bfloat16 products and NumPy's (OpenBLAS) float32 product.
2. int8 x int8 -> int32 products 1024^3 (``a.astype(pt.int32) @ b.astype(pt.int32)``) beside pypto's float32
   product of the same values, torch's int32 product and NumPy's.
3. Quantisation of 16M float32 values to int8 (``pt.cast`` saturates; NumPy: ``np.clip`` then ``astype``).

Medians of 7 calls after one warm-up, 2 threads; every result checked against a float64 (or exact integer)
reference. The table gives each time and the speed relative to the first row of its group (above 1 is faster).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

N = 1024


def rows(torch) -> list[tuple[str, str, float]]:  # noqa: ANN001
    rng = np.random.default_rng(0)
    out = []
    a = rng.standard_normal((N, N)).astype(np.float32)
    b = rng.standard_normal((N, N)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    bound = {"float32": N * 2.0**-24, "mixed": 2.0**-7 + 2.0**-16 + N * 2.0**-24, "highest": 2.0**-24 + N * 2.0**-53}
    for mode in ("float32", "mixed", "highest"):
        f = pt.jit(lambda a, b: a @ b, precision=mode)
        assert np.all(np.abs(f(a, b) - exact) <= bound[mode] * scale), mode
        out.append(("matmul 1024^3 float32", f"pypto, precision={mode!r}", median_ms(f, a, b, n=7)))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    out.append(("matmul 1024^3 float32", "torch float32", median_ms(torch.matmul, ta, tb, n=7)))
    ha, hb = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
    out.append(("matmul 1024^3 float32", "torch bfloat16", median_ms(torch.matmul, ha, hb, n=7)))
    out.append(("matmul 1024^3 float32", "NumPy (OpenBLAS) float32", median_ms(np.matmul, a, b, n=7)))

    q1 = rng.integers(-128, 128, (N, N), dtype=np.int8)
    q2 = rng.integers(-128, 128, (N, N), dtype=np.int8)
    want = q1.astype(np.int64) @ q2.astype(np.int64)
    f32 = pt.jit(lambda a, b: a @ b)
    x1, x2 = q1.astype(np.float32), q2.astype(np.float32)
    assert np.array_equal(f32(x1, x2), want)  # sums of 1024 products below 2^24: exact in float32
    out.append(("int8 matmul 1024^3 -> int32", "pypto float32 (same values)", median_ms(f32, x1, x2, n=7)))
    i8 = pt.jit(lambda a, b: a.astype(pt.int32) @ b.astype(pt.int32))
    assert np.array_equal(i8(q1, q2), want)
    out.append(("int8 matmul 1024^3 -> int32", "pypto int8 -> int32", median_ms(i8, q1, q2, n=7)))
    t1, t2 = torch.from_numpy(q1).to(torch.int32), torch.from_numpy(q2).to(torch.int32)
    out.append(("int8 matmul 1024^3 -> int32", "torch int32", median_ms(torch.matmul, t1, t2, n=3)))
    out.append(("int8 matmul 1024^3 -> int32", "NumPy int32", median_ms(np.matmul, q1.astype(np.int32),
                                                                         q2.astype(np.int32), n=3)))  # fmt: skip

    x = rng.standard_normal(1 << 24).astype(np.float32) * 60
    quant = pt.jit(lambda x: (x * 2.0).astype(pt.int8))
    expect = np.clip(np.trunc(x.astype(np.float64) * 2), -128, 127).astype(np.int8)
    assert np.array_equal(quant(x), expect)
    out.append(("quantise 16M float32 -> int8", "NumPy clip + astype", median_ms(
        lambda x: np.clip(x * np.float32(2), -128, 127).astype(np.int8), x, n=7)))  # fmt: skip
    out.append(("quantise 16M float32 -> int8", "pypto pt.cast (saturating)", median_ms(quant, x, n=7)))
    return out


def main() -> None:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    print("| case | run | ms | speed vs the group's first row |\n|---|---|---|---|")
    first: dict[str, float] = {}
    for case, run, ms in rows(torch):
        base = first.setdefault(case, ms)
        print(f"| {case} | {run} | {ms:.2f} | {base / ms:.2f}x |")


if __name__ == "__main__":
    main()
