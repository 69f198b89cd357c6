"""The ``cpu-simd`` target's ``private_scratch`` pass: a loop's scratch rows allocated in each of its iterations.

A temporary (:class:`~pypto.ir.loops.Alloc`) of shape ``(n, ...)`` around a loop ``for i in 0..n`` whose every
read and write is at ``[i, ...]`` (a sort's rows of keys, positions and counters: one row per point of the
parallel axis) is allocated inside the loop instead, one row's worth per iteration. The whole temporary is
never touched at once: allocated whole it is fresh memory at every call (the C library maps a large block
from the system, and each of its pages faults on first use, one thread at a time), while one row is reused
from the allocator's free list at the next iteration, still in the cache. Sorting the rows of 1024 x 4096
float32 allocated 72 MB and spent most of its time in page faults before this pass.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.loops import Alloc, Block, If, Loop, LoopKernel, Read, Stmt, Var, Write, stmt_exprs, walk
from pypto.ir.nodes import Const, Expr, Node, postorder, transform


def _accesses(s: Stmt, buffer: str) -> list[tuple[Expr, ...]]:
    """The index of every read and write of ``buffer`` under ``s``."""
    out: list[tuple[Expr, ...]] = []
    for st in walk(s):
        if isinstance(st, Write) and st.buffer == buffer:
            out.append(st.index)
        for e in stmt_exprs(st):
            out.extend(n.index for n in postorder(e) if isinstance(n, Read) and n.buffer == buffer)
    return out


def _drop_first(s: Stmt, buffer: str) -> Stmt:
    """``s`` with the first index of every access to ``buffer`` dropped."""

    def expr(e: Expr) -> Expr:
        def fn(n: Node) -> Node | None:
            return replace(n, index=n.index[1:]) if isinstance(n, Read) and n.buffer == buffer else None

        return transform(e, fn)  # type: ignore[return-value]

    def go(st: Stmt) -> Stmt:
        if isinstance(st, Block):
            return Block(tuple(go(b) for b in st.body))
        if isinstance(st, Loop):
            return replace(st, start=expr(st.start), stop=expr(st.stop), body=go(st.body))
        if isinstance(st, Alloc):
            return replace(st, shape=tuple(expr(d) for d in st.shape), body=go(st.body))
        if isinstance(st, If):
            return replace(
                st, cond=expr(st.cond), then=go(st.then), orelse=None if st.orelse is None else go(st.orelse)
            )
        if isinstance(st, Write):
            index = tuple(expr(i) for i in st.index)
            return replace(st, index=index[1:] if st.buffer == buffer else index, value=expr(st.value))
        if hasattr(st, "value"):  # Let, Assign
            return replace(st, value=expr(st.value))  # type: ignore[call-arg]
        if hasattr(st, "init"):  # Declare
            return replace(st, init=expr(st.init))  # type: ignore[call-arg]
        return st

    return go(s)


def _private(a: Alloc) -> Stmt:
    """``a`` moved into the loop it encloses when every access is at that loop's index (module docstring); the
    statements before the loop (values hoisted out of it) stay before it."""
    before: tuple[Stmt, ...] = ()
    loop = a.body
    if isinstance(loop, Block) and loop.body:
        before, loop = loop.body[:-1], loop.body[-1]
    if not (isinstance(loop, Loop) and a.shape and not a.local) or any(_accesses(b, a.buffer) for b in before):
        return a
    if not (isinstance(loop.start, Const) and loop.start.value == 0 and loop.stop == a.shape[0]):
        return a
    point = Var(loop.var, dtype=loop.start.dtype)
    seen = _accesses(loop.body, a.buffer)
    if not seen or any(not ix or ix[0] != point for ix in seen):
        return a
    inner = Alloc(a.buffer, a.dtype, a.shape[1:], _drop_first(loop.body, a.buffer))
    moved = replace(loop, body=_private(inner) if inner.shape else inner)
    return Block((*before, moved)) if before else moved


def private_scratch(k: LoopKernel) -> LoopKernel:
    """Temporaries read and written only at a loop's own index are allocated per iteration (module docstring)."""

    def go(s: Stmt) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(go(b) for b in s.body))
        if isinstance(s, Loop):
            return replace(s, body=go(s.body))
        if isinstance(s, If):
            return replace(s, then=go(s.then), orelse=None if s.orelse is None else go(s.orelse))
        if isinstance(s, Alloc):
            return _private(replace(s, body=go(s.body)))
        return s

    return replace(k, body=go(k.body))


__all__ = ["private_scratch"]
