"""pt.torch.op: pypto functions as PyTorch operators, their gradients checked by torch.autograd.gradcheck.

Needs PyTorch (pypto-core[torch]); the test session installs it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pt
from pypto.testing import two_layer_net

torch = pytest.importorskip("torch", reason="pt.torch needs PyTorch: pip install pypto-core[torch]")


def test_forward_gradcheck_and_opcheck():
    torch.manual_seed(0)

    @pt.jit
    def scaled_softmax(x, w):
        return pt.softmax(x * w, dim=-1)

    op = pt.torch.op(scaled_softmax)
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(op(x, w), torch.softmax(x * w, -1), rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(op, (x, w))
    checks = torch.library.opcheck(next(iter(op._ops.values())), (x.detach(), w.detach()))
    assert set(checks.values()) == {"SUCCESS"}, checks


def test_inside_a_module_with_several_results():
    torch.manual_seed(1)
    dense = pt.torch.op(lambda x, w, b: (pt.gelu(x @ w + b), x.sum(0)), name="dense")

    class Dense(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(6, 3))
            self.b = torch.nn.Parameter(torch.zeros(3))

        def forward(self, x):
            return dense(x, self.w, self.b)

    m = Dense()
    x = torch.randn(5, 6)
    y, s = m(x)
    torch.testing.assert_close(y, torch.nn.functional.gelu(x @ m.w + m.b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(s, x.sum(0))
    y.sum().backward()  # the second result unused: its cotangent is zero
    w, b = m.w.detach().clone().requires_grad_(), m.b.detach().clone().requires_grad_()
    torch.nn.functional.gelu(x @ w + b).sum().backward()
    torch.testing.assert_close(m.w.grad, w.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.b.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_tensors_are_shared_not_copied():
    op = pt.torch.op(lambda x: x * 2)
    x = torch.arange(6, dtype=torch.float32)
    y = op(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    seen = []
    probe = pt.torch.op(lambda x: x + 0)
    probe.forward = _Recorder(probe.forward, seen)
    probe(x)
    assert seen and seen[0] == x.data_ptr()  # the kernel read the tensor's own memory
    np.testing.assert_array_equal(y.numpy(), np.arange(6) * 2)


class _Recorder:
    def __init__(self, jit, seen):
        self.jit, self.seen = jit, seen

    def __call__(self, *arrays):
        self.seen.append(arrays[0].ctypes.data)
        return self.jit(*arrays)

    def compiled(self, *arrays):
        return self.jit.compiled(*arrays)


def test_torch_compile_captures_the_operator():
    op = pt.torch.op(lambda x, w: pt.tanh(x) * w)
    x, w = torch.randn(3, 4), torch.randn(4)
    op(x, w)  # an eager call registers the operator
    f = torch.compile(lambda x, w: op(x, w).sum() * 2, backend="eager", fullgraph=True)  # no graph break
    torch.testing.assert_close(f(x, w), (torch.tanh(x) * w).sum() * 2, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(f(x * 3, w), (torch.tanh(x * 3) * w).sum() * 2, rtol=1e-5, atol=1e-5)


def test_bad_arguments():
    op = pt.torch.op(lambda x: x * 2)
    with pytest.raises(pt.ArgumentError, match="is a ndarray"):
        op(np.ones(3))


TORCH_PAIRS = [
    (lambda x, w: (pt.softmax(x * w, dim=-1) ** 2).sum(), lambda x, w: (torch.softmax(x * w, -1) ** 2).sum()),
    (lambda x, w: (pt.layer_norm(x, w, w, 1e-5) * x).sum(),
     lambda x, w: (torch.nn.functional.layer_norm(x, (x.shape[-1],), w, w, 1e-5) * x).sum()),
    (lambda x, w: (pt.gelu(x) * w + pt.tanh(x * w) - x.max(0)).sum(),
     lambda x, w: (torch.nn.functional.gelu(x) * w + torch.tanh(x * w) - x.amax(0)).sum()),
    (lambda x, w: ((x @ x.T) * pt.sigmoid(x.sum(1))).mean() + (w**3).sum(),
     lambda x, w: ((x @ x.T) * torch.sigmoid(x.sum(1))).mean() + (w**3).sum()),
]  # fmt: skip


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 9), which=st.integers(0, len(TORCH_PAIRS) - 1),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_gradients_agree_with_torch_autograd_in_float32(rows, cols, which, seed):
    """float32 gradients against torch.autograd's in float64 on random shapes: within 1e-4 (relative to the
    largest), or within twice torch's own float32 error where the problem is that ill-conditioned (a layer
    norm over two nearly equal values loses that much in any float32 implementation)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    ours, theirs = TORCH_PAIRS[which]
    gx, gw = pt.grad(ours, argnums=(0, 1))(x, w)
    grads = {}
    for dt in (torch.float32, torch.float64):
        tx, tw = (torch.tensor(a, dtype=dt, requires_grad=True) for a in (x, w))
        theirs(tx, tw).backward()
        grads[dt] = (tx.grad.numpy().astype(np.float64), tw.grad.numpy().astype(np.float64))
    for got, want, torch32 in zip((gx, gw), grads[torch.float64], grads[torch.float32]):
        scale = max(1.0, float(np.abs(want).max()))
        torch_error = float(np.abs(torch32 - want).max())
        assert float(np.abs(got - want).max()) <= max(1e-4 * scale, 2 * torch_error)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_tensors_forward_and_backward_match_torch(dt):
    dt = getattr(torch, dt)
    op = pt.torch.op(pt.jit(lambda x, w: pt.gelu(x @ w)))
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 16, generator=g).to(dt).requires_grad_()
    w = torch.randn(16, 4, generator=g).to(dt).requires_grad_()
    y = op(x, w)
    assert y.dtype == dt
    x32, w32 = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    want = torch.nn.functional.gelu(x32 @ w32)  # computed in float32, as pypto computes 16-bit floats
    eps = torch.finfo(dt).eps
    torch.testing.assert_close(y.float(), want.to(dt).float(), rtol=2 * eps, atol=2 * eps)
    y.float().sum().backward()
    want.sum().backward()
    assert x.grad.dtype == dt
    torch.testing.assert_close(x.grad.float(), x32.grad.to(dt).float(), rtol=4 * eps, atol=4 * eps)


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "uint32", "uint64"])
def test_integer_tensors_wrap_around_like_torch(dt):
    """Integer tensors pass without copies; arithmetic wraps as torch's does, sums widen as the array API says."""
    tdt = getattr(torch, dt)
    op = pt.torch.op(pt.jit(lambda a, b: (a * b - a, (a + b).sum(axis=1))))
    g = torch.Generator().manual_seed(5)
    a = torch.randint(0, 250, (6, 40), generator=g).to(tdt)
    b = torch.randint(0, 250, (6, 40), generator=g).to(tdt)
    y, s = op(a, b)
    assert y.dtype == tdt
    if dt not in ("uint16", "uint32", "uint64"):  # torch has no arithmetic for these three on the CPU
        assert torch.equal(y, a * b - a)
    np.testing.assert_array_equal(y.numpy(), a.numpy() * b.numpy() - a.numpy())
    wide = np.uint32 if dt.startswith("uint") and dt != "uint64" else np.int32 if dt in ("int8", "int16") else None
    total = (a.numpy() + b.numpy()).astype(np.int64).sum(axis=1)  # the sum wraps in the type, then widens
    if wide is not None:
        assert s.numpy().dtype == wide
    np.testing.assert_array_equal(s.numpy(), total.astype(s.numpy().dtype))


