"""Simplification and common-subexpression elimination on the typed tensor IR.

Folds constant arithmetic in the operands' own precision (float32 stays float32), removes
identities that are exact in IEEE arithmetic (``x * 1``, ``x - 0``, casts to the same type,
``where`` on a constant condition), and makes structurally equal subtrees one shared node so a
value used twice (``exp_val`` in softmax) is recognisably the same value downstream.
"""

from __future__ import annotations

import warnings

import numpy as np

from pypto.ir.kernel import KernelIR
from pypto.ir.nodes import Binary, Cast, Const, Expr, Node, Store, Unary, Where, transform
from pypto.ir.ops import BINARY_TABLE, CAST

_NP_BINARY = {o.name: o.numpy for o in BINARY_TABLE if o.folds}  # constant folding, in the operands' precision


def _const(value, like: Expr) -> Const:
    v = value.item() if hasattr(value, "item") else value
    return Const(v, weak=False, dtype=like.dtype, loc=like.loc)


def _fold(n: Node) -> Node | None:
    if isinstance(n, Cast) and isinstance(n.x, Const):  # the op table's conversion (pypto.ir.ops.CAST)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = CAST.numpy(np.array(n.x.value, dtype=n.x.dtype.numpy), n.dtype.numpy)
        return _const(v, n)
    if isinstance(n, Cast) and n.x.dtype == n.dtype:
        return n.x
    if isinstance(n, Unary) and n.op == "neg" and isinstance(n.x, Unary) and n.x.op == "neg":
        return n.x.x
    if isinstance(n, Unary) and n.op == "neg" and isinstance(n.x, Const):
        return _const(-np.array(n.x.value, dtype=n.dtype.numpy), n)
    if isinstance(n, Where) and isinstance(n.cond, Const):
        return n.a if n.cond.value else n.b
    if isinstance(n, Where) and n.a == n.b:
        return n.a
    if isinstance(n, Binary):
        a, b, op = n.a, n.b, n.op
        if isinstance(a, Const) and isinstance(b, Const) and op in _NP_BINARY:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                v = _NP_BINARY[op](np.array(a.value, dtype=a.dtype.numpy), np.array(b.value, dtype=b.dtype.numpy))
            return _const(np.asarray(v).astype(n.dtype.numpy), n)
        if op == "mul" and isinstance(b, Const) and b.value == 1:
            return a
        if op == "mul" and isinstance(a, Const) and a.value == 1:
            return b
        if op == "div" and isinstance(b, Const) and b.value == 1:
            return a
        if op == "sub" and isinstance(b, Const) and b.value == 0:
            return a
        if op == "add" and n.dtype.is_int:
            if isinstance(b, Const) and b.value == 0:
                return a
            if isinstance(a, Const) and a.value == 0:
                return b
    return None


def simplify(k: KernelIR) -> KernelIR:
    """Fold constants, drop exact identities, and share equal subexpressions (CSE)."""
    canon: dict[Node, Node] = {}

    def rewrite(n: Node) -> Node:
        while True:
            r = _fold(n)
            if r is None or r is n:
                break
            n = r
        return canon.setdefault(n, n)

    memo: dict = {}
    stores = []
    for s in k.stores:
        v = transform(s.value, rewrite, memo)
        assert isinstance(v, Expr)
        stores.append(Store(s.tensor, s.index, v, loc=s.loc))
    return k.replace(stores=tuple(stores))
