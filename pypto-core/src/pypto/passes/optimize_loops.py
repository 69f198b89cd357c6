"""Loop-level clean-up after lowering: hoist loop-invariant arithmetic, divide by reciprocals.

* Arithmetic that does not depend on a loop (and reads no memory) is computed once before it.
* A floating-point division whose divisor is invariant in the loop becomes a multiplication by
  the divisor's reciprocal, computed once (softmax's ``/ sum`` per element becomes ``* (1 / sum)``).
  NaN and infinity behave as with the division; the result may differ from the division by one
  rounding (at most about one ulp), and divisors below the smallest normal number lose accuracy.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.loops import Alloc, Assign, Block, Declare, If, Let, Loop, LoopKernel, Read, Stmt, Var, Write, walk
from pypto.ir.names import NameGen
from pypto.ir.nodes import Binary, Cast, Const, Expr, Unary, Where, children, map_children, postorder

_COMPOUND = (Unary, Binary, Where, Cast)


def optimize_loops(k: LoopKernel) -> LoopKernel:
    """Hoist invariant arithmetic out of loops and use reciprocals for invariant divisors."""
    names = {a.name for a in k.args}
    for s in walk(k.body):
        if isinstance(s, (Let, Declare, Assign)):
            names.add(s.name)
        elif isinstance(s, Loop):
            names.add(s.var)
        elif isinstance(s, Alloc):
            names.add(s.buffer)
    opt = _Optimizer(names)
    body = opt.stmt(k.body)
    return replace(k, body=body)


class _Optimizer:
    def __init__(self, taken: set[str]):
        self.names = NameGen(taken)

    def fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Block):
            out: list[Stmt] = []
            for b in s.body:
                r = self.stmt(b)
                out.extend(r.body if isinstance(r, Block) and isinstance(b, Loop) else [r])
            return Block(tuple(out))
        if isinstance(s, Loop):
            inner = replace(s, body=self.stmt(s.body))
            return self.hoist(inner)
        if isinstance(s, Alloc):
            return Alloc(s.buffer, s.dtype, s.shape, self.stmt(s.body))
        if isinstance(s, If):
            return If(s.cond, self.stmt(s.then), self.stmt(s.orelse) if s.orelse is not None else None)
        return s

    def hoist(self, loop: Loop) -> Stmt:
        variant = {loop.var}
        for st in walk(loop.body):
            if isinstance(st, (Let, Declare, Assign)):
                variant.add(st.name)
            elif isinstance(st, Loop):
                variant.add(st.var)
            elif isinstance(st, Alloc):
                variant.add(st.buffer)

        def invariant(e: Expr) -> bool:
            return not any(isinstance(n, Read) or (isinstance(n, Var) and n.name in variant) for n in postorder(e))

        lets: list[Let] = []
        bound: dict[Expr, Var] = {}

        def hoisted(e: Expr) -> Var:
            v = bound.get(e)
            if v is None:
                v = Var(self.fresh("inv" if _is_reciprocal(e) else "h"), dtype=e.dtype)
                lets.append(Let(v.name, e))
                bound[e] = v
            return v

        def rewrite(e: Expr) -> Expr:
            if isinstance(e, _COMPOUND) and invariant(e) and not _trivial(e):
                return hoisted(e)
            if isinstance(e, Binary) and e.op == "div" and e.dtype is not None and e.dtype.is_float:
                if invariant(e.b) and not isinstance(e.b, Const):
                    recip = Binary("div", Const(1.0, dtype=e.dtype), e.b, dtype=e.dtype)
                    return Binary("mul", rewrite(e.a), hoisted(recip), dtype=e.dtype)
            r = map_children(e, rewrite)
            return r  # type: ignore[return-value]

        body = _map_exprs(loop.body, rewrite)
        new = replace(loop, body=body)
        if not lets:
            return new
        return Block((*lets, new))


def _trivial(e: Expr) -> bool:
    """Not worth a variable: a cast of a variable or constant."""
    return isinstance(e, Cast) and not any(isinstance(c, _COMPOUND) for c in children(e))


def _is_reciprocal(e: Expr) -> bool:
    return isinstance(e, Binary) and e.op == "div" and isinstance(e.a, Const) and e.a.value == 1.0


def _map_exprs(s: Stmt, fn) -> Stmt:
    """``s`` with ``fn`` applied to the expressions of this loop body (not to nested loops' own)."""
    if isinstance(s, Block):
        return Block(tuple(_map_exprs(b, fn) for b in s.body))
    if isinstance(s, Let):
        return Let(s.name, fn(s.value))
    if isinstance(s, Assign):
        return Assign(s.name, fn(s.value))
    if isinstance(s, Declare):
        return Declare(s.name, s.dtype, fn(s.init))
    if isinstance(s, Write):  # an atomic Update stays one
        return replace(s, value=fn(s.value))
    if isinstance(s, If):
        return If(fn(s.cond), _map_exprs(s.then, fn), _map_exprs(s.orelse, fn) if s.orelse is not None else None)
    if isinstance(s, Loop):
        # a nested loop was optimised already; its bounds may still use hoistable arithmetic
        return replace(s, start=fn(s.start), stop=fn(s.stop), body=_map_exprs(s.body, fn))
    if isinstance(s, Alloc):
        return Alloc(s.buffer, s.dtype, s.shape, _map_exprs(s.body, fn))
    return s
