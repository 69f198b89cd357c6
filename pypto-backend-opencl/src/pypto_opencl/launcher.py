"""Running a built program: the core's plan runner (:mod:`pypto.targets.simt.runner`) on an OpenCL queue.

This module gives the runner its device (buffers, copies, one ``clEnqueueNDRangeKernel``) and its launch
sizes (:data:`CPU_POLICY`, :data:`GPU_POLICY`). Host arrays reach the device without copies where the
device shares host memory (CPU devices such as PoCL: the array is wrapped with ``CL_MEM_USE_HOST_PTR``);
elsewhere each argument has a device buffer that is kept between calls and only reallocated when an
argument grows. Temporaries and device scalars of the plan are kept the same way.
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
from pypto.targets.simt.plan import KernelLaunch, LaunchPlan
from pypto.targets.simt.runner import Launch, LaunchPolicy, PlanRunner

from .build import load_program
from .device import Device

CPU_POLICY = LaunchPolicy(
    map_threads=1024, group_min=1, group_max=64, long_rows=16384, cache_rows=False, prefix_groups=False
)
"""CPU devices run a group's work-items as a loop over vector code: a row is best done by one work-item
(then the group's reduction needs no barrier), a long block (the first stage of a full reduction) by a
few dozen; fixed sizes also spare PoCL a kernel compilation per new size. Rows are not copied to local
memory there: the CPU's caches hold them. Running values (``pt.cumsum``) take their steps in order in one
work-item: as group prefixes, each step costs a barrier per doubling (a cumsum of 16M float32 values took
86 ms with groups of 64 on PoCL, 8 ms in one work-item)."""

GPU_POLICY = LaunchPolicy(map_threads=256, group_min=32, group_max=256, points_per_thread=1, cache_rows=True)
"""GPUs: enough work-items for the row (a power of two between 32 and 256), one group per iteration."""


def policy_for(dev: Device) -> LaunchPolicy:
    """The launch sizes for ``dev`` (see :mod:`pypto.targets.simt.runner`)."""
    return CPU_POLICY if dev.is_cpu else GPU_POLICY


class _OneItem:
    """The program built with ``PT_ONE_ITEM`` (its barriers empty), for launches in groups of one work-item on
    CPU devices: PoCL compiles a kernel's barriers into a state machine over the group, and for kernels of many
    group reductions (a determinant of 8 x 8 matrices: 16, each a loop of barriers) that took minutes even for
    one work-item, where the same kernel without them compiles in about a second. Built when first needed."""

    def __init__(self, dev: Device, artifact: bytes, options: list[str]):
        self.dev, self.artifact, self.options = dev, artifact, [*options, "-DPT_ONE_ITEM=1"]
        self.program: Any = None

    def kernel(self, cl: Any, name: str) -> Any:
        if self.program is None:
            self.program = load_program(self.dev, self.artifact, self.options)
        return cl.Kernel(self.program, name)


class _Kernel:
    """A plan entry with its built kernel object and the device's limits for it."""

    def __init__(self, cl: Any, prg: Any, dev: Device, launch: KernelLaunch, one: _OneItem | None = None):
        self.launch = launch
        self.kernel = cl.Kernel(prg, launch.name)
        self.one, self.one_kernel = one, None
        info = cl.kernel_work_group_info
        self.max_threads = int(self.kernel.get_work_group_info(info.WORK_GROUP_SIZE, dev.device))
        self.static_local = int(self.kernel.get_work_group_info(info.LOCAL_MEM_SIZE, dev.device))
        self.local_limit = dev.local_mem_size
        self.cached = _Kernel(cl, prg, dev, launch.cached, one) if launch.cached is not None else None

    def for_group(self, cl: Any, local: Sequence[int]) -> Any:
        """The kernel object to launch in groups of ``local`` work-items."""
        if self.one is None or math.prod(local) != 1:
            return self.kernel
        if self.one_kernel is None:
            self.one_kernel = self.one.kernel(cl, self.launch.name)
        return self.one_kernel

    def local_sizes(self, threads: int, counts: Sequence[int]) -> tuple[int, ...]:
        """Bytes of each ``__local`` argument: per work-item scratch, or the plan's element counts (cached rows)."""
        local = self.launch.local
        if len(counts) != len(local):
            counts = (1,) * len(local)
        return tuple(b.itemsize * (threads if b.per_thread else max(c, 1)) for b, c in zip(local, counts))

    def fits(self, local: Sequence[int]) -> bool:
        return sum(local) + self.static_local <= self.local_limit


class OpenCLLauncher:
    """Runs one compiled kernel on validated arguments (arrays, scalars, dims in loop-IR order): the core's
    plan runner over this module's device protocol (:class:`_Queue`)."""

    def __init__(self, program: Program, artifact: Artifact, dev: Device, options: list[str]):
        import pyopencl as cl

        self.cl = cl
        self.dev = dev
        self.name = program.name
        plan = LaunchPlan.from_json(artifact.metadata["plan"])
        prg = load_program(dev, artifact.data, options)
        one = _OneItem(dev, artifact.data, options) if dev.is_cpu else None
        kernels = [_Kernel(cl, prg, dev, k, one) for k in plan.kernels]
        types: dict[str, Any] = {}  # scalar or dim name -> the NumPy type the kernel takes it as
        for a in program.loops.args:
            if a.kind == "scalar":
                types[a.name] = np.uint8 if a.dtype.is_bool else a.dtype.compute.numpy.type  # 16-bit: a float
            elif a.kind == "dim":
                types[a.name] = np.int64
        self.runner = PlanRunner(program, plan, _Queue(cl, dev, self.name), kernels, policy_for(dev),
                                 lambda name, v: types[name](v))  # fmt: skip
        self.binder = DeviceBinder(program)
        self.lock = threading.Lock()

    @property
    def copies(self) -> dict[int, Any]:
        """Device buffers kept for host arguments (argument index -> (buffer, bytes))."""
        return self.runner.copies

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

    # -- one call ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        with self.lock:
            self.runner.run(args)


class _Queue:
    """The device protocol of :class:`~pypto.targets.simt.runner.PlanRunner` on one OpenCL queue (every call
    waits for its work: ``synchronous``)."""

    synchronous = True

    def __init__(self, cl: Any, dev: Device, name: str):
        self.cl, self.dev, self.name, self.queue = cl, dev, name, dev.queue

    def alloc(self, nbytes: int) -> Any:
        return self.cl.Buffer(self.dev.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 1))

    def free(self, handle: Any) -> None:
        handle.release()

    def host_buffer(self, array: np.ndarray) -> Any | None:
        """Host memory wrapped in place where the device shares it (CPU devices such as PoCL)."""
        if not self.dev.unified_memory:
            return None
        cl = self.cl
        try:
            return cl.Buffer(self.dev.context, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=array)
        except (cl.Error, TypeError, ValueError, BufferError):
            return None  # a read-only or odd array: copied like on a discrete device

    def upload(self, handle: Any, array: np.ndarray, stream: Any) -> None:
        self.cl.enqueue_copy(self.queue, handle, array, is_blocking=False)

    def download(self, array: np.ndarray, handle: Any, stream: Any) -> None:
        self.cl.enqueue_copy(self.queue, array, handle, is_blocking=False)

    def publish(self, array: np.ndarray, handle: Any, stream: Any) -> None:
        """Map the buffer for reading: the results become visible in host memory (a no-op on CPU devices)."""
        cl = self.cl
        mapped, _ = cl.enqueue_map_buffer(self.queue, handle, cl.map_flags.READ, 0, (array.nbytes,), np.uint8,
                                          is_blocking=False)  # fmt: skip
        mapped.base.release(self.queue)

    def synchronize(self, stream: Any) -> None:
        self.queue.finish()

    def launch(self, launch: Launch, stream: Any) -> None:
        k = launch.kernel
        cl = self.cl
        local = launch.threads
        glob = tuple(b * t for b, t in zip(launch.blocks, local))
        values = [*launch.values, *(cl.LocalMemory(max(n, 1)) for n in launch.local)]
        kernel = k.for_group(cl, local)
        try:
            kernel.set_args(*values)
            cl.enqueue_nd_range_kernel(self.queue, kernel, glob, local)
        except cl.Error as e:
            raise LaunchError(self._explain(k.launch, glob, local, sum(launch.local), e)) from None

    def _explain(self, launch: KernelLaunch, glob: tuple[int, ...], local: tuple[int, ...], local_bytes: int,
                 e: Exception) -> str:  # fmt: skip
        dev = self.dev
        return (
            f"kernel '{self.name}': launching '{launch.name}' with {glob} work-items in groups of {local} "
            f"and {local_bytes} bytes of local memory failed: {e}\n"
            f"device limits ({dev.name}): work-groups of at most {dev.max_work_group_size} work-items, "
            f"{dev.local_mem_size} bytes of local memory, allocations of at most {dev.max_alloc} bytes"
        )
