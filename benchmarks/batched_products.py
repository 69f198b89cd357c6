"""The products of a batched layer (batch 32, 64 tokens, float32): pypto against NumPy and torch eager.

    python benchmarks/batched_products.py

* ``x @ w.T``: x 32 x 64 x 512, w 128 x 512 (a torch ``Linear``'s weight layout; ``x @ w`` alongside);
* weight gradients over the batch and token axes together, of computed operands: ``einsum("btd,btn->dn",
  tanh(x), 2 g)`` (x 32 x 64 x 128, g 32 x 64 x 512) and ``einsum("btd,btn->dn", gelu(x), g)`` (x 32 x 64 x 512,
  g 32 x 64 x 128), the product a gelu layer's weight gradient computes.

15 rounds, each timing every case with every library in turn (the median of 5 calls); the medians of the rounds,
2 threads. pypto's results are checked against NumPy's first.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("PYPTO_NUM_THREADS", "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

ROUNDS = 15


def _gelu_np(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2))).astype(x.dtype)


def main() -> None:
    import torch

    torch.set_num_threads(2)
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64, 512)).astype(np.float32)
    w = rng.standard_normal((128, 512)).astype(np.float32) / 20
    wt = np.ascontiguousarray(w.T)
    x1 = rng.standard_normal((32, 64, 128)).astype(np.float32)
    g1 = rng.standard_normal((32, 64, 512)).astype(np.float32)
    g2 = rng.standard_normal((32, 64, 128)).astype(np.float32)
    t = {k: torch.from_numpy(v) for k, v in dict(x=x, w=w, wt=wt, x1=x1, g1=g1, g2=g2).items()}
    cases = [
        ("x @ w.T", pt.jit(lambda x, w: x @ w.T), (x, w), lambda: x @ w.T, lambda: t["x"] @ t["w"].T),
        ("x @ w (w stored as in.T)", pt.jit(lambda x, w: x @ w), (x, wt), lambda: x @ wt, lambda: t["x"] @ t["wt"]),
        ("einsum('btd,btn->dn', tanh(x), 2 g)", pt.jit(lambda x, g: pt.einsum("btd,btn->dn", pt.tanh(x), g * 2)),
         (x1, g1), lambda: np.tanh(x1).reshape(-1, 128).T @ (2 * g1).reshape(-1, 512),
         lambda: torch.tanh(t["x1"]).reshape(-1, 128).T @ (2 * t["g1"]).reshape(-1, 512)),
        ("einsum('btd,btn->dn', gelu(x), g)", pt.jit(lambda x, g: pt.einsum("btd,btn->dn", pt.gelu(x), g)),
         (x, g2), lambda: _gelu_np(x).reshape(-1, 512).T @ g2.reshape(-1, 128),
         lambda: F.gelu(t["x"]).reshape(-1, 512).T @ t["g2"].reshape(-1, 128)),
    ]  # fmt: skip
    for _, f, args, numpy_fn, _ in cases:
        np.testing.assert_allclose(f(*args), numpy_fn(), rtol=2e-3, atol=2e-3)
    # rounds of every case and library in turn (this machine's speed drifts: each round compares like with like)
    runs = [
        (name, [(lambda f=f, args=args: f(*args)), numpy_fn, torch_fn]) for name, f, args, numpy_fn, torch_fn in cases
    ]
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(ROUNDS):
        for name, fns in runs:
            for k, fn in enumerate(fns):
                times.setdefault((name, k), []).append(median_ms(fn, n=5))
    print(
        f"{f'ms (medians of {ROUNDS} rounds)':40} {'pypto':>8} {'NumPy':>8} {'torch':>8} {'vs NumPy':>9} {'vs torch':>9}"
    )
    for name, _ in runs:
        p, n, tt = (float(np.median(times[name, k])) for k in range(3))
        print(f"{name:40} {p:8.3f} {n:8.3f} {tt:8.3f} {n / p:8.2f}x {tt / p:8.2f}x")


if __name__ == "__main__":
    main()
