"""Running a compiled module on the GPU: arguments, grid and block sizes from the launch plan, streams.

Two ways in:

* **device arrays** (torch CUDA tensors, CuPy arrays, ``__cuda_array_interface__`` objects, CUDA
  DLPack tensors) reach :meth:`CudaLauncher.fast_entry`: they are checked like any argument and
  passed by pointer; the kernels are enqueued on the caller's stream (``pt.stream`` / ``stream=``,
  else torch's or CuPy's current stream, else the default stream) and the call returns without
  waiting for them, as torch and CuPy operations do.
* **host arrays** (NumPy) come through the core's binder to :meth:`CudaLauncher.__call__`: they are
  copied to device buffers kept between calls (reallocated only when an argument grows), the
  kernels run, outputs are copied back and the call waits for them. A ``pt.PerformanceWarning``
  says so once per kernel. Host arrays mixed with device arrays are copied the same way.

Launch arguments live in slots prepared once per device kernel, so a launch is one driver call.
Temporaries of the plan (partial results of two-stage reductions) are kept per stream, so calls
on different streams never share them.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto.backend_api import Artifact, Program
from pypto.errors import LaunchError, PerformanceWarning
from pypto.runtime.stream import current_stream
from pypto.targets.simt.args import DeviceArray, DeviceBinder
from pypto.targets.simt.plan import KernelLaunch, LaunchPlan
from pypto.targets.simt.runner import Launch, LaunchPolicy, PlanRunner

from . import arrays as views
from . import driver as drv
from .device import CudaDevice
from .driver import CudaError

WARP = 32
GROUP_MIN, GROUP_MAX = WARP, 1024  # threads of a block that shares a row: whole warps
POINTS_PER_THREAD = 4  # a row's points per thread a block is sized for (its loops are unrolled by 4)
MAP_THREADS = 256
MAP_BLOCKS_PER_SM = 8  # one-dimensional map kernels: enough blocks to fill every multiprocessor, then stride
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_SHARED = 48 * 1024  # dynamic shared memory a kernel gets without opting in
MEMO_SIZE = 16  # call signatures a launcher remembers (their launches are replayed without checks)
_CTYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long", "bool": "unsigned char",
           "int8": "signed char", "uint8": "unsigned char", "int16": "short", "uint16": "unsigned short",
           "uint32": "unsigned int", "uint64": "unsigned long long", "float16": "unsigned short"}  # fmt: skip


def policy_for(dev: CudaDevice) -> LaunchPolicy:
    """The launch sizes on ``dev`` (see :mod:`pypto.targets.simt.runner`): map blocks of 256 threads, one-dimensional
    maps striding over :data:`MAP_BLOCKS_PER_SM` blocks per multiprocessor, a row's block of whole warps with about
    :data:`POINTS_PER_THREAD` points per thread, rows kept in shared memory where they fit."""
    return LaunchPolicy(map_threads=MAP_THREADS, stride_blocks=dev.multiprocessors * MAP_BLOCKS_PER_SM,
                        max_blocks=MAX_GRID, group_min=GROUP_MIN, group_max=GROUP_MAX,
                        points_per_thread=POINTS_PER_THREAD, cache_rows=True)  # fmt: skip


def resolve_stream(args: Sequence[Any], ordinal: int, lib: str | None = None) -> int:
    """The stream a call runs on: ``pt.stream``/``stream=``, else the current stream of the arrays' library
    (``lib`` when the caller already knows it), else the default stream."""
    s = current_stream()
    if s is not None:
        return views.stream_handle(s)
    stream = views.stream_of_library(lib or views.library_of(args), ordinal)
    return stream if stream is not None else 0


class _Function:
    """A kernel of the module, its resource limits and the slots its arguments are passed in (the runner's
    :class:`~pypto.targets.simt.runner.DeviceKernel`)."""

    def __init__(self, dev: CudaDevice, module: Any, launch: KernelLaunch, ctypes_of: dict[str, str]):
        d = dev.driver
        self.launch = launch
        self.fn = d.function(module, launch.name)
        self.max_threads = d.function_attribute(self.fn, drv.FUNC_MAX_THREADS_PER_BLOCK)
        self.static_shared = d.function_attribute(self.fn, drv.FUNC_SHARED_SIZE_BYTES)
        self.registers = d.function_attribute(self.fn, drv.FUNC_NUM_REGS)
        self.shared_limit = max(dev.shared_optin, DEFAULT_SHARED) - self.static_shared
        self.opted_in = DEFAULT_SHARED - self.static_shared
        ffi = d.ffi
        self.slots = [ffi.new(f"{ctypes_of[p]}[1]") for p in launch.params]
        # NULL-terminated: the driver reads as many entries as the kernel has parameters, tools may read to the end
        self.params = ffi.new("void *[]", [ffi.cast("void *", s) for s in self.slots] + [ffi.NULL])
        self.cached = _Function(dev, module, launch.cached, ctypes_of) if launch.cached is not None else None

    def local_sizes(self, threads: int, counts: Sequence[int]) -> tuple[int, ...]:
        """Dynamic shared memory of the cached rows, 16-byte aligned (per-thread scratch is static in CUDA)."""
        local = self.launch.local
        return tuple((max(c, 1) * b.itemsize + 15) // 16 * 16 for b, c in zip(local, counts) if not b.per_thread)

    def fits(self, local: Sequence[int]) -> bool:
        return sum(local) <= self.shared_limit


def _release(driver: Any, module: Any, runner: PlanRunner) -> None:
    """Free a collected launcher's device memory and module (also at exit, when the driver may be gone)."""
    try:
        runner.release()
        driver.unload_module(module)
    except Exception:  # noqa: BLE001 - the process may be shutting down; nothing to report to
        pass


