"""Arrays in GPU memory as kernel arguments: torch CUDA tensors, CuPy arrays, ``__cuda_array_interface__``
objects and CUDA DLPack capsules, read as :class:`~pypto.targets.simt.args.DeviceArray` without copies.

One *view* function per array type, found once per type and cached: torch tensors and CuPy arrays
are read through their own attributes (cheaper than building the interface dictionary on every
call), anything else through ``__cuda_array_interface__`` (version 2 or 3) or ``__dlpack__``.
Host arrays among device ones (NumPy arrays, CPU tensors) come back as a view with ``handle=None``:
the launcher copies them. The *stream* helpers say which stream the caller's library is using.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto.errors import ArgumentError
from pypto.targets.simt.args import DeviceArray

HOST = "host"  # DeviceArray.memory of a host array (its start is the address)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13

View = Callable[[Any, int], "DeviceArray | None"]


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= s
    return tuple(reversed(out))


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    # extents of 1 may carry any stride (torch and CuPy give them arbitrary ones)
    want = c_strides(shape, itemsize)
    return all(n <= 1 or s == w for n, s, w in zip(shape, strides, want))


def _wrong_device(obj: Any, where: str, ordinal: int) -> ArgumentError:
    return ArgumentError(
        f"an array argument ({type(obj).__name__}) lives on {where}, but pypto's CUDA backend runs on GPU {ordinal}",
        param="device",
        expected=f"arrays on cuda:{ordinal}",
        got=where,
        fix=f"move it with .to('cuda:{ordinal}') / cupy.asarray under that device, or set PYPTO_CUDA_DEVICE",
    )


# -- torch --------------------------------------------------------------------------------------------------------
_TORCH_DTYPES: dict[Any, np.dtype] = {}


def _torch_dtype(t: Any) -> np.dtype:
    if not _TORCH_DTYPES:
        import torch

        for name in ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "bool",
                     "complex64", "complex128"):  # fmt: skip
            _TORCH_DTYPES[getattr(torch, name)] = np.dtype(name)
    dt = _TORCH_DTYPES.get(t.dtype)
    if dt is None:  # bfloat16 and friends: a dtype NumPy lacks, named so the dtype check can say so
        return np.dtype([(str(t.dtype).removeprefix("torch."), "V" + str(t.element_size()))])
    return dt


def torch_view(t: Any, ordinal: int) -> DeviceArray:
    if not t.is_cuda:
        return host_view(t.detach().numpy(), ordinal)
    dev = t.get_device()
    if dev != ordinal:
        raise _wrong_device(t, f"cuda:{dev}", ordinal)
    dtype = _torch_dtype(t)
    shape = tuple(t.shape)
    ptr = t.data_ptr()
    return DeviceArray(ptr, t, dtype, shape, t.is_contiguous(), ordinal, ptr, t.numel() * dtype.itemsize)


# -- CuPy ----------------------------------------------------------------------------------------------------------
def cupy_view(a: Any, ordinal: int) -> DeviceArray:
    dev = a.device.id
    if dev != ordinal:
        raise _wrong_device(a, f"cuda:{dev}", ordinal)
    ptr = a.data.ptr
    return DeviceArray(ptr, a, a.dtype, tuple(a.shape), a.flags.c_contiguous, ordinal, ptr, a.nbytes)


# -- the CUDA array interface ---------------------------------------------------------------------------------
def interface_view(obj: Any, ordinal: int, pointer_device: Callable[[int], int | None] | None = None) -> DeviceArray:
    iface = obj.__cuda_array_interface__
    dtype = _dtype(iface["typestr"])
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    nbytes = math.prod(shape) * dtype.itemsize
    contiguous = nbytes == 0 or _contiguous(shape, None if strides is None else tuple(strides), dtype.itemsize)
    ptr = int(iface["data"][0])
    if ptr and pointer_device is not None:
        dev = pointer_device(ptr)
        if dev is not None and dev != ordinal:
            raise _wrong_device(obj, f"cuda:{dev}", ordinal)
    return DeviceArray(ptr, obj, dtype, shape, contiguous, ordinal, ptr, nbytes)


_DTYPES: dict[str, np.dtype] = {}


def _dtype(typestr: str) -> np.dtype:
    dt = _DTYPES.get(typestr)
    if dt is None:
        dt = _DTYPES[typestr] = np.dtype(typestr)
    return dt


def interface_stream(obj: Any) -> int | None:
    """The stream a version-3 ``__cuda_array_interface__`` says its producer may still be writing on."""
    s = obj.__cuda_array_interface__.get("stream")
    return None if s is None else int(s)


# -- DLPack --------------------------------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool


def dlpack_view(obj: Any, ordinal: int) -> DeviceArray | None:
    """``obj.__dlpack__()`` read in place when it is on a CUDA device (None for other devices)."""
    kind, dev = obj.__dlpack_device__()
    if kind not in (KDL_CUDA, KDL_CUDA_MANAGED):
        return None
    if dev != ordinal:
        raise _wrong_device(obj, f"cuda:{dev}", ordinal)
    try:
        capsule = obj.__dlpack__(stream=None)
    except TypeError:
        capsule = obj.__dlpack__()
    # a DLManagedTensor starts with its DLTensor (a versioned capsule, "dltensor_versioned", is not asked for)
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    code = _DL_KINDS.get(t.dtype.code)
    if code is None or t.dtype.lanes != 1:
        raise ArgumentError(
            f"a DLPack array argument has a data type pypto cannot read (code {t.dtype.code}, {t.dtype.bits} bits)",
            param="dtype", expected="an integer, float, complex or bool dtype", got=f"DLPack code {t.dtype.code}",
            fix="convert the array to a supported dtype first",
        )  # fmt: skip
    dtype = np.dtype(f"{code}{t.dtype.bits // 8}") if code != "b" else np.dtype(bool)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None if not t.strides else tuple(int(t.strides[i]) * dtype.itemsize for i in range(t.ndim))
    ptr = int(t.data or 0) + int(t.byte_offset)
    nbytes = math.prod(shape) * dtype.itemsize
    contiguous = nbytes == 0 or _contiguous(shape, strides, dtype.itemsize)
    return DeviceArray(ptr, obj, dtype, shape, contiguous, ordinal, ptr, nbytes)


# -- host arrays among device ones -------------------------------------------------------------------------------
def host_view(a: Any, ordinal: int) -> DeviceArray:
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    contiguous = arr.flags.c_contiguous
    start = arr.__array_interface__["data"][0] if arr.size else 0
    return DeviceArray(None, arr, arr.dtype, tuple(arr.shape), contiguous, HOST, start, arr.nbytes)


def _is_torch(cls: type) -> bool:
    return cls.__module__.startswith("torch") and any(c.__name__ == "Tensor" for c in cls.__mro__)


def _is_cupy(cls: type) -> bool:
    return cls.__module__.startswith("cupy") and cls.__name__ == "ndarray"


_VIEWS: dict[type, View | None] = {}


def view_for(cls: type) -> View | None:
    """How to read arguments of type ``cls``: a view function, or None for anything not an array."""
    try:
        return _VIEWS[cls]
    except KeyError:
        pass
    view: View | None
    if _is_torch(cls):
        view = torch_view
    elif _is_cupy(cls):
        view = cupy_view
    elif hasattr(cls, "__cuda_array_interface__"):
        view = interface_view
    elif hasattr(cls, "__dlpack_device__") and hasattr(cls, "__dlpack__") and cls is not np.ndarray:
        view = _dlpack_or_host
    elif issubclass(cls, np.ndarray) or hasattr(cls, "__array_interface__"):
        view = host_view
    else:
        view = None
    _VIEWS[cls] = view
    return view


def view_of(obj: Any) -> View | None:
    """:func:`view_for` the object's type, or the array interface an object carries as an attribute of its own."""
    view = view_for(type(obj))
    if view is None and hasattr(obj, "__cuda_array_interface__"):
        return interface_view
    return view


