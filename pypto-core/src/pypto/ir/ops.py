"""The op tables: each elementwise math function and binary operator declared once, the rest derived.

An entry says what ``pt.<name>`` means (its NumPy implementation, used as the reference and for
constant folding), how it differentiates, and how it is spelled: a C99 ``<math.h>`` function
(``expf`` for float32 where the printer adds a suffix, ``exp`` in OpenCL, ``math.exp`` in Numba,
``numpy.exp`` in the reference backend), or a formula over other functions for those C lacks
(``rsqrt``, ``sigmoid``). From the table come the kernel language's functions (``pt.exp``), the
array layer's (``pt.exp(x)`` on a ``@pt.jit`` array), the IR's unary operators and their typing
(an integer argument is computed in float32), the reference backend, the C, CUDA, OpenCL and Numba
printers, the vector math library's declarations, the adjoints of ``pt.grad``, and the names a
kernel parameter may not take. The conformance suite tests each entry on every backend with its
``edge`` values.

The binary operators (:class:`BinaryOp`, :data:`BINARY`) give the IR's operator lists, the infix spellings
of every printer, the reference backend's NumPy ufuncs and constant folding. The reducers (:class:`Reducer`,
:data:`REDUCERS`) give ``pt.reduce_<name>``, the IR's ``Reduce`` operators, their identities and typing,
the combine each lowers to, OpenMP's reduction clauses, the reference backend's NumPy reductions and their
adjoints; :data:`CAST` is the one conversion (its NumPy meaning for folding and the reference backend, its
adjoint). The scans (:class:`Scanner`, :data:`SCANS`) are running reducers: ``pt.cumsum``, ``pt.cumprod``,
``pt.cummax``, ``pt.cummin``, the IR's ``Scan``, their NumPy meaning and adjoints; :data:`ARG_REDUCERS` the
positional ones, ``pt.argmax`` and ``pt.argmin``. Every entry states its cost in operations per point (``flops``), which ``pt.profile`` adds up, and
an estimate of its work in multiply-adds per point (``work``: a transcendental function 8 to 16, a division 4)
with which the compiler weighs computing a value again against storing it (:mod:`pypto.passes.hoist`).

Adding a function is one entry here (and, for a C printer that names it differently, one spelling)::

    MathFunction("log1p", "Elementwise log(1 + x), accurate for small x.", np.log1p,
                 adjoint=lambda g, x, y, f: g / (1.0 + x), c_name="log1p", edge=(0.0, -1.0, 1e-10, ...))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Adjoint = Callable[[Any, Any, Any, Callable[[str, Any], Any]], Any]
"""``(g, x, y, fn) -> the cotangent of x``: ``g`` the cotangent of ``y = f(x)``; arrays of the array
layer, ``fn(name, a)`` applying another table function to an array."""

Formula = Callable[[str, str, Callable[[str, str], str], str], str]
"""``(x, xu, call, one) -> text``: the function over others, for printers: ``x`` the argument's text, ``xu``
the same safe under a unary minus, ``call(name, arg)`` the printer's spelling of a native function, ``one``
its 1.0."""

inf, nan = math.inf, math.nan
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_erf(x: Any) -> Any:
    return _erf(np.asarray(x, dtype=np.float64))


@dataclass(frozen=True)
class MathFunction:
    """One elementwise function of floats (integer arguments are computed in float32)."""

    name: str
    doc: str
    numpy: Callable[[Any], Any]  # float64 NumPy implementation (reference, constant folding)
    adjoint: Adjoint
    c_name: str | None = None  # the <math.h> function; None when ``formula`` defines it
    formula: Formula | None = None
    precedence: int = 13  # of the formula's text (C's precedence of its top operator)
    numpy_name: str | None = None  # the reference backend's spelling when not ``_np.<c_name>``
    edge: tuple[float, ...] = ()  # values every backend is tested on (NaN, infinities, domain edges)
    spread: tuple[str, float, float] = ("normal", 0.0, 3.0)  # how test inputs are drawn: normal(0, s) or span
    vector_math: bool = True  # whether glibc's libmvec may have a vector variant (probed at run time)
    numba_name: str | None = None  # Numba's spelling when not ``_math.<c_name>`` (Python's math.floor is an int)
    flops: int = 1  # operations per point pt.profile counts (a formula: the operations it is made of)
    work: int = 12  # estimated cost per point in multiply-adds, for the compiler's decisions (pypto.passes.hoist)


def _sigmoid_np(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


_LN2, _LN10 = math.log(2.0), math.log(10.0)

FUNCTIONS: tuple[MathFunction, ...] = (
    MathFunction("exp", "Elementwise e**x.", np.exp, lambda g, x, y, f: g * y, "exp",
                 edge=(0.0, -inf, inf, nan, 80.0, 89.0, -100.0, -750.0), spread=("normal", 0.0, 3.0), work=8),
    MathFunction("log", "Elementwise natural logarithm (log(0) = -inf, negative -> nan).", np.log,
                 lambda g, x, y, f: g / x, "log",
                 edge=(0.0, -1.0, inf, nan, 1.0, 1e-30), spread=("exp-spread", -20.0, 20.0)),
    MathFunction("sqrt", "Elementwise square root.", np.sqrt, lambda g, x, y, f: g * 0.5 / y, "sqrt",
                 edge=(0.0, -1.0, inf, nan, 1e-30, 4.0), spread=("span", 0.0, 100.0), vector_math=False, work=4),
    MathFunction("rsqrt", "Elementwise 1 / sqrt(x).", lambda x: 1.0 / np.sqrt(x),
                 lambda g, x, y, f: g * -0.5 * y * y * y,
                 formula=lambda x, xu, call, one: f"{one} / {call('sqrt', x)}",
                 edge=(0.0, inf, nan, -1.0, 4.0), spread=("span", 0.01, 100.0), vector_math=False, flops=2,
                 work=6),
    MathFunction("tanh", "Elementwise hyperbolic tangent.", np.tanh, lambda g, x, y, f: g * (1 - y * y), "tanh",
                 edge=(inf, -inf, nan, 0.0, 20.0, -1e-4), spread=("normal", 0.0, 5.0)),
    MathFunction("sin", "Elementwise sine.", np.sin, lambda g, x, y, f: g * f("cos", x), "sin",
                 edge=(0.0, nan, inf, -inf, math.pi), spread=("span", -10.0, 10.0)),
    MathFunction("cos", "Elementwise cosine.", np.cos, lambda g, x, y, f: -g * f("sin", x), "cos",
                 edge=(0.0, nan, inf, -inf, math.pi / 2), spread=("span", -10.0, 10.0)),
    MathFunction("erf", "Elementwise error function.", _np_erf,
                 lambda g, x, y, f: g * (2 / math.sqrt(math.pi)) * f("exp", -(x * x)), "erf", numpy_name="_erf",
                 edge=(inf, -inf, nan, 0.0, 6.0, -6.0, 1e-5), spread=("normal", 0.0, 2.0), work=16),
    MathFunction("sigmoid", "Elementwise logistic function 1 / (1 + exp(-x)).", _sigmoid_np,
                 lambda g, x, y, f: g * y * (1 - y),
                 formula=lambda x, xu, call, one: f"{one} / ({one} + {call('exp', '-' + xu)})",
                 edge=(inf, -inf, nan, 0.0, -100.0, 100.0), spread=("normal", 0.0, 10.0), vector_math=False,
                 flops=4, work=12),
    MathFunction("log1p", "Elementwise log(1 + x), accurate for x near 0.", np.log1p,
                 lambda g, x, y, f: g / (1.0 + x), "log1p",
                 edge=(0.0, -1.0, -2.0, inf, nan, 1e-10, -1e-10, 1e30), spread=("span", -0.99, 10.0)),
    MathFunction("expm1", "Elementwise exp(x) - 1, accurate for x near 0.", np.expm1,
                 lambda g, x, y, f: g * (y + 1.0), "expm1",
                 edge=(0.0, -inf, inf, nan, 1e-10, -1e-10, 80.0, -100.0), spread=("normal", 0.0, 3.0)),
    MathFunction("log2", "Elementwise base-2 logarithm.", np.log2, lambda g, x, y, f: g / (x * _LN2), "log2",
                 edge=(0.0, -1.0, inf, nan, 1.0, 1024.0, 1e-30), spread=("exp-spread", -20.0, 20.0)),
    MathFunction("log10", "Elementwise base-10 logarithm.", np.log10, lambda g, x, y, f: g / (x * _LN10), "log10",
                 edge=(0.0, -1.0, inf, nan, 1.0, 1000.0, 1e-30), spread=("exp-spread", -20.0, 20.0)),
    MathFunction("tan", "Elementwise tangent.", np.tan, lambda g, x, y, f: g * (1 + y * y), "tan",
                 edge=(0.0, nan, inf, -inf, 1.0, -1.0), spread=("span", -1.5, 1.5)),
    MathFunction("atan", "Elementwise arc tangent (radians, in [-pi/2, pi/2]).", np.arctan,
                 lambda g, x, y, f: g / (1 + x * x), "atan", numpy_name="_np.arctan",
                 edge=(0.0, nan, inf, -inf, 1.0, 1e30), spread=("normal", 0.0, 10.0)),
    MathFunction("sinh", "Elementwise hyperbolic sine.", np.sinh, lambda g, x, y, f: g * f("cosh", x), "sinh",
                 edge=(0.0, nan, inf, -inf, 89.0, -89.0, 1e-5), spread=("normal", 0.0, 3.0)),
    MathFunction("cosh", "Elementwise hyperbolic cosine.", np.cosh, lambda g, x, y, f: g * f("sinh", x), "cosh",
                 edge=(0.0, nan, inf, -inf, 89.0, -89.0), spread=("normal", 0.0, 3.0)),
    MathFunction("asin", "Elementwise arc sine (radians, in [-pi/2, pi/2]; nan outside [-1, 1]).", np.arcsin,
                 lambda g, x, y, f: g * f("rsqrt", 1 - x * x), "asin", numpy_name="_np.arcsin",
                 edge=(0.0, 1.0, -1.0, 1.5, nan, inf, 1e-8), spread=("span", -1.0, 1.0)),
    MathFunction("acos", "Elementwise arc cosine (radians, in [0, pi]; nan outside [-1, 1]).", np.arccos,
                 lambda g, x, y, f: -g * f("rsqrt", 1 - x * x), "acos", numpy_name="_np.arccos",
                 edge=(0.0, 1.0, -1.0, -1.5, nan, inf), spread=("span", -1.0, 1.0)),
    MathFunction("asinh", "Elementwise inverse hyperbolic sine.", np.arcsinh,
                 lambda g, x, y, f: g * f("rsqrt", x * x + 1), "asinh", numpy_name="_np.arcsinh",
                 edge=(0.0, -0.0, nan, inf, -inf, 1e-8, 1e30, -1e30), spread=("normal", 0.0, 10.0)),
    MathFunction("acosh", "Elementwise inverse hyperbolic cosine (nan below 1).", np.arccosh,
                 lambda g, x, y, f: g * f("rsqrt", x * x - 1), "acosh", numpy_name="_np.arccosh",
                 edge=(1.0, 0.5, -1.0, nan, inf, 1e30, 1.0000001), spread=("span", 1.0, 100.0)),
    MathFunction("atanh", "Elementwise inverse hyperbolic tangent (+-inf at +-1, nan outside [-1, 1]).",
                 np.arctanh, lambda g, x, y, f: g / (1 - x * x), "atanh", numpy_name="_np.arctanh",
                 edge=(0.0, -0.0, 1.0, -1.0, 1.5, nan, inf, 1e-8), spread=("span", -0.99, 0.99)),
    MathFunction("cbrt", "Elementwise cube root (negative for a negative x).", np.cbrt,
                 lambda g, x, y, f: g / (3 * y * y), "cbrt", numba_name="_np.cbrt",
                 edge=(0.0, -0.0, 8.0, -27.0, inf, -inf, nan, 1e-30), spread=("normal", 0.0, 100.0), work=8),
    MathFunction("exp2", "Elementwise 2**x.", np.exp2, lambda g, x, y, f: g * y * _LN2, "exp2",
                 numba_name="_np.exp2", edge=(0.0, -inf, inf, nan, 127.0, 128.0, -149.0, 1023.5, -1100.0),
                 spread=("normal", 0.0, 4.0), work=8),
    MathFunction("floor", "Elementwise largest integer not above x (a float; nan, infinities and -0.0 kept).",
                 np.floor, lambda g, x, y, f: g * 0.0, "floor", numba_name="_np.floor",
                 edge=(-0.5, 0.5, -0.0, 2.5, -2.5, 1e20, nan, inf, -inf), spread=("normal", 0.0, 10.0),
                 vector_math=False, work=1),
    MathFunction("ceil", "Elementwise smallest integer not below x (a float).", np.ceil, lambda g, x, y, f: g * 0.0,
                 "ceil", numba_name="_np.ceil", edge=(-0.5, 0.5, -0.0, 2.5, -2.5, 1e20, nan, inf, -inf),
                 spread=("normal", 0.0, 10.0), vector_math=False, work=1),
    MathFunction("trunc", "Elementwise x rounded toward zero (a float).", np.trunc, lambda g, x, y, f: g * 0.0,
                 "trunc", numba_name="_np.trunc", edge=(-0.5, 0.5, -0.0, -1.5, 2.5, 1e20, nan, inf, -inf),
                 spread=("normal", 0.0, 10.0), vector_math=False, work=1),
    MathFunction("round", "Elementwise x rounded to the nearest integer, halves to even (``np.round``, ``np.rint``; "
                 "a float).", np.rint, lambda g, x, y, f: g * 0.0, "rint", numpy_name="_np.rint",
                 numba_name="_np.rint", edge=(0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 1e20, nan, inf, -inf),
                 spread=("normal", 0.0, 10.0), vector_math=False, work=1),
)  # fmt: skip


def logaddexp(a: Any, b: Any, maximum: Callable, where: Callable, log1p: Callable, exp: Callable) -> Any:
    """``log(exp(a) + exp(b))`` over the functions given (the kernel language's or the array layer's):
    ``maximum(a, b) + log1p(exp(-|a - b|))``, the difference taken as 0 where the operands are equal (equal
    infinities: ``a - b`` is NaN). Its gradient is ``sigmoid(a - b)`` for ``a`` (half each where they are equal,
    from the maximum's rule)."""
    return maximum(a, b) + log1p(exp(-abs(where(a == b, 0, a - b))))


MATH: dict[str, MathFunction] = {f.name: f for f in FUNCTIONS}
"""The table by name (``pt.<name>`` and the IR's ``Unary`` operator of that name)."""


def numpy_spelling(f: MathFunction) -> str:
    """How the reference backend's generated NumPy code names a native function."""
    return f.numpy_name or f"_np.{f.c_name}"


def c_names() -> frozenset[str]:
    """The <math.h> names generated code may call for the table's functions (with C's ``f`` forms)."""
    names = {f.c_name for f in FUNCTIONS if f.c_name} | {op.function for op in FUNCTIONS2.values()}
    return frozenset(names | {n + "f" for n in names})


BinaryAdjoint = Callable[[Any, Any, Any, Any, Any], tuple[Any, Any]]
"""``(g, a, b, y, ops) -> (cotangent of a, cotangent of b)`` for ``y = a op b`` (either may be ``None``):
arrays of the array layer; ``ops.where`` and ``ops.binary(name, a, b)`` build more of them."""


@dataclass(frozen=True)
class BinaryOp:
    """One binary operator of the IR (``Binary.op``): what it computes and how it is spelled.

    ``kind`` is ``"arith"`` (the operands' promoted type), ``"compare"`` (bool) or ``"logic"`` (bool or
    integer bits); ``symbol`` the infix spelling where Python and C share one (``None``: a function,
    ``pt.maximum``); ``numpy`` NumPy's ufunc, which defines it for the reference backend and tests;
    ``c_infix`` whether C-family printers and the host's launch expressions may print ``symbol`` for
    every type the operator takes (C's ``/`` and ``%`` on integers truncate, so ``div``, ``floordiv`` and
    ``mod`` go through helpers; so do the shifts, undefined in C for counts outside the type's width, whose
    results here are NumPy's); ``folds`` whether constant operands are folded at compile time (integer
    division and remainder by a constant zero are left for the kernel's own rule); ``adjoint`` its rule
    for ``pt.grad``; ``function`` the ``<math.h>`` function two-operand functions are spelled with
    (``atan2``, ``hypot``, ``copysign``: printed as calls, integer operands computed in float32, like the math functions).
    """

    name: str
    kind: str
    symbol: str | None
    numpy: Any  # a NumPy ufunc
    c_infix: bool = False
    folds: bool = True
    adjoint: BinaryAdjoint | None = None  # None: no gradient flows through it (comparisons, logic, floordiv)
    flops: int = 1  # operations per point pt.profile counts
    work: int = 1  # estimated cost per point in multiply-adds, for the compiler's decisions (pypto.passes.hoist)
    function: str | None = None  # a <math.h> function of two floats (atan2, hypot)
    doc: str = ""  # the docstring of pt.<name> for the functions
    numba_name: str | None = None  # Numba's spelling of ``function`` when not ``_math.<function>``


def _extreme_adjoint(g: Any, a_wins: Any, a: Any, b: Any, ops: Any) -> tuple[Any, Any]:
    """maximum/minimum: the gradient goes to the operand that wins, half to each on a tie (as torch does)."""
    share = ops.where(a_wins, 1.0, ops.where(ops.binary("eq", a, b), 0.5, 0.0))
    return g * share, g * (1 - share)


BINARY_TABLE: tuple[BinaryOp, ...] = (
    BinaryOp("add", "arith", "+", np.add, c_infix=True, adjoint=lambda g, a, b, y, ops: (g, g)),
    BinaryOp("sub", "arith", "-", np.subtract, c_infix=True, adjoint=lambda g, a, b, y, ops: (g, -g)),
    BinaryOp("mul", "arith", "*", np.multiply, c_infix=True, adjoint=lambda g, a, b, y, ops: (g * b, g * a)),
    BinaryOp("div", "arith", "/", np.true_divide, adjoint=lambda g, a, b, y, ops: (g / b, -g * y / b), work=4),
    BinaryOp("floordiv", "arith", "//", np.floor_divide, folds=False, work=6),
    BinaryOp("mod", "arith", "%", np.remainder, folds=False, work=6,  # a - floor(a / b) * b
             adjoint=lambda g, a, b, y, ops: (g, -g * ops.binary("floordiv", a, b))),
    BinaryOp("maximum", "arith", None, np.maximum,
             adjoint=lambda g, a, b, y, ops: _extreme_adjoint(g, a > b, a, b, ops)),
    BinaryOp("minimum", "arith", None, np.minimum,
             adjoint=lambda g, a, b, y, ops: _extreme_adjoint(g, a < b, a, b, ops)),
    BinaryOp("atan2", "arith", None, np.arctan2, function="atan2", flops=1, work=16,
             doc="Elementwise arc tangent of a / b in radians, in [-pi, pi], by the signs of both (numpy.arctan2).",
             adjoint=lambda g, a, b, y, ops: (g * b / (a * a + b * b), -g * a / (a * a + b * b))),
    BinaryOp("hypot", "arith", None, np.hypot, function="hypot", flops=1, work=8,
             doc="Elementwise sqrt(a**2 + b**2), without overflow or underflow on the way (numpy.hypot).",
             adjoint=lambda g, a, b, y, ops: (g * a / y, g * b / y)),
    BinaryOp("fmod", "arith", None, np.fmod, function="fmod", flops=1, work=8, numba_name="_np.fmod",
             doc="Elementwise remainder of a / b with the sign of a (C's fmod, numpy.fmod; pt.remainder and % take "
             "the sign of b).",
             adjoint=lambda g, a, b, y, ops: (g, -g * ops.unary("trunc", a / b))),
    BinaryOp("copysign", "arith", None, np.copysign, function="copysign", flops=1, work=1,
             doc="Elementwise the magnitude of a with the sign of b, the sign of -0.0 and of a NaN included "
             "(numpy.copysign).",
             adjoint=lambda g, a, b, y, ops: (g * ops.where(ops.binary("eq", a, 0), 0.0, y / a), None)),
    BinaryOp("lshift", "arith", "<<", np.left_shift, work=1,
             doc="Integers shifted left (numpy.left_shift): the bits beyond the type dropped, a count below zero or "
             "not below the type's width giving 0."),
    BinaryOp("rshift", "arith", ">>", np.right_shift, work=1,
             doc="Integers shifted right (numpy.right_shift), copying the sign bit: a count below zero or not below "
             "the type's width giving 0, or -1 for a negative value."),
    BinaryOp("lt", "compare", "<", np.less, c_infix=True),
    BinaryOp("le", "compare", "<=", np.less_equal, c_infix=True),
    BinaryOp("gt", "compare", ">", np.greater, c_infix=True),
    BinaryOp("ge", "compare", ">=", np.greater_equal, c_infix=True),
    BinaryOp("eq", "compare", "==", np.equal, c_infix=True),
    BinaryOp("ne", "compare", "!=", np.not_equal, c_infix=True),
    BinaryOp("and", "logic", "&", np.bitwise_and, c_infix=True),
    BinaryOp("or", "logic", "|", np.bitwise_or, c_infix=True),
    BinaryOp("xor", "logic", "^", np.bitwise_xor, c_infix=True),
)  # fmt: skip

BINARY: dict[str, BinaryOp] = {op.name: op for op in BINARY_TABLE}
"""The binary operators by name, in the order the IR lists them (arithmetic, comparisons, logic)."""


SHIFTS = frozenset({"lshift", "rshift"})
"""The shifts (``<<``, ``>>``): integers only; printed through helpers giving NumPy's results for every count."""


FUNCTIONS2: dict[str, BinaryOp] = {op.name: op for op in BINARY_TABLE if op.function is not None}
"""The two-operand math functions (``pt.atan2``, ``pt.hypot``), printed as calls of ``function``."""


def binary_symbols(*, c_infix: bool = False, also: tuple[str, ...] = ()) -> dict[str, str]:
    """``{op: infix symbol}`` of the operators that have one (only those C prints infix with ``c_infix``),
    plus the operators named in ``also`` (a printer that handles their types itself, e.g. ``div`` on
    float vectors)."""
    return {
        o.name: o.symbol for o in BINARY_TABLE if o.symbol is not None and (not c_infix or o.c_infix or o.name in also)
    }


ReduceAdjoint = Callable[[Any, Any, Any, Any], Any]
"""``(ge, x, ye, ops) -> the cotangent of x`` for ``y = reduce(x)``: ``ge`` and ``ye`` the cotangent and the
result broadcast back to ``x``'s shape; ``ops.where``, ``ops.binary``, ``ops.cast`` build arrays and
``ops.over(name, a)`` is reducer ``name`` of ``a`` over the same axes, broadcast back the same way."""


def _sum_adjoint(ge: Any, x: Any, ye: Any, ops: Any) -> Any:
    return ge


def _extreme_reduce_adjoint(ge: Any, x: Any, ye: Any, ops: Any) -> Any:
    """max/min: shared equally by the elements that reach the extreme (as torch's amax/amin do)."""
    hit = ops.cast(ops.binary("eq", x, ye), x.dtype)
    return ge * hit / ops.over("sum", hit)


def _prod_adjoint(ge: Any, x: Any, ye: Any, ops: Any) -> Any:
    """prod: y / x where no element is zero, exact through zeros (the product of the others at a lone zero)."""
    zero = ops.binary("eq", x, 0)
    others = ops.over("prod", ops.where(zero, 1.0, x))
    zeros = ops.over("sum", ops.cast(zero, ops.int32))
    lone = ops.binary("and", zero, ops.binary("eq", zeros, 1))
    return ge * ops.where(ops.binary("eq", zeros, 0), others / ops.where(zero, 1.0, x), ops.where(lone, others, 0.0))


def _lowest(dt: Any) -> Any:
    return -math.inf if dt.is_float else int(np.iinfo(dt.numpy).min)


def _highest(dt: Any) -> Any:
    return math.inf if dt.is_float else int(np.iinfo(dt.numpy).max)


@dataclass(frozen=True)
class Reducer:
    """One reduction (``Reduce.op``, ``pt.reduce_<name>``): an associative combine and its identity.

    ``combine`` names the :class:`BinaryOp` a reduction lowers to (``acc = acc ⊕ v``); ``identity(dt)`` is
    the result of an empty reduction in type ``dt``; ``on_bool`` the result type of a reduction of booleans
    (``"int32"``: it counts) or ``None`` where that is refused; ``numpy`` NumPy's reduction (the reference
    backend and tests), ``omp`` the OpenMP reduction identifier, ``adjoint`` its rule for ``pt.grad``.
    """

    name: str
    doc: str
    combine: str
    numpy: Callable[..., Any]
    identity: Callable[[Any], Any]
    omp: str
    adjoint: ReduceAdjoint
    on_bool: str | None = None
    flops: int = 1  # operations per element reduced that pt.profile counts


REDUCER_TABLE: tuple[Reducer, ...] = (
    Reducer("sum", "Sum of ``expr`` over ``axis`` (one axis or a tuple); 0 when empty.", "add", np.sum,
            lambda dt: 0.0 if dt.is_float else 0, "+", _sum_adjoint, on_bool="int32"),
    Reducer("prod", "Product of ``expr`` over ``axis``; 1 when empty.", "mul", np.prod,
            lambda dt: 1.0 if dt.is_float else 1, "*", _prod_adjoint, on_bool="int32"),
    Reducer("max", "Maximum over ``axis``; NaN if any element is NaN; -inf (floats) or the smallest integer "
            "when empty.", "maximum", np.max, _lowest, "max", _extreme_reduce_adjoint),
    Reducer("min", "Minimum over ``axis``; NaN if any element is NaN; +inf (floats) or the largest integer "
            "when empty.", "minimum", np.min, _highest, "min", _extreme_reduce_adjoint),
)  # fmt: skip

REDUCERS: dict[str, Reducer] = {r.name: r for r in REDUCER_TABLE}
"""The reducers by name, in the order the IR lists them."""


@dataclass(frozen=True)
class Scanner:
    """One running reduction (``Scan.op``, ``pt.cum<name>``): the reducer ``reducer`` applied to every prefix
    along an axis (every suffix when reversed). Its combine, identity and typing are the reducer's; ``numpy``
    is NumPy's meaning (``numpy(x, axis)``: the reference backend and tests); ``adjoint(g, x, y, axis, reverse,
    ops)`` its rule for ``pt.grad`` (``None``: not differentiable yet, a typed error), with ``ops.scan(op, g,
    axis, reverse)`` the array layer's scan."""

    name: str  # the function: cumsum, cumprod, cummax, cummin
    reducer: str  # the Reduce op it runs (sum, prod, max, min)
    doc: str
    numpy: Callable[[Any, int], Any]
    adjoint: Callable[[Any, Any, Any, int, bool, Any], Any] | None = None
    flops: int = 1  # operations per element that pt.profile counts


def _cumsum_adjoint(g: Any, x: Any, y: Any, axis: int, reverse: bool, ops: Any) -> Any:
    """Each element is added into every later running sum: its cotangent is the sum of theirs (a cumulative sum
    of the cotangent in the other direction)."""
    return ops.scan("sum", g, axis, not reverse)


def _cumprod_adjoint(g: Any, x: Any, y: Any, axis: int, reverse: bool, ops: Any) -> Any:
    """Element ``j`` is a factor of every later running product: its cotangent is ``E_j * s_j``, ``E_j`` the
    product of the elements before it and ``s_j = g_j + x_(j+1) s_(j+1)`` (a linear recurrence run from the
    end): exact where elements are zero (no division by them), as torch's (``reverse``: mirrored)."""
    step = -1 if reverse else 1  # the neighbour before j in the scan's order is j - step
    before = ops.scan("prod", ops.shift(x, axis, step, 1.0), axis, reverse)  # E_j
    return before * ops.linear_scan(ops.shift(x, axis, -step, 0.0), g, axis, not reverse)


def _extreme_scan_adjoint(g: Any, x: Any, y: Any, axis: int, reverse: bool, ops: Any) -> Any:
    """The running maximum (minimum) at ``t`` is the element at the first position, in the scan's order, holding
    it (the first NaN's from a NaN on): its cotangent goes there, as ``torch.cummax``'s does to its index."""
    return ops.to_positions(g, ops.running_position(x, axis, reverse), axis, x)


SCAN_TABLE: tuple[Scanner, ...] = (
    Scanner("cumsum", "sum", "Running sum along ``axis`` (``np.cumsum``): element ``t`` is the sum of elements "
            "``0..t``.", np.cumsum, _cumsum_adjoint),
    Scanner("cumprod", "prod", "Running product along ``axis`` (``np.cumprod``).", np.cumprod, _cumprod_adjoint),
    Scanner("cummax", "max", "Running maximum along ``axis`` (``np.maximum.accumulate``): NaN from the first NaN "
            "on.", lambda x, axis: np.maximum.accumulate(x, axis=axis), _extreme_scan_adjoint),
    Scanner("cummin", "min", "Running minimum along ``axis`` (``np.minimum.accumulate``): NaN from the first NaN "
            "on.", lambda x, axis: np.minimum.accumulate(x, axis=axis), _extreme_scan_adjoint),
)  # fmt: skip

SCANS: dict[str, Scanner] = {s.reducer: s for s in SCAN_TABLE}
"""The scans by the reducer they run (``Scan.op``)."""


@dataclass(frozen=True)
class ArgReducer:
    """``pt.argmax`` / ``pt.argmin``: the first position of the extreme of ``reducer`` along an axis (int64), the
    first NaN's where there is one, as ``numpy`` (NumPy's function: the reference of tests). Computed as two
    reductions (the extreme, then the least position holding it or a NaN: ``pypto.lang.functions``), so every
    backend runs it with no code of its own."""

    name: str
    reducer: str
    doc: str
    numpy: Callable[..., Any]


ARG_REDUCERS: dict[str, ArgReducer] = {a.name: a for a in (
    ArgReducer("argmax", "max", "The position of the first largest value along ``axis``", np.argmax),
    ArgReducer("argmin", "min", "The position of the first smallest value along ``axis``", np.argmin),
)}  # fmt: skip
"""The positional reductions by name."""


def ordered(x: Any, axis: int = -1, descending: bool = False, k: int | None = None) -> tuple[Any, Any]:
    """NumPy's meaning of the orderings: ``(values, positions)`` of ``x`` along ``axis`` in a stable order,
    ascending with NaN last (``np.sort``, ``np.argsort(kind="stable")``) or descending with NaN first (the
    exact reverse, equal values still in the order of their positions), the first ``k`` of them when given."""
    x = np.asarray(x)
    axis = axis % x.ndim
    if descending:  # a stable ascending sort of the reversed row, reversed: ties keep their positions' order
        flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        idx = (x.shape[axis] - 1) - np.flip(flipped, axis)
    else:
        idx = np.argsort(x, axis=axis, kind="stable")
    if k is not None:
        idx = np.take(idx, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


@dataclass(frozen=True)
class Ordering:
    """``pt.sort``, ``pt.argsort``, ``pt.topk``: the IR's :class:`~pypto.ir.nodes.Sort` with what it gives
    (``results``: the node's ``which`` for each value returned), its order, its NumPy meaning (:func:`ordered`:
    the reference backend and tests) and its cost (``flops`` compares per element per halving of the row:
    ``pt.profile`` counts ``n log2 n`` per row)."""

    name: str
    results: tuple[str, ...]
    doc: str
    flops: int = 1


ORDERINGS: dict[str, Ordering] = {o.name: o for o in (
    Ordering("sort", ("values",), "The values along ``axis`` in ascending order, NaN last (``np.sort``; "
             "``descending=True``: the reverse, NaN first); stable."),
    Ordering("argsort", ("indices",), "The positions (int64) that put the values along ``axis`` in order "
             "(``np.argsort(kind='stable')``: equal values keep their order; NaN last, first when descending)."),
    Ordering("topk", ("values", "indices"), "The ``k`` largest values along ``axis`` and their positions, "
             "largest first (``torch.topk``: NaN counts as the largest; equal values in the order of their positions; "
             "``largest=False``: the ``k`` smallest, smallest first)."),
)}  # fmt: skip
"""The orderings by name: one IR node (``Sort``) gives them all."""

USER_SCAN = "fn"
"""``Scan.op`` of ``pt.associative_scan``: the user's combine function (``Scan.combine``) instead of a reducer."""


LOOP = "loop"
"""``Scan.op`` of a sequential loop (``for t in pt.range(n)``, a ``while`` on a traced condition): the loop body as
a combine function (``Scan.combine``) of the carried variables and the step's values, run in order from the
variables' values before the loop (``Scan.init``); it need not be associative, so its steps are never split."""

LAST = "last"
"""``Reduce.op`` of a sequential loop's result: its body (a :data:`LOOP` scan along the reduced axis) after the
last step, or the carried variable's value before the loop when the loop runs no step. Not a reducer of
:data:`REDUCERS` (no identity, no combine): only a loop's result takes it."""


def scan_name(op: str) -> str:
    """The function a ``Scan.op`` comes from: ``cumsum`` ..., ``associative_scan`` or a loop."""
    return "associative_scan" if op == USER_SCAN else "loop" if op == LOOP else SCANS[op].name


@dataclass(frozen=True)
class Conversion:
    """The conversion ``Cast(x, dtype)`` (``pt.cast``, ``x.astype``): NumPy's ``astype``.

    To ``bool``: ``x != 0`` (NaN is true). Float to integer truncates toward zero; a value outside the
    integer type's range has no defined result on any backend (C's rule). Integer to integer wraps
    around (two's complement). ``numpy(value, np_dtype)`` folds constants and is the reference
    backend's meaning; ``adjoint(g, x, ops)`` casts the cotangent back to a floating ``x``'s type (no
    gradient flows into an integer or boolean ``x``).
    """

    numpy: Callable[[Any, Any], Any]
    adjoint: Callable[[Any, Any, Any], Any | None]
    flops: int = 0  # a conversion is not counted as an arithmetic operation


def _astype(value: Any, np_dtype: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(np_dtype)


def _cast_adjoint(g: Any, x: Any, ops: Any) -> Any:
    if not x.dtype.is_inexact:  # no gradient flows into an integer or boolean x
        return None
    if g.dtype.is_complex and not x.dtype.is_complex:  # a real value made complex: the real part (Re(c * dx))
        g = ops.unary("real", g)
    return ops.cast(g, x.dtype)


CAST = Conversion(_astype, _cast_adjoint)
"""The conversion's entry (see :class:`Conversion`)."""


@dataclass(frozen=True)
class ComplexPart:
    """One function of complex numbers that picks or flips a part (``pt.real``, ``pt.conj`` ...).

    ``part`` says whether the result has the part type (``real``, ``imag``, ``angle``: float32 for a
    complex64 operand) or the operand's type (``conj``). These exist in the tensor IR only until the
    ``complex_pairs`` pass (:mod:`pypto.passes.complex`) writes every complex value as two floats; on a
    real operand they mean what NumPy's do (``imag(x)`` is 0, ``angle(x)`` is 0 or pi).
    """

    name: str
    doc: str
    numpy: Callable[[Any], Any]
    part: bool


COMPLEX_PARTS: dict[str, ComplexPart] = {c.name: c for c in (
    ComplexPart("real", "The real part (elementwise; a real value itself).", np.real, True),
    ComplexPart("imag", "The imaginary part (elementwise; 0 for a real value).", np.imag, True),
    ComplexPart("conj", "The complex conjugate (elementwise; a real value itself).", np.conj, False),
    ComplexPart("angle", "The argument in radians, in [-pi, pi] (elementwise, numpy.angle; atan2(imag, real)).",
                np.angle, True),
)}  # fmt: skip
"""The complex part functions by name (IR ``Unary`` operators until ``complex_pairs``)."""

COMPLEX_FUNCTIONS = frozenset({"exp", "log", "sqrt"})
"""The math functions of the table that also take complex operands (the ``complex_pairs`` pass writes each
over real ones)."""