class CudaLauncher:
    """Runs one compiled kernel (see the module docstring)."""

    def __init__(self, program: Program, artifact: Artifact, dev: CudaDevice):
        self.dev = dev
        self.driver = dev.driver
        self.name = program.name
        plan = LaunchPlan.from_json(artifact.metadata["plan"])
        args = program.loops.args
        ctypes_of = {
            a.name: "unsigned long long" if a.kind == "buffer" else "long long" if a.kind == "dim"
            else _CTYPES[a.dtype.compute.name] for a in args  # a 16-bit float scalar is passed as a float
        }  # fmt: skip
        ctypes_of.update({b.name: "unsigned long long" for b in plan.buffers})
        data = artifact.data
        if artifact.metadata.get("format") == "ptx" and not data.endswith(b"\0"):
            data += b"\0"  # the driver reads PTX as a C string
        pushed = dev.enter()
        try:
            self.module = self.driver.load_module(data)
            self.functions = [_Function(dev, self.module, k, ctypes_of) for k in plan.kernels]
        except CudaError as e:
            raise LaunchError(
                f"kernel '{self.name}': the compiled module cannot be loaded on {dev.name}: {e}"
            ) from None
        finally:
            dev.leave(pushed)
        bools = {a.name for a in args if a.kind == "scalar" and a.dtype.is_bool}
        self.gpu = _Gpu(self)
        self.runner = PlanRunner(program, plan, self.gpu, self.functions, policy_for(dev),
                                 lambda name, v: int(bool(v)) if name in bools else v)  # fmt: skip
        self.binder = DeviceBinder(program)
        self.lock = threading.Lock()
        self.warned = False
        self._event: Any = None
        self.memo: dict[tuple, list[Launch]] = {}  # (argument signatures, stream) -> the launches of that call
        self.runner.on_free = self.memo.clear  # remembered launches may name a freed allocation
        self.follows = False  # calls may name producer streams (version-3 array interfaces)
        params = program.contract.params if program.contract is not None else ()
        self.outputs = [k for k, p in enumerate(params) if getattr(p, "role", "in") != "in" and hasattr(p, "ndim")]
        weakref.finalize(self, _release, self.driver, self.module, self.runner)

    @property
    def copies(self) -> dict[int, tuple[int, int]]:
        """Device allocations kept for host arguments (argument index -> (pointer, bytes))."""
        return self.runner.copies

    # -- entry points ------------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        """Host arrays, validated by the core (loop-IR order): copied in, run, copied out, waited for."""
        stream = resolve_stream((), self.dev.ordinal)
        with self.lock:
            self._run(args, stream)

    def fast_entry(self, *args: Any) -> Any:
        """Calls with arrays in GPU memory, checked here and used in place (see the module docstring);
        ``NotImplemented`` for calls without any, which take the core's path.

        A call whose arguments have the signature of a recent one (the same addresses, shapes, dtypes,
        layouts and scalars, on the same stream) replays that call's launches: it was checked then."""
        key, lib = views.call_signature(args)
        if key is not None:
            stream = resolve_stream(args, self.dev.ordinal, lib)
            hit = self.memo.get((key, stream))
            if hit is not None:
                with self.lock:
                    if self.follows:
                        self._follow_producers(args, stream)
                    self._replay(hit, stream)
                outs = self.outputs
                return args[outs[0]] if len(outs) == 1 else tuple(args[i] for i in outs)
        if not any(map(views.on_device, args)):
            return NotImplemented
        bound = self.binder.bind(args, self._view)
        if bound is None:
            return NotImplemented
        launch_args, outputs = bound
        stream = resolve_stream(args, self.dev.ordinal, lib)
        with self.lock:
            self._follow_producers(args, stream)
            launches = self._run(launch_args, stream)
            if launches is not None and key is not None:
                if len(self.memo) >= MEMO_SIZE:
                    self.memo.clear()
                self.memo[(key, stream)] = launches
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _view(self, value: Any) -> DeviceArray | None:
        view = views.view_of(value)
        if view is None:
            return None
        if view is views.interface_view:
            return views.interface_view(value, self.dev.ordinal, self.driver.pointer_device)
        return view(value, self.dev.ordinal)

    def _follow_producers(self, args: Sequence[Any], stream: int) -> None:
        """Make ``stream`` wait for the streams that version-3 array interfaces name (their producers')."""
        for a in args:
            if views.view_of(a) is not views.interface_view:
                continue
            self.follows = True
            s = views.interface_stream(a)
            if s is None or s == stream or (s in (0, 1) and stream in (0, 1)):
                continue
            d = self.driver
            pushed = self.dev.enter()
            try:
                if self._event is None:
                    self._event = d.new_event(timing=False)
                d.record(self._event, d.stream(s))
                d.wait(d.stream(stream), self._event)
            finally:
                self.dev.leave(pushed)

    # -- one call --------------------------------------------------------------------------------------------
    def _run(self, args: Sequence[Any], stream: int) -> list[Launch] | None:
        """One call through the plan runner. Returns the launches made (to be replayed by calls with the same
        signature), or None when host arrays were copied."""
        pushed = self.dev.enter()
        try:
            launches, copied = self.runner.run(args, stream)
        except CudaError as e:
            raise LaunchError(f"kernel '{self.name}' on {self.dev.name}: {e}") from None
        finally:
            self.dev.leave(pushed)
        if copied and not self.warned:
            self._warn_copies(copied)
        return launches

    def _replay(self, launches: list[Launch], stream: int) -> None:
        pushed = self.dev.enter()
        try:
            launch = self.gpu.launch
            for one in launches:
                launch(one, stream)
        finally:
            self.dev.leave(pushed)

    def _warn_copies(self, copied: list[tuple[str, int]]) -> None:
        self.warned = True
        names = ", ".join(n for n, _ in copied)
        total = sum(b for _, b in copied) / 2**20
        warnings.warn(
            f"kernel '{self.name}' on the GPU: host arrays ({names}; {total:.1f} MiB) are copied to the device and "
            f"back on every call, and the call waits for the GPU; pass device arrays (torch CUDA tensors, CuPy "
            f"arrays) to run without copies and asynchronously",
            PerformanceWarning,
            stacklevel=_user_stacklevel(),
        )


