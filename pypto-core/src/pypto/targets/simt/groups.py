"""Work-group sharing for the SIMT renderer: statements a group's threads run together.

In a ``groups`` or ``single`` kernel every statement runs in every thread of the group, so values
stay uniform, except shared loops (vector and parallel loops, and loops that only fold values
into accumulators), whose iterations the threads split between them. An accumulator folded in a
shared loop holds a per-thread partial result until the statement that contains the loop ends;
the group then combines the partials (:meth:`GroupSharing.group_reduce_call`, deterministic for a
given group size) and every thread sees the result. Writes outside shared loops are done by the
first thread; a barrier is placed where a thread may read what another one wrote. Rows a group
reads in several shared loops can be kept in local memory (a variant of the kernel).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pypto.dtypes import DType, int64
from pypto.ir.loops import (
    Alloc,
    Assign,
    Block,
    Comment,
    Declare,
    If,
    Let,
    Loop,
    Read,
    Stmt,
    Var,
    Write,
    stmt_exprs,
    walk,
)
from pypto.ir.nodes import Binary, Const, Expr
from pypto.ir.reducers import identity
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.analysis import Unsupported

SCRATCH = "pt_scratch"  # the reduction's local memory (an OpenCL kernel argument)
SHAREABLE = ("vector", "parallel", "parallel_vector")


@dataclass
class Partial:
    """An accumulator holding per-thread partial results until the group reduces it."""

    op: str
    dtype: DType
    pre: str | None  # saved value to combine with after the reduction (None: started at the identity)


class GroupSharing:
    """The group-shared half of :class:`~pypto.targets.simt.render.SimtRenderer`, mixed into it (it uses
    the renderer's expressions, statements and per-kernel state)."""

    def group_reduce_source(self, op: str, dt: DType, fn: str) -> str:
        """A function combining one value per thread of the group; every thread gets the result.

        A tree in local memory over a power-of-two group size: the same order for every call,
        so results are deterministic for a given group size.
        """
        t, q = self.ctype(dt), self.local_qualifier
        return (
            f"{self.static_inline} {t} {fn}({t} v, {q}{t} *s, long lid, long n) {{\n"
            f"    if (n == 1) return v;  /* one work-item (CPU devices): no barrier once inlined */\n"
            f"    s[lid] = v;\n"
            f"    {self.barrier}\n"
            f"    for (long h = n >> 1; h > 0; h >>= 1) {{\n"
            f"        if (lid < h) s[lid] = {self.combine_text(op, dt, 's[lid]', 's[lid + h]')};\n"
            f"        {self.barrier}\n"
            f"    }}\n"
            f"    v = s[0];\n"
            f"    {self.barrier}\n"
            f"    return v;\n}}"
        )

    def group_reduce_call(self, op: str, dt: DType, value: str) -> str:
        """The call reducing ``value`` over the group (OpenCL: through the local scratch argument)."""
        fn = self.helper(f"group_{op}", dt)
        return f"{fn}({value}, ({self.local_qualifier}{self.ctype(dt)} *){SCRATCH}, pt_lid, pt_L)"

    def shareable(self, s: Loop) -> tuple[tuple[str, str], ...] | None:
        """The reductions of a loop the group's threads may share, or None if they must not.

        Vector and parallel loops are independent up to their declared reductions. A serial loop
        whose body only folds values into accumulators (the ordered combine of a split reduction)
        is a reduction too.
        """
        if s.kind in SHAREABLE or s.reductions:
            return s.reductions
        body = s.body.body if isinstance(s.body, Block) else (s.body,)
        reds: list[tuple[str, str]] = []
        for b in body:
            if isinstance(b, Comment) or (isinstance(b, Let) and not ana.mentions(b.value, {a for a, _ in reds})):
                continue
            if not isinstance(b, Assign):
                return None
            v = b.value
            if not (isinstance(v, Binary) and v.op in ana.REDUCER_OF and isinstance(v.a, Var) and v.a.name == b.name):
                return None
            reds.append((b.name, ana.REDUCER_OF[v.op]))
        names = {a for a, _ in reds}
        for b in body:
            if isinstance(b, Assign) and ana.mentions(b.value.b, names):  # type: ignore[attr-defined]
                return None
        return tuple(reds) if reds else None

    def group_block(self, stmts: Iterable[Stmt], ind: int, level: int) -> None:
        """Statements run by every thread of the group; reductions land after their statement."""
        for s in stmts:
            if isinstance(s, Block):
                self.group_block(s.body, ind, level)
                continue
            self.group_stmt(s, ind, level)
            self.reduce_finished(ind, level)

    def group_stmt(self, s: Stmt, ind: int, level: int) -> None:
        st = self.st
        if isinstance(s, Comment):
            self.stmt(s, ind)
            return
        if isinstance(s, Alloc):
            raise Unsupported("a temporary inside a device kernel")
        if isinstance(s, Loop):
            self.group_loop(s, ind, level)
            return
        self.check_uniform(stmt_exprs(s))
        self.sync_before(s, ind)
        if isinstance(s, Declare):
            st.level[s.name] = level
            st.pristine.pop(s.name, None)
            if isinstance(s.init, Const):
                st.pristine[s.name] = s.init
            self.stmt(s, ind)
        elif isinstance(s, Assign):
            st.pristine.pop(s.name, None)
            self.stmt(s, ind)
        elif isinstance(s, Let):
            self.stmt(s, ind)
        elif isinstance(s, Write):  # every thread has the value: the first one stores it
            off = self.offset(s.buffer, s.index)
            if s.buffer in st.caches:
                raise Unsupported("a cached row written outside a shared loop")
            self.emit(ind, f"if (pt_lid == 0) {s.buffer}[{off}] = {self.expr(s.value)};")
            st.written.setdefault(s.buffer, set()).add(("lid0", "", off))
        elif isinstance(s, If):
            self.emit(ind, f"if ({self.expr(s.cond)}) {{")
            self.group_block([s.then], ind + 1, level + 1)
            if s.orelse is not None:
                self.emit(ind, "} else {")
                self.group_block([s.orelse], ind + 1, level + 1)
            self.emit(ind, "}")
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def group_loop(self, s: Loop, ind: int, level: int) -> None:
        st = self.st
        self.check_uniform((s.start, s.stop))
        reds = self.shareable(s)
        if reds is None:  # every thread runs the loop; its body may hold shared loops
            self.sync_before(s, ind)
            start, stop = self.index_expr(s.start), self.index_expr(s.stop, 10)
            it = self.index_type
            self.emit(ind, f"for ({it} {s.var} = {start}; {s.var} < {stop}; {s.var}++) {{")
            self.group_block([s.body], ind + 1, level + 1)
            if ana.reads_what_it_writes(s):
                self.emit(ind + 1, self.barrier_global)
                st.written.clear()
            self.emit(ind, "}")
            return
        accs = ana.assigned(s.body)
        for acc in accs:
            if acc not in st.level:
                raise Unsupported(f"accumulator '{acc}' is not declared in this kernel")
        ops = dict(reds)
        for acc in sorted(accs):
            if acc in st.partial:
                continue
            op = ops.get(acc) or ana.fold_op(s.body, acc)
            if op is None:
                raise Unsupported(f"'{acc}' is assigned in a shared loop without being reduced")
            dt = self.declared_types[acc]
            pre = None
            if st.pristine.get(acc) != identity(op, dt):  # fold the value it had in after the reduction
                st.counter += 1
                pre = f"{acc}_pre{st.counter}"
                self.emit(ind, f"const {self.ctype(dt)} {pre} = {acc};")
                self.emit(ind, f"{acc} = {self.literal(identity(op, dt).value, dt)};")
            st.partial[acc] = Partial(op, dt, pre)
            st.pristine.pop(acc, None)
        # inside the loop the accumulators may only be folded into
        for b in walk(s.body):
            for e in stmt_exprs(b):
                if isinstance(b, Assign) and b.name in accs and isinstance(e, Binary):
                    e = e.b
                if ana.mentions(e, set(st.partial)):
                    raise Unsupported("a partial accumulator is read inside a shared loop")
        self.synced_shared_loop(s, ind)

    def check_uniform(self, exprs: Iterable[Expr]) -> None:
        """Statements every thread runs may not read an accumulator holding per-thread partials."""
        partial = set(self.st.partial)
        if partial and any(ana.mentions(e, partial) for e in exprs):
            raise Unsupported("a partial accumulator is read before its group reduction")

    def reduce_finished(self, ind: int, level: int) -> None:
        for acc in [a for a, p in self.st.partial.items() if self.st.level.get(a) == level]:
            p = self.st.partial.pop(acc)
            self.st.reductions = True
            self.emit(ind, f"{acc} = {self.group_reduce_call(p.op, p.dtype, acc)};")
            if p.pre is not None:
                self.emit(ind, f"{acc} = {self.combine_text(p.op, p.dtype, p.pre, acc)};")

    def synced_shared_loop(self, s: Loop, ind: int) -> None:
        """A shared loop, after a barrier if it reads elements other threads wrote before it.

        Whether a thread reads only what it wrote itself depends on how the loop splits its points
        (one at a time, or in vectors), known once it is rendered; the barrier goes in afterwards.
        """
        st = self.st
        before = {b: set(o) for b, o in st.written.items()}
        mark = len(self.lines)
        self.shared_loop(s, ind)
        if self.conflicts(s, before, st.last_width):
            self.lines.insert(mark, self.indent_unit * ind + self.barrier_global)
            now = {b: o - before.get(b, set()) for b, o in st.written.items()}
            st.written = {b: o for b, o in now.items() if o}

    def shared_loop(self, s: Loop, ind: int) -> None:
        """A loop whose iterations the group's threads share (thread ``t`` takes ``t, t + L, ...``)."""
        outer, self.st.strided = self.st.strided, s
        rows = self.unfilled_rows(s)
        self.st.last_width = 1
        place, self.shared_count = self.shared_count, self.shared_count + 1
        if self.lanes > 1 and not ana.holds_loops(s.body) and self.vector_ok is None:  # plan_launch tries
            mark, written = len(self.lines), {b: set(o) for b, o in self.st.written.items()}
            filled = set(self.st.filled)
            try:
                self.shared_lanes(s, ind, rows)
                self.vector_found[place] = s.var
                self.st.strided = outer
                self.st.last_width = self.lanes
                return
            except Unsupported:
                del self.lines[mark:]
                self.st.written, self.st.filled = written, filled
        elif self.lanes > 1 and self.vector_ok and place in self.vector_ok:
            self.shared_lanes(s, ind, rows)
            self.st.strided = outer
            self.st.last_width = self.lanes
            return
        start, stop = self.index_expr(s.start, 12), self.index_expr(s.stop, 10)
        if self.strided_loop_pragma:  # several of a thread's points in flight at once
            self.emit(ind, self.strided_loop_pragma)
        self.emit(ind, f"for ({self.index_type} {s.var} = {start} + pt_lid; {s.var} < {stop}; {s.var} += pt_L) {{")
        self.fill_rows(rows, ind + 1)
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")
        self.st.strided = outer

    def shared_lanes(self, s: Loop, ind: int, rows: dict[str, tuple[Expr, ...]]) -> None:
        """A shared loop over vectors of ``lanes`` points (thread ``t`` takes vectors ``t, t + L, ...``),
        then the points left over, one at a time."""
        from pypto.targets.simt.lanes import LaneWriter

        w, it = self.lanes, self.index_type
        accs = {a: p.op for a, p in self.st.partial.items() if a in ana.assigned(s.body)}
        lanes = LaneWriter(self, s.var, w, accs)
        start, stop = self.index_expr(s.start, 12), self.index_expr(s.stop, 10)
        self.st.width = w
        self.emit(ind, "{")
        i = ind + 1
        self.emit(i, f"const {it} pt_nv = ({self.index_expr(s.stop, 12)} - {self.index_expr(s.start, 13)}) / {w};")
        lanes.declare_partials(i)
        self.emit(i, f"for ({it} pt_v = pt_lid; pt_v < pt_nv; pt_v += pt_L) {{")
        self.emit(i + 1, f"const {it} {s.var} = {start} + pt_v * {w};")
        lanes.fill_rows(rows, i + 1)
        lanes.body(s.body, i + 1)
        self.emit(i, "}")
        lanes.combine_partials(i)
        self.emit(i, f"for ({it} {s.var} = {start} + pt_nv * {w} + pt_lid; {s.var} < {stop}; {s.var} += pt_L) {{")
        self.fill_rows(rows, i + 1)
        self.stmt(s.body, i + 1)
        self.emit(i, "}")
        self.emit(ind, "}")
        self.st.width = 1

    def sync_before(self, s: Stmt, ind: int) -> None:
        """A barrier when ``s`` (run by every thread) may read an element another thread wrote."""
        if self.conflicts(s, self.st.written, None):
            self.emit(ind, self.barrier_global)
            self.st.written.clear()

    def conflicts(self, s: Stmt, written: dict[str, set[tuple[str, str, str]]], width: int | None) -> bool:
        """Whether ``s`` reads an element of ``written`` that another thread may have written.

        A shared loop (``width`` = its lane width) over the bounds of the loop that wrote the
        elements, reading them at the offsets written, only reads its own thread's elements.
        """
        reads = ana.reads(s)
        if not reads.keys() & written.keys():
            return False
        if width is None or not isinstance(s, Loop):
            return True
        key = f"{s.var}:{s.start}:{s.stop}:{width}"
        saved, self.st.strided = self.st.strided, s
        try:
            for buf, offs in reads.items():
                owners = written.get(buf)
                if owners is None:
                    continue
                texts = {(key, s.var, self.offset(buf, ix)) for ix in offs}
                if any(o[0] != key for o in owners) or not texts <= owners:
                    return True
        finally:
            self.st.strided = saved
        return False

    def cacheable_rows(self, loop: Loop) -> tuple[tuple[str, Loop], ...]:
        """Buffers a group reads (or writes, then reads back) in several shared loops over one row.

        Such a row is kept in local memory: read from global memory once, and a row written then
        read back (softmax's exponentials) is written to global memory only by the last loop.
        Applies to shared loops over the same bounds, directly in the group's body, each touching
        the buffer only at one row offset plus the loop variable.
        """
        body = ana.body(loop.body)
        loops = [b for b in body if isinstance(b, Loop) and self.shareable(b) is not None]
        if len(loops) < 2 or any(ana.holds_loops(b.body) for b in loops):
            return ()
        first = loops[0]
        if any((b.start, b.stop) != (first.start, first.stop) for b in loops):
            return ()
        rest = [b for b in body if not any(b is lp for lp in loops)]
        out = []
        for buf in self.buffers:
            uses = [b for b in loops if buf in ana.reads(b) or buf in ana.writes(b)]
            if len(uses) < 2 or any(buf in ana.reads(o) or buf in ana.writes(o) for o in rest):
                continue
            offsets = {self.row_offset(b, a) for b in uses for a in ana.accesses(b, buf)}
            if len(offsets) != 1 or None in offsets:
                continue
            writers = [b for b in uses if buf in ana.writes(b)]
            arg = self.args.get(buf)
            if writers and (arg is None or arg.role != "out" or writers[-1] is not uses[-1]):
                continue  # a written row must be rewritten completely by the last loop touching it
            out.append((buf, first))
        return tuple(out)

    def row_offset(self, lp: Loop, access: Read | Write) -> Expr | None:
        """The flat offset of an access with the loop variable renamed, if it walks the row by one."""
        flat = self.flat_index(access)
        if ana.coefficient(flat, lp.var) != 1:
            return None
        return ana.substitute(flat, {lp.var: Var("pt_c", dtype=int64)})

    def unfilled_rows(self, s: Loop) -> dict[str, tuple[Expr, ...]]:
        """Cached rows that loop ``s`` reads first (it copies them from global memory as it goes)."""
        reads = ana.reads(s)
        rows = {b: reads[b][0] for b in self.st.caches if b in reads and b not in self.st.filled}
        self.st.filled |= rows.keys()
        return rows

    def fill_rows(self, rows: dict[str, tuple[Expr, ...]], ind: int) -> None:
        for buf, index in rows.items():
            read = Read(buf, index, dtype=self.buffers[buf][0])
            self.emit(ind, f"{self.st.caches[buf]}[{self.cache_index(read)}] = {buf}[{self.offset(buf, index)}];")

    def cached_read(self, e: Read) -> str:
        return f"{self.st.caches[e.buffer]}[{self.cache_index(e)}]"

    def cache_index(self, e: Read | Write) -> str:
        lp = self.st.strided
        assert lp is not None
        if isinstance(lp.start, Const) and lp.start.value == 0:
            return lp.var
        return self.index_expr(Binary("sub", Var(lp.var, dtype=int64), lp.start, dtype=int64))
