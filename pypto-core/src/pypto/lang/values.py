"""The objects a kernel body computes with while it is traced.

``pt.dim`` and ``pt.axis`` give affine symbols (usable as indices and as integer values); indexing
a tensor parameter gives an :class:`ExprProxy`; arithmetic on proxies builds IR nodes. Anything
that would need a concrete value (``if``, ``while``, ``bool()``, ``float()``) raises
:class:`~pypto.errors.TracingError` pointing at the user's line.
"""

from __future__ import annotations

import keyword
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto import dtypes
from pypto.errors import TracingError
from pypto.ir.affine import Affine
from pypto.ir.nodes import Binary, Const, Expr, Gather, Index, Load, Unary, Where
from pypto.lang.location import user_loc

if TYPE_CHECKING:
    from pypto.lang.tracer import Tracer

_CONTROL_FLOW_HINT = (
    "a traced value has no Python truth value: use pt.where(cond, a, b) to choose between values, "
    "and pt.maximum / pt.minimum for clamps"
)


def _accumulation(value: Expr, target: Gather) -> tuple[str | None, Expr]:
    """How a store of ``value`` into ``target``'s element accumulates: ``y[k] += v`` is ("add", v), ``y[k] -= v``
    ("add", -v), ``y[k] = pt.maximum(y[k], v)`` ("max", v); (None, value) for anything else."""
    if isinstance(value, Binary):
        a, b = value.a, value.b
        if value.op == "add" and (a == target or b == target):
            return "add", b if a == target else a
        if value.op == "sub" and a == target:
            return "add", Unary("neg", b, loc=value.loc)
        if value.op in ("maximum", "minimum") and (a == target or b == target):
            return value.op[:3], b if a == target else a
    return None, value


def _no_concrete(what: str) -> TracingError:
    return TracingError(
        f"{what} needs a concrete value, but kernel values are symbolic while tracing", user_loc(3), _CONTROL_FLOW_HINT
    )


NUMPY_UFUNCS: dict[str, Any] = {}
"""NumPy ufuncs that traced values accept (``np.exp(x[i])``), by name: the pt function each stands for.
Filled by :mod:`pypto.lang.functions`, which the tracer imports, so it is complete before any kernel runs."""


def to_node(value: Any, *, what: str = "operand") -> Expr:
    """Turn anything a kernel expression may contain into an IR expression."""
    if isinstance(value, ExprProxy):
        return value.node
    if isinstance(value, AffineValue):
        return Index(value.affine, loc=user_loc())
    if isinstance(value, (bool, np.bool_)):
        return Const(bool(value), weak=isinstance(value, bool), dtype=None if isinstance(value, bool) else dtypes.bool_)
    if isinstance(value, np.generic):
        dt = dtypes.from_numpy(value.dtype)
        if dt is None:
            raise TracingError(
                f"{what}: NumPy scalar of type {value.dtype} is not supported",
                user_loc(),
                "use a Python number or a float32/float64/int32/int64 scalar",
            )
        return Const(value.item(), weak=False, dtype=dt, loc=user_loc())
    if isinstance(value, numbers.Integral):
        return Const(int(value), weak=True, loc=user_loc())
    if isinstance(value, numbers.Real):
        return Const(float(value), weak=True, loc=user_loc())
    if isinstance(value, numbers.Complex):
        return Const(complex(value), weak=True, loc=user_loc())
    if isinstance(value, TensorProxy):
        raise TracingError(
            f"tensor '{value.name}' is used as a value without an index",
            user_loc(),
            f"index it with axes, e.g. {value.name}[{', '.join(f'i{k}' for k in range(value.ndim)) or '0'}]",
        )
    if getattr(type(value), "_pt_undefined", False):  # a variable an if on a traced value left without a value
        value._fail()
    raise TracingError(
        f"{what}: cannot use a {type(value).__name__} in a kernel expression",
        user_loc(),
        "kernel expressions combine indexed tensors, axes, dims, scalar parameters and Python numbers",
    )


