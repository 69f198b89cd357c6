"""Benchmark cases of gradients (``pt.grad``): forward and backward together, against torch eager
autograd, ``torch.compile`` of the same loss with ``.backward()``, and ``jax.jit(jax.grad(...))``.

Each case is the gradient of a scalar loss ``(f(x) * w).sum()`` (``w`` a fixed random cotangent), so
every implementation computes the same vector-Jacobian product; the result checked is the gradient of
the first input, against a NumPy formula in float64.
"""

from __future__ import annotations

import math

import numpy as np

import pypto as pt


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _np_erf(v):
    try:
        from scipy.special import erf  # installed with jax
    except ImportError:  # slow but exact
        return np.vectorize(math.erf, otypes=[np.float64])(v)
    return erf(v)


def build_grad_cases(comp, want, rng, case_type, jax, jnp) -> list:
    torch = comp.torch
    cases: list = []

    def holder_case(name, title, nbytes, ref, flops=0, tol=None):
        held: dict = {}
        case = case_type(name, title, nbytes, ref, lambda: np.asarray(held["v"]), flops=flops)
        case.tolerance = tol or {"rtol": 1e-4, "atol": 1e-5}
        return case, held

    def keep(held, fn):
        def run():
            held["v"] = fn()

        return run

    def torch_impls(case, held, loss, arrays, n_grad=1):
        """torch eager autograd and torch.compile of the loss, both with .backward() for the first ``n_grad``
        inputs; the first input's gradient is the result."""
        ts = [torch.from_numpy(a).requires_grad_(k < n_grad) for k, a in enumerate(arrays)]

        def step(f):
            def run():
                for t in ts:
                    t.grad = None
                f(*ts).backward()
                return ts[0].grad

            return run

        case.impls["torch"] = keep(held, step(loss))
        compiled = comp.compiled(loss)
        if compiled is not None:
            case.impls["torch.compile"] = keep(held, step(compiled))

    def _grad_softmax_4096() -> None:
        m = 4096
        x = rng.standard_normal((m, m)).astype(np.float32)
        w = rng.standard_normal((m, m)).astype(np.float32)

        def ref():
            y = _np_softmax(x.astype(np.float64))
            return y * (w - (w * y).sum(-1, keepdims=True))

        case, held = holder_case("grad_softmax_4096", "d/dx sum(softmax(x) * w), 4096x4096 float32", 12 * m * m, ref)
        g = pt.grad(lambda x, w: (pt.softmax(x, dim=-1) * w).sum())
        case.impls["pypto-grad"] = keep(held, lambda: g(x, w))
        if torch:
            torch_impls(case, held, lambda t, w: (torch.softmax(t, dim=-1) * w).sum(), [x, w])
        if jax:
            jg = jax.jit(jax.grad(lambda v, w: (jax.nn.softmax(v, axis=-1) * w).sum()))
            jx, jw = jnp.asarray(x), jnp.asarray(w)
            case.impls["jax.jit(grad)"] = keep(held, lambda: jg(jx, jw).block_until_ready())
        cases.append(case)

    def _grad_layernorm_4096() -> None:
        m = 4096
        x = rng.standard_normal((m, m)).astype(np.float32)
        gam, bet = rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        w = rng.standard_normal((m, m)).astype(np.float32)

        def ref():
            xw = x.astype(np.float64)
            mu = xw.mean(-1, keepdims=True)
            inv = 1 / np.sqrt(((xw - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
            xh = (xw - mu) * inv
            gh = w * gam
            return inv * (gh - gh.mean(-1, keepdims=True) - xh * (gh * xh).mean(-1, keepdims=True))

        case, held = holder_case("grad_layernorm_4096", "d/d(x, g, b) sum(layer_norm(x, g, b) * w), 4096x4096 float32",
                                 12 * m * m, ref, tol={"rtol": 1e-3, "atol": 1e-3})  # fmt: skip
        g = pt.grad(lambda x, gam, bet, w: (pt.layer_norm(x, gam, bet, 1e-5) * w).sum(), argnums=(0, 1, 2))
        case.impls["pypto-grad"] = keep(held, lambda: g(x, gam, bet, w)[0])
        if torch:
            torch_impls(case, held, lambda t, a, b, w: (torch.nn.functional.layer_norm(t, (m,), a, b, 1e-5) * w).sum(),
                        [x, gam, bet, w], 3)  # fmt: skip
        if jax:

            def jln(v, a, b, w):
                mu = v.mean(-1, keepdims=True)
                return (((v - mu) * jax.lax.rsqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * a + b) * w).sum()

            jg = jax.jit(jax.grad(jln, argnums=(0, 1, 2)))
            j = [jnp.asarray(a) for a in (x, gam, bet, w)]
            case.impls["jax.jit(grad)"] = keep(held, lambda: jax.block_until_ready(jg(*j))[0])
        cases.append(case)

    def _grad_gelu_16M() -> None:
        n = 1 << 24
        x = rng.standard_normal(n).astype(np.float32)
        w = rng.standard_normal(n).astype(np.float32)

        def ref():
            xw = x.astype(np.float64)
            return w * (0.5 * (1 + _np_erf(xw / math.sqrt(2))) + xw * np.exp(-xw * xw / 2) / math.sqrt(2 * math.pi))

        case, held = holder_case("grad_gelu_16M", "d/dx sum(gelu(x) * w) (erf form), 16M float32", 12 * n, ref)
        g = pt.grad(lambda x, w: (pt.gelu(x) * w).sum())
        case.impls["pypto-grad"] = keep(held, lambda: g(x, w))
        if torch:
            torch_impls(case, held, lambda t, w: (torch.nn.functional.gelu(t) * w).sum(), [x, w])
        if jax:
            jg = jax.jit(jax.grad(lambda v, w: (jax.nn.gelu(v, approximate=False) * w).sum()))
            jx, jw = jnp.asarray(x), jnp.asarray(w)
            case.impls["jax.jit(grad)"] = keep(held, lambda: jg(jx, jw).block_until_ready())
        cases.append(case)

    def _train_mlp_block() -> None:
        n, d, h = 512, 1024, 4096
        x = (rng.standard_normal((n, d)) * 0.5).astype(np.float32)
        w1 = (rng.standard_normal((d, h)) / math.sqrt(d)).astype(np.float32)
        b1 = (rng.standard_normal(h) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((h, d)) / math.sqrt(h)).astype(np.float32)
        b2 = (rng.standard_normal(d) * 0.1).astype(np.float32)
        t = rng.standard_normal((n, d)).astype(np.float32)
        c = math.sqrt(2 / math.pi)

        def ref():  # d/dw1 of sum((gelu_tanh(x @ w1 + b1) @ w2 + b2) * t)
            xw = x.astype(np.float64)
            z = xw @ w1 + b1
            u = c * (z + 0.044715 * z**3)
            th = np.tanh(u)
            dz = (t @ w2.T.astype(np.float64)) * (
                0.5 * (1 + th) + 0.5 * z * (1 - th * th) * c * (1 + 3 * 0.044715 * z**2)
            )
            return xw.T @ dz

        flops = 3 * 2 * 2 * n * d * h
        case, held = holder_case("train_mlp_block", f"MLP block forward + backward (grads of w1, b1, w2, b2), x {n}x{d}, "
                                 f"hidden {h}, float32", 4 * 2 * (n * d * 2 + d * h * 2), ref, flops=flops,
                                 tol={"rtol": 2e-3, "atol": 2e-3})  # fmt: skip

        def loss(w1, b1, w2, b2, x, t):
            return ((pt.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2) * t).sum()

        g = pt.grad(loss, argnums=(0, 1, 2, 3))
        case.impls["pypto-grad"] = keep(held, lambda: g(w1, b1, w2, b2, x, t)[0])
        if torch:
            gelu_t = torch.nn.functional.gelu
            torch_impls(case, held, lambda w1, b1, w2, b2, x, t: ((gelu_t(x @ w1 + b1, approximate="tanh") @ w2 + b2) * t)
                        .sum(), [w1, b1, w2, b2, x, t], 4)  # fmt: skip
        if jax:

            def jloss(w1, b1, w2, b2, x, t):
                return ((jax.nn.gelu(x @ w1 + b1, approximate=True) @ w2 + b2) * t).sum()

            jg = jax.jit(jax.grad(jloss, argnums=(0, 1, 2, 3)))
            j = [jnp.asarray(a) for a in (w1, b1, w2, b2, x, t)]
            case.impls["jax.jit(grad)"] = keep(held, lambda: jax.block_until_ready(jg(*j))[0])
        cases.append(case)

    def _train_attention_block() -> None:
        batch, seq, dim, heads = 4, 256, 256, 8
        e = dim // heads
        r = np.random.default_rng(5)
        ws = [(r.standard_normal((dim, heads, e)) / math.sqrt(dim)).astype(np.float32) for _ in range(3)]
        wo = (r.standard_normal((heads, e, dim)) / math.sqrt(dim)).astype(np.float32)
        bo = np.zeros(dim, np.float32)
        x = rng.standard_normal((batch, seq, dim)).astype(np.float32)
        t = rng.standard_normal((batch, seq, dim)).astype(np.float32)
        scale = 1 / math.sqrt(e)

        def loss(wq, wk, wv, wo, bo, x, t):
            q, k, v = (pt.einsum("bsd,dhe->bhse", x, w) for w in (wq, wk, wv))
            p = pt.softmax(pt.einsum("bhie,bhje->bhij", q, k) * scale, dim=-1)
            return ((pt.einsum("bhse,hed->bsd", pt.einsum("bhij,bhje->bhie", p, v), wo) + bo) * t).sum()

        def ref():  # d/d(wo) in float64: sum over b, s of o[b, h, s, e] * t[b, s, d]
            xw = x.astype(np.float64)
            q, k, v = (np.einsum("bsd,dhe->bhse", xw, w, optimize=True) for w in ws)
            p = _np_softmax(np.einsum("bhie,bhje->bhij", q, k, optimize=True) * scale)
            o = np.einsum("bhij,bhje->bhie", p, v, optimize=True)
            return np.einsum("bhse,bsd->hed", o, t, optimize=True)

        flops = 3 * (2 * batch * seq * dim * dim * 4 + 2 * 2 * batch * heads * seq * seq * e)
        case, held = holder_case("train_attention_block", f"attention block forward + backward (grads of its 5 "
                                 f"parameters), x {batch}x{seq}x{dim}, {heads} heads, float32",
                                 4 * 2 * (2 * x.size + 4 * dim * dim), ref, flops=flops,
                                 tol={"rtol": 2e-3, "atol": 2e-3})  # fmt: skip
        g = pt.grad(loss, argnums=(0, 1, 2, 3, 4))
        case.impls["pypto-grad"] = keep(held, lambda: g(*ws, wo, bo, x, t)[3])
        if torch:

            def tloss(wq, wk, wv, wo, bo, x, t):
                q, k, v = (torch.einsum("bsd,dhe->bhse", x, w) for w in (wq, wk, wv))
                p = torch.softmax(torch.einsum("bhie,bhje->bhij", q, k) * scale, dim=-1)
                return ((torch.einsum("bhse,hed->bsd", torch.einsum("bhij,bhje->bhie", p, v), wo) + bo) * t).sum()

            arrays = [*ws, wo, bo, x, t]
            ts = [torch.from_numpy(a).requires_grad_(k < 5) for k, a in enumerate(arrays)]

            def step():
                for tt in ts:
                    tt.grad = None
                tloss(*ts).backward()
                return ts[3].grad

            case.impls["torch"] = keep(held, step)
        if jax:

            def jloss(wq, wk, wv, wo, bo, x, t):
                q, k, v = (jnp.einsum("bsd,dhe->bhse", x, w) for w in (wq, wk, wv))
                p = jax.nn.softmax(jnp.einsum("bhie,bhje->bhij", q, k) * scale, axis=-1)
                return ((jnp.einsum("bhse,hed->bsd", jnp.einsum("bhij,bhje->bhie", p, v), wo) + bo) * t).sum()

            jg = jax.jit(jax.grad(jloss, argnums=(0, 1, 2, 3, 4)))
            j = [jnp.asarray(a) for a in (*ws, wo, bo, x, t)]
            case.impls["jax.jit(grad)"] = keep(held, lambda: jax.block_until_ready(jg(*j))[3])
        cases.append(case)

    for name, build in (("grad_softmax_4096", _grad_softmax_4096), ("grad_layernorm_4096", _grad_layernorm_4096),
                        ("grad_gelu_16M", _grad_gelu_16M), ("train_mlp_block", _train_mlp_block),
                        ("train_attention_block", _train_attention_block)):  # fmt: skip
        if want(name):
            build()
    return cases
