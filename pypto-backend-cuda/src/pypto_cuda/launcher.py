"""Running a compiled module on the GPU: device buffers, grid and block sizes from the launch plan.

NumPy arguments are copied to device buffers that are kept between calls (reallocated only when an
argument grows) and outputs are copied back. Arrays already on the GPU (``__cuda_array_interface__``:
CuPy arrays, torch CUDA tensors, Numba device arrays) are used in place through :meth:`fast_entry`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto.backend_api import Artifact, Program
from pypto.errors import LaunchError
from pypto.targets.simt.args import DeviceArray, DeviceBinder
from pypto.targets.simt.plan import GROUPS, MAP, KernelLaunch, LaunchPlan, pow2_at_least

from .device import CudaDevice

WARP = 32
GROUP_MIN, GROUP_MAX = WARP, 256  # threads of a block that shares a row: whole warps
MAP_THREADS = 256
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_SHARED = 48 * 1024  # dynamic shared memory a kernel gets without opting in
_FORMAT = {"float32": "f", "float64": "d", "int32": "i", "int64": "q", "bool": "B"}


def block_for_map(extents: Sequence[int], limit: int) -> tuple[int, int, int]:
    """Threads per block for a map kernel: the innermost dimension first, whole warps if it is long."""
    room = min(MAP_THREADS, limit)
    block = []
    for e in extents:
        size = max(1, min(pow2_at_least(e), room))
        block.append(size)
        room = max(1, room // size)
    return (*block, *([1] * (3 - len(block))))  # type: ignore[return-value]


def group_size(hint: int | None, limit: int) -> int:
    want = pow2_at_least(hint) if hint else GROUP_MAX
    cap = 1 << (max(WARP, limit).bit_length() - 1)
    return max(GROUP_MIN, min(want, GROUP_MAX, cap))


def cuda_array(value: Any) -> DeviceArray | None:
    """A ``__cuda_array_interface__`` object as a :class:`DeviceArray` (None for anything else)."""
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is None:
        return None
    dtype = np.dtype(iface["typestr"])
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    contiguous = strides is None or nbytes == 0 or tuple(strides) == _c_strides(shape, dtype)
    ptr = int(iface["data"][0])
    return DeviceArray(ptr, value, dtype, shape, contiguous, "cuda", ptr, nbytes)


def _c_strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    out, step = [], dtype.itemsize
    for s in reversed(shape):
        out.append(step)
        step *= s
    return tuple(reversed(out))


class _Function:
    """A kernel of the module, prepared for launches, with its resource limits."""

    def __init__(self, dev: CudaDevice, module: Any, launch: KernelLaunch, formats: dict[str, str]):
        cuda = dev.cuda
        self.launch = launch
        self.fn = module.get_function(launch.name)
        self.fn.prepare("".join(formats[p] for p in launch.params))
        fa = cuda.function_attribute
        self.max_threads = int(self.fn.get_attribute(fa.MAX_THREADS_PER_BLOCK))
        self.static_shared = int(self.fn.get_attribute(fa.SHARED_SIZE_BYTES))
        self.shared_limit = max(dev.shared_optin, DEFAULT_SHARED) - self.static_shared
        self.opted_in = DEFAULT_SHARED - self.static_shared
        self.cached = _Function(dev, module, launch.cached, formats) if launch.cached is not None else None

    def shared_bytes(self, counts: Sequence[int]) -> int:
        """Dynamic shared memory for the cached rows (``counts``: elements of each local buffer)."""
        local = self.launch.local
        return sum((max(c, 1) * b.itemsize + 15) // 16 * 16 for b, c in zip(local, counts) if not b.per_thread)


class CudaLauncher:
    """Runs one compiled kernel on validated arguments (arrays, scalars, dims in loop-IR order)."""

    def __init__(self, program: Program, artifact: Artifact, dev: CudaDevice):
        self.dev = dev
        self.cuda = dev.cuda
        self.name = program.name
        self.plan = LaunchPlan.from_json(artifact.metadata["plan"])
        self.sizer = self.plan.sizer()
        args = program.loops.args
        formats = {
            a.name: "P" if a.kind == "buffer" else "q" if a.kind == "dim" else _FORMAT[a.dtype.name] for a in args
        }
        formats.update({b.name: "P" for b in self.plan.buffers})
        data = artifact.data
        if artifact.metadata.get("format") == "ptx" and not data.endswith(b"\0"):
            data += b"\0"  # the driver reads PTX as a C string
        with dev.active():
            self.module = self.cuda.module_from_buffer(data)
            self.functions = [_Function(dev, self.module, k, formats) for k in self.plan.kernels]
        pos = {a.name: i for i, a in enumerate(args)}
        self.buffers = [(i, a.name, a.role) for i, a in enumerate(args) if a.kind == "buffer"]
        self.inputs = [pos[n] for n in self.plan.inputs]
        self.values = {a.name: (i, np.uint8 if a.dtype.is_bool else a.dtype.numpy.type if a.kind == "scalar" else np.int64)
                       for i, a in enumerate(args) if a.kind != "buffer"}  # fmt: skip
        self.itemsize = {
            b.name: np.dtype(b.dtype if b.dtype != "bool" else "uint8").itemsize for b in self.plan.buffers
        }
        self.copies: dict[int, Any] = {}  # argument index -> reused device allocation
        self.temps: dict[str, Any] = {}
        self.binder = DeviceBinder(program)
        self.lock = threading.Lock()

    # -- entry points ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        with self.lock, self.dev.active():
            self._run(args)

    def fast_entry(self, *args: Any) -> Any:
        """Calls whose arrays are all on the GPU (checked like any call, used without copies);
        ``NotImplemented`` for anything else, which then takes the core's path."""
        if not any(hasattr(a, "__cuda_array_interface__") for a in args):
            return NotImplemented
        bound = self.binder.bind(args, cuda_array)
        if bound is None:
            return NotImplemented
        launch_args, outputs = bound
        with self.lock, self.dev.active():
            # the arrays' producers may still be writing them on their own streams
            self.cuda.Context.synchronize()
            self._run(launch_args)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # -- device memory ----------------------------------------------------------------------------------------
    def _reused(self, store: dict, key: Any, nbytes: int) -> Any:
        buf = store.get(key)
        if buf is None or buf[1] < nbytes:
            alloc = self.cuda.mem_alloc(max(int(nbytes), 1))
            buf = store[key] = (alloc, max(int(nbytes), 1))
        return buf[0]

    # -- one call --------------------------------------------------------------------------------------------
    def _run(self, args: Sequence[Any]) -> None:
        cuda = self.cuda
        sizes = self.sizer([args[i] for i in self.inputs])
        mem: dict[str, int] = {}
        back: list[tuple[np.ndarray, Any]] = []
        for i, name, role in self.buffers:
            arr = args[i]
            if isinstance(arr, DeviceArray):
                mem[name] = int(arr.handle)
                continue
            alloc = self._reused(self.copies, i, arr.nbytes)
            if arr.nbytes:
                cuda.memcpy_htod(alloc, arr)
                if role != "in":
                    back.append((arr, alloc))
            mem[name] = int(alloc)
        for b, count in zip(self.plan.buffers, sizes.buffers):
            mem[b.name] = int(self._reused(self.temps, b.name, max(count, 1) * self.itemsize[b.name]))
        for n, f in enumerate(self.functions):
            if not sizes.active[n]:
                continue
            extents = sizes.extents[n]
            if f.launch.kind != "single" and (not extents or 0 in extents):
                continue
            self._launch(f, extents, sizes.hints[n], sizes.local[n], mem, args)
        for arr, alloc in back:
            cuda.memcpy_dtoh(arr, alloc)
        cuda.Context.synchronize()

    def _launch(self, f: _Function, extents: tuple[int, ...], hint: int | None, counts: tuple[int, ...],
                mem: dict[str, int], args: Sequence[Any]) -> None:  # fmt: skip
        launch = f.launch
        shared = 0
        if launch.kind == MAP:
            block = block_for_map(extents, f.max_threads)
            grid = tuple(min(-(-e // b), cap) for e, b, cap in zip(extents, block, MAX_GRID))
            grid = (*grid, *([1] * (3 - len(grid))))
        elif launch.group:  # tiles, columns: blocks of the kernel's shape; no striding, so the grid must cover them
            block = (*launch.group, *([1] * (3 - len(launch.group))))
            grid = tuple(-(-e // b) for e, b in zip(extents, block))
            grid = (*grid, *([1] * (3 - len(grid))))
            if any(g > cap for g, cap in zip(grid, MAX_GRID)):
                raise LaunchError(
                    f"kernel '{self.name}': '{launch.name}' needs a grid of {grid} blocks of {block} threads, more than "
                    f"CUDA's limit of {MAX_GRID}; split the contraction into smaller calls"
                )
        else:
            size = 1 if launch.serial else group_size(hint, f.max_threads)
            if f.cached is not None and size <= f.cached.max_threads:
                need = f.cached.shared_bytes(counts)
                if need <= f.cached.shared_limit:
                    f, launch, shared = f.cached, f.cached.launch, need
                    self._opt_in(f, shared)
            block = (size, 1, 1)
            grid = (min(extents[0], MAX_GRID[0]) if launch.kind == GROUPS else 1, 1, 1)  # groups stride past it
        values = []
        for p in launch.params:
            if p in mem:
                values.append(mem[p])
            else:
                i, t = self.values[p]
                values.append(t(args[i]))
        try:
            f.fn.prepared_call(grid, block, *values, shared_size=shared)
        except self.cuda.Error as e:
            raise LaunchError(self._explain(launch, grid, block, shared, e)) from None

    def _opt_in(self, f: _Function, shared: int) -> None:
        """Let a kernel use more dynamic shared memory than the default 48 KiB (once per size)."""
        if shared > f.opted_in:
            f.fn.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            f.opted_in = shared

    def _explain(self, launch: KernelLaunch, grid: tuple, block: tuple, shared: int, e: Exception) -> str:
        d = self.dev
        return (
            f"kernel '{self.name}': launching '{launch.name}' with grid {grid}, blocks of {block} threads and "
            f"{shared} bytes of dynamic shared memory failed: {e}\n"
            f"device limits ({d.name}, {d.arch}): {d.max_threads} threads per block, {d.shared_per_block} bytes "
            f"of shared memory per block ({d.shared_optin} with opt-in)"
        )
