"""Reducers as IR: each ``Reduce.op`` is an entry of :data:`pypto.ir.ops.REDUCERS` (identity, combine)."""

from __future__ import annotations

from pypto.dtypes import DType
from pypto.ir.nodes import Binary, Const, Expr
from pypto.ir.ops import REDUCERS

COMBINE_OP = {r.name: r.combine for r in REDUCERS.values()}
"""``{reducer: the binary operator it combines with}``."""


def identity(op: str, dt: DType) -> Const:
    """The neutral element of reducer ``op`` in type ``dt`` (the result of an empty reduction)."""
    return Const(REDUCERS[op].identity(dt), dtype=dt)


def combine(op: str, acc: Expr, v: Expr) -> Expr:
    """``acc ⊕ v`` for reducer ``op`` (max and min propagate NaN, like NumPy)."""
    return Binary(COMBINE_OP[op], acc, v, dtype=acc.dtype)
