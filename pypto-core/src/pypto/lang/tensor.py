"""``pt.Tensor[dtype, shape]``: the annotation that declares a tensor parameter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pypto import dtypes
from pypto.errors import TracingError
from pypto.ir.affine import Affine
from pypto.lang.values import AffineValue, Dim


@dataclass(frozen=True)
class TensorType:
    """A declared tensor parameter type: element type and shape (ints and affine dim expressions)."""

    dtype: dtypes.DType
    shape: tuple[Affine, ...]

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"pt.Tensor[{self.dtype.name}, ({dims}{',' if len(self.shape) == 1 else ''})]"


def _shape_entry(entry: Any, pos: int) -> Affine:
    if isinstance(entry, bool):
        raise TracingError(f"pt.Tensor shape entry {pos} is a bool")
    if isinstance(entry, int):
        if entry < 0:
            raise TracingError(f"pt.Tensor shape entry {pos} is negative ({entry})")
        return Affine.constant(entry)
    if isinstance(entry, str):
        return Dim(entry).affine
    if isinstance(entry, AffineValue):
        a = entry.affine
        if a.has_axes:
            raise TracingError(f"pt.Tensor shape entry {pos} uses an iteration axis; shapes use dims and ints")
        if len(a.dims) > 1:
            raise TracingError(f"pt.Tensor shape entry {pos} ({a}) combines several dims; use at most one per entry")
        return a
    raise TracingError(
        f"pt.Tensor shape entry {pos} is a {type(entry).__name__}",
        hint="use pt.dim('N') for a symbolic size, an int for a static size, or an expression like N + 1",
    )


class Tensor:
    """Annotation for tensor parameters: ``pt.Tensor[float, (M, N)]``.

    The first item is the element type (``float`` = float32, ``int`` = int32, or an explicit
    ``pt.float64`` ...); the second is the shape: a tuple of symbolic dims (``pt.dim``), ints
    (static sizes) and expressions like ``N + 1``.
    """

    def __class_getitem__(cls, params: Any) -> TensorType:
        if not isinstance(params, tuple) or len(params) != 2:
            raise TracingError(
                f"pt.Tensor[...] takes a dtype and a shape, got {params!r}",
                hint="write pt.Tensor[float, (N,)] or pt.Tensor[pt.float64, (M, N)]",
            )
        dt, shape = params
        dtype = dtypes.as_dtype(dt, what="pt.Tensor dtype")
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        return TensorType(dtype, tuple(_shape_entry(s, k) for k, s in enumerate(shape)))

    def __init__(self, *a, **k):
        raise TypeError("pt.Tensor is an annotation: write pt.Tensor[float, (N,)]; allocate arrays with pt.empty")