def _dlpack_or_host(obj: Any, ordinal: int) -> DeviceArray | None:
    v = dlpack_view(obj, ordinal)
    return v if v is not None else host_view(obj, ordinal) if obj.__dlpack_device__()[0] == KDL_CPU else None


def on_device(obj: Any) -> bool:
    """Whether ``obj`` is an array in GPU memory (decides whether a call takes the device path)."""
    view = view_of(obj)
    if view is torch_view:
        return obj.is_cuda
    if view is cupy_view or view is interface_view:
        return True
    if view is _dlpack_or_host:
        return obj.__dlpack_device__()[0] in (KDL_CUDA, KDL_CUDA_MANAGED)
    return False


# -- call signatures ----------------------------------------------------------------------------------------
def _torch_signature(t: Any) -> Any:
    # a device address names its GPU (unified addressing), so the device need not be read
    return (t.data_ptr(), t.shape, t.dtype, t.is_contiguous()) if t.is_cuda else None


def _cupy_signature(a: Any) -> Any:
    return (a.data.ptr, a.shape, a.dtype, a.flags.c_contiguous)


def _interface_signature(obj: Any) -> Any:
    i = obj.__cuda_array_interface__
    strides = i.get("strides")
    return (i["data"][0], tuple(i["shape"]), i["typestr"], None if strides is None else tuple(strides))


