"""The array API standard's namespace: ``import pypto.array_api as xp`` (also ``pt.array_api``).

The functions of the Python array API standard (version :data:`__array_api_version__`) with the standard's
signatures, computed by pypto:

* on concrete arrays (NumPy arrays and anything NumPy converts), each call runs one compiled pypto program and
  returns NumPy arrays: the program is a ``@pt.jit`` function of the call's arrays (``dims="symbolic"``: one
  compilation per function, static arguments, ranks and dtypes, whatever the sizes), kept in
  :data:`PROGRAMS`. A REPL user, and code written against the standard, can call it on data directly;
* inside a ``@pt.jit`` function (on traced arrays) the same call adds to the traced graph, as NumPy's spelling
  does: code written for any namespace (``xp = pypto.array_api``) compiles into fused kernels.

Arrays are NumPy's (``xp.asarray`` makes one; dtypes are NumPy's dtype objects, ``xp.float32 ==
np.dtype("float32")``), so results go straight to NumPy, SciPy or plotting code. What the standard has and
pypto cannot compute (functions whose result's shape depends on the data: ``nonzero``, ``unique_*``;
functions no backend implements yet) is listed in :data:`UNSUPPORTED` and raises a
:class:`~pypto.errors.TracingError` naming it, with the nearest supported alternative. Differences from the
standard are those of ``@pt.jit`` (documented in docs/array-api.md, "The array API standard").
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Any

import numpy as np

from pypto.errors import SpecializationWarning, TracingError

__array_api_version__ = "2023.12"

# -- data types and constants -------------------------------------------------------------------------------------
bool = np.dtype(np.bool_)  # noqa: A001 - the standard's names
int8, int16, int32, int64 = (np.dtype(t) for t in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))
float32, float64 = np.dtype("float32"), np.dtype("float64")
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")
e, pi, inf, nan = math.e, math.pi, math.inf, math.nan
newaxis = None

_INTS = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
_FLOATS = (float32, float64)
_COMPLEX = (complex64, complex128)

PROGRAMS: dict[tuple, Any] = {}
"""The compiled programs of eager calls, by (function, static arguments, number of arrays)."""


def _traced(values: Sequence[Any]) -> builtins.bool:
    from pypto.array.graph import Array

    return builtins.any(isinstance(v, Array) for v in values)


def _freeze(value: Any) -> Any:
    """A hashable key for a static argument (axes as tuples, dtypes by name)."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return ("dtype", np.dtype(value).name)
    return value


def _run(name: str, fn: Callable[..., Any], arrays: Sequence[Any], **static: Any) -> Any:
    """``fn(*arrays, **static)``: traced, into the graph; concrete, as a compiled program (cached)."""
    if _traced(arrays):
        return fn(*arrays, **static)
    from pypto.array.function import jit

    key = (name, len(arrays), tuple(sorted((k, _freeze(v)) for k, v in static.items())))
    program = PROGRAMS.get(key)
    if program is None:

        def program_fn(*a: Any) -> Any:
            return fn(*a, **static)

        program_fn.__name__ = program_fn.__qualname__ = f"xp_{name}"
        program = PROGRAMS[key] = jit(program_fn, dims="symbolic")
    with warnings.catch_warnings():  # (a program that depends on a size is compiled per shape: expected here)
        warnings.simplefilter("ignore", SpecializationWarning)
        return program(*[_asarray_arg(a) for a in arrays])


def _asarray_arg(a: Any) -> Any:
    """A call's array argument: numbers pass as numbers (weakly typed), anything else as a C-ordered NumPy array
    (a view that skips elements is copied: expected of an eager call, not worth a warning)."""
    if isinstance(a, builtins.bool | int | float | complex):
        return a
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)  # (ascontiguousarray makes a 0-d array 1-d)


def _unsupported(name: str, why: str, instead: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise TracingError(f"pypto.array_api.{name}: {why}", None, instead)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not supported: {why} ({instead})."
    return fn


# -- creation -----------------------------------------------------------------------------------------------------
def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: builtins.bool | None = None) -> Any:
    _device(device)
    if _traced([obj]):  # (inside @pt.jit: the traced array itself)
        return obj if dtype is None else obj.astype(dtype)
    if copy is False:
        arr = np.asarray(obj, dtype=dtype)
        if arr is not obj and not (isinstance(obj, np.ndarray) and np.shares_memory(arr, obj)):
            raise ValueError("asarray(copy=False): the object cannot be used without a copy")
        return arr
    return np.array(obj, dtype=dtype, copy=True) if copy else np.asarray(obj, dtype=dtype)


