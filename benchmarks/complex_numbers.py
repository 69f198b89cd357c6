"""Complex numbers: pypto (pairs of floats after the ``complex_pairs`` pass) against NumPy and torch, in one run.

    python benchmarks/complex_numbers.py

complex64 and complex128: the matrix product 1024^3 (four real products on the interleaved parts), an
elementwise program ``z * w + exp(1j * x)`` and ``abs`` over 4M values, and the sum over the rows of a
2048 x 2048 array. Medians of 11 calls after one warm-up, 2 threads; every pypto result checked against
NumPy. The table gives each time and the speed relative to NumPy and torch (``t_other / t_pypto``: above 1,
pypto is faster).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402


def cases(rng: np.random.Generator, dt: type, torch) -> list:  # noqa: ANN001
    def c(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)

    real = np.float32 if dt == np.complex64 else np.float64
    a, b = c(1024, 1024) / 32, c(1024, 1024) / 32
    z, w, x = c(1 << 22), c(1 << 22), rng.standard_normal(1 << 22).astype(real)
    m = c(2048, 2048)
    return [
        ("matmul 1024^3", lambda a, b: a @ b, np.matmul, lambda a, b: a @ b, (a, b)),
        ("z * w + exp(1j x), 4M", lambda z, w, x: z * w + pt.exp(1j * x), lambda z, w, x: z * w + np.exp(1j * x),
         lambda z, w, x: z * w + torch.exp(1j * x), (z, w, x)),
        ("abs, 4M", lambda z: pt.abs(z), np.abs, torch.abs, (z,)),
        ("row sums 2048^2", lambda m: m.sum(axis=1), lambda m: m.sum(axis=1), lambda m: m.sum(dim=1), (m,)),
    ]  # fmt: skip


def main() -> None:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    print(
        "| case | dtype | pypto | NumPy | torch eager | NumPy / pypto | torch / pypto |\n|---|---|---|---|---|---|---|"
    )
    for dt in (np.complex64, np.complex128):
        for name, fn, nfn, tfn, args in cases(rng, dt, torch):
            ours = pt.jit(fn)
            got, want = ours(*args), nfn(*args)
            scale = max(float(np.max(np.abs(want))), 1.0)
            tol = (2e-5 if dt == np.complex64 else 1e-12) * (32 if "matmul" in name or "sum" in name else 1)
            assert float(np.max(np.abs(got - want))) <= tol * scale, (name, dt)
            t, tn = median_ms(ours, *args, n=11), median_ms(nfn, *args, n=11)
            tt = median_ms(tfn, *[torch.from_numpy(v) for v in args], n=11)
            print(f"| {name} | {np.dtype(dt).name} | {t:.2f} ms | {tn:.2f} ms | {tt:.2f} ms | {tn / t:.2f}x | "
                  f"{tt / t:.2f}x |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