def _scalar_signature(v: Any) -> Any:
    return (type(v), v)


_SIGNATURES: dict[type, Callable[[Any], Any] | None] = {}


def _signature_for(cls: type, obj: Any) -> Callable[[Any], Any] | None:
    view = view_for(cls)
    if view is torch_view:
        return _torch_signature
    if view is cupy_view:
        return _cupy_signature
    if view is interface_view or (view is None and hasattr(obj, "__cuda_array_interface__")):
        return _interface_signature
    if view is None and issubclass(cls, (int, float, bool, np.generic)):
        return _scalar_signature
    return None


def call_signature(args: Sequence[Any]) -> tuple[tuple | None, str | None]:
    """What decides how a call launches, read cheaply (for each argument its address, shape, dtype and
    layout, or its value), and the library of its first device array (``"torch"``, ``"cupy"`` or None).
    The signature is None when such a call cannot be replayed (host arrays, which are copied; anything else)."""
    out = []
    lib = None
    for a in args:
        cls = type(a)
        try:
            sig = _SIGNATURES[cls]
        except KeyError:
            sig = _SIGNATURES[cls] = _signature_for(cls, a)
        if sig is None:
            return None, None
        v = sig(a)
        if v is None:
            return None, None
        out.append(v)
        if lib is None and sig is not _scalar_signature:
            lib = "torch" if sig is _torch_signature else "cupy" if sig is _cupy_signature else "other"
    return tuple(out), lib


# -- streams --------------------------------------------------------------------------------------------------------
def stream_handle(s: Any) -> int:
    """An integer ``CUstream`` for what ``pt.stream``/``stream=`` was given (see :mod:`pypto.runtime.stream`)."""
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    for attr in ("cuda_stream", "ptr", "handle"):  # torch.cuda.Stream, cupy.cuda.Stream, cuda.core Stream
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return v
    proto = getattr(s, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        if isinstance(v, tuple) and len(v) == 2:
            return int(v[1])
    raise ArgumentError(
        f"stream: cannot read a CUDA stream from {type(s).__name__}",
        param="stream",
        expected="an int handle, torch.cuda.Stream, cupy.cuda.Stream or an object with __cuda_stream__",
        got=type(s).__name__,
        fix="pass the stream object of torch or CuPy, or its integer handle",
    )


def library_of(arrays: Sequence[Any]) -> str | None:
    """``"torch"`` or ``"cupy"``: the library of the first of ``arrays`` in GPU memory that belongs to one."""
    for a in arrays:
        view = view_of(a)
        if view is torch_view and a.is_cuda:
            return "torch"
        if view is cupy_view:
            return "cupy"
    return None


def stream_of_library(lib: str | None, ordinal: int) -> int | None:
    """The current stream of ``"torch"`` or ``"cupy"`` (None for anything else)."""
    if lib == "torch":
        return _torch_stream(ordinal)
    if lib == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    return None


def _torch_stream(ordinal: int) -> int:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch's own compiled kernels use
    if raw is not None:
        return int(raw(ordinal))
    return int(torch.cuda.current_stream(ordinal).cuda_stream)
