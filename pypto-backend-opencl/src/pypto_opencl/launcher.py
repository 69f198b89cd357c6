"""Running a built program: device buffers, work sizes from the launch plan, and the launches.

Host arrays reach the device without copies where the device shares host memory (CPU devices
such as PoCL: the array is wrapped with ``CL_MEM_USE_HOST_PTR``); elsewhere each argument has a
device buffer that is kept between calls and only reallocated when an argument grows.
Temporaries and device scalars of the plan are kept the same way.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto.backend_api import Artifact, Program
from pypto.errors import ArgumentError, LaunchError
from pypto.targets.simt.args import DeviceArray, DeviceBinder
from pypto.targets.simt.plan import GROUPS, MAP, KernelLaunch, LaunchPlan, pow2_at_least, pow2_at_most

from .build import load_program
from .device import Device


class GroupPolicy:
    """How many work-items a group gets, and how many groups run.

    GPUs: enough work-items for the row (a power of two between 32 and 256), one group per
    iteration. CPU devices run a group's work-items as a loop over vector code: a row is best
    done by one work-item (then the group's reduction needs no barrier), a long block (the first
    stage of a full reduction) by a few dozen; fixed sizes also spare PoCL a kernel compilation
    per new size. Rows are not copied to local memory there: the CPU's caches hold them.
    """

    def __init__(self, dev: Device):
        self.cpu = dev.is_cpu
        self.group_min, self.group_max = (1, 64) if dev.is_cpu else (32, 256)
        self.long_rows = 16384  # CPU devices: rows at least this long get group_max work-items
        self.map_items = 1024 if dev.is_cpu else 256
        self.max_groups = 2**31 - 1
        self.cache_rows = not dev.is_cpu

    def group(self, hint: int | None, limit: int) -> int:
        if self.cpu:
            want = self.group_max if hint is not None and hint >= self.long_rows else self.group_min
        else:
            want = pow2_at_least(hint) if hint else self.group_max
        return max(1, min(max(want, self.group_min), self.group_max, pow2_at_most(limit)))

    def groups(self, iterations: int) -> int:
        return max(1, min(iterations, self.max_groups))

    def map(self, extents: Sequence[int], limit: int) -> tuple[int, ...]:
        room = min(self.map_items, pow2_at_most(limit))
        local = []
        for e in extents:
            size = max(1, min(pow2_at_least(e), room))
            local.append(size)
            room = max(1, room // size)
        return tuple(local)


class _Kernel:
    """A plan entry with its built kernel object and the device's limit for it."""

    def __init__(self, cl: Any, prg: Any, dev: Device, launch: KernelLaunch):
        self.launch = launch
        self.kernel = cl.Kernel(prg, launch.name)
        info = cl.kernel_work_group_info
        self.max_group = int(self.kernel.get_work_group_info(info.WORK_GROUP_SIZE, dev.device))
        self.static_local = int(self.kernel.get_work_group_info(info.LOCAL_MEM_SIZE, dev.device))
        self.cached = _Kernel(cl, prg, dev, launch.cached) if launch.cached is not None else None


