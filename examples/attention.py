"""Multi-head self-attention with the array API: a module of parameters, einsum, softmax and a custom op.

    python examples/attention.py

prints the agreement with a NumPy implementation of the same block, the kernel's loop nests, and a
profile of 20 calls.
"""

import math

import numpy as np

import pypto as pt


@pt.custom_op
def scaled_softmax(scores, scale):
    """softmax(scores * scale) over the last axis: one operation by name, fused with its neighbours."""
    return pt.softmax(scores * scale, dim=-1)


@pt.module
class MultiHeadAttention:
    def __init__(self, dim: int, heads: int, rng: np.random.Generator):
        if dim % heads:
            raise ValueError(f"dim={dim} is not a multiple of heads={heads}")
        self.heads, self.head_dim = heads, dim // heads
        std = 1 / math.sqrt(dim)
        # projections stored as (dim, heads, head_dim), so each is one einsum
        self.wq = pt.Parameter(rng.normal(0, std, (dim, heads, self.head_dim)).astype(np.float32), "wq")
        self.wk = pt.Parameter(rng.normal(0, std, (dim, heads, self.head_dim)).astype(np.float32), "wk")
        self.wv = pt.Parameter(rng.normal(0, std, (dim, heads, self.head_dim)).astype(np.float32), "wv")
        self.wo = pt.Parameter(rng.normal(0, std, (heads, self.head_dim, dim)).astype(np.float32), "wo")
        self.bo = pt.Parameter(np.zeros(dim, np.float32), "bo")

    def forward(self, x):
        """x: (batch, seq, dim) -> (batch, seq, dim)."""
        q = pt.einsum("bsd,dhe->bhse", x, self.wq)
        k = pt.einsum("bsd,dhe->bhse", x, self.wk)
        v = pt.einsum("bsd,dhe->bhse", x, self.wv)
        p = scaled_softmax(pt.einsum("bhie,bhje->bhij", q, k), 1 / math.sqrt(self.head_dim))
        o = pt.einsum("bhij,bhje->bhie", p, v)
        return pt.einsum("bhse,hed->bsd", o, self.wo) + self.bo


def numpy_attention(m: MultiHeadAttention, x: np.ndarray) -> np.ndarray:
    """The same block in NumPy (float64), written independently of pypto."""
    x = x.astype(np.float64)
    q, k, v = (np.einsum("bsd,dhe->bhse", x, w.data) for w in (m.wq, m.wk, m.wv))
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(m.head_dim)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhse,hed->bsd", np.einsum("bhij,bhje->bhie", p, v), m.wo.data) + m.bo.data


def main() -> float:
    rng = np.random.default_rng(0)
    block = MultiHeadAttention(dim=128, heads=4, rng=rng)
    x = rng.standard_normal((2, 64, 128)).astype(np.float32)
    y = block(x)
    err = float(np.abs(y - numpy_attention(block, x)).max())
    print(f"attention {x.shape} -> {y.shape}: max |pypto - numpy| = {err:.2e}")
    print("parameters:", ", ".join(f"{n}{list(p.shape)}" for n, p in block.named_parameters()))
    return err


if __name__ == "__main__":
    err = main()
    rng = np.random.default_rng(1)
    block = MultiHeadAttention(dim=128, heads=4, rng=rng)
    x = rng.standard_normal((2, 64, 128)).astype(np.float32)
    block(x)
    with pt.profile() as prof:
        for _ in range(20):
            block(x)
    print(prof)
    raise SystemExit(0 if err < 1e-4 else 1)
