"""Memory of jit programs: the ``plan_memory`` pass (nests ordered so scratch lives end early, scratch arrays of
disjoint lifetimes in one buffer) and ``pt.checkpoint`` (a block's inside recomputed for the gradient), checked by
``pt.check_memory`` and against torch's autograd on the same inputs."""

import numpy as np
import pytest

import pypto as pt


@pytest.fixture
def compiled(pypto_executor):
    """An executor that renders the loop IR (the NumPy reference evaluates the program as traced: no sharing)."""
    if pypto_executor != "reference":
        return pypto_executor
    pytest.importorskip("pypto_openmp")
    return "openmp"


def _block(h, w1, w2):
    return pt.tanh(pt.tanh(h @ w1) @ w2)


def _deep(checkpointed):
    def loss(x, *ws):
        h = x
        for i in range(0, len(ws), 2):
            h = (pt.checkpoint(_block) if checkpointed else _block)(h, ws[i], ws[i + 1])
        return (h * h).sum()

    return loss


def _torch_grads(x, ws):
    torch = pytest.importorskip("torch")
    wt = [torch.tensor(w, requires_grad=True) for w in ws]
    h = torch.tensor(x)
    for w in wt:
        h = torch.tanh(h @ w)
    (h * h).sum().backward()
    return [w.grad.numpy() for w in wt]


def test_gradient_of_a_deep_mlp_shares_scratch_buffers(compiled, rng):
    ws = [rng.standard_normal((48, 48)) * 0.2 for _ in range(8)]
    x = rng.standard_normal((64, 48))
    grad = pt.grad(pt.jit(_deep(False), executor=compiled), argnums=tuple(range(1, 9)))
    got = grad(x, *ws)
    for g, want in zip(got, _torch_grads(x, ws)):
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
    report = pt.check_memory(grad.jit, x, *ws)
    temps = [e for e in report.entries if e.kind == "temporary"]
    owned = [e for e in temps if e.shares is None]
    assert report.shared > 0 and all(e.nbytes == 0 for e in temps if e.shares is not None)
    assert report.temporaries == sum(e.nbytes for e in owned) < sum(64 * 48 * 8 for _ in temps)
    assert "share tmp" in grad.jit.ir(x, *ws, stage="plan_memory")
    # each weight's gradient is computed right after the error it reads (the last layer's first), not all of
    # them at the end in argument order as the program lists them
    planned, listed = (grad.jit.ir(x, *ws, stage=s) for s in ("plan_memory", "online_softmax"))
    assert listed.index("out0[") < listed.index("out7[") and planned.index("out7[") < planned.index("out0[")


def test_checkpoint_recomputes_a_block_and_needs_less_memory(compiled, rng):
    ws = [rng.standard_normal((48, 48)) * 0.2 for _ in range(8)]
    x = rng.standard_normal((64, 48))
    plain = pt.grad(pt.jit(_deep(False), executor=compiled), argnums=tuple(range(1, 9)))
    kept = pt.grad(pt.jit(_deep(True), executor=compiled), argnums=tuple(range(1, 9)))
    want = _torch_grads(x, ws)
    for g, w in zip(kept(x, *ws), want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    without, with_ = pt.check_memory(plain.jit, x, *ws), pt.check_memory(kept.jit, x, *ws)
    assert with_.temporaries < without.temporaries  # the blocks' inner activations are not kept
    assert with_.inputs == without.inputs and with_.outputs == without.outputs
    # the value is the block's; on NumPy arrays it runs the block as a jit function
    np.testing.assert_allclose(pt.checkpoint(_block)(x, ws[0], ws[1]), np.tanh(np.tanh(x @ ws[0]) @ ws[1]), rtol=1e-12)


def test_checkpoint_errors():
    with pytest.raises(pt.ArgumentError, match="pt.checkpoint: expected a function"):
        pt.checkpoint(3)
    pair = pt.checkpoint(lambda a: (a, a))
    with pytest.raises(pt.TracingError, match="returned tuple, not one array"):
        pt.grad(lambda a: pair(a)[0].sum())(np.ones(3))
