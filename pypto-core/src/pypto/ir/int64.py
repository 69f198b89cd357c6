"""int64 index arithmetic for the loop IR: builders that fold constants (``add(2, 3)`` is ``3 + 2`` computed,
``x + 0`` is ``x``, ``x * 1`` is ``x``), used by the lowering passes wherever they compute loop bounds and
positions."""

from __future__ import annotations

from pypto import dtypes
from pypto.ir.nodes import Binary, Const, Expr

I64 = dtypes.int64


def i64(v: int) -> Const:
    """The int64 constant ``v``."""
    return Const(int(v), dtype=I64)


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return i64(a.value + b.value)
    if isinstance(b, Const) and b.value == 0:
        return a
    if isinstance(a, Const) and a.value == 0:
        return b
    return Binary("add", a, b, dtype=I64)


def sub(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return i64(a.value - b.value)
    if isinstance(b, Const) and b.value == 0:
        return a
    return Binary("sub", a, b, dtype=I64)


def mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return i64(a.value * b.value)
    if isinstance(b, Const) and b.value == 1:
        return a
    if isinstance(a, Const) and a.value == 1:
        return b
    return Binary("mul", a, b, dtype=I64)


def minimum(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return i64(min(a.value, b.value))
    return Binary("minimum", a, b, dtype=I64)


def maximum(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return i64(max(a.value, b.value))
    return Binary("maximum", a, b, dtype=I64)


__all__ = ["I64", "i64", "add", "sub", "mul", "minimum", "maximum"]
