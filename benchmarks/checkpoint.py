"""Gradient checkpointing: memory and time of a deep MLP's gradient with and without ``pt.checkpoint``.

    python benchmarks/checkpoint.py

An MLP of 16 layers ``h = tanh(h @ w)`` (batch 1,024, width 512, float32) in blocks of two layers, the
gradient of ``sum(h ** 2)`` with respect to every weight. For pypto: the temporaries of the program (each
counted, as if none shared a buffer), what the call allocates for them and its peak (``pt.check_memory``,
which counts temporaries that share a buffer once: the ``plan_memory`` pass) and the bytes NumPy
allocated during one call (``tracemalloc``'s peak, which NumPy reports its buffers to: the arrays of the call
itself, the pools emptied first), for the plain gradient and with each block under ``pt.checkpoint``; for
torch, the same model with ``torch.utils.checkpoint`` (its peak from ``tracemalloc`` is not comparable: torch
allocates outside it, so torch's time only). Medians of 7 calls after warm-up, 2 threads.
"""

from __future__ import annotations

import os
import tracemalloc

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np
from linalg_shapes import median_ms  # this folder's scripts share their timing loop

import pypto as pt

LAYERS, BATCH, WIDTH = 16, 1024, 512


def block(h, w1, w2):
    return pt.tanh(pt.tanh(h @ w1) @ w2)


def loss_of(checkpointed: bool):
    layer = pt.checkpoint(block) if checkpointed else block

    def loss(x, *ws):
        h = x
        for k in range(0, len(ws), 2):
            h = layer(h, ws[k], ws[k + 1])
        return (h * h).sum()

    return loss


def allocated_mib(grad, args) -> float:
    """NumPy's peak bytes during one call with empty pools (so the call allocates its arrays afresh)."""
    from pypto.array.introspect import _jit_of

    c, _ = _jit_of(grad.jit, "checkpoint benchmark").lookup(args)
    for pool in c.pools.values():
        pool.clear()
    tracemalloc.start()
    grad(*args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    import torch
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for _ in range(LAYERS)]
    args = (x, *ws)
    rows = []
    grads = {}
    for checkpointed in (False, True):
        grad = pt.grad(pt.jit(loss_of(checkpointed)), argnums=tuple(range(1, LAYERS + 1)))
        grads[checkpointed] = grad(*args)
        report = pt.check_memory(grad.jit, *args)
        unshared = sum(int(np.prod(e.shape)) * np.dtype(e.dtype).itemsize for e in report.entries
                       if e.kind == "temporary")  # fmt: skip
        rows.append(("pypto" + (" + pt.checkpoint" if checkpointed else ""), median_ms(grad, *args, n=7),
                     unshared / 2**20, report.temporaries / 2**20, report.peak / 2**20, allocated_mib(grad, args)))  # fmt: skip
    for a, b in zip(grads[False], grads[True]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    xt = torch.tensor(x)
    wt = [torch.tensor(w, requires_grad=True) for w in ws]

    def torch_step(checkpointed: bool) -> None:
        h = xt
        for k in range(0, LAYERS, 2):
            f = lambda h, a, b: torch.tanh(torch.tanh(h @ a) @ b)  # noqa: E731
            h = torch_checkpoint(f, h, wt[k], wt[k + 1], use_reentrant=False) if checkpointed else f(h, *wt[k : k + 2])
        for w in wt:
            w.grad = None
        (h * h).sum().backward()

    for checkpointed in (False, True):
        rows.append(("torch eager" + (" + torch.utils.checkpoint" if checkpointed else ""),
                     median_ms(torch_step, checkpointed, n=7), None, None, None, None))  # fmt: skip
    torch_step(False)
    for g, w in zip(grads[True], wt):
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=2e-3, atol=2e-4)

    print(f"gradient of a {LAYERS}-layer tanh MLP, batch {BATCH}, width {WIDTH}, float32, blocks of 2 layers")
    print(f"{'':36} {'ms':>8} {'temporaries MiB':>16} {'shared':>8} {'peak MiB':>9} {'allocated MiB':>14}")
    for name, ms, unshared, temps, peak, alloc in rows:
        extra = "" if temps is None else f" {unshared:16.1f} {temps:8.1f} {peak:9.1f} {alloc:14.1f}"
        print(f"{name:36} {ms:8.1f}{extra}")


if __name__ == "__main__":
    main()
