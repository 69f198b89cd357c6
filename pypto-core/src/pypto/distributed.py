"""Data-parallel training across processes and machines, on ``torch.distributed``.

pypto does not have a distributed engine of its own: these are thin wrappers over the one PyTorch users
already run (gloo on CPUs, NCCL on GPUs), under the names pypto's users know::

    pt.init_distributed(backend="gloo")          # torch.distributed.init_process_group, from torchrun's variables
    model = pt.DistributedDataParallel(net)      # torch's DDP around pt.torch.module(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in my_shard_of_the_batches:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()   # gradients averaged over the processes by DDP

launched with ``torchrun --nproc-per-node=2 train.py`` (or on several machines with ``--nnodes``). The forward
and backward of the model are pypto kernels (``pt.torch.module``); the gradients' all-reduce, the parameters'
broadcast at the start and the process group are torch's. A process that dies makes the others fail with an
error (after at most ``timeout`` seconds in a collective) instead of waiting for ever.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from pypto.errors import ArgumentError

DEFAULT_TIMEOUT = 300.0
"""Seconds a collective waits for the other processes before failing (torch's default is 30 minutes)."""


def _dist() -> Any:
    from pypto.torch import _torch

    return _torch().distributed


def init_distributed(backend: str = "gloo", *, timeout: float = DEFAULT_TIMEOUT, init_method: str | None = None,
                     rank: int | None = None, world_size: int | None = None) -> None:  # fmt: skip
    """Join the process group: ``torch.distributed.init_process_group(backend, ...)``.

    ``backend`` is ``"gloo"`` (CPUs) or ``"nccl"`` (NVIDIA GPUs). Without ``init_method``, ``rank`` and
    ``world_size``, they come from the environment as ``torchrun`` sets it (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``). ``timeout`` (seconds) bounds every collective: a process that died makes
    the others raise instead of hang.
    """
    dist = _dist()
    if backend not in ("gloo", "nccl", "mpi"):
        raise ArgumentError(f"pt.init_distributed: backend={backend!r}", param="backend",
                            expected="'gloo' (CPUs) or 'nccl' (NVIDIA GPUs)", got=repr(backend))  # fmt: skip
    if not dist.is_available():  # pragma: no cover - depends on the torch build
        raise ArgumentError("pt.init_distributed: this PyTorch build has no torch.distributed", param="backend",
                            expected="a PyTorch build with distributed support", got="torch.distributed unavailable")  # fmt: skip
    if dist.is_initialized():
        return
    if init_method is None and rank is None and "MASTER_ADDR" not in os.environ:
        raise ArgumentError(
            "pt.init_distributed: no process group to join (MASTER_ADDR, RANK and WORLD_SIZE are not set)",
            param="init_method",
            expected="the variables torchrun sets, or init_method=, rank= and world_size=",
            got="none of them",
            fix="launch with: torchrun --nproc-per-node=2 your_script.py",
        )
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=float(timeout))}
    if init_method is not None:
        kwargs["init_method"] = init_method
    if rank is not None:
        kwargs["rank"] = rank
    if world_size is not None:
        kwargs["world_size"] = world_size
    dist.init_process_group(**kwargs)


def is_initialized() -> bool:
    """Whether this process is in a process group."""
    dist = _dist()
    return bool(dist.is_available() and dist.is_initialized())


def get_rank() -> int:
    """This process's number in the group (0 when not in one)."""
    return _dist().get_rank() if is_initialized() else 0


def get_world_size() -> int:
    """How many processes the group has (1 when not in one)."""
    return _dist().get_world_size() if is_initialized() else 1


def DistributedDataParallel(model: Any, **kwargs: Any) -> Any:  # noqa: N802 - torch's spelling
    """``torch.nn.parallel.DistributedDataParallel`` around ``model``: a ``pt.Module`` (converted with
    :func:`pypto.torch.module`, parameters shared) or a ``torch.nn.Module``; ``kwargs`` are DDP's."""
    from pypto.array.module import Module
    from pypto.torch import _torch, module

    torch = _torch()
    if not is_initialized():
        raise ArgumentError(
            "pt.DistributedDataParallel: not in a process group",
            param="model",
            expected="pt.init_distributed(...) called first",
            got="no process group",
            fix="call pt.init_distributed('gloo') (or 'nccl') at the start of each process",
        )
    if isinstance(model, Module):
        model = module(model)
    return torch.nn.parallel.DistributedDataParallel(model, **kwargs)


def destroy() -> None:
    """Leave the process group: wait for every process to get here, then
    ``torch.distributed.destroy_process_group`` (tearing connections down while another process still uses them
    can abort a process at exit)."""
    if is_initialized():
        dist = _dist()
        dist.barrier()
        dist.destroy_process_group()


__all__ = ["init_distributed", "is_initialized", "get_rank", "get_world_size", "DistributedDataParallel", "destroy",
           "DEFAULT_TIMEOUT"]  # fmt: skip
