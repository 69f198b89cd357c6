"""Aligned array allocation: ``pt.empty``, ``pt.zeros``, ``pt.empty_like``, ``pt.zeros_like``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import ArgumentError


def _shape(shape: Any) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(s) is int and s >= 0 for s in shape):
        return shape
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise ArgumentError(
            f"shape must be an int or a sequence of ints, got {shape!r}",
            param="shape",
            expected="int or tuple of ints",
            got=shape,
        ) from None
    if any(s < 0 for s in out):
        raise ArgumentError(f"shape {out} has a negative size", param="shape", expected="sizes >= 0", got=out)
    return out


def empty(shape: Any, dtype: Any = float, align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary.

    ``dtype`` follows the kernel language: ``float`` is float32, ``int`` is int32.
    """
    if not isinstance(align, int) or align <= 0 or align & (align - 1):
        raise ArgumentError(
            f"align must be a positive power of two, got {align!r}",
            param="align",
            expected="a power of two such as 64",
            got=align,
        )
    dt = dtypes.as_dtype(dtype).numpy
    shp = _shape(shape)
    nbytes = math.prod(shp) * dt.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.__array_interface__["data"][0]) % align
    return raw[offset : offset + nbytes].view(dt).reshape(shp)


def zeros(shape: Any, dtype: Any = float, align: int = 64) -> np.ndarray:
    """Like :func:`empty`, filled with zeros."""
    a = empty(shape, dtype, align)
    a.fill(0)
    return a


def empty_like(a: Any, dtype: Any = None, align: int = 64) -> np.ndarray:
    """An aligned, uninitialised array with ``a``'s shape and (unless given) dtype."""
    arr = np.asarray(a)
    return empty(arr.shape, arr.dtype if dtype is None else dtype, align)


def zeros_like(a: Any, dtype: Any = None, align: int = 64) -> np.ndarray:
    """An aligned array of zeros with ``a``'s shape and (unless given) dtype."""
    arr = np.asarray(a)
    return zeros(arr.shape, arr.dtype if dtype is None else dtype, align)