def _binary(op: str, a: Any, b: Any) -> ExprProxy:
    return ExprProxy(Binary(op, to_node(a), to_node(b), loc=user_loc()))


def _rbinary(op: str, a: Any, b: Any) -> ExprProxy:
    return ExprProxy(Binary(op, to_node(b), to_node(a), loc=user_loc()))


def power(base: Any, exponent: Any) -> ExprProxy:
    """``base ** exponent`` for an integer exponent, built from multiplications."""
    if isinstance(exponent, float) and exponent.is_integer():
        exponent = int(exponent)
    if not isinstance(exponent, int) or isinstance(exponent, bool):
        hint = "x ** 0.5 is pt.sqrt(x); a general power is pt.exp(y * pt.log(x))"
        raise TracingError(f"'**' takes an integer exponent in kernels, got {exponent!r}", user_loc(), hint)
    x = to_node(base)
    loc = user_loc()
    if exponent == 0:  # x ** 0 is 1 even for nan and inf; the weak 1 takes x's type
        return ExprProxy(Where(Const(True, weak=True), Const(1, weak=True), x, loc=loc))
    n = abs(exponent)
    result: Expr | None = None
    sq = x
    while n:
        if n & 1:
            result = sq if result is None else Binary("mul", result, sq, loc=loc)
        n >>= 1
        if n:
            sq = Binary("mul", sq, sq, loc=loc)
    assert result is not None
    if exponent < 0:
        result = Binary("div", Const(1.0, weak=True), result, loc=loc)
    return ExprProxy(result)


class _Operators:
    """Arithmetic, comparison and logic operators shared by every traced value."""

    __slots__ = ()

    def __add__(self, o):
        return _binary("add", self, o)

    def __radd__(self, o):
        return _rbinary("add", self, o)

    def __sub__(self, o):
        return _binary("sub", self, o)

    def __rsub__(self, o):
        return _rbinary("sub", self, o)

    def __mul__(self, o):
        return _binary("mul", self, o)

    def __rmul__(self, o):
        return _rbinary("mul", self, o)

    def __truediv__(self, o):
        return _binary("div", self, o)

    def __rtruediv__(self, o):
        return _rbinary("div", self, o)

    def __floordiv__(self, o):
        return _binary("floordiv", self, o)

    def __rfloordiv__(self, o):
        return _rbinary("floordiv", self, o)

    def __mod__(self, o):
        return _binary("mod", self, o)

    def __rmod__(self, o):
        return _rbinary("mod", self, o)

    def __lshift__(self, o):
        return _binary("lshift", self, o)

    def __rlshift__(self, o):
        return _rbinary("lshift", self, o)

    def __rshift__(self, o):
        return _binary("rshift", self, o)

    def __rrshift__(self, o):
        return _rbinary("rshift", self, o)

    def __and__(self, o):
        return _binary("and", self, o)

    def __rand__(self, o):
        return _rbinary("and", self, o)

    def __or__(self, o):
        return _binary("or", self, o)

    def __ror__(self, o):
        return _rbinary("or", self, o)

    def __xor__(self, o):
        return _binary("xor", self, o)

    def __rxor__(self, o):
        return _rbinary("xor", self, o)

    def __lt__(self, o):
        return _binary("lt", self, o)

    def __le__(self, o):
        return _binary("le", self, o)

    def __gt__(self, o):
        return _binary("gt", self, o)

    def __ge__(self, o):
        return _binary("ge", self, o)

    def __pow__(self, o):
        return power(self, o)

    def __rpow__(self, o):
        raise TracingError("a traced value cannot be an exponent", user_loc(), "write pt.exp(x * pt.log(base))")

    def __neg__(self):
        return ExprProxy(Unary("neg", to_node(self), loc=user_loc()))

    def __pos__(self):
        return self if isinstance(self, ExprProxy) else ExprProxy(to_node(self))

    def __abs__(self):
        return ExprProxy(Unary("abs", to_node(self), loc=user_loc()))

    def __invert__(self):
        return ExprProxy(Unary("invert", to_node(self), loc=user_loc()))

    def __bool__(self):
        raise _no_concrete("Python control flow ('if', 'while', 'and', 'or', 'not') on a traced value")

    def __float__(self):
        raise TracingError(
            "float() needs a concrete value; math.* functions do too",
            user_loc(2),
            "use the pt.* functions (pt.exp, pt.sqrt, ...) inside kernels",
        )

    def __int__(self):
        raise TracingError("int() needs a concrete value", user_loc(2), "use pt.cast(x, pt.int32)")

    def __index__(self):
        raise _no_concrete("using a traced value as a Python integer (range(), list index, ...)")

    def __iter__(self):
        raise _no_concrete("iterating over a traced value")

    def __len__(self):
        raise _no_concrete("len() of a traced value")

    def __round__(self, ndigits=None):
        """``round(x)``: ``pt.round`` (halves to even, as NumPy's; Python's own round of a float does the same)."""
        rint = NUMPY_UFUNCS["rint"]
        if not ndigits:
            return rint(self)
        scale = 10.0**ndigits
        return rint(self * scale) / scale

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = NUMPY_UFUNCS.get(ufunc.__name__)
        if fn is None or method != "__call__" or kwargs:
            raise TracingError(
                f"numpy.{ufunc.__name__} cannot be applied to a traced value",
                user_loc(),
                "use the pt.* functions and operators inside kernels",
            )
        return fn(*inputs)


