"""A small transformer block (a pt.Module) trained for a few steps: alone on the whole batch, or under torchrun
with pt.init_distributed and pt.DistributedDataParallel, each process on its share of the batch.

    python train.py OUT.npz                               # one process, the whole batch
    torchrun --nproc-per-node=2 train.py OUT.npz          # data-parallel; rank 0 writes OUT.npz
    ... train.py OUT.npz --die-after 1                    # the last rank exits after that many steps

Written as a user would write it: the model's forward and backward are pypto kernels, the optimizer, the
all-reduce of the gradients and the process group are torch's.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

import pypto as pt

B, T, D, H = 8, 6, 16, 32  # batch, tokens, model width, hidden width
STEPS = 4


@pt.module
class Block:
    """Pre-norm attention (one head) and an MLP, each with a residual, then a linear head on the mean token."""

    def __init__(self, rng: np.random.Generator, d: int = D, h: int = H):
        def w(*shape: int, scale: float) -> pt.Parameter:
            return pt.Parameter((rng.standard_normal(shape) * scale).astype(np.float32))

        self.g = pt.Parameter(np.ones(d, np.float32))
        self.wq, self.wk, self.wv, self.wo = (w(d, d, scale=d**-0.5) for _ in range(4))
        self.w1, self.w2 = w(d, h, scale=d**-0.5), w(h, d, scale=h**-0.5)
        self.head = w(d, 1, scale=d**-0.5)

    def forward(self, x):
        h = pt.layer_norm(x, self.g)
        q, k, v = h @ self.wq, h @ self.wk, h @ self.wv
        att = pt.softmax(pt.einsum("btd,bsd->bts", q, k) * x.shape[-1] ** -0.5, axis=-1)
        x = x + pt.einsum("bts,bsd->btd", att, v) @ self.wo
        x = x + pt.gelu(pt.layer_norm(x, self.g) @ self.w1) @ self.w2
        return x.mean(axis=1) @ self.head


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    return x, np.tanh(x.sum(axis=(1, 2)) / 10).astype(np.float32).reshape(B, 1)


def main() -> None:
    out = sys.argv[1]
    die_after = int(sys.argv[sys.argv.index("--die-after") + 1]) if "--die-after" in sys.argv else None
    net = Block(np.random.default_rng(0))
    x, y = data()
    if "WORLD_SIZE" in os.environ:
        pt.init_distributed("gloo", timeout=float(os.environ.get("PYPTO_TEST_TIMEOUT", "60")))
        rank, size = pt.get_rank(), pt.get_world_size()
        model = pt.DistributedDataParallel(net)
        share = slice(rank * B // size, (rank + 1) * B // size)  # this process's share of every batch
        x, y = x[share], y[share]
    else:
        rank, size, model = 0, 1, pt.torch.module(net)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    losses = []
    start = time.perf_counter()
    for step in range(STEPS):
        if die_after is not None and step == die_after and rank == size - 1:
            os._exit(3)  # a process dies in the middle of training
        loss = ((model(tx) - ty) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    elapsed = time.perf_counter() - start
    if rank == 0:  # the pypto module's own arrays: trained in place through the shared parameters
        np.savez(out, losses=np.array(losses), seconds=elapsed, **dict(net.named_parameters()))
    if size > 1:
        pt.distributed.destroy()


if __name__ == "__main__":
    main()
