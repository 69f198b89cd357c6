"""A contraction nest in the loop IR, as every target's contraction schedule finds it.

Lowered, ``c[i, j] = f(pt.reduce_sum(a[.., i, k] * b[.., k, j], axis=k))`` is a loop over rows ``i``
holding one loop over columns ``j``, whose body declares an accumulator, folds ``a * b`` into it in a
loop over ``k``, then runs the epilogue (lets and writes). The ``cpu-simd`` target rewrites it into
register tiles (:mod:`pypto.targets.cpu.contractions`); the ``simt`` target runs it as work-groups
over output tiles (:mod:`pypto.targets.simt.tiles`).
"""

from __future__ import annotations

from pypto.dtypes import DType
from pypto.ir.loops import Assign, Comment, Declare, Let, Loop, Var, Write
from pypto.ir.nodes import Binary
from pypto.ir.reducers import identity
from pypto.targets.rewrite import PARALLEL, flat, var_names


class ContractionNest:
    """One matched nest: ``rows`` (i) holding ``cols`` (j) holding ``acc``'s reduction loop ``red`` (k)."""

    def __init__(self, rows: Loop):
        self.rows = rows

    def match(self) -> bool:
        """Whether the nest has the form; then ``cols``, ``acc`` (the accumulator's declaration), ``red``,
        ``tail`` (what follows the reduction), ``a`` and ``b`` (the factors: ``a`` without ``j``, ``b``
        without ``i``), ``k`` and ``dtype`` are set."""
        body = [s for s in flat(self.rows.body) if not isinstance(s, Comment)]
        if len(body) != 1 or not isinstance(body[0], Loop):
            return False
        self.cols = cols = body[0]
        i, j = self.rows.var, cols.var
        if cols.reductions or cols.kind in PARALLEL or (var_names(cols.start) | var_names(cols.stop)) & {i}:
            return False
        inner = flat(cols.body)
        if len(inner) < 3 or not isinstance(inner[0], Declare) or not isinstance(inner[1], Loop):
            return False
        decl, red = inner[0], inner[1]
        self.acc, self.red, self.tail = decl, red, inner[2:]
        if red.reductions != ((decl.name, "sum"),) or decl.init != identity("sum", decl.dtype):
            return False
        if (var_names(red.start) | var_names(red.stop)) & {i, j}:
            return False
        if any(not isinstance(s, (Let, Write, Comment)) for s in self.tail):
            return False
        fold = flat(red.body)
        if len(fold) != 1 or not isinstance(fold[0], Assign) or fold[0].name != decl.name:
            return False
        v = fold[0].value
        if not (isinstance(v, Binary) and v.op == "add" and v.a == Var(decl.name, dtype=decl.dtype)):
            return False
        prod = v.b
        if not (isinstance(prod, Binary) and prod.op == "mul"):
            return False
        k = red.var
        for a, b in ((prod.a, prod.b), (prod.b, prod.a)):
            na, nb = var_names(a), var_names(b)
            if j not in na and i not in nb and decl.name not in na | nb:
                self.a, self.b = a, b
                break
        else:
            return False
        self.k = k
        self.dtype: DType = decl.dtype
        return True
