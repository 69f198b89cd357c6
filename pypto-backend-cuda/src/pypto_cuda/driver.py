"""The CUDA driver API through cffi: the few dozen entry points the backend calls, from ``libcuda.so.1``.

The backend talks to the driver directly (ABI mode: nothing is compiled on the user's machine)
instead of through a binding package: the driver ships with every NVIDIA installation, a launch
costs one foreign call on prepared argument slots (a few microseconds from Python), and the
package installs from a wheel everywhere, GPU or not. The declarations below are the driver's
own (``cuda.h``), with enumerations passed as ``int`` and the ``_v2`` entry points that ``cuda.h``
maps the plain names to; ``tests/test_cuda.py`` checks them against the toolkit's header.

Every call goes through :meth:`Driver.check`, which turns a non-zero ``CUresult`` into a
:class:`CudaError` naming the call and the driver's own name and text for the code.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

DRIVER_LIBRARY = "libcuda.so.1"

CDEF = """
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuGetErrorString(CUresult error, const char **pStr);

CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);

CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);

CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction hfunc);
CUresult cuFuncSetAttribute(CUfunction hfunc, int attrib, int value);

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuPointerGetAttribute(void *data, int attribute, CUdeviceptr ptr);

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CUresult cuStreamDestroy_v2(CUstream hStream);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
CUresult cuEventDestroy_v2(CUevent hEvent);
CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
CUresult cuEventSynchronize(CUevent hEvent);
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
"""

# enumerations of cuda.h used here (their values are part of the driver's ABI)
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8
ATTR_CLOCK_RATE = 13
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_MEMORY_CLOCK_RATE = 36
ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37
ATTR_L2_CACHE_SIZE = 38
ATTR_MAX_THREADS_PER_MULTIPROCESSOR = 39
ATTR_COMPUTE_CAPABILITY_MAJOR = 75
ATTR_COMPUTE_CAPABILITY_MINOR = 76
ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
FUNC_MAX_THREADS_PER_BLOCK = 0
FUNC_SHARED_SIZE_BYTES = 1
FUNC_NUM_REGS = 4
FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
POINTER_MEMORY_TYPE = 2
POINTER_DEVICE_ORDINAL = 9
MEMORYTYPE_DEVICE = 2
STREAM_LEGACY = 1  # CU_STREAM_LEGACY: the default stream, synchronising with every blocking stream
STREAM_PER_THREAD = 2
STREAM_NON_BLOCKING = 1
EVENT_DISABLE_TIMING = 2
ERROR_NOT_INITIALIZED = 3
ERROR_NO_DEVICE = 100


class CudaError(RuntimeError):
    """A driver call failed: ``code`` is the ``CUresult``, the message names the call and the error."""

    def __init__(self, code: int, name: str, text: str, call: str):
        super().__init__(f"{call} failed: {name} ({code}): {text}")
        self.code, self.name, self.call = code, name, call


class Driver:
    """``libcuda`` loaded with cffi: ``lib`` (the raw functions), ``ffi``, and checked helpers."""

    def __init__(self, path: str = DRIVER_LIBRARY):
        from cffi import FFI

        self.ffi = FFI()
        self.ffi.cdef(CDEF)
        # RTLD_NODELETE: the driver's threads must not outlive a library that was unloaded at exit
        self.lib = self.ffi.dlopen(
            path, self.ffi.RTLD_NOW | self.ffi.RTLD_GLOBAL | getattr(self.ffi, "RTLD_NODELETE", 0)
        )
        self.NULL = self.ffi.NULL
        self._streams: dict[int, Any] = {}
        self._local = threading.local()

    # -- results -------------------------------------------------------------------------------------------
    def error_text(self, code: int) -> tuple[str, str]:
        ffi, p = self.ffi, self.ffi.new("const char **")
        name = ffi.string(p[0]).decode() if self.lib.cuGetErrorName(code, p) == 0 and p[0] else f"CUDA error {code}"
        text = ffi.string(p[0]).decode() if self.lib.cuGetErrorString(code, p) == 0 and p[0] else "unknown error"
        return name, text

    def check(self, code: int, call: str) -> None:
        if code:
            raise CudaError(code, *self.error_text(code), call)

    # -- handles -------------------------------------------------------------------------------------------------
    def stream(self, handle: int) -> Any:
        """The ``CUstream`` for an integer handle (0 and 1: the legacy default stream; 2: per-thread)."""
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self.ffi.cast("CUstream", handle)
        return s

    # -- devices --------------------------------------------------------------------------------------------------
    def init(self) -> None:
        self.check(self.lib.cuInit(0), "cuInit")

    def version(self) -> int:
        v = self.ffi.new("int *")
        self.check(self.lib.cuDriverGetVersion(v), "cuDriverGetVersion")
        return int(v[0])

    def device_count(self) -> int:
        n = self.ffi.new("int *")
        self.check(self.lib.cuDeviceGetCount(n), "cuDeviceGetCount")
        return int(n[0])

    def device(self, ordinal: int) -> int:
        d = self.ffi.new("CUdevice *")
        self.check(self.lib.cuDeviceGet(d, ordinal), "cuDeviceGet")
        return int(d[0])

    def device_name(self, dev: int) -> str:
        buf = self.ffi.new("char[256]")
        self.check(self.lib.cuDeviceGetName(buf, 256, dev), "cuDeviceGetName")
        return self.ffi.string(buf).decode(errors="replace")

    def attribute(self, dev: int, attr: int) -> int:
        v = self.ffi.new("int *")
        self.check(self.lib.cuDeviceGetAttribute(v, attr, dev), "cuDeviceGetAttribute")
        return int(v[0])

    def total_memory(self, dev: int) -> int:
        v = self.ffi.new("size_t *")
        self.check(self.lib.cuDeviceTotalMem_v2(v, dev), "cuDeviceTotalMem")
        return int(v[0])

    def primary_context(self, dev: int) -> Any:
        c = self.ffi.new("CUcontext *")
        self.check(self.lib.cuDevicePrimaryCtxRetain(c, dev), "cuDevicePrimaryCtxRetain")
        return c[0]

    def current_context(self) -> Any:
        c = getattr(self._local, "ctx", None)
        if c is None:  # one out-parameter per thread: this is called on every launch
            c = self._local.ctx = self.ffi.new("CUcontext *")
        self.check(self.lib.cuCtxGetCurrent(c), "cuCtxGetCurrent")
        return c[0]

    def push(self, ctx: Any) -> None:
        self.check(self.lib.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")

    def pop(self) -> None:
        c = self.ffi.new("CUcontext *")
        self.check(self.lib.cuCtxPopCurrent_v2(c), "cuCtxPopCurrent")

    def synchronize(self) -> None:
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def memory_info(self) -> tuple[int, int]:
        free, total = self.ffi.new("size_t *"), self.ffi.new("size_t *")
        self.check(self.lib.cuMemGetInfo_v2(free, total), "cuMemGetInfo")
        return int(free[0]), int(total[0])

    # -- modules and functions ----------------------------------------------------------------------------
    def load_module(self, image: bytes) -> Any:
        m = self.ffi.new("CUmodule *")
        self.check(self.lib.cuModuleLoadData(m, self.ffi.from_buffer(image)), "cuModuleLoadData")
        return m[0]

    def unload_module(self, module: Any) -> None:
        self.lib.cuModuleUnload(module)  # at exit the context may already be gone: nothing to report

    def function(self, module: Any, name: str) -> Any:
        f = self.ffi.new("CUfunction *")
        self.check(self.lib.cuModuleGetFunction(f, module, name.encode()), f"cuModuleGetFunction({name!r})")
        return f[0]

    def function_attribute(self, fn: Any, attr: int) -> int:
        v = self.ffi.new("int *")
        self.check(self.lib.cuFuncGetAttribute(v, attr, fn), "cuFuncGetAttribute")
        return int(v[0])

    def set_function_attribute(self, fn: Any, attr: int, value: int) -> None:
        self.check(self.lib.cuFuncSetAttribute(fn, attr, value), "cuFuncSetAttribute")

    # -- memory ---------------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        p = self.ffi.new("CUdeviceptr *")
        self.check(self.lib.cuMemAlloc_v2(p, max(int(nbytes), 1)), f"cuMemAlloc({nbytes} bytes)")
        return int(p[0])

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)  # freed when a launcher is collected, possibly at exit: no report

    def htod(self, dst: int, host: Any, nbytes: int, stream: Any) -> None:
        src = self.ffi.cast("void *", host)
        self.check(self.lib.cuMemcpyHtoDAsync_v2(dst, src, nbytes, stream), "cuMemcpyHtoDAsync")

    def dtoh(self, host: Any, src: int, nbytes: int, stream: Any) -> None:
        dst = self.ffi.cast("void *", host)
        self.check(self.lib.cuMemcpyDtoHAsync_v2(dst, src, nbytes, stream), "cuMemcpyDtoHAsync")

    def memset(self, dst: int, byte: int, nbytes: int, stream: Any) -> None:
        self.check(self.lib.cuMemsetD8Async(dst, byte, nbytes, stream), "cuMemsetD8Async")

    def pointer_device(self, ptr: int) -> int | None:
        """The ordinal of the device ``ptr`` was allocated on, or None when the driver does not know it."""
        v = self.ffi.new("int *")
        if self.lib.cuPointerGetAttribute(v, POINTER_DEVICE_ORDINAL, ptr) != 0:
            return None
        return int(v[0])

    def launch(
        self, fn: Any, grid: tuple, block: tuple, shared: int, stream: Any, params: Any, slots: Any = None
    ) -> None:
        """``cuLaunchKernel``; ``params`` points at the argument ``slots`` (kept alive by the caller)."""
        rc = self.lib.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, stream,
                                     params, self.NULL)  # fmt: skip
        if rc:
            self.check(rc, "cuLaunchKernel")

    # -- streams and events --------------------------------------------------------------------------------
    def stream_synchronize(self, stream: Any) -> None:
        self.check(self.lib.cuStreamSynchronize(stream), "cuStreamSynchronize")

    def new_stream(self, flags: int = STREAM_NON_BLOCKING) -> int:
        s = self.ffi.new("CUstream *")
        self.check(self.lib.cuStreamCreate(s, flags), "cuStreamCreate")
        return int(self.ffi.cast("uintptr_t", s[0]))

    def destroy_stream(self, handle: int) -> None:
        self.lib.cuStreamDestroy_v2(self.stream(handle))
        self._streams.pop(handle, None)

    def new_event(self, timing: bool = True) -> Any:
        e = self.ffi.new("CUevent *")
        self.check(self.lib.cuEventCreate(e, 0 if timing else EVENT_DISABLE_TIMING), "cuEventCreate")
        return e[0]

    def destroy_event(self, event: Any) -> None:
        self.lib.cuEventDestroy_v2(event)

    def record(self, event: Any, stream: Any) -> None:
        self.check(self.lib.cuEventRecord(event, stream), "cuEventRecord")

    def wait(self, stream: Any, event: Any) -> None:
        self.check(self.lib.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")

    def event_synchronize(self, event: Any) -> None:
        self.check(self.lib.cuEventSynchronize(event), "cuEventSynchronize")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        v = self.ffi.new("float *")
        self.check(self.lib.cuEventElapsedTime(v, start, end), "cuEventElapsedTime")
        return float(v[0])


def driver_problem(path: str = DRIVER_LIBRARY) -> str | None:
    """Why the CUDA driver library cannot be loaded, or None when it can."""
    try:
        ctypes.CDLL(path)
    except OSError as e:
        return f"no CUDA driver: {path} not found ({e})"
    return None