class ExprProxy(_Operators):
    """A traced value: wraps an IR expression; operators build new expressions."""

    __slots__ = ("node",)
    __hash__ = None  # type: ignore[assignment]  # '==' builds an expression, so no hashing

    def __init__(self, node: Expr):
        self.node = node

    def __eq__(self, o):  # type: ignore[override]
        return _binary("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _binary("ne", self, o)

    @property
    def real(self) -> ExprProxy:
        """The real part (``pt.real``)."""
        return ExprProxy(Unary("real", self.node, loc=user_loc()))

    @property
    def imag(self) -> ExprProxy:
        """The imaginary part (``pt.imag``)."""
        return ExprProxy(Unary("imag", self.node, loc=user_loc()))

    def conj(self) -> ExprProxy:
        """The complex conjugate (``pt.conj``)."""
        return ExprProxy(Unary("conj", self.node, loc=user_loc()))

    conjugate = conj

    def __getitem__(self, idx):
        raise TracingError(
            "only tensor parameters can be indexed",
            user_loc(),
            "index the parameter directly: x[i] rather than (x[i] + 1)[j]",
        )

    def __repr__(self) -> str:
        return f"<traced value {type(self.node).__name__}>"


class AffineValue(_Operators):
    """An integer affine expression over axes and dims; also usable as an (int) value."""

    __slots__ = ("_affine",)

    def __init__(self, affine: Affine):
        self._affine = affine

    @property
    def affine(self) -> Affine:
        return self._affine

    def _affine_op(self, o: Any, sign: int, reflected: bool = False):
        other = _as_affine(o)
        if other is None:
            return None
        mine = self._affine
        if reflected:
            mine, other = other, mine
        return IndexExpr(mine + other if sign > 0 else mine - other)

    def __add__(self, o):
        r = self._affine_op(o, 1)
        return r if r is not None else _binary("add", self, o)

    def __radd__(self, o):
        r = self._affine_op(o, 1, True)
        return r if r is not None else _rbinary("add", self, o)

    def __sub__(self, o):
        r = self._affine_op(o, -1)
        return r if r is not None else _binary("sub", self, o)

    def __rsub__(self, o):
        r = self._affine_op(o, -1, True)
        return r if r is not None else _rbinary("sub", self, o)

    def __mul__(self, o):
        if isinstance(o, int) and not isinstance(o, bool):
            return IndexExpr(self._affine.scale(o))
        if isinstance(o, AffineValue) and o.affine.is_const:
            return IndexExpr(self._affine.scale(o.affine.const))
        if isinstance(o, AffineValue) and self._affine.is_const:
            return IndexExpr(o.affine.scale(self._affine.const))
        return _binary("mul", self, o)

    def __rmul__(self, o):
        if isinstance(o, int) and not isinstance(o, bool):
            return IndexExpr(self._affine.scale(o))
        return _rbinary("mul", self, o)

    def __neg__(self):
        return IndexExpr(self._affine.scale(-1))

    def __eq__(self, o):  # type: ignore[override]
        return _binary("eq", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _binary("ne", self, o)

    def __hash__(self) -> int:
        return hash(self._affine)


def _as_affine(o: Any) -> Affine | None:
    if isinstance(o, AffineValue):
        return o.affine
    if isinstance(o, int) and not isinstance(o, bool):
        return Affine.constant(o)
    if isinstance(o, np.integer):
        return Affine.constant(int(o))
    return None


class IndexExpr(AffineValue):
    """An affine combination such as ``i + 1`` or ``N - 1 - i``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<index {self._affine}>"


class Axis(AffineValue):
    """Iteration axis ``k`` of a kernel (``pt.axis(k)``)."""

    __slots__ = ()

    def __init__(self, index: int):
        super().__init__(Affine.axis(index))

    @property
    def index(self) -> int:
        return self._affine.axes[0][0]

    def __repr__(self) -> str:
        return f"pt.axis({self.index})"

    def __hash__(self) -> int:
        return hash(("axis", self.index))


_RESERVED = frozenset(keyword.kwlist) | {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "half", "kernel", "global", "local", "private", "constant",
}  # fmt: skip


class Dim(AffineValue):
    """A symbolic dimension (``pt.dim("N")``): a size known only when the kernel is called."""

    __slots__ = ()

    def __init__(self, name: str):
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise TracingError(f"pt.dim({name!r}): a dimension name must be a Python identifier not starting with '_'")
        if name in _RESERVED:
            raise TracingError(f"pt.dim({name!r}): '{name}' is a reserved word in generated code; choose another name")
        super().__init__(Affine.dim(name))

    @property
    def name(self) -> str:
        return self._affine.dims[0][0]

    def __eq__(self, o):  # type: ignore[override]
        # Dims compare by name (they key shapes and signatures); use pt.where(...) for value tests.
        return isinstance(o, Dim) and o.name == self.name

    def __ne__(self, o):  # type: ignore[override]
        return not self.__eq__(o)

    def __hash__(self) -> int:
        return hash(("dim", self.name))

    def __repr__(self) -> str:
        return f"pt.dim({self.name!r})"


class TensorProxy:
    """A tensor parameter inside a kernel body: index it to read, assign to an index to write."""

    __slots__ = ("name", "dtype", "shape_affine", "_tracer")

    def __init__(self, name: str, dtype: dtypes.DType, shape: tuple[Affine, ...], tracer: Tracer):
        self.name = name
        self.dtype = dtype
        self.shape_affine = shape
        self._tracer = tracer

    @property
    def ndim(self) -> int:
        return len(self.shape_affine)

    @property
    def shape(self) -> tuple:
        """The declared shape: ints for static sizes, index expressions for symbolic ones."""
        return tuple(s.const if s.is_const else IndexExpr(s) for s in self.shape_affine)

    def _index(self, idx: Any) -> tuple[Affine | Expr, ...]:
        """Affine indices, or (for a read) an integer expression where an index is computed from tensor
        values (a gather); negative constants count from the end."""
        items = idx if isinstance(idx, tuple) else (idx,)
        if len(items) != self.ndim:
            raise TracingError(
                f"tensor '{self.name}' has {self.ndim} dimension(s) but is indexed with {len(items)}",
                user_loc(2),
                f"index every dimension, e.g. {self.name}[{', '.join(f'i{k}' for k in range(self.ndim))}]",
            )
        out = []
        for pos, it in enumerate(items):
            if isinstance(it, slice) or it is Ellipsis or it is None:
                raise TracingError(
                    f"tensor '{self.name}': slices, '...' and None are not kernel indices",
                    user_loc(2),
                    "index each dimension with an axis (pt.axis(k)), an affine expression like i + 1, or an int; "
                    "leave a dimension out of the *other* tensors to broadcast",
                )
            a = _as_affine(it)
            if a is None:
                if isinstance(it, ExprProxy):
                    out.append(it.node)
                    continue
                raise TracingError(
                    f"tensor '{self.name}': index {pos} is a {type(it).__name__}",
                    user_loc(2),
                    "use pt.axis(k), an affine expression of axes and dims, or an int",
                )
            if a.is_const and not a.dims and a.const < 0:
                a = self.shape_affine[pos] + a.const  # Python-style negative index
            out.append(a)
        return tuple(out)

    def __getitem__(self, idx: Any) -> ExprProxy:
        self._tracer.check_active(self)
        index = self._index(idx)
        if all(isinstance(ix, Affine) for ix in index):
            return ExprProxy(Load(self.name, index, loc=user_loc()))  # type: ignore[arg-type]
        # a gather: the affine entries become Index values
        entries = tuple(Index(ix, loc=user_loc()) if isinstance(ix, Affine) else ix for ix in index)
        return ExprProxy(Gather(self.name, entries, loc=user_loc()))

    def __setitem__(self, idx: Any, value: Any) -> None:
        self._tracer.check_active(self)
        index = self._index(idx)
        node = to_node(value, what=f"value stored into '{self.name}'")
        if all(isinstance(ix, Affine) for ix in index):
            self._tracer.record_store(self.name, index, node, user_loc())  # type: ignore[arg-type]
            return
        entries = tuple(Index(ix, loc=user_loc()) if isinstance(ix, Affine) else ix for ix in index)
        op, v = _accumulation(node, Gather(self.name, entries))
        if op is None:
            pos = next(p for p, ix in enumerate(index) if not isinstance(ix, Affine))
            raise TracingError(
                f"tensor '{self.name}': index {pos} of a store is computed from tensor values; several points may "
                "write the same element, so the result would depend on their order",
                user_loc(),
                f"accumulate instead: {self.name}[...] += v, or pt.scatter_max / pt.scatter_min "
                f"({self.name}[...] = pt.maximum({self.name}[...], v) works too); pt.scatter({self.name}[...], v, "
                "unique=True) stores where you know no two points share an element; a read at computed indices "
                "(out[i] = table[idx[i]]) is a gather",
            )
        self._tracer.record_scatter(self.name, entries, v, op, user_loc())

    def _misuse(self, *_a, **_k):
        raise TracingError(
            f"tensor '{self.name}' is used without an index",
            user_loc(2),
            f"kernels compute element by element: write {self.name}[i] with i = pt.axis(0)",
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _misuse
    __neg__ = __abs__ = __pow__ = __lt__ = __le__ = __gt__ = __ge__ = __matmul__ = __rmatmul__ = _misuse
    __array_ufunc__ = None  # let NumPy defer to _misuse via the reflected operators

    def __bool__(self):
        raise _no_concrete("Python control flow on a tensor")

    def __iter__(self):
        raise TracingError(
            f"iterating over tensor '{self.name}' is not supported",
            user_loc(2),
            "use an axis for the loop (pt.axis(k)) or a reduction (pt.reduce_sum(...))",
        )

    def __len__(self):
        raise TracingError(
            f"len() of tensor '{self.name}'",
            user_loc(2),
            f"use {self.name}.shape[k], a symbolic size usable in expressions",
        )

    def __repr__(self) -> str:
        return f"<tensor parameter {self.name}: {self.dtype}>"