def _device(device: Any) -> None:
    if device not in (None, "cpu"):
        raise ValueError(f"device={device!r}: pypto.array_api arrays live in host memory ('cpu')")


def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    return np.zeros(shape, dtype=dtype or float64)


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    return np.ones(shape, dtype=dtype or float64)


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    return np.empty(shape, dtype=dtype or float64)


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    if dtype is None:
        dtype = {builtins.bool: bool, int: int64, float: float64, complex: complex128}.get(type(fill_value))
    return np.full(shape, fill_value, dtype=dtype)


def _like(name: str, value: Any) -> Callable[..., Any]:
    def fn(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
        _device(device)
        if _traced([x]):
            return getattr(np, name)(x) if dtype is None else getattr(np, name)(x).astype(dtype)
        return np.full(np.shape(x), value, dtype=dtype or _np_dtype(x))

    fn.__name__ = fn.__qualname__ = name
    return fn


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", 0)


def full_like(x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    _device(device)
    if _traced([x]):
        return np.full_like(x, fill_value, dtype=dtype)
    return np.full(np.shape(x), fill_value, dtype=dtype or _np_dtype(x))


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    return np.arange(start, stop, step, dtype=dtype)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: builtins.bool = True) -> np.ndarray:  # fmt: skip
    _device(device)
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Any = None) -> np.ndarray:
    _device(device)
    return np.eye(n_rows, n_cols, k, dtype=dtype or float64)


def meshgrid(*arrays: Any, indexing: str = "xy") -> list[Any]:
    return list(np.meshgrid(*arrays, indexing=indexing))


def tril(x: Any, /, *, k: int = 0) -> Any:
    return _run("tril", lambda a, k: np.tril(a, k), [x], k=k)


def triu(x: Any, /, *, k: int = 0) -> Any:
    return _run("triu", lambda a, k: np.triu(a, k), [x], k=k)


def from_dlpack(x: Any, /, *, device: Any = None, copy: builtins.bool | None = None) -> np.ndarray:
    _device(device)
    return np.from_dlpack(x)


# -- data type functions ------------------------------------------------------------------------------------------
def astype(x: Any, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None) -> Any:
    _device(device)
    if _traced([x]):
        return x.astype(dtype)
    if not copy and _np_dtype(x) == np.dtype(dtype):
        return x
    return _run("astype", lambda a, dtype: a.astype(dtype), [x], dtype=np.dtype(dtype))


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    return builtins.bool(np.can_cast(getattr(from_, "dtype", from_), to))


def finfo(type: Any, /) -> Any:  # noqa: A002 - the standard's name
    return np.finfo(getattr(type, "dtype", type))


def iinfo(type: Any, /) -> Any:  # noqa: A002
    return np.iinfo(getattr(type, "dtype", type))


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    dt = np.dtype(dtype)
    if not isinstance(kind, str):
        return dt == np.dtype(kind)
    kinds = {
        "bool": (bool,), "signed integer": _INTS[:4], "unsigned integer": _INTS[4:], "integral": _INTS,
        "real floating": _FLOATS, "complex floating": _COMPLEX, "numeric": (*_INTS, *_FLOATS, *_COMPLEX),
    }  # fmt: skip
    if kind not in kinds:
        raise ValueError(f"isdtype: unknown kind {kind!r} (expected one of {sorted(kinds)})")
    return dt in kinds[kind]


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    return np.result_type(*arrays_and_dtypes)


# -- elementwise --------------------------------------------------------------------------------------------------
def _elementwise(name: str, fn: Callable[..., Any], arity: int) -> Callable[..., Any]:
    if arity == 1:

        def one(x: Any, /) -> Any:
            return _run(name, fn, [x])

        f = one
    else:

        def two(x1: Any, x2: Any, /) -> Any:
            return _run(name, fn, [x1, x2])

        f = two
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The array API's ``{name}``, elementwise."
    return f


def _truth(a: Any) -> Any:
    return a if a.dtype == np.bool_ else a != 0


