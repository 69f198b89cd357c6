"""The array program a ``@pt.jit`` function traces into: a graph of whole-array operations.

Each :class:`Array` is a node: an input, an elementwise operation (with NumPy broadcasting), a
reduction, a contraction (``@``, ``pt.einsum``), a view (transpose, slicing, broadcast, a reshape that
only splits axes) or a general reshape. Nodes know their shape (ints, specialised per call signature;
under ``pt.jit(dims=...)`` a symbolic axis holds a :class:`~pypto.array.sizes.Size`) and dtype (the kernel language's promotion rules, applied by the same code the
``infer_types`` pass runs). :mod:`pypto.array.lower` turns the graph into one kernel.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array.precision import contraction_mode
from pypto.array.sizes import Size
from pypto.dtypes import DType
from pypto.errors import ShapeError, SourceLoc, TracingError
from pypto.ir.nodes import Binary, Cast, Const, Expr, Unary, Where
from pypto.ir.ops import BINARY, BINARY_TABLE, FUNCTIONS, REDUCERS, logaddexp
from pypto.lang.location import user_loc

Scalar = int | float | bool

_scope = threading.local()  # the custom ops being traced, outermost first


@contextlib.contextmanager
def op_scope(name: str) -> Iterator[None]:
    """Nodes made inside belong to the custom op ``name`` (shown in graphs)."""
    stack = getattr(_scope, "names", None)
    if stack is None:
        stack = _scope.names = []
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


def _current_op() -> str | None:
    stack = getattr(_scope, "names", None)
    return "/".join(stack) if stack else None


_BINARY = {o.name: o.symbol or f"pt.{o.name}" for o in BINARY_TABLE}  # how show_graph names an operation


def _placeholder(dt: DType) -> Expr:
    return Const(False if dt.is_bool else 0, weak=False, dtype=dt)


def _typeof(e: Expr) -> DType:
    """The dtype the kernel language gives ``e`` (operands are typed placeholders or weak constants)."""
    from pypto.passes.infer_types import _Typer

    try:
        return _Typer(None).visit(e).dtype  # type: ignore[arg-type]
    except TracingError as err:  # raised again at the user's line
        raise TracingError(err.bare_message, user_loc(), err.hint) from None


def _operand(x: Any, what: str) -> Array | Scalar:
    if isinstance(x, Array):
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, Size):
        return int(x)  # the value (recorded: the program is compiled per shape)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, numbers.Complex):
        return complex(x)
    if isinstance(x, np.ndarray) or hasattr(x, "__array_interface__"):
        captures = _captures.get()
        if captures is not None:  # a NumPy array from the function's closure or globals: an input it reads
            return captures.add(x, what)
        raise TracingError(
            f"{what}: a NumPy array in an array expression outside a @pt.jit function's trace",
            user_loc(),
            "use it inside a @pt.jit function, or pass it as an argument of one",
        )
    if getattr(type(x), "_pt_undefined", False):  # a variable an if on a traced value left without a value
        x._fail()
    raise TracingError(
        f"{what}: cannot use a {type(x).__name__} in an array expression",
        user_loc(),
        "array expressions combine the jit function's arrays and Python numbers",
    )


class Captures:
    """The NumPy arrays a traced function reads from outside it (its closure, its module's globals): each an input
    of the program, read by reference at every call (an array changed in place is seen; another array bound to
    the same name later is not: the program holds the one it was traced with)."""

    def __init__(self, taken: set[str]):
        self.taken = taken  # the program's names so far (its arguments'): a captured array's name avoids them
        self.arrays: list[np.ndarray] = []
        self.nodes: list[Array] = []
        self._by_id: dict[int, Array] = {}

    def add(self, x: Any, what: str) -> Array:
        hit = self._by_id.get(id(x))
        if hit is not None:
            return hit
        arr = np.asarray(x)
        dt = dtypes.from_numpy(arr.dtype)
        if dt is None:
            raise TracingError(f"{what}: a captured NumPy array of dtype {arr.dtype}, which pypto does not take",
                               user_loc(), "convert it (.astype(np.float32)) or pass it as an argument")  # fmt: skip
        name = f"captured{len(self.nodes)}"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        node = input_array(name, arr.shape, dt)
        self._by_id[id(x)] = node
        self.arrays.append(x)  # (the object itself: kept alive, read again at each call)
        self.nodes.append(node)
        return node


_captures: ContextVar[Captures | None] = ContextVar("pypto_captures", default=None)


def captured(x: Any, what: str) -> Array | None:
    """``x`` (a NumPy array or a list of numbers) as an input of the function being traced; None outside a trace."""
    c = _captures.get()
    if c is None:
        return None
    return c.add(np.asarray(x) if isinstance(x, list) else x, what)


@contextlib.contextmanager
def capturing(taken: set[str]) -> Iterator[Captures]:
    """While a function is traced: the NumPy arrays it reads from outside become inputs (:class:`Captures`)."""
    c = Captures(taken)
    token = _captures.set(c)
    try:
        yield c
    finally:
        _captures.reset(token)


def _as_expr(x: Array | Scalar) -> Expr:
    if isinstance(x, Array):
        return _placeholder(x.dtype)
    return Const(x, weak=True)


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "operands") -> tuple[int, ...]:
    """NumPy's broadcasting of ``shapes`` (a :class:`ShapeError` naming them when they do not)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeError(
                f"{what}: shapes {' and '.join(str(s) for s in shapes)} do not broadcast (axis {k - rank}: "
                f"sizes {sorted(sizes)})",
                param=what,
                expected="equal sizes, or 1, along every axis counted from the right",
                got=shapes,
                fix="reshape or slice one operand, or add an axis with x[:, None]",
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def normalize_axes(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence, negatives counted from the end) as sorted axes of an ``ndim`` array."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out: list[int] = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not -ndim <= int(a) < max(ndim, 1):
            raise ShapeError(
                f"{what}: axis {a!r} is out of range for an array of {ndim} dimension(s)",
                param="axis",
                expected=f"an int in [{-ndim}, {ndim})",
                got=a,
            )
        a = int(a) % max(ndim, 1)
        if a in out:
            raise ShapeError(f"{what}: axis {a} is repeated", param="axis", expected="distinct axes", got=axis)
        out.append(a)
    return tuple(sorted(out))


NUMPY_FUNCTIONS: dict[Any, Any] = {}
"""NumPy's functions (not ufuncs) on traced arrays, by the NumPy function: filled by
:mod:`pypto.array.numpy_api` when it loads (as :data:`STRUCTURAL`)."""

UFUNC_METHODS: dict[tuple[str, str], Any] = {}
"""The ufunc methods a traced array takes (``np.maximum.accumulate``), by (ufunc name, method): filled by
:mod:`pypto.array.numpy_api` when it loads."""


def _ufuncs() -> dict[str, Any]:
    """NumPy's ufuncs on traced arrays, by name: the op table's math functions and binary operators whose NumPy
    meaning is a ufunc, and the operators Python spells with a symbol."""
    out: dict[str, Any] = {f.numpy.__name__: (lambda n: lambda x: unary(n, x))(f.name) for f in FUNCTIONS
                           if isinstance(f.numpy, np.ufunc)}  # fmt: skip
    out.update({o.numpy.__name__: (lambda n: lambda a, b: binary(n, a, b))(o.name) for o in BINARY_TABLE
                if isinstance(o.numpy, np.ufunc)})  # fmt: skip
    out.update(
        absolute=lambda x: unary("abs", x),
        negative=lambda x: unary("neg", x),
        positive=lambda x: x,
        conjugate=lambda x: unary("conj", x),
        power=lambda a, b: power(a, b),
        square=lambda x: x * x,
        matmul=lambda a, b: STRUCTURAL["matmul"](a, b),
        invert=lambda x: unary("invert", x),
        sign=lambda x: where(binary("gt", x, 0), 1, where(binary("lt", x, 0), -1, x)),
        isnan=lambda x: binary("ne", x, x),
        isinf=lambda x: binary("eq", unary("abs", x), math.inf),
        isfinite=lambda x: binary("lt", unary("abs", x), math.inf),
        signbit=lambda x: binary("lt", binary("copysign", 1.0, x), 0),
        logaddexp=lambda a, b: logaddexp(
            a, b, lambda a, b: binary("maximum", a, b), where, lambda x: unary("log1p", x), lambda x: unary("exp", x)
        ),
        left_shift=lambda a, b: shift("lshift", a, b),
        right_shift=lambda a, b: shift("rshift", a, b),
        fmax=lambda a, b: _ignoring_nan("maximum", a, b),
        fmin=lambda a, b: _ignoring_nan("minimum", a, b),
        heaviside=lambda x, h0: where(
            binary("lt", x, 0), 0, where(binary("gt", x, 0), 1, where(binary("eq", x, 0), h0, x))
        ),
        deg2rad=lambda x: binary("mul", x, math.pi / 180),
        radians=lambda x: binary("mul", x, math.pi / 180),
        rad2deg=lambda x: binary("mul", x, 180 / math.pi),
        degrees=lambda x: binary("mul", x, 180 / math.pi),
        reciprocal=lambda x: binary("div", 1, _inexact(x, "reciprocal", "1 // x, or x.astype(float)")),
        fabs=lambda x: unary("abs", _inexact(x, "fabs", "np.abs(x)")),
        float_power=lambda a, b: power(cast(a, _float_power_type(a, b)), b),
        logaddexp2=lambda a, b: logaddexp(
            a,
            b,
            lambda a, b: binary("maximum", a, b),
            where,
            lambda x: binary("mul", unary("log1p", x), 1 / math.log(2)),
            lambda x: unary("exp2", x),
        ),
        fmod=_fmod,
        logical_and=lambda a, b: binary("and", _truth(a), _truth(b)),
        logical_or=lambda a, b: binary("or", _truth(a), _truth(b)),
        logical_xor=lambda a, b: binary("xor", _truth(a), _truth(b)),
        logical_not=lambda x: unary("invert", _truth(x)),
        divmod=lambda a, b: (binary("floordiv", a, b), binary("mod", a, b)),
    )
    return out


def _ignoring_nan(op: str, a: Any, b: Any) -> Array:
    """``np.fmax`` / ``np.fmin``: the maximum (minimum) of the operands that are not NaN (NaN when both are)."""
    m = binary(op, a, b)
    return where(binary("ne", b, b), a, where(binary("ne", a, a), b, m))


def _inexact(x: Any, fname: str, fix: str) -> Any:
    if isinstance(x, Array) and not x.dtype.is_inexact:
        raise TracingError(f"numpy.{fname} of {x.dtype} values: NumPy computes it in the integer type", user_loc(),
                           f"write {fix}")  # fmt: skip
    return x


def _float_power_type(a: Any, b: Any) -> DType:
    """``np.float_power`` computes in float64 (complex128 for complex operands)."""
    complex_ = any(isinstance(x, Array) and x.dtype.is_complex or isinstance(x, complex) for x in (a, b))
    return dtypes.complex128 if complex_ else dtypes.float64


def _truth(x: Any) -> Any:
    x = _operand(x, "a logical function")
    if isinstance(x, Array):
        return x if x.dtype.is_bool else binary("ne", x, 0)
    return bool(x)


def _fmod(a: Any, b: Any) -> Array:
    """``np.fmod``: C's remainder, with the sign of ``a``. Floats: the op table's ``fmod``; integers: the floor
    remainder moved to ``a``'s sign (0 for a zero divisor, as NumPy)."""
    a, b = _operand(a, "numpy.fmod"), _operand(b, "numpy.fmod")
    if not any(isinstance(x, Array) and x.dtype.is_inexact or isinstance(x, float) for x in (a, b)):
        r = binary("mod", a, b)
        moved = binary("and", binary("ne", r, 0), binary("ne", binary("lt", a, 0), binary("lt", b, 0)))
        return where(moved, binary("sub", r, b), r)
    return binary("fmod", a, b)


STRUCTURAL: dict[str, Any] = {}
"""The operations behind :class:`Array`'s ``[]``, ``@``, ``transpose`` and ``reshape``, which are built from this
module's nodes in :mod:`pypto.array.views` (``getitem``, ``transpose``, ``reshape``) and :mod:`pypto.array.ops`
(``matmul``): those modules add them here when they load, and the package (``pypto/array/__init__.py``) loads
them before any of its modules is used."""


class UnrewrittenUpdate(TracingError):
    """``x[idx] = v`` reached a traced array's ``__setitem__``: code the front end did not rewrite into a
    functional update (a function the jit function calls: the trace runs again with its calls rewritten)."""


class Array:
    """An array inside a ``@pt.jit`` function: a node of the traced program.

    It has a ``shape`` and a ``dtype`` and supports NumPy's operators, methods and broadcasting;
    its values exist only when the compiled program runs.
    """

    __slots__ = ("op", "args", "attrs", "shape", "dtype", "loc", "name", "weak", "argument", "value", "__weakref__")
    __pypto_array__ = True

    # -- NumPy's functions on it (pypto.array.numpy_api) ----------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None)
        bound = UFUNC_METHODS.get((ufunc.__name__, method)) if out in (None, ()) else None
        if bound is not None:
            return bound(*inputs, **kwargs)
        fn = _UFUNCS.get(ufunc.__name__) if method == "__call__" and not kwargs and out in (None, ()) else None
        if fn is None:
            what = f"numpy.{ufunc.__name__}" + (f".{method}" if method != "__call__" else "")
            extra = f" with {', '.join(sorted({*kwargs, *(['out'] if out not in (None, ()) else [])}))}" if (
                kwargs or out not in (None, ())) else ""  # fmt: skip
            raise TracingError(f"{what}{extra} is not supported on a traced array", user_loc(),
                               "use the operators and the pt.* functions (or the NumPy call without out=/where=)")  # fmt: skip
        return fn(*inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        fn = NUMPY_FUNCTIONS.get(func)
        if fn is None:
            module = getattr(func, "__module__", None) or "numpy"
            module = "numpy" if module.startswith("numpy._core") or module == "numpy.core" else module
            raise TracingError(
                f"{module}.{getattr(func, '__name__', func)} is not supported on a traced array inside @pt.jit",
                user_loc(),
                "use the array's methods and the pt.* functions (see the array API chapter for what NumPy "
                "functions are taken)",
            )
        return fn(*args, **kwargs)

    def __round__(self, ndigits: int | None = None) -> Array:
        return NUMPY_FUNCTIONS[np.round](self, ndigits or 0)

    def __init__(self, op: str, args: tuple, attrs: Any, shape: tuple[int, ...], dtype: DType,
                 loc: SourceLoc | None = None, name: str | None = None):  # fmt: skip
        self.op = op
        self.args = args
        self.attrs = attrs
        self.shape = tuple(s if type(s) is Size else int(s) for s in shape)
        self.dtype = dtype
        self.loc = loc if loc is not None else user_loc()
        self.name = name if name is not None else _current_op()  # the custom op that made it, for graphs
        # a runtime scalar argument of a jit function (or arithmetic on such values and Python numbers): typed
        # like a Python number beside arrays (``x * lr`` keeps x's dtype), its value known while tracing for the
        # uses that need one (``range(n)``, a shape), which make the program specific to it
        self.weak = False
        self.argument: int | None = None  # the jit argument a runtime scalar input is
        self.value: Any = None  # its value in the call being traced

    # -- NumPy-like attributes ------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def T(self) -> Array:  # noqa: N802 - NumPy's spelling
        return self.transpose()

    @property
    def mT(self) -> Array:  # noqa: N802 - NumPy's spelling
        """The last two axes swapped (a stack of matrices transposed)."""
        return NUMPY_FUNCTIONS[np.swapaxes](self, -1, -2)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<pt.jit array {self.op} {self.dtype.name}{list(self.shape)}>"

    def __bool__(self):
        v = scalar_value(self)
        if v is not None:
            return bool(v)
        raise TracingError(
            "the truth value of an array inside @pt.jit is not known while tracing",
            user_loc(),
            "use pt.where(cond, a, b) instead of if/else on array values",
        )

    def __float__(self):
        v = scalar_value(self)
        if v is not None:
            return float(v)
        raise TracingError("float() of an array inside @pt.jit: its value is not known while tracing", user_loc())

    def __int__(self):
        v = scalar_value(self)
        if v is not None:
            return int(v)
        raise TracingError("int() of an array inside @pt.jit: its value is not known while tracing", user_loc())

    def __index__(self):
        v = scalar_value(self)
        if v is not None and isinstance(v, (numbers.Integral, np.integer, bool, np.bool_)):
            return int(v)
        if v is not None:
            raise TypeError(f"a {self.dtype.name} runtime scalar cannot be used as an integer index")
        raise TracingError("an array inside @pt.jit used as an integer: its value is not known while tracing",
                           user_loc(), "use a Python int (or an int argument) where a size or index is needed")  # fmt: skip

    def __iter__(self):
        raise TracingError(
            "iterating over an array inside @pt.jit", user_loc(), "index it (x[k]) or use whole-array operations"
        )

    # -- operators --------------------------------------------------------------------------------------
    def __add__(self, o):
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        return binary("mul", self, o)

    def __rmul__(self, o):
        return binary("mul", o, self)

    def __truediv__(self, o):
        return binary("div", self, o)

    def __rtruediv__(self, o):
        return binary("div", o, self)

    def __floordiv__(self, o):
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return binary("floordiv", o, self)

    def __mod__(self, o):
        return binary("mod", self, o)

    def __rmod__(self, o):
        return binary("mod", o, self)

    def __pow__(self, o):
        return power(self, o)

    def __rpow__(self, o):
        return power(o, self)

    def __matmul__(self, o):
        return STRUCTURAL["matmul"](self, o)

    def __rmatmul__(self, o):
        return STRUCTURAL["matmul"](o, self)

    def __lt__(self, o):
        return binary("lt", self, o)

    def __le__(self, o):
        return binary("le", self, o)

    def __gt__(self, o):
        return binary("gt", self, o)

    def __ge__(self, o):
        return binary("ge", self, o)

    def __eq__(self, o):  # type: ignore[override]
        return binary("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return binary("ne", self, o)

    __hash__ = object.__hash__

    def __and__(self, o):
        return binary("and", self, o)

    def __rand__(self, o):
        return binary("and", o, self)

    def __or__(self, o):
        return binary("or", self, o)

    def __ror__(self, o):
        return binary("or", o, self)

    def __xor__(self, o):
        return binary("xor", self, o)

    def __rxor__(self, o):
        return binary("xor", o, self)

    def __lshift__(self, o):
        return shift("lshift", self, o)

    def __rlshift__(self, o):
        return shift("lshift", o, self)

    def __rshift__(self, o):
        return shift("rshift", self, o)

    def __rrshift__(self, o):
        return shift("rshift", o, self)

    def __neg__(self):
        return unary("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return unary("abs", self)

    def __invert__(self):
        return unary("invert", self)

    def __getitem__(self, key):
        return STRUCTURAL["getitem"](self, key)

    def __setitem__(self, key, value):
        raise UnrewrittenUpdate(
            "x[idx] = v on a traced array where it could not be rewritten into an update: the @pt.jit "
            "function's body and the functions of your code it calls are rewritten, on their local variables "
            "(not attributes, elements of containers or closure variables), where their source can be read",
            user_loc(),
            "write x = x.at[idx].set(v) (or .add(v), .multiply(v) ...): a traced array is a value, and an update "
            "makes a new one",
        )

    @staticmethod
    def _pt_setitem(target, key, value, op):
        """``target[key] = value`` (``op`` None) or ``target[key] op= value`` as a functional update (the
        rewritten code of a jit function binds the result to the variable); ``target`` is this class's, or a
        NumPy array updated with traced values."""
        return STRUCTURAL["setitem"](target, key, value, op)

    # -- methods ----------------------------------------------------------------------------------------
    def sum(self, axis=None, keepdims: bool = False) -> Array:
        return reduce("sum", self, axis, keepdims)

    def prod(self, axis=None, keepdims: bool = False) -> Array:
        return reduce("prod", self, axis, keepdims)

    def max(self, axis=None, keepdims: bool = False) -> Array:
        return reduce("max", self, axis, keepdims)

    def min(self, axis=None, keepdims: bool = False) -> Array:
        return reduce("min", self, axis, keepdims)

    def mean(self, axis=None, keepdims: bool = False) -> Array:
        return reduce("mean", self, axis, keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False) -> Array:
        return NUMPY_FUNCTIONS[np.var](self, axis, dtype, out, ddof, keepdims)

    def std(self, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False) -> Array:
        return NUMPY_FUNCTIONS[np.std](self, axis, dtype, out, ddof, keepdims)

    def any(self, axis=None, out=None, keepdims: bool = False) -> Array:
        return NUMPY_FUNCTIONS[np.any](self, axis, out, keepdims)

    def all(self, axis=None, out=None, keepdims: bool = False) -> Array:
        return NUMPY_FUNCTIONS[np.all](self, axis, out, keepdims)

    def clip(self, min=None, max=None, out=None) -> Array:  # noqa: A002 - NumPy's names
        return NUMPY_FUNCTIONS[np.clip](self, min, max, out)

    def round(self, decimals: int = 0, out=None) -> Array:
        return NUMPY_FUNCTIONS[np.round](self, decimals, out)

    def squeeze(self, axis=None) -> Array:
        return NUMPY_FUNCTIONS[np.squeeze](self, axis)

    def ravel(self, order: str = "C") -> Array:
        return NUMPY_FUNCTIONS[np.ravel](self, order)

    def flatten(self, order: str = "C") -> Array:
        return NUMPY_FUNCTIONS[np.ravel](self, order)

    def repeat(self, repeats, axis=None) -> Array:
        return NUMPY_FUNCTIONS[np.repeat](self, repeats, axis)

    def searchsorted(self, v, side="left", sorter=None) -> Array:
        return NUMPY_FUNCTIONS[np.searchsorted](self, v, side, sorter)

    def cumsum(self, axis=None) -> Array:
        return STRUCTURAL["scan"]("sum", self, axis, False, "cumsum()")

    def cumprod(self, axis=None) -> Array:
        return STRUCTURAL["scan"]("prod", self, axis, False, "cumprod()")

    def argmax(self, axis=None, keepdims: bool = False) -> Array:
        return STRUCTURAL["arg_reduce"]("max", self, axis, keepdims, "argmax()")

    def argmin(self, axis=None, keepdims: bool = False) -> Array:
        return STRUCTURAL["arg_reduce"]("min", self, axis, keepdims, "argmin()")

    def argsort(self, axis=-1, kind=None, order=None, *, stable=None) -> Array:
        return NUMPY_FUNCTIONS[np.argsort](self, axis, kind, order, stable=stable)

    def dot(self, b, out=None) -> Array:
        return NUMPY_FUNCTIONS[np.dot](self, b, out)

    def swapaxes(self, axis1: int, axis2: int) -> Array:
        return NUMPY_FUNCTIONS[np.swapaxes](self, axis1, axis2)

    def take(self, indices, axis=None, out=None, mode=None) -> Array:
        return NUMPY_FUNCTIONS[np.take](self, indices, axis, out, mode)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None) -> Array:
        return NUMPY_FUNCTIONS[np.trace](self, offset, axis1, axis2, dtype, out)

    def transpose(self, *axes) -> Array:
        return STRUCTURAL["transpose"](
            self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes or None
        )

    def reshape(self, *shape) -> Array:
        return STRUCTURAL["reshape"](
            self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        )

    @property
    def at(self) -> Any:
        """Functional updates as in JAX: ``x.at[idx].add(v)`` (a scatter-add), ``x.at[idx].get()``."""
        return STRUCTURAL["at"](self)

    def astype(self, dtype) -> Array:
        return cast(self, dtype)

    def copy(self, order: str = "C") -> Array:
        """The same array: a traced array is a value (updates make new ones), so a copy costs nothing."""
        return self

    @property
    def real(self) -> Array:
        """The real part (``pt.real``)."""
        return unary("real", self)

    @property
    def imag(self) -> Array:
        """The imaginary part (``pt.imag``)."""
        return unary("imag", self)

    def conj(self) -> Array:
        """The complex conjugate (``pt.conj``)."""
        return unary("conj", self)

    conjugate = conj


def input_array(name: str, shape: tuple[int, ...], dtype: DType) -> Array:
    return Array("input", (), name, shape, dtype, loc=None)


class Scalars:
    """The runtime scalars of one jit trace: the argument positions whose value the trace needed (their program
    is then specific to the value)."""

    def __init__(self) -> None:
        self.needed: set[int] = set()


_scalars: ContextVar[Scalars | None] = ContextVar("pypto_runtime_scalars", default=None)


@contextlib.contextmanager
def runtime_scalars() -> Iterator[Scalars]:
    token = _scalars.set(Scalars())
    try:
        yield _scalars.get()  # type: ignore[misc]
    finally:
        _scalars.reset(token)


def scalar_input(name: str, position: int, value: Any, dtype: DType, weak: bool) -> Array:
    """A runtime scalar argument: a 0-d input; ``weak`` for a Python number (it takes its partner's type)."""
    node = input_array(name, (), dtype)
    node.weak, node.argument, node.value = weak, position, value
    return node


def scalar_value(x: Array) -> Any:
    """The value of a runtime scalar, or of arithmetic on runtime scalars and numbers, in the call being traced
    (its arguments are then recorded as needed: the program is specific to them); None for anything else."""
    if x.shape != () or _scalars.get() is None:
        return None
    needed: set[int] = set()
    v = _evaluate(x, needed)
    if v is None:
        return None
    _scalars.get().needed.update(needed)  # type: ignore[union-attr]
    return v.item() if isinstance(v, np.generic) else v


def _evaluate(x: Any, needed: set[int]) -> Any:
    if not isinstance(x, Array):
        return x
    if x.argument is not None:
        needed.add(x.argument)
        return x.value
    if x.shape != () or x.op not in ("binary", "unary", "cast", "where"):
        return None
    args = [_evaluate(a, needed) for a in x.args]
    if any(a is None for a in args):
        return None
    with np.errstate(all="ignore"):
        if x.op == "binary":
            r = BINARY[x.attrs].numpy(*args)
        elif x.op == "unary":
            fn = FUNCTIONS.get(x.attrs)
            simple = {"neg": np.negative, "abs": np.absolute, "not": np.logical_not, "invert": np.invert}
            if fn is None and x.attrs not in simple:
                return None
            r = fn.numpy(args[0]) if fn is not None else simple[x.attrs](args[0])
        elif x.op == "where":
            r = args[1] if args[0] else args[2]
        else:
            r = args[0]
    return np.asarray(r).astype(x.dtype.numpy)[()]


def _unweak(x: Array, other: DType) -> Array:
    """A weak scalar beside an array of type ``other``: converted to the type a Python number would take there."""
    number = 0j if x.dtype.is_complex else 0.0 if x.dtype.is_float else False if x.dtype.is_bool else 0
    t = _typeof(Binary("add", _placeholder(other), Const(number, weak=True)))
    return cast(x, t)


def _weak(x: Any) -> bool:
    return isinstance(x, Array) and x.weak


def _typed(*xs: Any) -> tuple[list[Any], bool]:
    """The operands with their weak scalars converted to the first typed array's type; and whether every
    operand was weak or a number (the result is then weak too)."""
    typed = next((x for x in xs if isinstance(x, Array) and not x.weak), None)
    if typed is None:
        return list(xs), any(_weak(x) for x in xs)
    return [_unweak(x, typed.dtype) if _weak(x) else x for x in xs], False


def unary(op: str, x: Any) -> Array:
    x = _operand(x, f"pt.{op}")
    if not isinstance(x, Array):
        raise TracingError(f"pt.{op}: expected an array, got {x!r}", user_loc(), f"use math.{op} for Python numbers")
    out = Array("unary", (x,), op, x.shape, _typeof(Unary(op, _placeholder(x.dtype))))
    out.weak = x.weak
    return out


def scatter_add(base: Array, g: Array, indices: tuple, attrs: tuple) -> Array:
    """``base`` with ``g`` added at the elements a gather (``attrs``: its positions and layout) read: a gather's
    adjoint. Lowered to scatter statements into the buffer ``base`` is stored in, after the kernel's stores."""
    return Array("scatter_add", (base, g, *indices), attrs, base.shape, base.dtype)


def binary(op: str, a: Any, b: Any) -> Array:
    sym = _BINARY.get(op, op)
    a, b = _operand(a, f"'{sym}'"), _operand(b, f"'{sym}'")
    if op == "add" and isinstance(a, Array) and isinstance(b, Array) and "scatter_add" in (a.op, b.op):
        # gradients summed into a scatter-add: the other term joins its base (the scatter then adds on top of it)
        if a.op == "scatter_add" and a.shape == b.shape and a.dtype == b.dtype:
            return scatter_add(binary("add", a.args[0], b), a.args[1], a.args[2:], a.attrs)
        if b.op == "scatter_add" and a.shape == b.shape and a.dtype == b.dtype:
            return scatter_add(binary("add", a, b.args[0]), b.args[1], b.args[2:], b.attrs)
    (a, b), weak = _typed(a, b)
    shapes = [x.shape for x in (a, b) if isinstance(x, Array)]
    shape = broadcast_shapes(*shapes, what=f"the operands of '{sym}'")
    out = Array("binary", (a, b), op, shape, _typeof(Binary(op, _as_expr(a), _as_expr(b))))
    out.weak = weak
    return out


def shift(op: str, a: Any, b: Any) -> Array:
    """``a << b`` (``op="lshift"``) or ``a >> b`` (``"rshift"``) of integers: the op table's shifts, NumPy's results
    for every count (a negative one, or one not below the type's width, gives 0, or -1 shifting a negative value
    right)."""
    sym = BINARY[op].symbol
    for x in (a, b):
        if isinstance(x, (bool, np.bool_)) or not (
            isinstance(x, (int, np.integer)) or (isinstance(x, Array) and x.dtype.is_int)
        ):
            got = x.dtype if isinstance(x, Array) else type(x).__name__
            raise TracingError(f"'{sym}' shifts integers, got an operand of type {got}", user_loc(),
                               "convert it: x.astype(pt.int64)")  # fmt: skip
    return binary(op, a, b)


def where(cond: Any, a: Any, b: Any) -> Array:
    cond, a, b = _operand(cond, "pt.where"), _operand(a, "pt.where"), _operand(b, "pt.where")
    (a, b), weak = _typed(a, b)
    shape = broadcast_shapes(*(x.shape for x in (cond, a, b) if isinstance(x, Array)), what="the operands of pt.where")
    out = Array("where", (cond, a, b), None, shape, _typeof(Where(_as_expr(cond), _as_expr(a), _as_expr(b))))
    out.weak = weak and (not isinstance(cond, Array) or cond.weak)
    return out


def cast(x: Any, dtype: Any) -> Array:
    x = _operand(x, "pt.cast")
    dt = dtypes.as_dtype(dtype, what="dtype")
    if not isinstance(x, Array):
        raise TracingError("pt.cast: expected an array", user_loc())
    if x.dtype == dt:
        return x
    return Array("cast", (x,), dt, x.shape, _typeof(Cast(_placeholder(x.dtype), dtype=dt)))


def stored(x: Array) -> Array:
    """``x`` stored once where it is first read (no gradient flows through the mark): a step of an iteration
    (a factorisation's elimination) reads the previous step's value from memory instead of recomputing every
    step so far inside its own expressions."""
    return Array("stop", (x,), "store", x.shape, x.dtype)


def laid_out(x: Array) -> Array:
    """``x`` stored once where it is first read, in its own layout, the gradient passing through unchanged: the
    transposed weight a batched product reads (``x @ w.T`` with ``x`` of several batches), which the product
    then packs per batch from contiguous rows instead of gathering a column of ``w`` per point each time."""
    return Array("stop", (x,), "keep", x.shape, x.dtype)


def stop_gradient(x: Any) -> Any:
    """``x`` itself, through which :func:`pypto.grad` carries no gradient (as ``jax.lax.stop_gradient``)."""
    if not isinstance(x, Array):
        return x
    return Array("stop", (x,), None, x.shape, x.dtype)


def power(base: Any, exponent: Any) -> Array:
    """``base ** exponent``: integer exponents by multiplication, 0.5 as a square root, others through exp and log."""
    base, exponent = _operand(base, "'**'"), _operand(exponent, "'**'")
    if _weak(exponent) and isinstance(base, Array) and not base.weak:  # a runtime number: the program is
        value = scalar_value(exponent)  # specific to the exponent (x ** 2 is a multiplication)
        exponent = exponent if value is None else value
    if isinstance(exponent, Array):
        if isinstance(base, Array) or not isinstance(base, (int, float)) or base <= 0:
            raise TracingError(
                "'**' with an array exponent takes a positive Python number as the base",
                user_loc(),
                "write pt.exp(y * pt.log(x)) for x > 0 explicitly",
            )
        return unary("exp", binary("mul", exponent, math.log(base)))
    assert isinstance(base, Array)
    if isinstance(exponent, float) and exponent.is_integer():
        exponent = int(exponent)
    if isinstance(exponent, bool):
        exponent = int(exponent)
    if isinstance(exponent, int):
        if exponent == 0:
            return where(binary("eq", base, base) | True, 1, base)  # 1 even for nan and inf, in base's type
        result: Array | None = None
        sq, n = base, abs(exponent)
        while n:
            if n & 1:
                result = sq if result is None else binary("mul", result, sq)
            n >>= 1
            if n:
                sq = binary("mul", sq, sq)
        assert result is not None
        return binary("div", 1.0, result) if exponent < 0 else result
    if exponent == 0.5:
        return unary("sqrt", base)
    if exponent == -0.5:
        return unary("rsqrt", base)
    # x ** y = exp(y log x): NaN for x < 0 (as NumPy for a non-integer exponent), 0 for x = 0 and y > 0. The
    # logarithm reads 1 where x = 0, so the gradient there is the selected constant's (0), not 0 * inf
    zero = binary("eq", base, 0)
    p = unary("exp", binary("mul", unary("log", where(zero, 1.0, base)), exponent))
    return where(zero, 0.0 if exponent > 0 else math.inf, p)


def reduce(op: str, x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    x = _operand(x, f"{op}()")
    if not isinstance(x, Array):
        raise TracingError(f"{op}(): expected an array", user_loc())
    if not isinstance(keepdims, bool):
        raise TracingError(f"{op}(): keepdims must be True or False, got {keepdims!r}", user_loc())
    axes = normalize_axes(axis, x.ndim, f"{op}()")
    if not x.ndim:
        return x
    shape = tuple(1 if k in axes else s for k, s in enumerate(x.shape)) if keepdims else tuple(
        s for k, s in enumerate(x.shape) if k not in axes)  # fmt: skip
    base = "sum" if op == "mean" else op
    dt = x.dtype
    if dt.is_bool:  # the op table says what a reduction of booleans gives (a count) or that it is refused
        counted = REDUCERS[base].on_bool
        if counted is None:
            raise TracingError(f"{op}() of a boolean array", user_loc(), "convert first: x.astype(pt.int32)")
        dt = dtypes.as_dtype(counted)
    if dt.is_complex and base != "sum":
        raise TracingError(
            f"{op}() of a complex array (complex numbers have no order, and a product of them is not supported yet)",
            user_loc(),
            "reduce the real parts (x.real), the magnitudes (pt.abs(x)) or the logarithms (pt.log(x)) instead",
        )
    if op == "mean" and not dt.is_inexact:
        dt = dtypes.DEFAULT_FLOAT
    if base in ("sum", "prod") and dt.is_narrow_int:  # the array API standard's rule: the default integer's width
        dt = dtypes.uint32 if dt.is_unsigned else dtypes.DEFAULT_INT
    if any(x.shape[a] == 0 for a in axes) and op in ("max", "min"):
        raise ShapeError(
            f"{op}() over an axis of size 0 has no identity",
            param="axis",
            expected="axes of size >= 1",
            got=axes,
        )
    return Array("reduce", (x,), (op, axes, keepdims), shape, dt)


def contract(operands: Sequence[Array], subscripts: Sequence[str], out: str) -> Array:
    """``sum over the letters not in out of the product of operands[k][subscripts[k]]`` (einsum's meaning)."""
    sizes: dict[str, int] = {}
    for x, sub in zip(operands, subscripts):
        for letter, n in zip(sub, x.shape):
            if sizes.setdefault(letter, n) != n:
                if n == 1 or sizes[letter] == 1:  # broadcast, as np.einsum allows
                    sizes[letter] = max(n, sizes[letter])
                    continue
                raise ShapeError(
                    f"pt.einsum: index '{letter}' has size {sizes[letter]} in one operand and {n} in another",
                    param="operands",
                    expected=f"equal sizes for '{letter}'",
                    got=tuple(o.shape for o in operands),
                )
    e: Expr | None = None
    for x in operands:
        e = _placeholder(x.dtype) if e is None else Binary("mul", e, _placeholder(x.dtype))
    assert e is not None
    dt = _typeof(e)
    if dt.is_bool:
        dt = dtypes.int32
    shape = tuple(sizes[c] for c in out)
    # the precision mode applies to float32 contractions (pypto.array.precision)
    mode = contraction_mode() if dt == dtypes.float32 else "float32"
    attrs = (tuple(subscripts), out, tuple(sorted(sizes.items())), mode)
    return Array("contract", tuple(operands), attrs, shape, dt)


def substitute(outputs: Sequence[Array], mapping: dict[int, Array]) -> list[Array]:
    """``outputs`` rebuilt with the nodes whose ids ``mapping`` holds replaced by its arrays (every node that
    depends on one of them a new node with new operands; the others the same objects)."""
    new: dict[int, Array] = dict(mapping)
    for node in walk(list(outputs), frozenset(mapping)):
        if id(node) in new:
            continue
        args = tuple(new.get(id(a), a) if isinstance(a, Array) else a for a in node.args)
        if all(a is b for a, b in zip(args, node.args)):
            new[id(node)] = node
            continue
        copy = Array(node.op, args, node.attrs, node.shape, node.dtype, node.loc, node.name)
        copy.weak, copy.argument, copy.value = node.weak, node.argument, node.value
        new[id(node)] = copy
    return [new[id(o)] for o in outputs]


def walk(outputs: Sequence[Array], leaves: frozenset[int] = frozenset()) -> list[Array]:
    """Every node the outputs depend on, each once, operands before their users (not those of ``leaves``: ids
    of nodes whose operands are not entered)."""
    order: list[Array] = []
    seen: set[int] = set()
    stack: list[tuple[Array, bool]] = [(o, False) for o in reversed(outputs)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if id(node) in leaves:
            continue
        for a in reversed(node.args):
            if isinstance(a, Array) and id(a) not in seen:
                stack.append((a, False))
    return order


_UFUNCS = _ufuncs()
