"""Hypothesis strategies for random, well-typed kernels (:class:`~.tree.Program`).

Expressions mix every operator and function of the language, Python scalars and axis values,
broadcast, transposed, shifted, reversed and strided tensor reads, casts, ``pt.where``, and
reductions. Values stay in safe domains by construction: logarithms and reciprocal square roots
see ``abs(x) + 1``, divisors are kept away from zero, ``exp`` sees arguments below 8, and any
value that grows past a limit is scaled back by a power of two (floats) or taken ``% 97``
(integers), so nothing overflows in int32 and int64; the narrower integer types wrap around (the
evaluator wraps the same way), and kernels with unsigned types use positive constants only (a
negative Python integer does not fit them). Zero-size dims appear only without inner reductions.
Complex kernels mix complex tensors (random and grid values, the latter with exact zero parts and
points on the branch cut) with real ones and Python complex scalars; divisors and logarithms see
``z * 2**-k + 1.5`` (modulus at least 1) and values are kept in range by scaling the modulus.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from . import rules
from .tree import (
    AXIS_FORMS,
    PATTERNS,
    Node,
    Program,
    Tensor,
    axis_value,
    binary,
    const,
    convert,
    load,
    power,
    reduce,
    select,
    tensors_of,
    unary,
)

SIZES = (1, 2, 3, 5, 7, 8, 13, 16, 17, 24, 31, 33)
FLOAT_CONSTS = (2.0, 0.5, -1.5, 0.1, 3.0, 0.25, -0.75, 1.0)
INT_CONSTS = (2, 3, -1, 5, 1, 7, -3)
COMPLEX_CONSTS = (1j, 0.5 + 1j, -1.5 + 0.25j, 2 - 1j, 0.1 - 0.75j)
LIMIT = {"float": 1e4, "int": 2.0**20, "complex": 1e4}
MAX_TENSORS = 5
FAMILIES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "int16", "uint8", "uint16", "uint32",
            "uint64", "complex64", "complex128")  # fmt: skip

# the tensor dtypes a family's kernels read: its own first, then others it mixes with
LEAF_DTYPES = {
    "float32": ("float32", "int32"),
    "float64": ("float64", "float32", "int64"),
    "float16": ("float16", "float32", "int32"),
    "bfloat16": ("bfloat16", "float16", "int8"),
    "int32": ("int32", "int64"),
    "int64": ("int64", "int32"),
    "int8": ("int8", "int32", "uint8"),
    "int16": ("int16", "int8", "uint16"),
    "uint8": ("uint8", "uint16"),
    "uint16": ("uint16", "uint8", "uint32"),
    "uint32": ("uint32", "uint8", "int64"),
    "uint64": ("uint64", "uint32"),
    "complex64": ("complex64", "float32", "int32"),
    "complex128": ("complex128", "complex64", "float64"),
}
PREFIX = {
    "full": "x",
    "row": "r",
    "col": "c",
    "trans": "t",
    "shift": "s",
    "rev": "v",
    "stride": "w",
    "gather": "g",
    "pick": "p",
}
PROFILES = {
    "float": ("signed", "positive", "grid"),
    "int": ("int_signed", "int_positive"),
    "complex": ("complex_signed", "complex_grid"),
}


def _mode(dtype: str) -> str:
    if rules.is_complex(dtype):
        return "complex"
    return "float" if rules.is_float(dtype) else "int"


class Builder:
    """Draws one program's expression, tracking its tensors; each method draws one kind of node."""

    def __init__(self, draw: Callable, family: str, dtypes: frozenset[str], m: int, n: int):
        self.draw = draw
        self.family = family
        self.m, self.n = m, n
        self.tensors: list[Tensor] = []
        self.inner_reduce = m > 0 and n > 0
        # the family's own dtype comes first and three times as often as the ones it mixes with
        leaf = [d for d in LEAF_DTYPES[family] if d in dtypes]
        leaf = [family] * 2 + leaf if family in leaf else leaf
        self.complex_types = [d for d in leaf if rules.is_complex(d)]
        self.float_types = [d for d in leaf if rules.is_float(d)]
        self.int_types = [d for d in leaf if rules.is_int(d)]
        unsigned = any(rules.is_unsigned(d) for d in self.int_types)
        self.int_consts = [c for c in INT_CONSTS if c > 0] if unsigned else list(INT_CONSTS)
        # integer families compute with floats by converting integers to float32
        self.has_float = bool(self.float_types) or "float32" in dtypes
        self.has_bool = "bool" in dtypes

    def choice(self, options: Sequence):
        return self.draw(st.sampled_from(list(options)))

    def flag(self) -> bool:
        return self.draw(st.booleans())

    # -- leaves ----------------------------------------------------------------------------------
    def tensor(self, dtype: str, mask: bool = False) -> Tensor:
        same = [t for t in self.tensors if t.dtype == dtype]
        if same and (len(self.tensors) >= MAX_TENSORS or self.flag()):
            return self.choice(same)
        pattern = self.choice(PATTERNS)
        profile = "mask" if mask else self.choice(PROFILES[_mode(dtype)])
        t = Tensor(f"{'m' if mask else PREFIX[pattern]}{len(self.tensors)}", dtype, pattern, profile)
        self.tensors.append(t)
        return t

    def leaf(self, mode: str) -> Node:
        if mode == "complex":
            return load(self.tensor(self.choice(self.complex_types)))
        if mode == "float":
            if self.float_types:
                return load(self.tensor(self.choice(self.float_types)))
            return convert(load(self.tensor(self.choice(self.int_types))), "float32")
        return load(self.tensor(self.choice(self.int_types)))

    def weak(self, mode: str, axis_ok: bool = True) -> Node:
        if axis_ok and self.flag():
            return axis_value(self.choice(AXIS_FORMS), self.m, self.n)
        if mode == "complex":
            return const(self.choice(COMPLEX_CONSTS + FLOAT_CONSTS))
        return const(self.choice(FLOAT_CONSTS if mode == "float" else self.int_consts))

    # -- keeping values in range -----------------------------------------------------------------
    def fit(self, x: Node, limit: float) -> Node:
        """``x`` scaled into ``[-limit, limit]``: by a power of two (floats) or ``% p`` for a prime p (integers)."""
        if x.bound <= limit:
            return x
        if rules.is_inexact(x.dtype):
            return binary("mul", x, const(2.0 ** -math.ceil(math.log2(x.bound / limit))))
        modulus = next(p for p in (97, 61, 7, 3) if p - 1 <= limit)
        return binary("mod", x, const(modulus))

    def positive(self, x: Node) -> Node:
        """``x`` if it is at least 0.25, else ``abs(x) + 1``."""
        if x.lo > 0.25:
            return x
        one = const(1.0 if rules.is_float(x.dtype) else 1)
        return binary("add", unary("abs", x, self.choice(("abs", "pt.abs"))), one)

    def nonzero(self, x: Node) -> Node:
        """``x`` if it stays away from 0, else ``±(abs(x) + 1)``."""
        if x.lo > 0.25 or x.hi < -0.25:
            return x
        p = self.positive(x)
        return unary("neg", p) if self.flag() else p

    def away_from_zero(self, x: Node) -> Node:
        """A complex ``x`` if its modulus stays above 0.25, else ``±(x * 2**-k + 1.5)`` (modulus at least 1;
        the negative form lies around the negative real axis, the branch cut of ``log`` and ``sqrt``)."""
        if x.lo > 0.25:
            return x
        shifted = binary("add", self.fit(x, 0.5), const(1.5))
        return unary("neg", shifted) if self.flag() else shifted

    def settle(self, x: Node, mode: str) -> Node:
        return self.fit(x, LIMIT[mode])

    # -- expressions -----------------------------------------------------------------------------
    def kinds(self, mode: str) -> list[str]:
        if mode == "complex":
            # arithmetic and the functions twice as often: they are where complex numbers differ from pairs
            kinds = ["leaf", "scalar", "arith", "arith", "function", "function", "neg_conj", "power", "where", "reduce",
                     "parts"]  # fmt: skip
            if self.float_types or self.int_types:
                kinds.append("mixed")
            if len(self.complex_types) > 1 or self.float_types:
                kinds.append("cast")
            return [f"c_{k}" for k in kinds]
        if mode == "float":
            kinds = ["leaf", "scalar", "arith", "function", "neg_abs", "power", "where", "reduce", "floor_mod"]
            if self.int_types:
                kinds.append("mixed")
            if self.float_types and (self.int_types or len(self.float_types) > 1):
                kinds.append("cast")
            return kinds
        kinds = ["leaf", "scalar", "arith", "int_div", "bitwise", "neg_abs", "power", "where", "reduce", "bool_cast"]
        if self.has_float:
            kinds.append("float_trip")
        return kinds

    def numeric(self, depth: int, mode: str) -> Node:
        """A float (``mode="float"``), integer or complex expression of at most ``depth`` levels."""
        if depth <= 0:
            return self.leaf(mode)
        kind = self.choice(self.kinds(mode))
        return getattr(self, f"_{kind}")(depth - 1, mode)

    def _leaf(self, depth: int, mode: str) -> Node:
        return self.leaf(mode)

    def _scalar(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        ops = ["add", "sub", "mul", "maximum", "minimum"]
        ops += ["div"] if mode == "float" else ["floordiv", "mod", "and", "or", "xor"]
        op = self.choice(ops)
        w = self.weak(mode, axis_ok=op in ("add", "sub", "mul", "maximum", "minimum"))
        if op == "mul" and mode == "int":
            x = self.fit(x, 2.0**12)
        if self.flag():
            if op == "div":
                x = self.nonzero(x)
            return self.settle(binary(op, w, x), mode)
        return self.settle(binary(op, x, w), mode)

    def _arith(self, depth: int, mode: str) -> Node:
        a, b = self.numeric(depth, mode), self.numeric(depth, mode)
        op = self.choice(["add", "sub", "mul", "maximum", "minimum"] + (["div"] if mode == "float" else []))
        if op == "div":
            b = self.nonzero(b)
        if op == "mul" and mode == "int" and a.bound * b.bound > LIMIT["int"]:
            a, b = self.fit(a, 96), self.fit(b, 96)
        return self.settle(binary(op, a, b), mode)

    def _function(self, depth: int, mode: str) -> Node:
        op = self.choice(rules.FUNCTIONS)
        use_int = self.int_types and self.flag()  # a function of an integer computes in float32
        x = self.numeric(depth, "int" if use_int else mode)
        if op == "exp":
            x = self.fit(x, 8.0) if rules.is_float(x.dtype) else self.fit(x, 6)
        elif op in ("log", "rsqrt"):
            x = self.positive(x)
        elif op == "sqrt" and x.lo < 0:
            x = unary("abs", x, self.choice(("abs", "pt.abs")))
        elif op in ("sin", "cos"):
            x = self.fit(x, 64.0)
        return self.settle(unary(op, x), "float")

    def _neg_abs(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        op = self.choice(["neg", "abs", "pt.abs"] + (["invert"] if mode == "int" else []))
        if op == "pt.abs":
            return unary("abs", x, "pt.abs")
        return self.settle(unary(op, x), mode)

    def _power(self, depth: int, mode: str) -> Node:
        k = self.choice((2, 3, 0, -1, -2) if mode == "float" else (2, 3, 0))
        x = self.numeric(depth, mode)
        if k < 0:
            x = self.nonzero(x)
        elif k > 0:
            x = self.fit(x, 96) if mode == "int" else self.fit(x, LIMIT["float"] ** (1 / k))
        return self.settle(power(x, k), mode)

    def condition(self, depth: int) -> Node:
        """A boolean expression: comparisons, boolean tensors, ``~``, ``&``, ``|``, ``^``."""
        kinds = ["compare"] + (["mask"] if self.has_bool else []) + (["not", "combine"] if depth > 0 else [])
        kind = self.choice(kinds)
        if kind == "mask":
            return load(self.tensor("bool", mask=True))
        if kind == "not":
            return unary("invert", self.condition(depth - 1))
        if kind == "combine":
            return binary(self.choice(rules.LOGIC), self.condition(depth - 1), self.condition(depth - 1))
        modes = (["float"] if self.has_float else []) + (["int"] if self.int_types else [])
        modes += ["complex"] if self.complex_types else []
        mode = self.choice(modes)
        a = self.numeric(max(depth - 1, 0), mode)
        b = self.weak(mode) if self.flag() else self.numeric(max(depth - 1, 0), mode)
        return binary(self.choice(("eq", "ne") if mode == "complex" else rules.COMPARE), a, b)

    def _where(self, depth: int, mode: str) -> Node:
        cond = self.condition(depth)
        a = self.numeric(depth, mode)
        b = self.weak(mode, axis_ok=False) if self.flag() else self.numeric(depth, mode)
        if self.flag():
            a, b = b, a
        return select(cond, a, b)

    def _reduce(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        axes = [a for a in "ij" if a in x.sized and a in x.axes]
        if not self.inner_reduce or not axes:
            return x
        op = self.choice(["sum", "max", "min"] + (["mean"] if mode == "float" else []))
        return self.settle(reduce(op, x, (self.choice(axes),), self.m, self.n), mode)

    def _floor_mod(self, depth: int, mode: str) -> Node:
        a = self.numeric(depth, mode)
        b = self.nonzero(self.numeric(depth, mode) if self.flag() else const(self.choice(FLOAT_CONSTS)))
        return self.settle(binary(self.choice(["floordiv", "mod"]), a, b), mode)

    def _mixed(self, depth: int, mode: str) -> Node:
        a, b = self.numeric(depth, "float"), self.numeric(depth, "int")
        if self.flag():
            a, b = b, a
        return self.settle(binary(self.choice(["add", "sub", "mul", "maximum", "minimum"]), a, b), mode)

    def _cast(self, depth: int, mode: str) -> Node:
        if len(self.float_types) > 1 and (not self.int_types or self.flag()):
            x = self.numeric(depth, "float")
            other = sorted({t for t in self.float_types if t != x.dtype}) or self.float_types
            return convert(x, self.choice(other))
        return convert(self.numeric(depth, "int"), self.choice(self.float_types))

    def _int_div(self, depth: int, mode: str) -> Node:
        a, b = self.numeric(depth, mode), self.numeric(depth, mode)
        return self.settle(binary(self.choice(["floordiv", "mod"]), a, b), mode)

    def _bitwise(self, depth: int, mode: str) -> Node:
        a, b = self.numeric(depth, mode), self.numeric(depth, mode)
        return self.settle(binary(self.choice(rules.LOGIC), a, b), mode)

    def _bool_cast(self, depth: int, mode: str) -> Node:
        return convert(self.condition(depth), self.choice(self.int_types))

    def _float_trip(self, depth: int, mode: str) -> Node:
        x = self.fit(self.numeric(depth, "float"), LIMIT["int"])
        return convert(x, self.choice(self.int_types))

    # -- complex expressions ---------------------------------------------------------------------
    def _c_leaf(self, depth: int, mode: str) -> Node:
        return self.leaf(mode)

    def _c_scalar(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        op = self.choice(["add", "sub", "mul", "div"])
        w = self.weak(mode, axis_ok=op != "div")
        if self.flag():
            return self.settle(binary(op, w, self.away_from_zero(x) if op == "div" else x), mode)
        return self.settle(binary(op, x, w), mode)

    def _c_arith(self, depth: int, mode: str) -> Node:
        a, b = self.numeric(depth, mode), self.numeric(depth, mode)
        op = self.choice(["add", "sub", "mul", "div"])
        if op == "div":
            b = self.away_from_zero(b)
        return self.settle(binary(op, a, b), mode)

    def _c_function(self, depth: int, mode: str) -> Node:
        op = self.choice(rules.COMPLEX_FUNCTIONS)
        x = self.numeric(depth, mode)
        if op == "exp":
            x = self.fit(x, 8.0)
        elif op == "log":
            x = self.away_from_zero(x)
        return self.settle(unary(op, x), mode)

    def _c_neg_conj(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        op = self.choice(["neg", "pt.conj", ".conj()"])
        return unary("neg", x) if op == "neg" else unary("conj", x, op)

    def _c_power(self, depth: int, mode: str) -> Node:
        k = self.choice((2, 3, 0, -1, -2))
        x = self.numeric(depth, mode)
        x = self.away_from_zero(x) if k < 0 else self.fit(x, LIMIT[mode] ** (1 / max(k, 1)))
        return self.settle(power(x, k), mode)

    def _c_where(self, depth: int, mode: str) -> Node:
        return self._where(depth, mode)

    def _c_reduce(self, depth: int, mode: str) -> Node:
        x = self.numeric(depth, mode)
        axes = [a for a in "ij" if a in x.sized and a in x.axes]
        if not self.inner_reduce or not axes:
            return x
        return self.settle(reduce(self.choice(["sum", "mean"]), x, (self.choice(axes),), self.m, self.n), mode)

    def _c_parts(self, depth: int, mode: str) -> Node:
        """A real part of a complex value (abs, angle, real, imag) combined with a complex value."""
        spelling = self.choice(["abs", "pt.abs", "pt.angle", "pt.real", ".real", "pt.imag", ".imag"])
        op = spelling.removeprefix("pt.").removeprefix(".")
        r = unary(op, self.numeric(depth, mode), spelling)
        z = self.numeric(depth, mode)
        op = self.choice(["add", "sub", "mul"])
        return self.settle(binary(op, r, z) if self.flag() else binary(op, z, r), mode)

    def _c_mixed(self, depth: int, mode: str) -> Node:
        real = self.choice((["float"] if self.float_types else []) + (["int"] if self.int_types else []))
        a, b = self.numeric(depth, mode), self.numeric(depth, real)
        op = self.choice(["add", "sub", "mul", "div"])
        if op == "div":
            if self.flag():
                return self.settle(binary(op, b, self.away_from_zero(a)), mode)
            b = self.nonzero(b)
        elif self.flag():
            a, b = b, a
        return self.settle(binary(op, a, b), mode)

    def _c_cast(self, depth: int, mode: str) -> Node:
        if self.float_types and (len(self.complex_types) < 2 or self.flag()):
            return convert(self.numeric(depth, "float"), self.choice(self.complex_types))
        x = self.numeric(depth, mode)
        return convert(x, self.choice([t for t in self.complex_types if t != x.dtype] or self.complex_types))

    def near_one(self, x: Node, count: int) -> Node:
        """``x`` mapped into [1 - c, 1 + c] with c ~ 2 / count (floats) or [-1, 1] (integers), so a
        product of ``count`` of them stays within [e**-2, e**2] or [-1, 1]."""
        if rules.is_float(x.dtype):
            c = 2.0 ** -max(4, math.ceil(math.log2(max(count, 1) / 2)))
            return binary("add", const(1.0), binary("mul", unary("tanh", x), const(c)))
        return binary("sub", binary("mod", x, const(3)), const(1))


def _stores(x: Node) -> list[str]:
    stores = ["full", "trans"]
    has = {a for a in "ij" if a in x.axes and a in x.sized}
    if "j" in has:
        stores.append("row")
    if "i" in has:
        stores.append("col")
    if has == {"i", "j"}:
        stores.append("all")
    return stores


@st.composite
def programs(draw: Callable, family: str, dtypes: frozenset[str] = frozenset(rules.KIND)) -> Program:
    """A random kernel whose tensors and results use ``family`` (and only dtypes in ``dtypes``)."""
    m, n = draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES))
    empty = draw(st.sampled_from((None,) * 14 + ("M", "N")))
    m, n = (0 if empty == "M" else m), (0 if empty == "N" else n)
    b = Builder(draw, family, frozenset(dtypes) | {family}, m, n)
    depth = draw(st.integers(1, 5))
    mode = _mode(family)
    if b.has_bool and draw(st.sampled_from((False,) * 7 + (True,))):
        root, store = b.condition(depth), "full"
    else:
        x = b.numeric(depth, mode)
        store = draw(st.sampled_from(_stores(x)))
        root = x
        if store not in ("full", "trans"):
            over = {"row": ("j",), "col": ("i",), "all": ("i", "j")}[store]
            if mode == "complex":
                op = draw(st.sampled_from(["sum", "mean"]))
            else:
                op = draw(st.sampled_from(["sum", "max", "min", "prod"] + (["mean"] if mode == "float" else [])))
            if op == "prod":
                x = b.near_one(x, (m if "i" in over else 1) * (n if "j" in over else 1))
            root = reduce(op, x, over, m, n)
    seed = draw(st.integers(0, 2**32 - 1))
    swapped = draw(st.booleans())
    return Program(m, n, root, store, seed, tuple(tensors_of(root)), swapped)
