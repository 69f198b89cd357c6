"""A Llama-style block (RMSNorm, rotary attention with a causal mask, SwiGLU MLP) in bfloat16 end to end, forward
and gradients of every parameter, against float64 references on the same bfloat16 values: NumPy for the
forward pass, torch autograd for the gradients.

pypto computes 16-bit programs in float32 and rounds each result once (docs/precision.md), so each element is
within half a bfloat16 unit (2^-8 relative) of the float32 result, which is itself within float32 rounding of
the exact one (bounded here by 2^-12 of the result's largest magnitude: reductions over a few hundred terms)."""

import math

import ml_dtypes
import numpy as np
import pytest

import pypto as pt

B, S, D, H = 2, 16, 64, 4
E, F = D // H, 128
BF16 = ml_dtypes.bfloat16


def _rope_np(q, cos, sin):
    half = q.shape[-1] // 2
    return q * cos + np.concatenate([-q[..., half:], q[..., :half]], -1) * sin


def _block_np(g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * g

    a = rms(x, g1)
    q, k, v = (np.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
    q, k = _rope_np(q, cos, sin), _rope_np(k, cos, sin)
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(E) + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    o = np.einsum("bhij,bhje->bhie", p / p.sum(-1, keepdims=True), v)
    x = x + np.einsum("bhse,hed->bsd", o, wo)
    a = rms(x, g2)
    gate = a @ w1
    return x + (gate / (1 + np.exp(-gate)) * (a @ w3)) @ w2


def _block_pt(g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask):
    def rope(q):
        return q * cos + pt.concat([-q[..., E // 2 :], q[..., : E // 2]], axis=-1) * sin

    a = pt.rms_norm(x, g1)
    q, k, v = (pt.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
    s = pt.einsum("bhie,bhje->bhij", rope(q), rope(k)) * (1 / math.sqrt(E)) + mask
    o = pt.einsum("bhij,bhje->bhie", pt.softmax(s, dim=-1), v)
    x = x + pt.einsum("bhse,hed->bsd", o, wo)
    a = pt.rms_norm(x, g2)
    return x + (pt.silu(a @ w1) * (a @ w3)) @ w2


def _arrays(rng):
    def normal(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(BF16)

    params = [(1 + 0.1 * rng.standard_normal(D)).astype(BF16), normal((D, H, E), D**-0.5), normal((D, H, E), D**-0.5),
              normal((D, H, E), D**-0.5), normal((H, E, D), D**-0.5), (1 + 0.1 * rng.standard_normal(D)).astype(BF16),
              normal((D, F), D**-0.5), normal((D, F), D**-0.5), normal((F, D), F**-0.5)]  # fmt: skip
    ang = np.arange(S)[:, None] * (10000.0 ** (-np.arange(0, E, 2) / E))[None, :]
    ang = np.concatenate([ang, ang], -1)
    inputs = [normal((B, S, D), 1.0), np.cos(ang).astype(BF16), np.sin(ang).astype(BF16),
              np.triu(np.full((S, S), -1e9), 1).astype(BF16)]  # fmt: skip
    return params, inputs


@pytest.fixture
def executor(pypto_executor):
    """The block's fused kernel has 44 axes: the reference backend, which gives every value one NumPy dimension
    per axis, cannot hold it (NumPy's limit is 32), so the session's executor runs it unless that is the
    reference, and then the best installed backend does."""
    return "auto" if pypto_executor == "reference" else pypto_executor


def _close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bound = 2.0**-8 * np.abs(want) + 2.0**-12 * np.abs(want).max()
    worst = float(np.max(np.abs(got - want) - bound))
    assert worst <= 0, f"{what}: beyond the bound by {worst:.3g} (largest |value| {np.abs(want).max():.3g})"


def test_forward_in_bfloat16_matches_float64(rng, executor):
    params, inputs = _arrays(rng)
    y = pt.jit(_block_pt, executor=executor)(*params, *inputs)
    assert y.dtype == BF16
    _close(y, _block_np(*(a.astype(np.float64) for a in params + inputs)), "forward")


def test_gradients_in_bfloat16_match_torch_autograd_in_float64(rng, executor):
    torch = pytest.importorskip("torch")
    params, inputs = _arrays(rng)
    r = (rng.standard_normal((B, S, D))).astype(BF16)

    def loss(*args):
        return (_block_pt(*args[:-1]) * args[-1]).sum()

    grads = pt.grad(pt.jit(loss, executor=executor), argnums=tuple(range(len(params))))(*params, *inputs, r)
    ts = [torch.tensor(a.astype(np.float64), requires_grad=k < len(params)) for k, a in enumerate(params + inputs)]

    def rope_t(q, cos, sin):
        return q * cos + torch.cat([-q[..., E // 2 :], q[..., : E // 2]], -1) * sin

    g1, wq, wk, wv, wo, g2, w1, w3, w2, x, cos, sin, mask = ts
    a = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g1
    q, k, v = (torch.einsum("bsd,dhe->bhse", a, w) for w in (wq, wk, wv))
    s = torch.einsum("bhie,bhje->bhij", rope_t(q, cos, sin), rope_t(k, cos, sin)) / math.sqrt(E) + mask
    o = torch.einsum("bhij,bhje->bhie", torch.softmax(s, -1), v)
    x = x + torch.einsum("bhse,hed->bsd", o, wo)
    a = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g2
    y = x + (torch.nn.functional.silu(a @ w1) * (a @ w3)) @ w2
    (y * torch.tensor(r.astype(np.float64))).sum().backward()
    names = ["g1", "wq", "wk", "wv", "wo", "g2", "w1", "w3", "w2"]
    for name, got, t in zip(names, grads, ts[: len(params)]):
        assert got.dtype == BF16, name
        _close(got, t.grad.numpy(), f"gradient of {name}")