_UNARY: dict[str, Callable[..., Any]] = {
    "abs": np.absolute, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "bitwise_invert": np.invert,
    "ceil": np.ceil, "conj": np.conjugate, "cos": np.cos, "cosh": np.cosh, "exp": np.exp, "expm1": np.expm1,
    "floor": np.floor, "isfinite": np.isfinite, "isinf": np.isinf, "isnan": np.isnan, "log": np.log,
    "log1p": np.log1p, "log2": np.log2, "log10": np.log10, "negative": np.negative, "positive": np.positive,
    "round": np.rint, "sign": np.sign, "sin": np.sin, "sinh": np.sinh, "square": np.square, "sqrt": np.sqrt,
    "tan": np.tan, "tanh": np.tanh, "trunc": np.trunc, "real": lambda a: a.real, "imag": lambda a: a.imag,
    "signbit": np.signbit, "logical_not": lambda a: np.invert(_truth(a)),
}  # fmt: skip
_BINARY: dict[str, Callable[..., Any]] = {
    "add": np.add, "atan2": np.arctan2, "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift,
    "copysign": np.copysign, "logaddexp": np.logaddexp, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor, "divide": np.divide, "equal": np.equal, "floor_divide": np.floor_divide,
    "greater": np.greater, "greater_equal": np.greater_equal, "hypot": np.hypot, "less": np.less,
    "less_equal": np.less_equal, "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply,
    "not_equal": np.not_equal, "pow": np.power, "remainder": np.remainder, "subtract": np.subtract,
    "logical_and": lambda a, b: np.bitwise_and(_truth(a), _truth(b)),
    "logical_or": lambda a, b: np.bitwise_or(_truth(a), _truth(b)),
    "logical_xor": lambda a, b: np.bitwise_xor(_truth(a), _truth(b)),
}  # fmt: skip
for _name, _fn in _UNARY.items():
    globals()[_name] = _elementwise(_name, _fn, 1)
for _name, _fn in _BINARY.items():
    globals()[_name] = _elementwise(_name, _fn, 2)


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    arrays = [x] + [v for v in (min, max) if v is not None and not isinstance(v, int | float)]
    lo = min if isinstance(min, int | float) or min is None else "array"
    hi = max if isinstance(max, int | float) or max is None else "array"

    def fn(a: Any, *rest: Any, lo: Any, hi: Any) -> Any:
        it = iter(rest)
        low = next(it) if lo == "array" else lo
        high = next(it) if hi == "array" else hi
        return np.clip(a, low, high)

    return _run("clip", fn, arrays, lo=lo, hi=hi)


# -- statistics, utility, searching, sorting ---------------------------------------------------------------------
def _accumulating(x: Any, dtype: Any) -> Any:
    """The standard's accumulation type for sums and products: the default integer for narrower integers."""
    if dtype is not None:
        return np.dtype(dtype)
    dt = _np_dtype(x)
    if dt.kind == "i" and dt.itemsize < 8:
        return int64
    if dt.kind == "u" and dt.itemsize < 8:
        return uint64
    if dt.kind == "b":
        return int64
    return None