def test_complex_tensors_forward_and_backward_match_torch():
    """Complex tensors are shared like real ones; torch's complex gradients are the conjugates of pypto's (JAX's
    convention), converted at the boundary so autograd sees its own."""
    rng = np.random.default_rng(3)

    def f(z, x, lib):
        return lib.exp(z * 0.5) * x + z * z - 2j

    op = pt.torch.op(lambda z, x: f(z, x, pt))
    z0 = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    x0 = rng.standard_normal(9)
    grads = []
    for fn in (op, lambda z, x: f(z, x, torch)):
        z = torch.tensor(z0, dtype=torch.complex128, requires_grad=True)
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        y = fn(z, x)
        (torch.abs(y) ** 2 + y.real).sum().backward()
        grads.append((y.detach().numpy(), z.grad.numpy(), x.grad.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(op, (torch.tensor(z0, requires_grad=True), torch.tensor(x0, requires_grad=True)))


# -- pt.torch.module: a pt.Module for torch's tools --------------------------------------------------------------


def test_a_module_trains_with_torch_optimizers_on_shared_parameters():
    rng = np.random.default_rng(0)
    net = two_layer_net(rng)
    tnet = pt.torch.module(net)
    names = ["layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b"]
    assert list(tnet.state_dict()) == names == [n for n, _ in net.named_parameters()]
    params = dict(net.named_parameters())
    for name in names:  # the same memory: no copies either way
        assert tnet.get_parameter(name).data_ptr() == params[name].data.ctypes.data

    x = torch.tensor(rng.standard_normal((16, 4)))
    # a replica in torch alone: forward and gradients must agree
    ref = [torch.tensor(params[n].data.copy(), requires_grad=True) for n in names]
    out = torch.tanh(torch.tanh(x @ ref[0] + ref[1]) @ ref[2] + ref[3])
    (out**2).mean().backward()
    got = tnet(x)
    torch.testing.assert_close(got, out.detach(), rtol=1e-12, atol=1e-12)
    (got**2).mean().backward()
    for p, r in zip(tnet.parameters(), ref):
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-10, atol=1e-12)

    before = params["layers.0.w"].data.copy()
    torch.optim.SGD(tnet.parameters(), lr=0.5).step()  # torch's update lands in the pypto module's arrays
    np.testing.assert_allclose(params["layers.0.w"].data, before - 0.5 * ref[0].grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(net(x.numpy()), tnet(x).detach().numpy(), rtol=1e-12)


def test_a_modules_other_attributes_reach_the_torch_operator():
    @pt.module
    class Scaled:
        def __init__(self):
            self.w = pt.Parameter(np.linspace(-1, 1, 5), "w")
            self.scale = 0.5

        def forward(self, x):
            return x * self.w * self.scale

    m = Scaled()
    tm = pt.torch.module(m)
    x = torch.ones(5, dtype=torch.float64)
    torch.testing.assert_close(tm(x), torch.tensor(m.w.data) * 0.5)
    m.scale = 4.0  # a new constant: a new operator, not the first one's result
    torch.testing.assert_close(tm(x), torch.tensor(m.w.data) * 4.0)


def test_weights_load_into_a_module_by_name():
    rng = np.random.default_rng(1)
    net, other = two_layer_net(rng), two_layer_net(rng)
    pt.torch.load_state_dict(net, pt.torch.module(other))  # a torch module: its state_dict()
    for (_, a), (_, b) in zip(net.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data)
    state = {n: np.zeros(p.shape) for n, p in other.named_parameters()}
    pt.torch.load_state_dict(net, state)
    assert all((p.data == 0).all() for p in net.parameters())
    with pytest.raises(pt.ArgumentError, match="missing: layers.1.b; unexpected: bias"):
        pt.torch.load_state_dict(net, {**{k: v for k, v in state.items() if k != "layers.1.b"}, "bias": np.ones(2)})
    with pytest.raises(pt.ArgumentError, match=r"'layers.0.w' has shape \(2, 2\)"):
        pt.torch.load_state_dict(net, {**state, "layers.0.w": np.ones((2, 2))})
    with pytest.raises(pt.ArgumentError, match="takes a pt.Module"):
        pt.torch.module(torch.nn.Linear(2, 2))


def test_the_backward_reads_the_forwards_kept_values(monkeypatch):
    """A call that needs a gradient keeps the forward's costly values (contractions, reductions) for the backward,
    which then computes no forward contraction again; the gradients equal torch's and those of the backward that
    computes the forward again (KEEP_RESIDUALS off)."""
    torch.manual_seed(3)

    def attention(q, k, v, w):
        s = pt.softmax(q @ k.T * 0.25, dim=-1)
        return pt.tanh((s @ v) @ w)

    op = pt.torch.op(attention)
    q, k, v = (torch.randn(12, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    w = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)
    g = torch.randn(12, 5, dtype=torch.float64)
    ts = (q, k, v, w)

    def grads(f):
        for t in ts:
            t.grad = None
        (f(*ts) * g).sum().backward()
        return [t.grad.clone() for t in ts]

    kept = grads(op)
    want = grads(lambda q, k, v, w: torch.tanh((torch.softmax(q @ k.T * 0.25, -1) @ v) @ w))
    monkeypatch.setattr(pt.torch, "KEEP_RESIDUALS", False)
    again = grads(op)
    for a, b, c in zip(kept, want, again):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-12)
    n_res = next(key[3] for key in op._ops if key[3])
    assert n_res >= 3  # q @ k.T, the softmax's row maximum and sum, s @ v, (s @ v) @ w (some may share a nest)
    arrays = [t.detach().numpy() for t in ts]
    forward = op.pullbacks.residual_jits(4, 1).compiled(*arrays)
    values = [np.zeros(forward.shape_of(pos, None)) for pos in forward.plan.outputs]
    backward = op.pullbacks.residual_jits(4, 1, n_res)
    with_kept = backward.ir(*arrays, *values, np.zeros((12, 5)), stage="traced")
    recomputed = op.pullbacks.pullback_jit(4, 1).ir(*arrays, np.zeros((12, 5)), stage="traced")
    assert with_kept.count("reduce_") < recomputed.count("reduce_")  # (contractions are sums of products)
