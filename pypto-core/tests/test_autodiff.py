"""Gradients of array programs (pt.grad, pt.value_and_grad, pt.vjp) against central finite differences.

Every adjoint rule is checked in float64 against central differences of the same function (step 1e-6,
relative tolerance 1e-6 of the gradient's largest element), and in float32 against the float64 finite
differences (1e-4). Tie and zero rules are checked against their stated values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pt


def fd_grad(f, args, k, eps=1e-6):
    """Central differences of the scalar ``f`` with respect to ``args[k]`` (float64)."""
    x = np.array(args[k], np.float64)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        a_hi = list(args)
        a_lo = list(args)
        a_hi[k], a_lo[k] = hi, lo
        out[idx] = (float(f(*a_hi)) - float(f(*a_lo))) / (2 * eps)
    return out


def assert_close_to(got, want, rel):
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    err = float(np.abs(np.asarray(got, np.float64) - want).max(initial=0.0))
    assert err <= rel * scale, f"max error {err:.3g} > {rel:g} x {scale:.3g}"


# name, function of arrays returning a scalar, shapes, inputs drawn positive
RULES = [
    ("neg_abs", lambda x: (-pt.abs(x) * x).sum(), [(3, 4)], False),
    ("exp_log", lambda x: (pt.exp(x) + pt.log(x)).sum(), [(3, 4)], True),
    ("sqrt_rsqrt", lambda x: (pt.sqrt(x) * 2 + pt.rsqrt(x)).sum(), [(5,)], True),
    ("tanh_sigmoid", lambda x: (pt.tanh(x) * pt.sigmoid(x)).sum(), [(4, 3)], False),
    ("sin_cos_erf", lambda x: (pt.sin(x) * pt.cos(2 * x) + pt.erf(x)).sum(), [(6,)], False),
    ("arith_broadcast", lambda a, b: (a * b - a / (b * b + 1) + 3 * a - b).sum(), [(4, 1), (3,)], False),
    ("power", lambda x: (x**3 + x**-2 + x**0.5 + x**1.7).sum(), [(5,)], True),
    ("mod", lambda a, b: (a % b).sum(), [(6,), (6,)], True),
    ("where", lambda x, y: pt.where(x > 0, x * y, y * y).sum(), [(4, 5), (5,)], False),
    ("sum_mean", lambda x: (x.sum(0) * x.mean(1, keepdims=True)).sum(), [(4, 5)], False),
    ("max_min", lambda x: x.max(1).sum() - 2 * x.min(0).sum(), [(4, 5)], False),
    ("prod", lambda x: x.prod(1).sum(), [(3, 4)], True),
    ("matmul", lambda a, b: pt.tanh(a @ b).sum(), [(4, 5), (5, 3)], False),
    ("batched_matmul", lambda a, b: ((a @ b) ** 2).sum(), [(2, 3, 4), (4, 2)], False),
    ("einsum", lambda a, b: pt.einsum("bhid,bhjd->bhij", a, b).max(-1).sum(), [(2, 2, 3, 4), (2, 2, 5, 4)], False),
    (
        "einsum_outer_trace",
        lambda a, b: pt.einsum("i,j->ij", a, b).sum() + pt.einsum("ij->", a[:, None] * b),
        [(3,), (4,)],
        False,
    ),  # fmt: skip
    ("views", lambda x: (x.T[1:, ::2] * 3).sum() + (x[2, ::-1] * x[1]).sum() + (x[::3, 1] ** 2).sum(), [(7, 5)], False),
    ("reshape", lambda x: (x.reshape(3, 4, 2).sum(1) ** 2).sum() + (x.T.reshape(-1) ** 3).sum(), [(6, 4)], False),
    (
        "concat_stack",
        lambda a, b: (pt.concat([a, b * 2], 0) ** 2).sum() + pt.stack([a, a], 1).max(),
        [(2, 3), (4, 3)],
        False,
    ),  # fmt: skip
    ("softmax", lambda x, w: (pt.softmax(x, dim=-1) * w).sum(), [(3, 6), (6,)], False),
    ("log_softmax", lambda x: pt.log_softmax(x, dim=0)[1].sum(), [(4, 5)], False),
    ("layer_norm", lambda x, w, b: (pt.layer_norm(x, w, b, 1e-5) ** 2 * w).sum(), [(3, 8), (8,), (8,)], False),
    ("rms_norm", lambda x, w: (pt.rms_norm(x, w) ** 3).sum(), [(3, 8), (8,)], False),
    ("activations", lambda x: (pt.gelu(x) + pt.gelu(x, "tanh") + pt.silu(x) + pt.relu(x + 0.1)).sum(), [(9,)], False),
]


def _inputs(rng, shapes, positive, dtype=np.float64):
    if positive:
        return [rng.uniform(0.3, 2.0, s).astype(dtype) for s in shapes]
    # away from the kinks of abs, max and relu, so finite differences are valid
    xs = [rng.standard_normal(s) for s in shapes]
    return [(np.sign(x) * (np.abs(x) + 0.05)).astype(dtype) for x in xs]


@pytest.mark.parametrize(("name", "fn", "shapes", "positive"), RULES, ids=[r[0] for r in RULES])
def test_gradients_match_finite_differences(pypto_executor, rng, name, fn, shapes, positive):
    f = pt.jit(fn, executor=pypto_executor)
    xs = _inputs(rng, shapes, positive)
    argnums = tuple(range(len(xs)))
    grads = pt.grad(f, argnums=argnums)(*xs)
    assert len(grads) == len(xs)
    for k, g in enumerate(grads):
        assert g.shape == xs[k].shape and g.dtype == np.float64
        assert_close_to(g, fd_grad(f, xs, k), 1e-6)
    # float32: the same gradient within 1e-4 of the float64 finite differences
    xs32 = [x.astype(np.float32) for x in xs]
    grads32 = pt.grad(f, argnums=argnums)(*xs32)
    for k, g in enumerate(grads32):
        assert g.dtype == np.float32
        assert_close_to(g, fd_grad(f, [x.astype(np.float64) for x in xs32], k), 1e-4)


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_softmax_matmul_gradient_on_random_shapes(rows, cols, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((rows, cols)), rng.standard_normal((cols, 3))

    def f(x, w):
        return (pt.softmax(x @ w, dim=-1) * pt.log_softmax(x, dim=-1).sum(-1, keepdims=True)).sum()

    gx, gw = pt.grad(f, argnums=(0, 1))(x, w)
    assert_close_to(gx, fd_grad(pt.jit(f), [x, w], 0), 1e-6)
    assert_close_to(gw, fd_grad(pt.jit(f), [x, w], 1), 1e-6)


def test_tie_and_zero_rules(pypto_executor):
    grad = lambda fn, **kw: pt.grad(pt.jit(fn, executor=pypto_executor), **kw)  # noqa: E731
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_array_equal(grad(lambda x: x.max())(x), [0, 0.5, 0.5, 0])  # ties share equally
    a, b = np.array([1.0, 2.0, 5.0]), np.array([1.0, 3.0, 4.0])
    ga, gb = grad(lambda a, b: pt.maximum(a, b).sum(), argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.5, 0, 1])
    np.testing.assert_array_equal(gb, [0.5, 1, 0])
    np.testing.assert_array_equal(grad(lambda x: pt.abs(x).sum())(np.array([-2.0, 0.0, 3.0])), [-1, 0, 1])
    # prod through zeros: one zero gets the product of the others, two zeros give zeros
    g = grad(lambda x: x.prod(1).sum())(np.array([[2.0, 0.0, 3.0], [0.0, 4.0, 0.0], [1.0, 2.0, 3.0]]))
    np.testing.assert_allclose(g, [[0, 6, 0], [0, 0, 0], [6, 3, 2]])
    # a fractional power at 0: the value 0 and the gradient 0, not NaN
    np.testing.assert_allclose(grad(lambda x: (x**1.5).sum())(np.array([0.0, 4.0])), [0.0, 3.0], rtol=1e-14)
    # stop_gradient: a value, no gradient through it
    np.testing.assert_array_equal(grad(lambda x: (x * pt.stop_gradient(x)).sum())(x), x)
    # a cast carries the cotangent back in the input's type
    x32 = np.array([0.5, -1.5, 2.0], np.float32)
    g = grad(lambda x: (x.astype(pt.float64) ** 2).sum())(x32)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, 2 * x32)


def test_value_and_grad_vjp_and_higher_order(pypto_executor, rng):
    f = pt.jit(lambda x, w: ((x @ w) ** 2).mean(), executor=pypto_executor)
    x, w = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    value, (gx, gw) = pt.value_and_grad(f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(value, ((x @ w) ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(gx, 2 * (x @ w) @ w.T / 15, rtol=1e-10)
    np.testing.assert_allclose(gw, 2 * x.T @ (x @ w) / 15, rtol=1e-10)

    y, pullback = pt.vjp(lambda a, b: (pt.tanh(a @ b), a.sum(0)), x, w)
    ct = (rng.standard_normal((5, 3)), rng.standard_normal(4))
    da, db = pullback(ct)
    h = np.tanh(x @ w)
    np.testing.assert_allclose(y[0], h, rtol=1e-12)
    np.testing.assert_allclose(da, (ct[0] * (1 - h * h)) @ w.T + ct[1], rtol=1e-10)
    np.testing.assert_allclose(db, x.T @ (ct[0] * (1 - h * h)), rtol=1e-10)
    with pytest.raises(pt.ArgumentError, match="cotangent 0 has shape"):
        pullback((np.ones((3, 5)), ct[1]))

    # second and third derivatives of tanh at scalars
    t = np.tanh(0.3)
    np.testing.assert_allclose(pt.grad(pt.grad(pt.tanh))(0.3), -2 * t * (1 - t * t), rtol=1e-12)
    np.testing.assert_allclose(pt.grad(pt.grad(pt.grad(pt.tanh)))(0.3), (1 - t * t) * (6 * t * t - 2), rtol=1e-10)
    # elementwise second derivative of a sum
    d2 = pt.grad(lambda x: pt.grad(lambda x: pt.tanh(x).sum())(x).sum())
    xs = rng.standard_normal(6)
    np.testing.assert_allclose(d2(xs), -2 * np.tanh(xs) * (1 - np.tanh(xs) ** 2), rtol=1e-12)


def test_backward_is_fused(pypto_executor):
    x = np.ones((64, 256), np.float32)
    g = pt.grad(pt.jit(lambda x: (pt.softmax(x, dim=-1) * x).sum(), executor=pypto_executor))
    fused = g.ir(x, stage="fuse")
    assert fused.count("nest ") <= 2  # the rows' softmax and its backward, and the scalar's seed at most
    assert "tmp" not in fused.split("\n", 1)[0]  # nothing stored between the passes
    gl = pt.grad(pt.jit(lambda x: pt.gelu(x).sum(), executor=pypto_executor))
    assert gl.ir(x, stage="fuse").count("nest ") == 1
    # what the gradient of an MLP keeps between its passes: the hidden layer's contraction, stored once
    w1, w2 = np.ones((256, 32), np.float32), np.ones((32, 4), np.float32)
    mlp = pt.grad(lambda x, w1, w2: (pt.tanh(x @ w1) @ w2).sum(), argnums=(1, 2))
    report = pt.check_memory(mlp, x, w1, w2)
    temps = [e for e in report.entries if e.kind == "temporary"]
    assert temps and all(e.shape == (64, 32) for e in temps[:1])
    assert "einsum" in pt.show_graph(mlp, x, w1, w2).dot


def test_custom_vjp_replaces_the_body(pypto_executor, rng):
    calls = []

    @pt.custom_op(executor=pypto_executor)
    def soft_clip(x):
        return pt.tanh(x) * 2

    @soft_clip.def_vjp
    def _(g, x):
        calls.append(x.shape)
        return g * 0  # a deliberately different backward, to see that it is the one used

    x = rng.standard_normal(5)
    f = pt.grad(lambda x: (soft_clip(x) * x).sum())
    np.testing.assert_allclose(f(x), np.tanh(x) * 2, rtol=1e-12)  # only the direct term: the vjp gave 0
    assert calls == [(5,)]
    # without a vjp the body is differentiated
    body = pt.custom_op(lambda x: pt.tanh(x) * 2, name="body")
    np.testing.assert_allclose(pt.grad(lambda x: body(x).sum())(x), 2 * (1 - np.tanh(x) ** 2), rtol=1e-12)
    # a vjp given as an argument, returning one cotangent per array argument
    scaled = pt.custom_op(lambda x, s: x * s, name="scaled", vjp=lambda g, x, s: g * s)
    np.testing.assert_allclose(pt.grad(lambda x: scaled(x, 3.0).sum())(x), np.full(5, 3.0))
    bad = pt.custom_op(lambda x, y: x * y, name="bad", vjp=lambda g, x, y: g)
    with pytest.raises(pt.TracingError, match="returned 1 cotangent"):
        pt.grad(lambda x: bad(x, x).sum())(x)


def test_no_grad_and_errors(rng):
    x = rng.standard_normal(4)
    f = pt.grad(lambda x: (x * x).sum())
    with pt.no_grad():
        assert not pt.is_grad_enabled()
        with pytest.raises(pt.TracingError, match="switched off"):
            f(x)
        y, pullback = pt.vjp(lambda x: x * 2, x)  # forward only
        np.testing.assert_allclose(y, x * 2)
        with pytest.raises(pt.TracingError, match="switched off"):
            pullback(np.ones(4))
    assert pt.is_grad_enabled()

    @pt.grad_enabled(False)
    def off():
        return pt.is_grad_enabled()

    assert off() is False and pt.is_grad_enabled()
    with pytest.raises(pt.TracingError, match="must return a scalar"):
        pt.grad(lambda x: x * 2)(x)
    with pytest.raises(pt.TracingError, match="float arrays"):
        pt.grad(lambda x: x.sum())(np.arange(4))
    with pytest.raises(pt.ArgumentError, match="argnums"):
        pt.grad(lambda x: x.sum(), argnums=-1)
    with pytest.raises(pt.ArgumentError, match="argnums has 2"):
        pt.grad(lambda x: x.sum(), argnums=2)(x)
    np.testing.assert_array_equal(pt.grad(lambda x, y: x.sum(), argnums=1)(x, x), np.zeros(4))  # unused input


def test_training_a_small_mlp_lowers_its_loss(rng):
    x = rng.standard_normal((64, 3))
    y = np.sin(x.sum(1, keepdims=True))
    params = [rng.standard_normal((3, 16)) * 0.5, np.zeros(16), rng.standard_normal((16, 1)) * 0.25, np.zeros(1)]

    def loss(w1, b1, w2, b2, x, y):
        return ((pt.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2).mean()

    step = pt.value_and_grad(loss, argnums=(0, 1, 2, 3))
    first = None
    for _ in range(150):
        value, grads = step(*params, x, y)
        first = value if first is None else first
        params = [p - 0.1 * g for p, g in zip(params, grads)]
    assert float(value) < 0.2 * float(first)
    h = np.tanh(x @ params[0] + params[1])
    np.testing.assert_allclose(value, ((h @ params[2] + params[3] - y) ** 2).mean(), rtol=0.05)
    assert math.isfinite(float(value))


# -- destination-passing kernels --------------------------------------------------------------------------------

M, N, K = pt.dims("M N K")


def test_kernel_vjp_softmax_layernorm_and_matmul(pypto_executor, rng):
    from pypto.testing import layernorm, softmax

    x = rng.standard_normal((6, 9)).astype(np.float32)
    y = np.empty_like(x)
    k = pt.kernel(softmax.fn, executor=pypto_executor)
    out, pullback = k.vjp(x, y)
    want = np.exp(x - x.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)  # the kernel ran
    dy = rng.standard_normal((6, 9)).astype(np.float32)
    (dx,) = pullback(dy)
    np.testing.assert_allclose(dx, want * (dy - (dy * want).sum(1, keepdims=True)), rtol=1e-4, atol=1e-5)

    g, b = rng.standard_normal(9).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    ln = pt.kernel(layernorm.fn, executor=pypto_executor)
    _, pullback = pt.vjp(ln, x, g, b, np.empty_like(x))
    _, array_pullback = pt.vjp(lambda x, g, b: pt.layer_norm(x, g, b, 1e-5), x, g, b)
    for got, want in zip(pullback(dy), array_pullback(dy)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    @pt.kernel(executor=pypto_executor)
    def dense(a: pt.Tensor[pt.float64, (M, K)], w: pt.Tensor[pt.float64, (K, N)], s: float,
              c: pt.Tensor[pt.float64, (M, N)]):  # fmt: skip
        i, j, kk = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.tanh(pt.reduce_sum(a[i, kk] * w[kk, j], axis=kk) * s)

    a, w = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))
    _, pullback = dense.vjp(a, w, 0.5, np.empty((4, 3)))
    dc = rng.standard_normal((4, 3))
    da, dw = pullback(dc)
    h = np.tanh(a @ w * 0.5)
    np.testing.assert_allclose(da, (dc * (1 - h * h) * 0.5) @ w.T, rtol=1e-12)
    np.testing.assert_allclose(dw, a.T @ (dc * (1 - h * h) * 0.5), rtol=1e-12)
    with pytest.raises(pt.ArgumentError, match="cotangent 0 has shape"):
        pullback(np.ones((3, 4)))


def test_kernel_vjp_reads_shifted_loads_and_refuses_partial_stores(rng):
    @pt.kernel
    def diff(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (N - 1,)]):
        i = pt.axis(0)
        y[i] = x[i + 1] * x[i + 1] - x[i]

    x = rng.standard_normal(8)
    _, pullback = diff.vjp(x, np.empty(7))
    dy = rng.standard_normal(7)
    (dx,) = pullback(dy)
    want = np.zeros(8)
    want[1:] += 2 * x[1:] * dy
    want[:-1] -= dy
    np.testing.assert_allclose(dx, want, rtol=1e-12)

    @pt.kernel
    def total(x: pt.Tensor[pt.float64, (N,)], s: pt.Tensor[pt.float64, (1,)]):
        i = pt.axis(0)
        s[0] = pt.reduce_sum(pt.exp(x[i]), axis=i)  # a scalar result in a one-element output

    s = np.empty(1)
    _, pullback = total.vjp(x, s)
    np.testing.assert_allclose(s, np.exp(x).sum(), rtol=1e-12)
    np.testing.assert_allclose(pullback(np.array([2.0]))[0], 2 * np.exp(x), rtol=1e-12)

    @pt.kernel
    def twice(x: pt.Tensor[pt.float64, (N,)], y: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        y[i] = x[i]
        y[i] = y[i] * 2  # updated in place: not read back as one array expression

    with pytest.raises(pt.TracingError, match="more than one store"):
        twice.vjp(x, np.zeros(8))[1](np.ones(8))


@pytest.mark.parametrize("name", [f.name for f in __import__("pypto.ir.ops", fromlist=["FUNCTIONS"]).FUNCTIONS])
def test_every_table_function_differentiates_like_torch(name):
    """Each op-table function in a @pt.jit program and its gradient, against torch autograd in float64."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).uniform(0.1, 1.4, (5, 7))  # inside every function's domain
    fn = getattr(pt, name)

    def loss(x):
        return (fn(x) * x).sum()

    value, dx = pt.value_and_grad(loss)(x)
    tx = torch.tensor(x, requires_grad=True)
    tfn = {"cbrt": lambda t: torch.pow(t, 1 / 3)}.get(name) or getattr(torch, name)  # (x > 0 here)
    want = (tfn(tx) * tx).sum()
    want.backward()
    np.testing.assert_allclose(value, want.item(), rtol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pt.jit(fn)(x), tfn(torch.tensor(x)).numpy(), rtol=1e-13)


