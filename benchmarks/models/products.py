"""The matrix products of the Llama block alone, as torch eager and NumPy run them: a floor for the whole block.

    python benchmarks/models/products.py [a|b|ci]

The block's products at the given size (default a): the q, k, v and output projections, the scores and the
weighted sum of every head, the three SwiGLU products, each as one ``matmul``/``bmm`` on inputs of the block's
shapes (2 threads, medians of 15 calls). Compare with the block's time in ``run.py``: what is left over is all
the rest (norms, RoPE, softmax, gating, residuals), the part a compiler can fuse.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import blocks  # noqa: E402


def median_ms(fn, n: int = 15) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def main() -> None:
    size = blocks.SIZES[sys.argv[1] if len(sys.argv) > 1 else "a"]
    d, h, e, f, s, b = size.dim, size.heads, size.head_dim, size.hidden, size.seq, size.batch
    rng = np.random.default_rng(0)

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    x, w_in, w_out, w1, w2, hid = rand(b * s, d), rand(d, h * e), rand(h * e, d), rand(d, f), rand(f, d), rand(b * s, f)
    q, kt, p, v = rand(b * h, s, e), rand(b * h, e, s), rand(b * h, s, s), rand(b * h, s, e)
    flops = 2 * b * s * d * h * e * 4 + 2 * b * h * s * s * e * 2 + 2 * b * s * d * f * 3
    shapes = f"batch {b} x seq {s} x d {d}, {h} heads of {e}, hidden {f}"

    def run(mm, bmm, arrays):
        x, w_in, w_out, w1, w2, hid, q, kt, p, v = arrays

        def products():
            for _ in range(3):  # q, k, v
                mm(x, w_in)
            bmm(q, kt)  # scores
            bmm(p, v)  # weighted sum
            mm(x, w_out)  # output projection (same shape as one of q, k, v)
            mm(x, w1)  # gate
            mm(x, w1)  # up
            mm(hid, w2)  # down

        return median_ms(products)

    arrays = (x, w_in, w_out, w1, w2, hid, q, kt, p, v)
    if sys.argv[2:] == ["numpy"]:
        print(f"  NumPy (OpenBLAS): {run(np.matmul, np.matmul, arrays):.2f} ms")
        return
    attention = 2 * b * h * s * s * e * 2
    print(
        f"Llama block's matrix products, size {size.name} ({shapes}): {flops / 1e9:.2f} GFLOP, of which the "
        f"scores and weighted sums {attention / 1e9:.2f} (a causal attention kernel skips about half of those)"
    )
    # each library in a process of its own: one's idle worker threads would take cores from the other's
    import subprocess

    subprocess.run([sys.executable, __file__, size.name, "numpy"], check=True)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    print(f"  torch eager:      {run(torch.matmul, torch.bmm, tuple(torch.from_numpy(a) for a in arrays)):.2f} ms")


if __name__ == "__main__":
    main()