class OpenCLLauncher:
    """Runs one compiled kernel on validated arguments (arrays, scalars, dims in loop-IR order)."""

    def __init__(self, program: Program, artifact: Artifact, dev: Device, options: list[str]):
        import pyopencl as cl

        self.cl = cl
        self.dev = dev
        self.name = program.name
        self.plan = LaunchPlan.from_json(artifact.metadata["plan"])
        self.sizer = self.plan.sizer()
        prg = load_program(dev, artifact.data, options)
        self.kernels = [_Kernel(cl, prg, dev, k) for k in self.plan.kernels]
        args = program.loops.args
        pos = {a.name: i for i, a in enumerate(args)}
        self.buffers = [(i, a.name, a.role) for i, a in enumerate(args) if a.kind == "buffer"]
        self.inputs = [pos[n] for n in self.plan.inputs]
        self.values: dict[str, tuple[int, Any]] = {}  # scalar or dim name -> (argument index, NumPy type)
        for i, a in enumerate(args):
            if a.kind == "scalar":
                self.values[a.name] = (i, np.uint8 if a.dtype.is_bool else a.dtype.numpy.type)
            elif a.kind == "dim":
                self.values[a.name] = (i, np.int64)
        self.policy = GroupPolicy(dev)
        self.copies: dict[int, Any] = {}  # argument index -> reused device buffer
        self.temps: dict[str, Any] = {}
        self.itemsize = {
            b.name: np.dtype(b.dtype if b.dtype != "bool" else "uint8").itemsize for b in self.plan.buffers
        }
        self.binder = DeviceBinder(program)
        self.lock = threading.Lock()

    # -- device arrays -------------------------------------------------------------------------------
    def fast_entry(self, *args: Any) -> Any:
        """Calls whose arrays are ``pyopencl.array.Array`` objects (checked like any call, used in
        place); ``NotImplemented`` for anything else, which then takes the core's path."""
        import pyopencl.array as cla

        if not any(isinstance(a, cla.Array) for a in args):
            return NotImplemented
        bound = self.binder.bind(args, self._cl_array)
        if bound is None:
            return NotImplemented
        launch_args, outputs = bound
        for a in args:
            if isinstance(a, cla.Array) and a.queue is not None and a.queue != self.dev.queue:
                a.queue.finish()  # the array's pending work (a fill, a copy) comes first
        self(*launch_args)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _cl_array(self, value: Any) -> DeviceArray | None:
        import pyopencl.array as cla

        if not isinstance(value, cla.Array):
            return None
        if value.context != self.dev.context:
            raise ArgumentError(
                f"{self.name}(): a pyopencl array belongs to another OpenCL context than the backend's",
                expected="an array made in pypto_opencl.context()",
                got=str(value.context),
                fix="create device arrays with pypto_opencl.queue() (e.g. pyopencl.array.to_device(pypto_opencl.queue(), a))",
            )
        base = value.base_data
        handle = base
        if value.offset:
            try:
                handle = base.get_sub_region(value.offset, max(value.nbytes, 1))
            except self.cl.Error:
                raise ArgumentError(
                    f"{self.name}(): a pyopencl array view starts at byte {value.offset} of its buffer, "
                    "which the device cannot address on its own",
                    expected="an array at the start of its buffer (or at an aligned offset)",
                    got=f"offset {value.offset}",
                    fix="pass a copy of the view",
                ) from None
        contiguous = bool(value.flags.c_contiguous) or value.size == 0
        return DeviceArray(handle, value, value.dtype, tuple(value.shape), contiguous, base.int_ptr,
                           value.offset, value.nbytes)  # fmt: skip

    # -- device memory -----------------------------------------------------------------------------
    def _alloc(self, nbytes: int) -> Any:
        return self.cl.Buffer(self.dev.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 1))

    def _reused(self, store: dict, key: Any, nbytes: int) -> Any:
        buf = store.get(key)
        if buf is None or buf.size < nbytes:
            buf = store[key] = self._alloc(nbytes)
        return buf

    def _argument(self, i: int, arr: np.ndarray) -> tuple[Any, bool]:
        """The device buffer for argument ``i`` and whether it is the host memory itself."""
        cl = self.cl
        if arr.nbytes and self.dev.unified_memory:
            try:
                flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
                return cl.Buffer(self.dev.context, flags, hostbuf=arr), True
            except (cl.Error, TypeError, ValueError, BufferError):
                pass  # a read-only or odd array: copy it like on a discrete device
        buf = self._reused(self.copies, i, arr.nbytes)
        if arr.nbytes:
            cl.enqueue_copy(self.dev.queue, buf, arr, is_blocking=False)
        return buf, False

    # -- one call ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        with self.lock:
            self._run(args)

    def _run(self, args: Sequence[Any]) -> None:
        cl, queue = self.cl, self.dev.queue
        sizes = self.sizer([args[i] for i in self.inputs])
        mem: dict[str, Any] = {}
        shared: list[tuple[np.ndarray, Any]] = []
        copied: list[tuple[np.ndarray, Any]] = []
        for i, name, role in self.buffers:
            arr = args[i]
            if isinstance(arr, DeviceArray):
                mem[name] = arr.handle if arr.nbytes else self._reused(self.copies, i, 1)
                continue
            buf, in_place = self._argument(i, arr)
            mem[name] = buf
            if role != "in" and arr.nbytes:
                (shared if in_place else copied).append((arr, buf))
        for b, count in zip(self.plan.buffers, sizes.buffers):
            mem[b.name] = self._reused(self.temps, b.name, max(count, 1) * self.itemsize[b.name])
        for n, k in enumerate(self.kernels):
            if not sizes.active[n]:
                continue
            extents = sizes.extents[n]
            if k.launch.kind != "single" and (not extents or 0 in extents):
                continue
            self._launch(k, extents, sizes.hints[n], sizes.local[n], mem, args)
        for arr, buf in copied:
            cl.enqueue_copy(queue, arr, buf, is_blocking=False)
        for arr, buf in shared:  # make the results visible in host memory (a no-op on CPU devices)
            mapped, _ = cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ, 0, (arr.nbytes,), np.uint8,
                                              is_blocking=False)  # fmt: skip
            mapped.base.release(queue)
        queue.finish()

    def _launch(self, k: _Kernel, extents: tuple[int, ...], hint: int | None, counts: tuple[int, ...],
                mem: dict[str, Any], args: Sequence[Any]) -> None:  # fmt: skip
        launch = k.launch
        if launch.kind == MAP:
            if launch.width > 1:  # each work-item takes that many consecutive points of dimension 0
                extents = (-(-extents[0] // launch.width), *extents[1:])
            local = self.policy.map(extents, k.max_group)
            glob = tuple(-(-e // lsz) * lsz for e, lsz in zip(extents, local))
        elif launch.group:  # tiles, columns: work-groups of the shape the kernel was written for
            local = launch.group[: len(extents)]
            if math.prod(local) > k.max_group:
                raise LaunchError(
                    f"kernel '{self.name}': '{launch.name}' needs work-groups of {local} work-items; device "
                    f"'{self.dev.name}' runs at most {k.max_group} per group for this kernel; run it on another "
                    "device (PYOPENCL_CTX) or backend"
                )
            glob = tuple(-(-e // lsz) * lsz for e, lsz in zip(extents, local))
        else:
            size = 1 if launch.serial else self.policy.group(hint, k.max_group)
            if k.cached is not None and self.policy.cache_rows and self._fits(k.cached, size, counts):
                k, launch = k.cached, k.cached.launch
            local = (size,)
            glob = (size * (self.policy.groups(extents[0]) if launch.kind == GROUPS else 1),)
        values = []
        for p in launch.params:
            if p in mem:
                values.append(mem[p])
            else:
                i, t = self.values[p]
                values.append(t(args[i]))
        nbytes = self._local_bytes(launch, local[0], counts if launch.cached is None else counts)
        values += [self.cl.LocalMemory(max(n, 1)) for n in nbytes]
        try:
            k.kernel.set_args(*values)
            self.cl.enqueue_nd_range_kernel(self.dev.queue, k.kernel, glob, local)
        except self.cl.Error as e:
            raise LaunchError(self._explain(launch, glob, local, sum(nbytes), e)) from None

    def _local_bytes(self, launch: KernelLaunch, size: int, counts: tuple[int, ...]) -> list[int]:
        out = []
        for b, count in zip(launch.local, counts if len(counts) == len(launch.local) else (1,) * len(launch.local)):
            out.append(b.itemsize * (size if b.per_thread else max(count, 1)))
        return out

    def _fits(self, k: _Kernel, size: int, counts: tuple[int, ...]) -> bool:
        total = sum(self._local_bytes(k.launch, size, counts)) + k.static_local
        return size <= k.max_group and total <= self.dev.local_mem_size

    def _explain(self, launch: KernelLaunch, glob: tuple[int, ...], local: tuple[int, ...], local_bytes: int,
                 e: Exception) -> str:  # fmt: skip
        dev = self.dev
        return (
            f"kernel '{self.name}': launching '{launch.name}' with {glob} work-items in groups of {local} "
            f"and {local_bytes} bytes of local memory failed: {e}\n"
            f"device limits ({dev.name}): work-groups of at most {dev.max_work_group_size} work-items, "
            f"{dev.local_mem_size} bytes of local memory, allocations of at most {dev.max_alloc} bytes"
        )