@pytest.mark.parametrize("name", list(__import__("pypto.ir.ops", fromlist=["REDUCERS"]).REDUCERS))
def test_every_table_reducer_differentiates_like_torch(name):
    """Each op-table reducer's adjoint in a @pt.jit program against torch autograd (float64), on rows with
    ties (max, min share the gradient equally, as torch's amax/amin do) and with one and two zeros (prod)."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(11).uniform(0.5, 1.5, (6, 5))
    x[1, 1] = x[1, 3] = x[1].max() + 0.25  # a tied maximum
    x[2, 0] = x[2, 4] = x[2].min() - 0.25  # a tied minimum
    x[3, 2] = 0.0  # one zero
    x[4, 1] = x[4, 3] = 0.0  # two zeros
    w = np.random.default_rng(12).normal(size=6)
    method = {"sum": "sum", "prod": "prod", "max": "max", "min": "min"}[name]
    torch_fn = {"sum": torch.sum, "prod": torch.prod, "max": torch.amax, "min": torch.amin}[name]

    def loss(x, w):
        return (getattr(x, method)(axis=1) * w).sum()

    value, dx = pt.value_and_grad(loss)(x, w)
    tx = torch.tensor(x, requires_grad=True)
    want = (torch_fn(tx, 1) * torch.tensor(w)).sum()
    want.backward()
    np.testing.assert_allclose(value, want.item(), rtol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_grad_written_inline_traces_once():
    """pt.grad(loss)(w, x) in a loop, as the README writes it: one trace and one program, not one per call."""
    traced = []

    def loss(w, x):
        traced.append(1)
        return ((x @ w) ** 2).sum()

    rng = np.random.default_rng(3)
    w, x = rng.normal(size=(6, 3)), rng.normal(size=(4, 6))
    for _ in range(3):
        dw = pt.grad(loss)(w, x)
        value, dw2 = pt.value_and_grad(loss)(w, x)
    assert len(traced) == 2  # once for grad, once for value_and_grad
    np.testing.assert_allclose(dw, 2 * x.T @ (x @ w), rtol=1e-12)
    np.testing.assert_allclose(dw2, dw, rtol=1e-12)
    np.testing.assert_allclose(value, ((x @ w) ** 2).sum(), rtol=1e-12)
    assert pt.grad(loss) is pt.grad(loss) and pt.grad(loss) is not pt.grad(loss, argnums=(0,))
    assert pt.grad(loss, argnums=(0, 1))(w, x)[1].shape == x.shape


def test_bare_grad_enabled_decorator_switches_gradients_on_inside():
    @pt.grad_enabled
    def gradient(x):
        return pt.grad(lambda a: (a * a).sum())(x)

    x = np.array([1.0, -2.0, 3.0])
    with pt.no_grad():
        np.testing.assert_array_equal(gradient(x), 2 * x)
        assert not pt.is_grad_enabled()
