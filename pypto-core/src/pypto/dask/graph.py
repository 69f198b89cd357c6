"""The functions of the dask layers: generated kernels run on NumPy blocks.

These objects travel to the workers: they hold IR, never compiled code; each process compiles (through
the disk cache) and keeps the kernels it runs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto._lru import LRUCache
from pypto.errors import ArgumentError
from pypto.ir.kernel import KernelIR
from pypto.runtime.kernel import Kernel


def dask_array():
    try:
        import dask.array as da
    except ImportError as e:  # pragma: no cover - only without the extra
        raise ArgumentError(
            "pypto: dask arrays were passed but dask is not installed",
            expected="dask[array]",
            got="no dask",
            fix="pip install 'pypto-core[dask]'",
        ) from e
    return da


# ---------------------------------------------------------------------------------------------------------
# Generated kernels, run on blocks (these objects travel to the workers: they hold IR, never compiled code)

KERNEL_CACHE_SIZE = 256  # generated kernels a process (a worker) keeps loaded, least recently used dropped
_KERNELS: LRUCache[tuple, Any] = LRUCache(KERNEL_CACHE_SIZE)
_KERNELS_LOCK = threading.Lock()


def kernel_for(ir: KernelIR, executor: str | None, fastmath: bool) -> Any:
    """The compiled kernel of ``ir`` in this process (built once per process, through the disk cache; the
    ``KERNEL_CACHE_SIZE`` most recently used stay loaded)."""
    key = (ir, executor, fastmath)
    k = _KERNELS.get(key)
    if k is None:
        with _KERNELS_LOCK:
            k = _KERNELS.get(key)
            if k is None:
                k = Kernel.from_ir(ir, executor=executor, fastmath=fastmath)
                _KERNELS[key] = k
    return k


@dataclass(frozen=True)
class Run:
    """One generated kernel with one output, run on NumPy blocks (the function of a dask layer)."""

    ir: KernelIR
    executor: str | None
    fastmath: bool
    inputs: tuple[str, ...]  # tensor parameters fed by the blocks, in order
    output: str
    scalars: tuple[tuple[str, Any], ...] = ()

    def _out_shape(self, blocks: Sequence[np.ndarray]) -> tuple[int, ...]:
        dims: dict[str, int] = {}
        for name, b in zip(self.inputs, blocks):
            for e, n in zip(self.ir.buffer(name).shape, b.shape):
                d = e.plain_dim()
                if d is not None:
                    dims[d] = n
        return tuple(e.evaluate(dims) for e in self.ir.buffer(self.output).shape)

    def run(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        out_param = self.ir.buffer(self.output)
        out = np.empty(self._out_shape(blocks), out_param.dtype.numpy)
        if out.size == 0:
            return out
        values: dict[str, Any] = dict(zip(self.inputs, (np.ascontiguousarray(b) for b in blocks)))
        values[self.output] = out
        values.update(self.scalars)
        kernel_for(self.ir, self.executor, self.fastmath)(*(values[p.name] for p in self.ir.params))
        return out

    def __call__(self, *blocks: np.ndarray) -> np.ndarray:
        return self.run(blocks)


@dataclass(frozen=True)
class WholeRun:
    """A kernel run once on whole arrays (one that gathers or scatters): its outputs, in order."""

    ir: KernelIR
    executor: str | None
    fastmath: bool
    inputs: tuple[str, ...]  # the tensor parameters given, in the order of the task's arguments
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # every tensor parameter's shape
    scalars: tuple[tuple[str, Any], ...] = ()

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        given, shapes = dict(zip(self.inputs, arrays)), dict(self.shapes)
        values = {p.name: np.array(given[p.name]) if p.name in given else np.empty(shapes[p.name], p.dtype.numpy)
                  for p in self.ir.tensor_params}  # fmt: skip
        values.update(self.scalars)
        kernel_for(self.ir, self.executor, self.fastmath)(*(values[p.name] for p in self.ir.params))
        return tuple(values[p.name] for p in self.ir.outputs)


@dataclass(frozen=True)
class Combine:
    """A combine kernel as dask's ``combine``/``aggregate`` callback (partials concatenated along ``axis``)."""

    run: Run

    def __call__(self, x: np.ndarray, axis: Any = None, keepdims: bool = True, **_: Any) -> np.ndarray:
        return self.run.run((x,))


def identity(x: np.ndarray, axis: Any = None, keepdims: bool = True, **_: Any) -> np.ndarray:
    return x  # partial kernels already give one element per chunk along the reduced axes