def _np_dtype(x: Any) -> np.dtype:
    """The NumPy dtype of a concrete or traced array."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return np.asarray(x).dtype
    return np.dtype(getattr(dt, "numpy", dt))


def _reducer(name: str, np_fn: Callable[..., Any], accumulate: builtins.bool) -> Callable[..., Any]:
    def fn(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False) -> Any:
        acc = _accumulating(x, dtype) if accumulate else None

        def body(a: Any, axis: Any, keepdims: Any, acc: Any) -> Any:
            if acc is None:
                return np_fn(a, axis=axis, keepdims=keepdims)
            return np_fn(a.astype(acc), axis=axis, keepdims=keepdims).astype(acc)  # (16-bit sums add in int32)

        return _run(name, body, [x], axis=_axis(axis), keepdims=builtins.bool(keepdims), acc=acc)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list | tuple) else axis


sum = _reducer("sum", np.sum, True)  # noqa: A001
prod = _reducer("prod", np.prod, True)
max = _reducer("max", np.max, False)  # noqa: A001
min = _reducer("min", np.min, False)  # noqa: A001
mean = _reducer("mean", np.mean, False)


def var(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: builtins.bool = False) -> Any:
    return _run("var", lambda a, axis, ddof, keepdims: np.var(a, axis=axis, ddof=ddof, keepdims=keepdims), [x],
                axis=_axis(axis), ddof=correction, keepdims=builtins.bool(keepdims))  # fmt: skip


def std(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: builtins.bool = False) -> Any:
    return _run("std", lambda a, axis, ddof, keepdims: np.std(a, axis=axis, ddof=ddof, keepdims=keepdims), [x],
                axis=_axis(axis), ddof=correction, keepdims=builtins.bool(keepdims))  # fmt: skip


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: builtins.bool = False) -> Any:  # fmt: skip
    if axis is None:
        if np.ndim(x) != 1:
            raise ValueError("cumulative_sum: axis is required for arrays of more than one dimension")
        axis = 0
    acc = _accumulating(x, dtype)

    def body(a: Any, axis: int, acc: Any, initial: builtins.bool) -> Any:
        s = np.cumsum(a if acc is None else a.astype(acc), axis=axis)
        if not initial:
            return s
        first = tuple(slice(0, 1) if d == axis % s.ndim else slice(None) for d in range(s.ndim))
        return np.concatenate([np.zeros_like(s[first]), s], axis=axis)

    return _run("cumulative_sum", body, [x], axis=axis, acc=acc, initial=builtins.bool(include_initial))


def all(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Any:  # noqa: A001
    return _run("all", lambda a, axis, keepdims: np.all(a, axis=axis, keepdims=keepdims), [x], axis=_axis(axis),
                keepdims=builtins.bool(keepdims))  # fmt: skip


def any(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Any:  # noqa: A001
    return _run("any", lambda a, axis, keepdims: np.any(a, axis=axis, keepdims=keepdims), [x], axis=_axis(axis),
                keepdims=builtins.bool(keepdims))  # fmt: skip


def argmax(x: Any, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Any:
    return _run("argmax", lambda a, axis, keepdims: np.argmax(a, axis=axis, keepdims=keepdims), [x], axis=axis,
                keepdims=builtins.bool(keepdims))  # fmt: skip


def argmin(x: Any, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Any:
    return _run("argmin", lambda a, axis, keepdims: np.argmin(a, axis=axis, keepdims=keepdims), [x], axis=axis,
                keepdims=builtins.bool(keepdims))  # fmt: skip


def where(condition: Any, x1: Any, x2: Any, /) -> Any:
    return _run("where", np.where, [condition, x1, x2])


def sort(x: Any, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Any:
    from pypto.lang.functions import sort as pt_sort

    return _run("sort", lambda a, axis, descending: pt_sort(a, axis=axis, descending=descending), [x], axis=axis,
                descending=builtins.bool(descending))  # fmt: skip


def argsort(x: Any, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Any:
    from pypto.lang.functions import argsort as pt_argsort

    return _run("argsort", lambda a, axis, descending: pt_argsort(a, axis=axis, descending=descending), [x],
                axis=axis, descending=builtins.bool(descending))  # fmt: skip


# -- manipulation, indexing, linear algebra ----------------------------------------------------------------------
def reshape(x: Any, /, shape: Sequence[int], *, copy: builtins.bool | None = None) -> Any:
    return _run("reshape", lambda a, shape: np.reshape(a, shape), [x], shape=tuple(shape))


def permute_dims(x: Any, /, axes: Sequence[int]) -> Any:
    return _run("permute_dims", lambda a, axes: np.transpose(a, axes), [x], axes=tuple(axes))


def matrix_transpose(x: Any, /) -> Any:
    if np.ndim(x) < 2:
        raise ValueError("matrix_transpose: expected an array of at least two dimensions")
    return _run("matrix_transpose", lambda a: np.swapaxes(a, -1, -2), [x])


def expand_dims(x: Any, /, *, axis: int = 0) -> Any:
    return _run("expand_dims", lambda a, axis: np.expand_dims(a, axis), [x], axis=axis)


def squeeze(x: Any, /, axis: Any) -> Any:
    return _run("squeeze", lambda a, axis: np.squeeze(a, axis), [x], axis=_axis(axis))


def flip(x: Any, /, *, axis: Any = None) -> Any:
    return _run("flip", lambda a, axis: np.flip(a, axis), [x], axis=_axis(axis))


def roll(x: Any, /, shift: Any, *, axis: Any = None) -> Any:
    return _run("roll", lambda a, shift, axis: np.roll(a, shift, axis), [x], shift=_axis(shift), axis=_axis(axis))


def broadcast_to(x: Any, /, shape: Sequence[int]) -> Any:
    return _run("broadcast_to", lambda a, shape: np.broadcast_to(a, shape), [x], shape=tuple(shape))


def broadcast_arrays(*arrays: Any) -> list[Any]:
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    arrays = list(arrays)
    if axis is None:
        return _run("concat_flat", lambda *a: np.concatenate([np.ravel(v) for v in a]), arrays)
    return _run("concat", lambda *a, axis: np.concatenate(list(a), axis=axis), arrays, axis=axis)


def stack(arrays: Sequence[Any], /, *, axis: int = 0) -> Any:
    return _run("stack", lambda *a, axis: np.stack(list(a), axis=axis), list(arrays), axis=axis)


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    n = np.shape(x)[axis]
    return tuple(_run("take_one", lambda a, i, axis: np.take(a, i, axis=axis), [x], i=i, axis=axis) for i in range(n))


def moveaxis(x: Any, source: Any, destination: Any, /) -> Any:
    nd = np.ndim(x)
    src = [s % nd for s in (source if isinstance(source, list | tuple) else [source])]
    dst = [d % nd for d in (destination if isinstance(destination, list | tuple) else [destination])]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, order)


def repeat(x: Any, repeats: Any, /, *, axis: int | None = None) -> Any:
    counts = builtins.int(repeats) if np.ndim(repeats) == 0 else tuple(int(r) for r in np.asarray(repeats))
    return _run("repeat", lambda a, repeats, axis: np.repeat(a, repeats, axis), [x], repeats=counts, axis=axis)


def tile(x: Any, repetitions: Sequence[int], /) -> Any:
    return _run("tile", lambda a, reps: np.tile(a, reps), [x], reps=tuple(int(r) for r in repetitions))


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    if sorter is None:
        return _run("searchsorted", lambda a, v, side: np.searchsorted(a, v, side), [x1, x2], side=side)
    return _run(
        "searchsorted_sorter", lambda a, v, s, side: np.searchsorted(a, v, side, s), [x1, x2, sorter], side=side
    )


def take(x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    return _run("take", lambda a, i, axis: np.take(a, i, axis=axis), [x, indices], axis=axis)


def matmul(x1: Any, x2: Any, /) -> Any:
    return _run("matmul", np.matmul, [x1, x2])


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return _run("tensordot", lambda a, b, axes: np.tensordot(a, b, axes), [x1, x2], axes=_axis(axes))


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return _run("vecdot", lambda a, b, axis: np.sum(np.conjugate(a) * b, axis=axis), [x1, x2], axis=axis)


# -- what the standard has and pypto does not compute -------------------------------------------------------------
_DATA_SHAPED = "its result's shape depends on the values (a traced program's shapes are known before it runs)"
UNSUPPORTED: dict[str, str] = {
    "nonzero": "pt.where(mask, x, 0), or the positions with pt.argsort on the mask",
    "unique_all": "pt.sort, then compare neighbours", "unique_counts": "pt.sort, then compare neighbours",
    "unique_inverse": "pt.sort, then compare neighbours", "unique_values": "pt.sort, then compare neighbours",
}  # fmt: skip
"""The standard's functions this namespace does not compute, each with what to write instead."""
DATA_SHAPED = frozenset({"nonzero", "unique_all", "unique_counts", "unique_inverse", "unique_values"})
"""The names of :data:`UNSUPPORTED` whose result's shape depends on the values."""
for _name, _instead in UNSUPPORTED.items():
    _why = _DATA_SHAPED if _name in DATA_SHAPED else "not implemented by pypto yet"
    globals()[_name] = _unsupported(_name, _why, f"instead: {_instead}")


class _Info:
    """``__array_namespace_info__()``: the devices and dtypes of this namespace."""

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": False, "data-dependent shapes": False}

    def default_device(self) -> str:
        return "cpu"

    def devices(self) -> list[str]:
        return ["cpu"]

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        return {"real floating": float64, "complex floating": complex128, "integral": int64, "indexing": int64}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        every = {d.name: d for d in (bool, *_INTS, *_FLOATS, *_COMPLEX)}
        if kind is None:
            return every
        return {n: d for n, d in every.items() if isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    return _Info()


def supported() -> list[str]:
    """The standard's names this namespace computes (for the docs' list)."""
    names = [n for n, v in globals().items() if isinstance(v, FunctionType) and not n.startswith("_")]
    return sorted(n for n in names if n not in UNSUPPORTED and n != "supported")


del _name, _fn, _instead, _why
