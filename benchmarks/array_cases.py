"""Benchmark cases of the array API (``@pt.jit``), against torch eager, JAX's jit and NumPy.

Each implementation returns its result the way its library does (a new array), recorded in the
case's holder so the harness can check it; ``pypto-jit (out=)`` writes into a preallocated array, the
way the kernel-language rows of the other cases do, and ``pypto kernel`` is the same computation
written in the kernel language (the array layer should cost nothing on top of it).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

import pypto as pt
from pypto.testing import layernorm, softmax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def _jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None
    return jax, jnp


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def build_array_cases(comp, want, rng, case_type) -> list:
    jax, jnp = _jax()
    torch = comp.torch
    cases = []
    if jax is None:
        comp.missing.setdefault("jax", "not installed (pip install jax)")

    def holder_case(name, title, nbytes, ref, flops=0, tol=None):
        held = {}
        case = case_type(name, title, nbytes, ref, lambda: np.asarray(held["v"]), flops=flops)
        if tol:
            case.tolerance = tol
        return case, held

    def keep(held, fn):
        def run():
            held["v"] = fn()

        return run

    def _jit_softmax_4096() -> None:  # a function of its own: its lambdas keep their own arrays
        m = 4096
        x = rng.standard_normal((m, m)).astype(np.float32)
        y = pt.empty((m, m))
        case, held = holder_case("jit_softmax_4096", "pt.softmax(x) through @pt.jit, 4096x4096 float32", 8 * m * m,
                                 lambda: _np_softmax(x.astype(np.float64)))  # fmt: skip
        sm = pt.jit(lambda x: pt.softmax(x, dim=-1))
        k = pt.kernel(softmax.fn)
        case.impls["pypto kernel"] = keep(held, lambda: k(x, y))
        case.impls["pypto-jit (out=)"] = keep(held, lambda: sm(x, out=y))
        case.impls["pypto-jit"] = keep(held, lambda: sm(x))
        if torch:
            tx = torch.from_numpy(x)
            case.impls["torch"] = keep(held, lambda: torch.softmax(tx, dim=-1))
        if jax:
            jx = jnp.asarray(x)
            jf = jax.jit(lambda v: jax.nn.softmax(v, axis=-1))
            case.impls["jax.jit"] = keep(held, lambda: jf(jx).block_until_ready())
        cases.append(case)

    def _jit_layernorm_4096() -> None:  # a function of its own: its lambdas keep their own arrays
        m = 4096
        x = rng.standard_normal((m, m)).astype(np.float32)
        g, b = rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        y = pt.empty((m, m))

        def ref():
            xw = x.astype(np.float64)
            mu = xw.mean(-1, keepdims=True)
            return (xw - mu) / np.sqrt(((xw - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

        case, held = holder_case("jit_layernorm_4096", "pt.layer_norm(x, g, b) through @pt.jit, 4096x4096 float32",
                                 8 * m * m, ref, tol={"rtol": 1e-4, "atol": 1e-4})  # fmt: skip
        ln = pt.jit(lambda x, g, b: pt.layer_norm(x, g, b, eps=1e-5))
        k = pt.kernel(layernorm.fn)
        case.impls["pypto kernel"] = keep(held, lambda: k(x, g, b, y))
        case.impls["pypto-jit (out=)"] = keep(held, lambda: ln(x, g, b, out=y))
        case.impls["pypto-jit"] = keep(held, lambda: ln(x, g, b))
        if torch:
            tx, tg, tb = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(b)
            case.impls["torch"] = keep(held, lambda: torch.nn.functional.layer_norm(tx, (m,), tg, tb, 1e-5))
        if jax:
            jx, jg, jb = jnp.asarray(x), jnp.asarray(g), jnp.asarray(b)

            def jln(v, g, b):
                mu = v.mean(-1, keepdims=True)
                return (v - mu) * jax.lax.rsqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

            jf = jax.jit(jln)
            case.impls["jax.jit"] = keep(held, lambda: jf(jx, jg, jb).block_until_ready())
        cases.append(case)

    def _mlp_block() -> None:  # a function of its own: its lambdas keep their own arrays
        n, d, h = 512, 1024, 4096
        x = (rng.standard_normal((n, d)) * 0.5).astype(np.float32)
        w1 = (rng.standard_normal((d, h)) / math.sqrt(d)).astype(np.float32)
        b1 = (rng.standard_normal(h) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((h, d)) / math.sqrt(h)).astype(np.float32)
        b2 = (rng.standard_normal(d) * 0.1).astype(np.float32)

        def gelu_np(v):
            return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))

        def ref():
            return gelu_np(x.astype(np.float64) @ w1 + b1) @ w2 + b2

        case, held = holder_case("mlp_block", f"MLP block gelu(x @ w1 + b1) @ w2 + b2, x {n}x{d}, hidden {h}, float32",
                                 4 * (n * d * 2 + d * h * 2 + h + d), ref, flops=2 * 2 * n * d * h,
                                 tol={"rtol": 1e-3, "atol": 1e-3})  # fmt: skip
        mlp = pt.jit(lambda x, w1, b1, w2, b2: pt.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2)
        case.impls["pypto-jit"] = keep(held, lambda: mlp(x, w1, b1, w2, b2))
        case.impls["numpy"] = keep(held, lambda: gelu_np(x @ w1 + b1) @ w2 + b2)
        if torch:
            t = [torch.from_numpy(a) for a in (x, w1, b1, w2, b2)]
            gelu_t = torch.nn.functional.gelu

            def torch_mlp():
                with torch.no_grad():
                    return gelu_t(t[0] @ t[1] + t[2], approximate="tanh") @ t[3] + t[4]

            case.impls["torch"] = keep(held, torch_mlp)
        if jax:
            j = [jnp.asarray(a) for a in (x, w1, b1, w2, b2)]
            jf = jax.jit(lambda x, w1, b1, w2, b2: jax.nn.gelu(x @ w1 + b1, approximate=True) @ w2 + b2)
            case.impls["jax.jit"] = keep(held, lambda: jf(*j).block_until_ready())
        cases.append(case)

    def _swiglu_mlp() -> None:  # a function of its own: its lambdas keep their own arrays
        n, d, h = 256, 512, 1024
        x = rng.standard_normal((n, d)).astype(np.float32)
        w1, w3 = ((rng.standard_normal((d, h)) / math.sqrt(d)).astype(np.float32) for _ in range(2))
        w2 = (rng.standard_normal((h, d)) / math.sqrt(h)).astype(np.float32)

        def silu_np(v):
            return v / (1 + np.exp(-v))

        def ref():
            x64 = x.astype(np.float64)
            return (silu_np(x64 @ w1) * (x64 @ w3)) @ w2

        case, held = holder_case("swiglu_mlp", f"SwiGLU MLP (silu(x @ w1) * (x @ w3)) @ w2, x {n}x{d}, hidden {h}, "
                                 "float32", 4 * (n * d * 2 + d * h * 3), ref, flops=2 * 3 * n * d * h,
                                 tol={"rtol": 1e-3, "atol": 1e-3})  # fmt: skip
        mlp = pt.jit(lambda x, w1, w3, w2: (pt.silu(x @ w1) * (x @ w3)) @ w2)
        case.impls["pypto-jit"] = keep(held, lambda: mlp(x, w1, w3, w2))
        case.impls["numpy"] = keep(held, lambda: (silu_np(x @ w1) * (x @ w3)) @ w2)
        if torch:
            t = [torch.from_numpy(a) for a in (x, w1, w3, w2)]
            silu_t = torch.nn.functional.silu

            def torch_mlp():
                with torch.no_grad():
                    return (silu_t(t[0] @ t[1]) * (t[0] @ t[2])) @ t[3]

            case.impls["torch"] = keep(held, torch_mlp)
        if jax:
            j = [jnp.asarray(a) for a in (x, w1, w3, w2)]
            jf = jax.jit(lambda x, w1, w3, w2: (jax.nn.silu(x @ w1) * (x @ w3)) @ w2)
            case.impls["jax.jit"] = keep(held, lambda: jf(*j).block_until_ready())
        cases.append(case)

    def _silu_matmul() -> None:  # a function of its own: its lambdas keep their own arrays
        n, d, h = 256, 512, 1024
        a = rng.standard_normal((n, d)).astype(np.float32)
        w = (rng.standard_normal((d, h)) / math.sqrt(d)).astype(np.float32)

        def ref():
            a64 = a.astype(np.float64)
            return (a64 / (1 + np.exp(-a64))) @ w

        case, held = holder_case("silu_matmul", f"a contraction fed by a function, pt.silu(a) @ w, a {n}x{d}, "
                                 f"w {d}x{h}, float32", 4 * (n * d + d * h + n * h), ref, flops=2 * n * d * h,
                                 tol={"rtol": 1e-3, "atol": 1e-3})  # fmt: skip
        f = pt.jit(lambda a, w: pt.silu(a) @ w)
        case.impls["pypto-jit"] = keep(held, lambda: f(a, w))
        case.impls["numpy"] = keep(held, lambda: (a / (1 + np.exp(-a))) @ w)
        if torch:
            ta, tw = torch.from_numpy(a), torch.from_numpy(w)

            def torch_silu_matmul():
                with torch.no_grad():
                    return torch.nn.functional.silu(ta) @ tw

            case.impls["torch"] = keep(held, torch_silu_matmul)
        if jax:
            ja, jw = jnp.asarray(a), jnp.asarray(w)
            jf = jax.jit(lambda a, w: jax.nn.silu(a) @ w)
            case.impls["jax.jit"] = keep(held, lambda: jf(ja, jw).block_until_ready())
        cases.append(case)

    def _attention_block() -> None:  # a function of its own: its lambdas keep their own arrays
        from attention import MultiHeadAttention, numpy_attention

        batch, seq, dim, heads = 4, 256, 256, 8
        block = MultiHeadAttention(dim, heads, np.random.default_rng(5))
        x = rng.standard_normal((batch, seq, dim)).astype(np.float32)
        e = dim // heads
        flops = 2 * batch * seq * dim * dim * 4 + 2 * 2 * batch * heads * seq * seq * e
        case, held = holder_case("attention_block", f"multi-head attention block (examples/attention.py), x {batch}x"
                                 f"{seq}x{dim}, {heads} heads, float32", 4 * (2 * x.size + 4 * dim * dim),
                                 lambda: numpy_attention(block, x), flops=flops,
                                 tol={"rtol": 1e-3, "atol": 1e-4})  # fmt: skip
        case.impls["pypto-jit"] = keep(held, lambda: block(x))

        def np_attention():
            q, k, v = (np.einsum("bsd,dhe->bhse", x, w.data, optimize=True) for w in (block.wq, block.wk, block.wv))
            p = _np_softmax(np.einsum("bhie,bhje->bhij", q, k, optimize=True) / math.sqrt(e))
            o = np.einsum("bhij,bhje->bhie", p, v, optimize=True)
            return np.einsum("bhse,hed->bsd", o, block.wo.data, optimize=True) + block.bo.data

        case.impls["numpy"] = keep(held, np_attention)
        params = [p.data for p in block.parameters()]
        if torch:
            tp = [torch.from_numpy(p) for p in params]
            tx = torch.from_numpy(x)

            def torch_attention():
                wq, wk, wv, wo, bo = tp
                with torch.no_grad():
                    q, k, v = (torch.einsum("bsd,dhe->bhse", tx, w) for w in (wq, wk, wv))
                    p = torch.softmax(torch.einsum("bhie,bhje->bhij", q, k) / math.sqrt(e), dim=-1)
                    return torch.einsum("bhse,hed->bsd", torch.einsum("bhij,bhje->bhie", p, v), wo) + bo

            case.impls["torch"] = keep(held, torch_attention)
        if jax:
            jp = [jnp.asarray(p) for p in params]
            jx = jnp.asarray(x)

            def jax_attention(x, wq, wk, wv, wo, bo):
                q, k, v = (jnp.einsum("bsd,dhe->bhse", x, w) for w in (wq, wk, wv))
                p = jax.nn.softmax(jnp.einsum("bhie,bhje->bhij", q, k) / math.sqrt(e), axis=-1)
                return jnp.einsum("bhse,hed->bsd", jnp.einsum("bhij,bhje->bhie", p, v), wo) + bo

            jf = jax.jit(jax_attention)
            case.impls["jax.jit"] = keep(held, lambda: jf(jx, *jp).block_until_ready())
        cases.append(case)

    for name, build in (("jit_softmax_4096", _jit_softmax_4096), ("jit_layernorm_4096", _jit_layernorm_4096),
                        ("mlp_block", _mlp_block), ("swiglu_mlp", _swiglu_mlp), ("silu_matmul", _silu_matmul),
                        ("attention_block", _attention_block)):  # fmt: skip
        if want(name):
            build()
    from grad_cases import build_grad_cases

    return cases + build_grad_cases(comp, want, rng, case_type, jax, jnp)
