"""The values a parallel loop's body reads from outside it, passed to the code that runs its chunks by value.

Both CPU backends run a parallel loop's chunks through one piece of code, called with threads or
directly when the nest is too small for threads: TBB a chunk lambda, OpenMP a function of its own
(``pt_nest<n>``). That code takes the buffers and sizes its body reads as parameters. A lambda that
reaches them through by-reference captures loads them from the closure inside every loop; gcc then
no longer sees the base pointers and row lengths as loop invariant and vectorises
``x[row * N + col]`` as a gather (3x slower softmax). As parameters they are plain local values
again, and buffer pointers keep their ``restrict`` qualifier.
"""

from __future__ import annotations

from pypto.dtypes import DType
from pypto.ir.loops import Alloc, Assign, Declare, Let, Loop, Read, Var, Write, stmt_exprs, walk
from pypto.ir.nodes import Expr, postorder


def free_values(s: Loop, shapes: dict[str, tuple[Expr, ...]]) -> tuple[list[str], list[tuple[str, DType]]]:
    """Buffers and scalars that ``s``'s body uses but does not define, each sorted by name.

    ``shapes`` gives every buffer's shape: row-major offsets read its sizes but the first.
    """
    defined: set[str] = set()
    buffers: set[str] = set()
    inner: set[str] = set()  # buffers allocated inside the body (register tiles, packed panels)
    used: dict[str, DType] = {}
    exprs: list[Expr] = []
    for st in walk(s.body):
        if isinstance(st, Loop):
            defined.add(st.var)
        elif isinstance(st, (Let, Declare)):
            defined.add(st.name)
        elif isinstance(st, Alloc):
            inner.add(st.buffer)
        elif isinstance(st, Write):
            buffers.add(st.buffer)
        exprs.extend(stmt_exprs(st))
    defined.add(s.var)
    pending, seen = list(exprs), 0
    while seen < len(pending):  # a read's index is a field of its own, not a child: visited as one more expression
        for n in postorder(pending[seen]):
            if isinstance(n, Read):
                buffers.add(n.buffer)
                pending.extend(n.index)
        seen += 1
    buffers -= inner
    for b in buffers:
        pending.extend(shapes.get(b, ())[1:])
    for e in pending:
        for n in postorder(e):
            if isinstance(n, Var) and n.name not in defined and n.dtype is not None:
                used[n.name] = n.dtype
    return sorted(buffers), sorted(used.items())


def assigned_outside(s: Loop) -> set[str]:
    """Variables ``s``'s body assigns but declares outside it (accumulators of an enclosing reduction)."""
    declared = {st.name for st in walk(s.body) if isinstance(st, Declare)}
    return {st.name for st in walk(s.body) if isinstance(st, Assign) and st.name not in declared}