class _Gpu:
    """The device protocol of :class:`~pypto.targets.simt.runner.PlanRunner` on the GPU: allocations, copies and
    launches on the call's stream (a stream handle; launches are not waited for)."""

    synchronous = False

    def __init__(self, launcher: CudaLauncher):
        self.dev, self.name = launcher.dev, launcher.name
        self.driver = d = launcher.dev.driver
        self.alloc, self.free = d.alloc, d.free

    def host_buffer(self, array: np.ndarray) -> None:
        return None  # host memory is always copied

    def upload(self, handle: int, array: np.ndarray, stream: int) -> None:
        self.driver.htod(handle, array.ctypes.data, array.nbytes, self.driver.stream(stream))

    def download(self, array: np.ndarray, handle: int, stream: int) -> None:
        self.driver.dtoh(array.ctypes.data, handle, array.nbytes, self.driver.stream(stream))

    def publish(self, array: np.ndarray, handle: int, stream: int) -> None:
        raise AssertionError("CUDA copies host arrays: nothing to publish")

    def synchronize(self, stream: int) -> None:
        self.driver.stream_synchronize(self.driver.stream(stream))

    def launch(self, launch: Launch, stream: int) -> None:
        ready = launch.ready
        if ready is None:  # the first time: the driver's grid, block and shared memory (a replay reuses them)
            f = launch.kernel
            shared = sum(launch.local)
            if shared > f.opted_in:  # more dynamic shared memory than the default 48 KiB: opt in (once per size)
                self.driver.set_function_attribute(f.fn, drv.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
                f.opted_in = shared
            grid = (*launch.blocks, *([1] * (3 - len(launch.blocks))))
            block = (*launch.threads, *([1] * (3 - len(launch.threads))))
            ready = launch.ready = (f, grid, block, shared)
        f, grid, block, shared = ready
        for slot, v in zip(f.slots, launch.values):
            slot[0] = v
        try:
            self.driver.launch(f.fn, grid, block, shared, self.driver.stream(stream), f.params, f.slots)
        except CudaError as e:
            raise LaunchError(self._explain(f.launch, grid, block, shared, e)) from None

    def _explain(self, launch: KernelLaunch, grid: tuple, block: tuple, shared: int, e: Exception) -> str:
        d = self.dev
        return (
            f"kernel '{self.name}': launching '{launch.name}' with grid {grid}, blocks of {block} threads and "
            f"{shared} bytes of dynamic shared memory failed: {e}\n"
            f"device limits ({d.name}, {d.arch}): {d.max_threads} threads per block, {d.shared_per_block} bytes "
            f"of shared memory per block ({d.shared_optin} with opt-in)"
        )


class EventTimer:
    """Times GPU work on one stream with a pair of CUDA events (``pt.benchmark`` on device arrays)."""

    def __init__(self, dev: CudaDevice, stream: int):
        self.dev, self.d = dev, dev.driver
        self.stream = self.d.stream(stream)
        pushed = dev.enter()
        try:
            self.begin, self.end = self.d.new_event(), self.d.new_event()
        finally:
            dev.leave(pushed)
        weakref.finalize(self, _destroy_events, self.d, (self.begin, self.end))

    def start(self) -> None:
        pushed = self.dev.enter()
        try:
            self.d.record(self.begin, self.stream)
        finally:
            self.dev.leave(pushed)

    def stop(self) -> float:
        """Seconds of GPU time since :meth:`start` (waits for the stream to reach this point)."""
        pushed = self.dev.enter()
        try:
            self.d.record(self.end, self.stream)
            self.d.event_synchronize(self.end)
            return self.d.elapsed_ms(self.begin, self.end) / 1e3
        finally:
            self.dev.leave(pushed)


def _destroy_events(d: Any, events: tuple) -> None:
    try:
        for e in events:
            d.destroy_event(e)
    except Exception:  # noqa: BLE001 - at exit the driver may be gone
        pass


def _user_stacklevel() -> int:
    """The stack level of the first frame outside pypto's packages (where a warning should point)."""
    import sys

    level, f = 1, sys._getframe(1)
    while f is not None and f.f_globals.get("__name__", "").split(".")[0] in ("pypto", "pypto_cuda"):
        f = f.f_back
        level += 1
    return level
