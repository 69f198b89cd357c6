"""Questions the SIMT renderer asks of loop-IR statements and expressions (no rendering here)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pypto.dtypes import DType
from pypto.ir.loops import (
    Alloc,
    Assign,
    Block,
    Comment,
    Declare,
    If,
    Let,
    Loop,
    LoopKernel,
    Read,
    Stmt,
    Var,
    Write,
    stmt_exprs,
    walk,
)
from pypto.ir.nodes import Binary, Const, Expr, children, map_children
from pypto.ir.reducers import COMBINE_OP

REDUCER_OF = {v: k for k, v in COMBINE_OP.items()}  # "add" -> "sum", ...


class Unsupported(Exception):
    """A loop shape a mapping does not handle; the caller falls back to a simpler mapping."""


def deep(e: Expr) -> Iterator[Expr]:
    """Every distinct expression under ``e``, the indices of its buffer reads included."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(children(n))
        if isinstance(n, Read):
            stack.extend(n.index)


def mentions(e: Expr, names: set[str]) -> bool:
    return bool(names) and any(isinstance(n, Var) and n.name in names for n in deep(e))


def only(e: Expr, known: set[str]) -> bool:
    """Whether ``e`` is computed from ``known`` names alone (no memory, no locals)."""
    return all(not isinstance(n, Read) and (not isinstance(n, Var) or n.name in known) for n in deep(e))


def only_all(es: Iterable[Expr], known: set[str]) -> bool:
    return all(only(e, known) for e in es)


def names(stmts: Iterable[Stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for st in walk(s):
            if isinstance(st, Assign):
                out.add(st.name)
            for e in stmt_exprs(st):
                out |= {n.name for n in deep(e) if isinstance(n, Var)}
    return out


def assigned(s: Stmt) -> set[str]:
    """Variables assigned in ``s`` that are declared outside it."""
    declared = {st.name for st in walk(s) if isinstance(st, Declare)}
    return {st.name for st in walk(s) if isinstance(st, Assign) and st.name not in declared}


def assigned_outside(loop: Loop) -> bool:
    return bool(assigned(loop.body))


def writes_through_data(loop: Loop) -> bool:
    """Whether the loop writes at an index read from memory (a scatter): two of its iterations may write one
    element, so they are not independent."""
    return any(
        isinstance(st, Write) and any(isinstance(n, Read) for ix in st.index for n in deep(ix))
        for st in walk(loop.body)
    )


def fold_op(s: Stmt, acc: str) -> str | None:
    """The reducer every assignment of ``acc`` in ``s`` folds with, if they all use one."""
    ops = set()
    for st in walk(s):
        if isinstance(st, Assign) and st.name == acc:
            v = st.value
            if not (isinstance(v, Binary) and v.op in REDUCER_OF and isinstance(v.a, Var) and v.a.name == acc):
                return None
            if mentions(v.b, {acc}):
                return None
            ops.add(REDUCER_OF[v.op])
    return ops.pop() if len(ops) == 1 else None


def holds_loops(s: Stmt) -> bool:
    return any(isinstance(st, Loop) for st in walk(s))


def reads(s: Stmt) -> dict[str, list[tuple[Expr, ...]]]:
    out: dict[str, list[tuple[Expr, ...]]] = {}
    for st in walk(s):
        for e in stmt_exprs(st):
            for n in deep(e):
                if isinstance(n, Read):
                    out.setdefault(n.buffer, []).append(n.index)
    return out


def writes(s: Stmt) -> set[str]:
    return {st.buffer for st in walk(s) if isinstance(st, Write)}


def reads_what_it_writes(s: Stmt) -> bool:
    return bool(writes(s) & reads(s).keys())


def unit_stride(e: Expr, var: Var) -> bool:
    """Whether the int64 expression ``e`` grows by exactly one when ``var`` does."""
    return coefficient(e, var.name) == 1


def coefficient(e: Expr, name: str) -> int | None:
    """The coefficient of ``name`` in an affine int64 expression (None if not affine in it)."""
    if isinstance(e, Var):
        return 1 if e.name == name else 0
    if isinstance(e, Const):
        return 0
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        a, b = coefficient(e.a, name), coefficient(e.b, name)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b
    if isinstance(e, Binary) and e.op == "mul":
        a, b = coefficient(e.a, name), coefficient(e.b, name)
        if a == 0 and b == 0:
            return 0
        if a == 0 and isinstance(e.a, Const):
            return None if b is None else int(e.a.value) * b
        if b == 0 and isinstance(e.b, Const):
            return None if a is None else int(e.b.value) * a
        return None if (a != 0 or b != 0) else 0
    return None if mentions(e, {name}) else 0


def substitute(e: Expr, values: dict[str, Expr]) -> Expr:
    def go(n: Expr) -> Expr:
        if isinstance(n, Var) and n.name in values:
            return go(values[n.name])
        if isinstance(n, Read):
            return Read(n.buffer, tuple(go(i) for i in n.index), dtype=n.dtype)
        return map_children(n, go)  # type: ignore[return-value]

    return go(e)


def sink_declares(flat: list[Stmt], known: set[str]) -> list[Stmt]:
    """Move declarations with pure initial values next to their first use (saves a kernel launch)."""
    out = list(flat)
    for s in list(out):
        if not (isinstance(s, Declare) and only(s.init, known)):
            continue
        i = out.index(s)
        j = i + 1
        while j < len(out) and s.name not in names([out[j]]) and not isinstance(out[j], Comment):
            j += 1
        while j < len(out) and isinstance(out[j], Comment):
            j += 1
        if j > i + 1:
            out.pop(i)
            out.insert(j - 1, s)
    return out


def dtypes(k: LoopKernel) -> set[DType]:
    out = {a.dtype for a in k.args}
    for st in walk(k.body):
        if isinstance(st, (Declare, Alloc)):
            out.add(st.dtype)
        for e in stmt_exprs(st):
            out |= {n.dtype for n in deep(e) if n.dtype is not None}
    return out


def declares(s: If, pure: set[str]) -> bool:
    """Whether a branch declares variables (other than pure lets) that code after it could see."""
    for b in (s.then, s.orelse):
        for x in b.body if isinstance(b, Block) else (b,) if b is not None else ():
            if isinstance(x, (Declare, Let)) and x.name not in pure:
                return True
    return False


def body(s: Stmt) -> tuple[Stmt, ...]:
    return s.body if isinstance(s, Block) else (s,)


def accesses(s: Stmt, buf: str) -> list[Read | Write]:
    """Every read and write of ``buf`` in ``s``."""
    out: list[Read | Write] = []
    for st in walk(s):
        if isinstance(st, Write) and st.buffer == buf:
            out.append(st)
        for e in stmt_exprs(st):
            out += [n for n in deep(e) if isinstance(n, Read) and n.buffer == buf]
    return out
