"""pt.optim against torch.optim: the same parameters after the same gradients, one compiled update per optimizer."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pt
from pypto.testing import two_layer_net

torch = pytest.importorskip("torch")

SHAPES = [(5, 3), (3,), (2, 2, 4)]

CASES = {
    "sgd": (lambda p: pt.optim.sgd(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd momentum": (
        lambda p: pt.optim.sgd(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    ),
    "nesterov": (
        lambda p: pt.optim.sgd(p, lr=0.05, momentum=0.8, nesterov=True),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
    ),
    "adam": (
        lambda p: pt.optim.adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
        lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
    ),
    "adamw": (lambda p: pt.optim.adamw(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_the_same_steps_as_torch(case, dtype):
    rng = np.random.default_rng(len(case))
    ours, theirs = CASES[case]
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    tparams = [torch.nn.Parameter(torch.tensor(p.copy())) for p in params]
    opt, topt = ours(params), theirs(tparams)
    for _ in range(6):
        grads = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        opt.step(grads)
        for p, g in zip(tparams, grads):
            p.grad = torch.tensor(g)
        topt.step()
    tol = 1e-6 if dtype == np.float32 else 1e-13
    for p, q in zip(params, tparams):
        assert p.dtype == dtype
        np.testing.assert_allclose(p, q.detach().numpy(), rtol=tol * 10, atol=tol)
    assert len(opt._update._cache) == 1  # every step, the first one included, ran one compiled program


def test_a_learning_rate_schedule_compiles_nothing_new():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    opt = pt.optim.adam([w], lr=0.1)
    want = w.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, lr in enumerate([0.1, 0.05, 0.02, 0.01], start=1):
        g = rng.standard_normal(w.shape).astype(np.float32)
        opt.lr = lr
        opt.step([g])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        want = want - lr / (1 - 0.9**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999**t) + 1e-8)
    np.testing.assert_allclose(w, want, rtol=1e-5, atol=1e-6)
    assert len(opt._update._cache) == 1


def test_training_with_value_and_grad_and_module_parameters():
    """A pt.Module's parameters are updated in place; a regression on a fixed batch reaches a small loss."""
    rng = np.random.default_rng(2)

    @pt.module
    class Mlp:
        def __init__(self):
            self.w1 = pt.Parameter(rng.standard_normal((3, 16)).astype(np.float32) * 0.5, "w1")
            self.w2 = pt.Parameter(rng.standard_normal((16, 1)).astype(np.float32) * 0.3, "w2")

        def forward(self, x):
            return pt.tanh(x @ self.w1) @ self.w2

    net = Mlp()
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (x[:, :1] * 0.5 - x[:, 1:2] * 0.25).astype(np.float32)

    def loss(w1, w2, x, y):
        return ((pt.tanh(x @ w1) @ w2 - y) ** 2).mean()

    step = pt.value_and_grad(loss, argnums=(0, 1))
    opt = pt.optim.adam(net, lr=0.02)
    assert [p.shape for p in opt] == [(3, 16), (16, 1)]
    first = None
    for _ in range(150):
        value, grads = step(net.w1.data, net.w2.data, x, y)
        first = float(value) if first is None else first
        opt.step(grads)
    final = float(((net(x) - y) ** 2).mean())  # the module's forward sees the updated parameters
    assert final < 0.05 * first


def test_state_can_be_saved_and_restored():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(6)
    b = a.copy()
    opt1, opt2 = pt.optim.adamw([a], lr=0.1), pt.optim.adamw([b], lr=0.1)
    g = rng.standard_normal(6)
    opt1.step([g])
    opt2.load_state_dict(opt1.state_dict())
    np.copyto(b, a)
    opt1.step([g])
    opt2.step([g])
    np.testing.assert_array_equal(a, b)


def test_bad_input_is_a_typed_error():
    w = np.zeros((2, 2), np.float32)
    with pytest.raises(pt.ArgumentError, match="lr"):
        pt.optim.sgd([w], lr=-1)
    with pytest.raises(pt.ArgumentError, match="betas"):
        pt.optim.adam([w], betas=(0.9, 1.0))
    with pytest.raises(pt.ArgumentError, match="nesterov"):
        pt.optim.sgd([w], lr=0.1, nesterov=True)
    with pytest.raises(pt.ArgumentError, match="parameter 0 has dtype int64"):
        pt.optim.sgd([np.zeros(3, np.int64)], lr=0.1)
    with pytest.raises(pt.ArgumentError, match="not a writable C-ordered array"):
        pt.optim.sgd([np.zeros((4, 4), np.float32)[:, ::2]], lr=0.1)
    with pytest.raises(pt.ArgumentError, match="no arrays"):
        pt.optim.sgd([], lr=0.1)
    opt = pt.optim.sgd([w], lr=0.1)
    with pytest.raises(pt.ArgumentError, match="2 gradient"):
        opt.step([w, w])
    with pytest.raises(pt.ShapeError, match="gradient 0 has shape"):
        opt.step([np.zeros(3, np.float32)])
    np.testing.assert_array_equal(w, 0)  # nothing half-written


def test_gradients_of_a_module_are_its_parameters_gradients():
    """pt.value_and_grad of a function of a pt.Module: the module stands for its parameters (a list of their
    gradients, in named_parameters() order, against torch autograd); pt.optim takes them as they come."""
    rng = np.random.default_rng(4)

    def loss(model, x, y):
        return ((model(x) - y) ** 2).mean()

    net = two_layer_net(rng)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 2))
    step = pt.value_and_grad(loss)
    value, grads = step(net, x, y)
    ref = [torch.tensor(p.data.copy(), requires_grad=True) for p in net.parameters()]
    h = torch.tensor(x)
    for w, b in zip(ref[::2], ref[1::2]):
        h = torch.tanh(h @ w + b)
    want = ((h - torch.tensor(y)) ** 2).mean()
    want.backward()
    assert value == pytest.approx(float(want.detach()), rel=1e-12)
    assert len(grads) == 4
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g, r.grad.numpy(), rtol=1e-10, atol=1e-14)
    # with respect to the data too, for another model
    (gm, gx) = pt.grad(loss, argnums=(0, 1))(two_layer_net(rng), x, y)
    assert len(gm) == 4 and gx.shape == x.shape
    opt = pt.optim.adam(net, lr=0.05)
    first = value
    for _ in range(100):
        value, grads = step(net, x, y)
        opt.step(grads)
    assert value < 0.5 * first
