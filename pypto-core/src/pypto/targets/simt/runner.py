"""Running a launch plan: the loop every SIMT backend's launcher shares, over a small device protocol.

A call of a SIMT-compiled kernel evaluates the plan's sizes for its arguments, puts each array
argument in device memory (a device array by its handle; a host array in place where the device
shares host memory, else copied to a buffer kept between calls), keeps the plan's temporaries
between calls, chooses each device kernel's launch shape (blocks and threads per block, local
memory) and launches them in order, then copies results back or makes them visible and, where the
call must return with its results, waits.

What differs between GPU-like backends is a :class:`SimtDevice` (memory, copies, one launch,
synchronisation) and a :class:`LaunchPolicy` (how many threads a map block or a row's group gets,
how many blocks a one-dimensional map strides with, the grid limits); the CUDA and OpenCL launchers
are such a device with a policy, plus their own entry for device arrays. A new GPU-like backend
is a spec, a printer's spellings and a device.

Launch shapes, in the plan's terms (:mod:`pypto.targets.simt.plan`):

* ``map``: a block of up to ``map_threads`` threads shaped over the innermost dimensions first
  (each a power of two up to the dimension's extent), as many blocks as cover the extents;
  a one-dimensional map strides with at most ``stride_blocks`` blocks where the policy says so;
* ``tiles`` and ``columns``: blocks of the shape the kernel was written for, as many as cover the
  extents (the device's per-kernel thread limit and the grid limits are checked, with an error
  naming both);
* ``groups``: ``policy.group(hint, limit)`` threads share each of the ``extents[0]`` iterations,
  one block per iteration up to the grid limit (a group strides past it); the variant keeping rows
  in local memory is taken where the policy caches rows and the device says it fits;
* ``single``: one block of the same group size (one thread for ``serial`` kernels).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pypto.backend_api import Program
from pypto.errors import LaunchError
from pypto.targets.simt.args import DeviceArray
from pypto.targets.simt.plan import GROUPS, MAP, SINGLE, KernelLaunch, LaunchPlan, pow2_at_least, pow2_at_most


@dataclass(frozen=True)
class LaunchPolicy:
    """A device's launch sizes (see the module docstring).

    ``group`` sizes: on GPUs about ``points_per_thread`` of a row's points per thread, between
    ``group_min`` and ``group_max`` threads (powers of two); on CPU devices (``long_rows`` set) one
    thread per row, or ``group_max`` for rows of at least ``long_rows`` points.
    """

    map_threads: int = 256
    stride_blocks: int | None = None  # one-dimensional maps: at most this many blocks, each thread striding
    max_blocks: tuple[int, int, int] = (2**31 - 1, 2**31 - 1, 2**31 - 1)
    group_min: int = 32
    group_max: int = 256
    points_per_thread: int = 1
    long_rows: int | None = None
    cache_rows: bool = True
    prefix_groups: bool = True  # kernels computing running values as group prefixes get groups (else 1 thread)

    def group(self, hint: int | None, limit: int) -> int:
        """Threads of a group sharing a row of ``hint`` points, under the kernel's ``limit``."""
        if self.long_rows is not None:
            want = self.group_max if hint is not None and hint >= self.long_rows else self.group_min
        else:
            want = pow2_at_least(-(-hint // self.points_per_thread)) if hint else self.group_max
        return max(1, min(max(want, self.group_min), self.group_max, pow2_at_most(limit)))

    def map_block(self, extents: Sequence[int], limit: int) -> tuple[int, ...]:
        """Threads per block of a map kernel over ``extents``: the innermost dimension first."""
        room = min(self.map_threads, pow2_at_most(limit))
        block = []
        for e in extents:
            size = max(1, min(pow2_at_least(e), room))
            block.append(size)
            room = max(1, room // size)
        return tuple(block)


class DeviceKernel(Protocol):
    """A built device kernel as a device sees it (its plan entry, limits and cached-rows variant)."""

    launch: KernelLaunch
    max_threads: int  # threads per block this kernel can run with on the device
    cached: DeviceKernel | None

    def local_sizes(self, threads: int, counts: Sequence[int]) -> tuple[int, ...]:
        """Bytes of each dynamically sized local buffer for ``threads`` threads and the plan's ``counts``."""
        ...

    def fits(self, local: Sequence[int]) -> bool:
        """Whether a block with those local buffers fits the device (with the kernel's static ones)."""
        ...


class SimtDevice(Protocol):
    """What a GPU-like backend gives the runner. ``stream`` is the backend's (``None`` where there is one queue)."""

    synchronous: bool  # every call waits for its launches (OpenCL here); else only calls that copied host arrays

    def alloc(self, nbytes: int) -> Any: ...

    def free(self, handle: Any) -> None: ...

    def host_buffer(self, array: np.ndarray) -> Any | None:
        """The host array as device memory without a copy (unified memory), or None: it is copied."""
        ...

    def upload(self, handle: Any, array: np.ndarray, stream: Any) -> None: ...

    def download(self, array: np.ndarray, handle: Any, stream: Any) -> None: ...

    def publish(self, array: np.ndarray, handle: Any, stream: Any) -> None:
        """Make results written into a :meth:`host_buffer` visible in host memory."""
        ...

    def launch(self, launch: Launch, stream: Any) -> None:
        """Enqueue one launch (raise :class:`~pypto.errors.LaunchError` with the device's limits on failure)."""
        ...

    def synchronize(self, stream: Any) -> None: ...


class Launch:
    """One launch of a call: the device kernel, blocks per dimension, threads per block, bytes of its local
    buffers, its parameter values. Calls with the same arguments make the same launches (CUDA replays them);
    ``ready`` is what a device derived from it for its launch call, kept for replays (None until then)."""

    __slots__ = ("kernel", "blocks", "threads", "local", "values", "ready")

    def __init__(self, kernel: Any, blocks: tuple[int, ...], threads: tuple[int, ...], local: tuple[int, ...],
                 values: tuple[Any, ...]):  # fmt: skip
        self.kernel, self.blocks, self.threads, self.local, self.values = kernel, blocks, threads, local, values
        self.ready: Any = None


class PlanRunner:
    """Runs one compiled kernel's launch plan on ``device`` (see the module docstring).

    ``kernels`` are the device's built kernels in plan order; ``value(name, v)`` converts a scalar or
    dim argument to what the device's launch takes. ``on_free`` is called when a kept allocation is
    replaced by a larger one (a launcher remembering launches forgets them then).
    """

    def __init__(self, program: Program, plan: LaunchPlan, device: SimtDevice, kernels: Sequence[Any],
                 policy: LaunchPolicy, value: Callable[[str, Any], Any]):  # fmt: skip
        self.name = program.name
        self.plan, self.device, self.kernels, self.policy = plan, device, list(kernels), policy
        self.sizer = plan.sizer()
        args = program.loops.args
        pos = {a.name: i for i, a in enumerate(args)}
        self.buffers = [(i, a.name, a.role) for i, a in enumerate(args) if a.kind == "buffer"]
        self.inputs = [pos[n] for n in plan.inputs]
        self.values = {a.name: i for i, a in enumerate(args) if a.kind != "buffer"}
        self.value = value
        self.itemsize = {b.name: np.dtype(b.dtype if b.dtype != "bool" else "uint8").itemsize for b in plan.buffers}
        self.copies: dict[int, tuple[Any, int]] = {}  # argument index -> kept allocation (handle, bytes)
        self.temps: dict[tuple[Any, str], tuple[Any, int]] = {}  # (stream, plan buffer) -> kept allocation
        self.on_free: Callable[[], None] | None = None

    # -- memory --------------------------------------------------------------------------------------------
    def kept(self, store: dict, key: Any, nbytes: int) -> Any:
        """An allocation of at least ``nbytes`` kept in ``store`` under ``key`` between calls."""
        buf = store.get(key)
        if buf is None or buf[1] < nbytes:
            if buf is not None:
                del store[key]
                self.device.free(buf[0])
                if self.on_free is not None:
                    self.on_free()
            size = max(int(nbytes), 1)
            store[key] = buf = (self.device.alloc(size), size)
        return buf[0]

    def release(self) -> None:
        """Free every kept allocation (the launcher is being dropped)."""
        for store in (self.copies, self.temps):
            for handle, _ in store.values():
                self.device.free(handle)
            store.clear()

    # -- one call ------------------------------------------------------------------------------------------
    def run(self, args: Sequence[Any], stream: Any = None) -> tuple[list[Launch] | None, list[tuple[str, int]]]:
        """One call on validated arguments in loop-IR order (host arrays, or :class:`DeviceArray` s).

        Returns the launches made (to be replayed by calls with the same arguments), or None when host
        arrays were involved, and the host arrays copied (``(name, bytes)``, for a performance warning)."""
        dev = self.device
        sizes = self.sizer([args[i] for i in self.inputs])
        mem: dict[str, Any] = {}
        back: list[tuple[np.ndarray, Any]] = []
        shown: list[tuple[np.ndarray, Any]] = []
        copied: list[tuple[str, int]] = []
        for i, name, role in self.buffers:
            a = args[i]
            if isinstance(a, DeviceArray):
                if a.handle is not None and a.nbytes:
                    mem[name] = a.handle
                    continue
                if a.handle is not None:  # empty: any valid allocation
                    mem[name] = self.kept(self.copies, i, 1)
                    continue
                a = a.array
            shared = dev.host_buffer(a) if a.nbytes else None
            if shared is not None:
                mem[name] = shared
                if role != "in":
                    shown.append((a, shared))
                continue
            buf = mem[name] = self.kept(self.copies, i, a.nbytes)
            copied.append((name, a.nbytes))
            if a.nbytes:
                dev.upload(buf, a, stream)
                if role != "in":
                    back.append((a, buf))
        for b, count in zip(self.plan.buffers, sizes.buffers):
            mem[b.name] = self.kept(self.temps, (stream, b.name), max(count, 1) * self.itemsize[b.name])
        launches = []
        for n, k in enumerate(self.kernels):
            if not sizes.active[n]:
                continue
            extents = sizes.extents[n]
            if k.launch.kind != SINGLE and (not extents or 0 in extents):
                continue
            launches.append(self.configure(k, extents, sizes.hints[n], sizes.local[n], mem, args))
        for launch in launches:
            dev.launch(launch, stream)
        for a, buf in back:
            dev.download(a, buf, stream)
        for a, buf in shown:
            dev.publish(a, buf, stream)
        host = bool(copied or shown)
        if host or dev.synchronous:
            dev.synchronize(stream)
        return (None if host else launches), copied

    def configure(self, k: Any, extents: tuple[int, ...], hint: int | None, counts: tuple[int, ...],
                  mem: dict[str, Any], args: Sequence[Any]) -> Launch:  # fmt: skip
        """The launch of device kernel ``k`` for one call (its cached-rows variant where that is taken)."""
        launch, policy = k.launch, self.policy
        threads: tuple[int, ...]
        if launch.kind == MAP:
            if launch.width > 1:  # each thread takes that many consecutive points of dimension 0
                extents = (-(-extents[0] // launch.width), *extents[1:])
            threads = policy.map_block(extents, k.max_threads)
            blocks = tuple(min(-(-e // t), cap) for e, t, cap in zip(extents, threads, policy.max_blocks))
            if len(extents) == 1 and policy.stride_blocks is not None:
                blocks = (min(blocks[0], policy.stride_blocks),)
        elif launch.group:  # tiles, columns: blocks of the kernel's shape covering the extents, no striding
            threads = launch.group[: len(extents)]
            blocks = tuple(-(-e // t) for e, t in zip(extents, threads))
            if math.prod(threads) > k.max_threads or any(b > cap for b, cap in zip(blocks, policy.max_blocks)):
                raise LaunchError(
                    f"kernel '{self.name}': '{launch.name}' needs {blocks} blocks of {threads} threads; the device "
                    f"runs at most {k.max_threads} threads per block for it and grids of at most "
                    f"{policy.max_blocks} blocks; split the call into smaller ones or run it on another device or backend"
                )
        else:
            alone = launch.serial or (launch.prefix and not policy.prefix_groups)
            size = 1 if alone else policy.group(hint, k.max_threads)
            cached = k.cached
            if cached is not None and policy.cache_rows and size <= cached.max_threads:
                local = cached.local_sizes(size, counts)
                if cached.fits(local):
                    k, launch = cached, cached.launch
            threads = (size,)
            blocks = (min(extents[0], policy.max_blocks[0]) if launch.kind == GROUPS else 1,)
        values = []
        for p in launch.params:
            if p in mem:
                values.append(mem[p])
            else:
                values.append(self.value(p, args[self.values[p]]))
        return Launch(k, blocks, threads, k.local_sizes(threads[0], counts), tuple(values))
