"""Reducers: each is an identity element and an associative combine (``Reduce.op`` names one)."""

from __future__ import annotations

import math

from pypto.dtypes import DType
from pypto.ir.nodes import Binary, Const, Expr

COMBINE_OP = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def identity(op: str, dt: DType) -> Const:
    """The neutral element of reducer ``op`` in type ``dt`` (the result of an empty reduction)."""
    if op == "sum":
        return Const(0.0 if dt.is_float else 0, dtype=dt)
    if op == "prod":
        return Const(1.0 if dt.is_float else 1, dtype=dt)
    if dt.is_float:
        return Const(-math.inf if op == "max" else math.inf, dtype=dt)
    lim = 2 ** (dt.bits - 1)
    return Const(-lim if op == "max" else lim - 1, dtype=dt)


def combine(op: str, acc: Expr, v: Expr) -> Expr:
    """``acc ⊕ v`` for reducer ``op`` (max and min propagate NaN, like NumPy)."""
    return Binary(COMBINE_OP[op], acc, v, dtype=acc.dtype)
