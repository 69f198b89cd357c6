"""Model blocks written the way each library's users write them: pypto (``@pt.jit``, ``pt.grad``), NumPy,
torch (eager and ``torch.compile``) and JAX (``jax.jit``).

A block is a function of its parameters and inputs. Every implementation computes the same forward
result and, for the training step, the gradients of the same scalar loss with respect to every
parameter: ``(block(...) * r).sum()`` with ``r`` a fixed random cotangent, or the cross-entropy itself.

* ``llama``: pre-norm Llama block: RMSNorm, q/k/v projections, rotary position embedding (RoPE),
  causal attention, output projection, residual; RMSNorm, SwiGLU MLP, residual.
* ``gpt2``: GPT-2 block: layer norm, attention with biases and a causal mask, residual; layer norm,
  tanh-GELU MLP with biases, residual.
* ``cross_entropy``: the language-model head: logits ``h @ w`` over the vocabulary, then
  ``mean(logsumexp(logits) - logits[target])``, the target picked by a one-hot matrix (pypto has no
  gather yet; NumPy, torch and JAX pick it with their own indexing).
* ``swiglu``: the SwiGLU MLP alone, ``(silu(x @ w1) * (x @ w3)) @ w2``.

torch and JAX use their fused attention where their users would (``scaled_dot_product_attention``,
``jax.nn.dot_product_attention``, both with ``is_causal``); NumPy and pypto write it out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import pypto as pt


@dataclass(frozen=True)
class Size:
    name: str
    batch: int
    seq: int
    dim: int
    heads: int
    vocab: int = 32000

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def hidden(self) -> int:  # Llama's SwiGLU width: 8/3 of the model width, a multiple of 64
        return (8 * self.dim // 3 + 63) // 64 * 64

    def __str__(self) -> str:
        return f"batch {self.batch} x seq {self.seq} x d {self.dim} x {self.heads} heads"


SIZES = {
    "ci": Size("ci", 1, 128, 256, 4, vocab=4096),  # the regression check in CI: seconds, not minutes
    "a": Size("a", 4, 256, 512, 8),
    "b": Size("b", 1, 1024, 1024, 16),
}


@dataclass
class Block:
    """One block at one size: parameters, other inputs, and the implementations of each library."""

    name: str
    title: str
    size: Size
    params: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    numpy: Callable[..., np.ndarray]  # (*params, *inputs) -> output, float64 when given float64
    pypto: Callable  # the same, with pt functions (traced by pt.jit, differentiated by pt.grad)
    torch: Callable | None = None  # (torch module, *tensors) -> output
    jax: Callable | None = None  # (jax module, *arrays) -> output
    flops: int = 0  # forward floating-point operations (matrix products only)
    cotangent: np.ndarray | None = None  # r of the loss (block * r).sum(); None: the output is the loss

    @property
    def arrays(self) -> list[np.ndarray]:
        return [*self.params.values(), *self.inputs.values()]


def _normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# -- NumPy ---------------------------------------------------------------------------------------------
def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_rms(x, g, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def _np_ln(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    v = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(v + eps) * g + b


def _np_rope(q, cos, sin):
    half = q.shape[-1] // 2
    return q * cos + np.concatenate([-q[..., half:], q[..., :half]], -1) * sin


def _np_attention(q, k, v, mask):
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(q.shape[-1]) + mask
    return np.einsum("bhij,bhje->bhie", _np_softmax(s), v)


def _np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


# -- pypto ---------------------------------------------------------------------------------------------
def _pt_rope(q, cos, sin):
    half = q.shape[-1] // 2
    return q * cos + pt.concat([-q[..., half:], q[..., :half]], axis=-1) * sin


def _pt_attention(q, k, v, mask):
    s = pt.einsum("bhie,bhje->bhij", q, k) * (1 / math.sqrt(q.shape[-1])) + mask
    return pt.einsum("bhij,bhje->bhie", pt.softmax(s, dim=-1), v)


# -- the blocks ----------------------------------------------------------------------------------------
def llama(size: Size, rng: np.random.Generator) -> Block:
    d, h, e, f, s = size.dim, size.heads, size.head_dim, size.hidden, size.seq
    params = {
        "g1": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "wq": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "wk": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "wv": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "wo": _normal(rng, (h, e, d), 1 / math.sqrt(d)),
        "g2": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "w1": _normal(rng, (d, f), 1 / math.sqrt(d)),
        "w3": _normal(rng, (d, f), 1 / math.sqrt(d)),
        "w2": _normal(rng, (f, d), 1 / math.sqrt(f)),
    }
    inv = 10000.0 ** (-np.arange(0, e, 2) / e)
    ang = np.arange(s)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], -1)
    inputs = {
        "x": _normal(rng, (size.batch, s, d), 1.0),
        "cos": np.cos(ang).astype(np.float32),
        "sin": np.sin(ang).astype(np.float32),
        "mask": np.triu(np.full((s, s), -1e9, np.float32), 1),
    }

    def numpy(g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
        a = _np_rms(x, g1)
        q, k, v = (np.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
        o = _np_attention(_np_rope(q, cos, sin), _np_rope(k, cos, sin), v, mask)
        x = x + np.einsum("bhse,hed->bsd", o, wo)
        a = _np_rms(x, g2)
        gate = a @ w1
        return x + (gate / (1 + np.exp(-gate)) * (a @ w3)) @ w2

    def pypto(g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
        a = pt.rms_norm(x, g1)
        q, k, v = (pt.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
        o = _pt_attention(_pt_rope(q, cos, sin), _pt_rope(k, cos, sin), v, mask)
        x = x + pt.einsum("bhse,hed->bsd", o, wo)
        a = pt.rms_norm(x, g2)
        return x + (pt.silu(a @ w1) * (a @ w3)) @ w2

    def torch(t, g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
        F = t.nn.functional

        def rms(v, g):
            return v * t.rsqrt((v * v).mean(-1, keepdim=True) + 1e-6) * g

        def rope(q):
            half = q.shape[-1] // 2
            return q * cos + t.cat([-q[..., half:], q[..., :half]], -1) * sin

        a = rms(x, g1)
        q, k, v = (t.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
        o = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
        x = x + t.einsum("bhse,hed->bsd", o, wo)
        a = rms(x, g2)
        return x + (F.silu(a @ w1) * (a @ w3)) @ w2

    def jax(jx, g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
        jnp = jx.numpy

        def rms(v, g):
            return v * jx.lax.rsqrt((v * v).mean(-1, keepdims=True) + 1e-6) * g

        def rope(q):
            half = q.shape[-1] // 2
            return q * cos + jnp.concatenate([-q[..., half:], q[..., :half]], -1) * sin

        a = rms(x, g1)
        q, k, v = (jnp.einsum("bsd,dhe->bshe", a, w) for w in (wq, wk, wv))  # jax.nn's layout: (b, s, h, e)
        cos_, sin_ = cos[:, None, :], sin[:, None, :]
        half = e // 2

        def rope_bshe(q):
            return q * cos_ + jnp.concatenate([-q[..., half:], q[..., :half]], -1) * sin_

        o = jx.nn.dot_product_attention(rope_bshe(q), rope_bshe(k), v, is_causal=True)
        x = x + jnp.einsum("bshe,hed->bsd", o, wo)
        a = rms(x, g2)
        return x + (jx.nn.silu(a @ w1) * (a @ w3)) @ w2

    n = size.batch * s
    flops = 2 * n * d * d * 4 + 2 * 2 * size.batch * h * s * s * e + 2 * 3 * n * d * f
    return Block("llama", "Llama block (RMSNorm, RoPE, causal attention, SwiGLU MLP)", size, params, inputs,
                 numpy, pypto, torch, jax, flops=flops, cotangent=_normal(rng, (size.batch, s, d), 1.0))  # fmt: skip


def gpt2(size: Size, rng: np.random.Generator) -> Block:
    d, h, e, s = size.dim, size.heads, size.head_dim, size.seq
    f = 4 * d
    params = {
        "g1": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "b1": _normal(rng, (d,), 0.1),
        "wq": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "wk": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "wv": _normal(rng, (d, h, e), 1 / math.sqrt(d)),
        "bq": _normal(rng, (h, 1, e), 0.1),
        "bk": _normal(rng, (h, 1, e), 0.1),
        "bv": _normal(rng, (h, 1, e), 0.1),
        "wo": _normal(rng, (h, e, d), 1 / math.sqrt(d)),
        "bo": _normal(rng, (d,), 0.1),
        "g2": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
        "b2": _normal(rng, (d,), 0.1),
        "wf": _normal(rng, (d, f), 1 / math.sqrt(d)),
        "bf": _normal(rng, (f,), 0.1),
        "wp": _normal(rng, (f, d), 1 / math.sqrt(f)),
        "bp": _normal(rng, (d,), 0.1),
    }
    inputs = {
        "x": _normal(rng, (size.batch, s, d), 1.0),
        "mask": np.triu(np.full((s, s), -1e9, np.float32), 1),
    }

    def numpy(g1, b1, wq, wk, wv, bq, bk, bv, wo, bo, g2, b2, wf, bf, wp, bp, x, mask):
        a = _np_ln(x, g1, b1)
        q, k, v = (np.einsum("bsd,dhe->bhse", a, w) + b for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        x = x + np.einsum("bhse,hed->bsd", _np_attention(q, k, v, mask), wo) + bo
        return x + _np_gelu_tanh(_np_ln(x, g2, b2) @ wf + bf) @ wp + bp

    def pypto(g1, b1, wq, wk, wv, bq, bk, bv, wo, bo, g2, b2, wf, bf, wp, bp, x, mask):
        a = pt.layer_norm(x, g1, b1)
        q, k, v = (pt.einsum("bsd,dhe->bhse", a, w) + b for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        x = x + pt.einsum("bhse,hed->bsd", _pt_attention(q, k, v, mask), wo) + bo
        return x + pt.gelu(pt.layer_norm(x, g2, b2) @ wf + bf, approximate="tanh") @ wp + bp

    def torch(t, g1, b1, wq, wk, wv, bq, bk, bv, wo, bo, g2, b2, wf, bf, wp, bp, x, mask):
        F = t.nn.functional
        a = F.layer_norm(x, (d,), g1, b1)
        q, k, v = (t.einsum("bsd,dhe->bhse", a, w) + b for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + t.einsum("bhse,hed->bsd", o, wo) + bo
        return x + F.gelu(F.layer_norm(x, (d,), g2, b2) @ wf + bf, approximate="tanh") @ wp + bp

    def jax(jx, g1, b1, wq, wk, wv, bq, bk, bv, wo, bo, g2, b2, wf, bf, wp, bp, x, mask):
        jnp = jx.numpy

        def ln(v, g, b):
            mu = v.mean(-1, keepdims=True)
            return (v - mu) * jx.lax.rsqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

        a = ln(x, g1, b1)
        q, k, v = (jnp.einsum("bsd,dhe->bshe", a, w) + b[:, 0] for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        o = jx.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + jnp.einsum("bshe,hed->bsd", o, wo) + bo
        return x + jx.nn.gelu(ln(x, g2, b2) @ wf + bf, approximate=True) @ wp + bp

    n = size.batch * s
    flops = 2 * n * d * d * 4 + 2 * 2 * size.batch * h * s * s * e + 2 * 2 * n * d * f
    return Block("gpt2", "GPT-2 block (layer norm, causal attention, GELU MLP)", size, params, inputs,
                 numpy, pypto, torch, jax, flops=flops, cotangent=_normal(rng, (size.batch, s, d), 1.0))  # fmt: skip


def cross_entropy(size: Size, rng: np.random.Generator) -> Block:
    n, d, v = size.batch * size.seq, size.dim, size.vocab
    target = rng.integers(0, v, n)
    onehot = np.zeros((n, v), np.float32)
    onehot[np.arange(n), target] = 1
    params = {"w": _normal(rng, (d, v), 1 / math.sqrt(d))}
    inputs = {"h": _normal(rng, (n, d), 1.0), "onehot": onehot}

    def numpy(w, h, onehot):
        z = h @ w
        m = z.max(-1, keepdims=True)
        lse = np.log(np.exp(z - m).sum(-1)) + m[:, 0]
        return (lse - z[np.arange(n), target]).mean()

    def pypto(w, h, onehot):
        z = h @ w
        m = z.max(-1, keepdims=True)
        lse = pt.log(pt.exp(z - m).sum(-1)) + m[:, 0]
        return (lse - (z * onehot).sum(-1)).mean()

    def torch(t, w, h, onehot):
        return t.nn.functional.cross_entropy(h @ w, tgt_t(t))

    def jax(jx, w, h, onehot):
        z = h @ w
        lse = jx.nn.logsumexp(z, axis=-1)
        return (lse - jx.numpy.take_along_axis(z, tgt_j(jx), axis=-1)[:, 0]).mean()

    cache: dict = {}

    def tgt_t(t):
        return cache.setdefault("t", t.from_numpy(target))

    def tgt_j(jx):  # a constant of the traced function (a cached array would be a leaked tracer)
        return jx.numpy.asarray(target[:, None])

    return Block("cross_entropy", f"cross-entropy over a {v // 1000}k vocabulary (logits h @ w, logsumexp)", size,
                 params, inputs, numpy, pypto, torch, jax, flops=2 * n * d * v)  # fmt: skip


def swiglu(size: Size, rng: np.random.Generator) -> Block:
    n, d, f = size.batch * size.seq, size.dim, size.hidden
    params = {
        "w1": _normal(rng, (d, f), 1 / math.sqrt(d)),
        "w3": _normal(rng, (d, f), 1 / math.sqrt(d)),
        "w2": _normal(rng, (f, d), 1 / math.sqrt(f)),
    }
    inputs = {"x": _normal(rng, (n, d), 1.0)}

    def numpy(w1, w3, w2, x):
        gate = x @ w1
        return (gate / (1 + np.exp(-gate)) * (x @ w3)) @ w2

    def pypto(w1, w3, w2, x):
        return (pt.silu(x @ w1) * (x @ w3)) @ w2

    def torch(t, w1, w3, w2, x):
        return (t.nn.functional.silu(x @ w1) * (x @ w3)) @ w2

    def jax(jx, w1, w3, w2, x):
        return (jx.nn.silu(x @ w1) * (x @ w3)) @ w2

    return Block("swiglu", "SwiGLU MLP (silu(x @ w1) * (x @ w3)) @ w2", size, params, inputs, numpy, pypto,
                 torch, jax, flops=2 * 3 * n * d * f, cotangent=_normal(rng, (n, d), 1.0))  # fmt: skip


BLOCKS = {"llama": llama, "gpt2": gpt2, "cross_entropy": cross_entropy, "swiglu": swiglu}
