"""Arrays in a device's memory (torch CUDA tensors, CuPy arrays, ``__cuda_array_interface__`` and DLPack
objects) as the core sees them: their shape and dtype, and new arrays allocated like them.

The core never reads such arrays; it describes them (``@pt.jit`` keys a program by shape and dtype),
allocates results with the same library on the same device (``torch.empty``, ``cupy.empty``), and
hands them to the kernel, whose backend passes them by pointer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import ArgumentError, DTypeError

_KDL_CPU = 1


def _torch_tensor(a: Any) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "is_cuda") and hasattr(a, "data_ptr")


def is_device_array(a: Any) -> bool:
    """Whether ``a`` is an array in a device's memory (not readable as a NumPy array)."""
    if isinstance(a, np.ndarray):
        return False
    if _torch_tensor(a):
        return a.device.type != "cpu"
    if hasattr(a, "__cuda_array_interface__"):
        return True
    dev = getattr(a, "__dlpack_device__", None)
    if dev is not None and not hasattr(a, "__array_interface__"):
        try:
            return dev()[0] != _KDL_CPU
        except Exception:  # noqa: BLE001 - not a usable DLPack object
            return False
    return False


def to_host(a: Any) -> np.ndarray:
    """A NumPy copy of a device array (a synchronous copy: torch's ``.cpu()``, CuPy's ``.get()``, else the
    array's own ``__array__``)."""
    if _torch_tensor(a):
        return a.detach().cpu().numpy()
    get = getattr(a, "get", None)
    if callable(get):
        return np.asarray(get())
    return np.asarray(a)


def describe(a: Any) -> tuple[tuple[int, ...], np.dtype] | None:
    """``(shape, dtype)`` of a device array, None for anything else."""
    if not is_device_array(a):
        return None
    if _torch_tensor(a):
        name = str(a.dtype).removeprefix("torch.")
        try:
            return tuple(a.shape), dtypes.bfloat16.numpy if name == "bfloat16" else np.dtype(name)
        except TypeError:  # types NumPy does not know
            raise DTypeError(
                f"a torch tensor argument has dtype {name}, which pypto does not support yet",
                param="dtype",
                expected="float16, bfloat16, float32, float64, int32, int64 or bool",
                got=name,
                fix="convert it with .float() (or another supported dtype)",
            ) from None
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None:
        return tuple(int(s) for s in iface["shape"]), np.dtype(iface["typestr"])
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is None or dtype is None:
        return None
    return tuple(int(s) for s in shape), np.dtype(str(dtype))


def probe(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A NumPy stand-in with the shape and dtype (no memory of its size): what tracing reads."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))


def empty_like_device(template: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """A new array of ``shape`` and ``dtype`` on ``template``'s device, made by ``template``'s library."""
    if _torch_tensor(template):
        import torch

        return torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device=template.device)
    mod = type(template).__module__
    if mod.startswith("cupy"):
        import cupy

        with template.device:
            return cupy.empty(shape, dtype)
    raise ArgumentError(
        f"cannot allocate results on the device of a {type(template).__name__}",
        param="out",
        expected="torch CUDA tensors or CuPy arrays as arguments, or out= arrays",
        got=type(template).__name__,
        fix="pass torch or CuPy arrays, or pass the results' arrays with out=",
    )
