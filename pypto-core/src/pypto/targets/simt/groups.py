"""Work-group sharing for the SIMT renderer: statements a group's threads run together.

In a ``groups`` or ``single`` kernel every statement runs in every thread of the group, so values
stay uniform, except shared loops (vector and parallel loops, and loops that only fold values
into accumulators), whose iterations the threads split between them. An accumulator folded in a
shared loop holds a per-thread partial result until the statement that contains the loop ends;
the group then combines the partials (:meth:`GroupSharing.group_reduce_call`, deterministic for a
given group size) and every thread sees the result. Writes outside shared loops are done by the
first thread. Barriers stand where the ``place_barriers`` pass put them (where a thread may read
what another one wrote). Rows a group reads in several shared loops can be kept in local memory (a
variant of the kernel).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pypto.dtypes import DType, int64
from pypto.ir.loops import (
    Assign,
    Block,
    Comment,
    Declare,
    If,
    Loop,
    Read,
    Stmt,
    Var,
    Write,
)
from pypto.ir.nodes import Binary, Const, Expr
from pypto.ir.reducers import identity
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.forms import Path, ScanForm, scan_form, shareable

SCRATCH = "pt_scratch"  # the reduction's local memory (an OpenCL kernel argument)


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

    def group_scan_source(self, op: str, dt: DType, fn: str) -> str:
        """A function giving each thread the combined values of threads ``0..lid`` (an inclusive prefix over the
        group), and every thread the group's total (``*total``).

        Doubling steps in local memory over the group (Hillis and Steele): at step ``d`` each thread combines the
        value ``d`` threads before it into its own. The same tree at every call: deterministic for a given group
        size; a float sum rounds as that tree adds, not as a serial sum.
        """
        t, q, b = self.ctype(dt), self.local_qualifier, self.barrier
        return (
            f"{self.static_inline} {t} {fn}({t} v, {q}{t} *s, long lid, long n, {t} *total) {{\n"
            f"    if (n == 1) {{ *total = v; return v; }}  /* one work-item (CPU devices): no barrier once inlined */\n"
            f"    s[lid] = v;\n"
            f"    {b}\n"
            f"    for (long d = 1; d < n; d <<= 1) {{\n"
            f"        const {t} o = lid >= d ? s[lid - d] : v;\n"
            f"        {b}\n"
            f"        if (lid >= d) {{ v = {self.combine_text(op, dt, 'o', 'v')}; s[lid] = v; }}\n"
            f"        {b}\n"
            f"    }}\n"
            f"    *total = s[n - 1];\n"
            f"    {b}\n"
            f"    return v;\n}}"
        )

    def group_scan_call(self, op: str, dt: DType, value: str, total: str) -> str:
        """The call of :meth:`group_scan_source` for ``value``, the total landing in the variable ``total``."""
        fn = self.helper(f"groupscan_{op}", dt)
        return f"{fn}({value}, ({self.local_qualifier}{self.ctype(dt)} *){SCRATCH}, pt_lid, pt_L, &{total})"

    def scan_loop(self, s: Loop, form: ScanForm, ind: int) -> None:
        """A loop of running reductions (:func:`~pypto.targets.simt.forms.scan_form`), ``pt_L`` steps at a time:
        thread ``t`` takes step ``base + t`` (the last step where that is past the end, its value left out), the
        group's prefix of the folded values starts from the running values before the first of them, the steps'
        writes follow, and the running values move on by the group's total."""
        st = self.st
        st.reductions = st.prefix = True  # (the group's local scratch)
        it = self.index_type
        start, stop = self.index_expr(s.start, 12), self.index_expr(s.stop, 10)
        self.emit(ind, f"for ({it} pt_base = {start}; pt_base < {stop}; pt_base += pt_L) {{")
        i = ind + 1
        self.emit(i, f"const int pt_in = pt_base + pt_lid < {stop};")
        self.emit(i, f"const {it} {s.var} = pt_in ? pt_base + pt_lid : {self.index_expr(s.stop, 6)} - 1;")
        for b in form.before:
            self.stmt(b, i)
        for n, (acc, op, value) in enumerate(form.folds):
            dt = self.declared_types[acc]
            t = self.ctype(dt)
            ident = self.literal(identity(op, dt).value, dt)
            self.emit(i, f"{t} pt_x{n} = pt_in ? ({t})({self.expr(value)}) : {ident};")
            self.emit(i, f"{t} pt_t{n};")
            self.emit(i, f"pt_x{n} = {self.group_scan_call(op, dt, f'pt_x{n}', f'pt_t{n}')};")
            self.emit(i, f"const {t} pt_y{n} = {self.combine_text(op, dt, acc, f'pt_x{n}')};")
        self.emit(i, "if (pt_in) {")
        for n, (acc, _, _) in enumerate(form.folds):  # the step's running values, under their own names here
            self.emit(i + 1, f"const {self.ctype(self.declared_types[acc])} {acc} = pt_y{n};")
        for b in form.after:
            self.stmt(b, i + 1)
        self.emit(i, "}")
        for n, (acc, op, _) in enumerate(form.folds):
            self.emit(i, f"{acc} = {self.combine_text(op, self.declared_types[acc], acc, f'pt_t{n}')};")
        self.emit(ind, "}")

    def group_block(self, stmts: Iterable[Stmt], ind: int, level: int, path: Path = ()) -> None:
        """Statements run by every thread of the group; reductions land after their statement."""
        for i, s in enumerate(stmts):
            if isinstance(s, Block):
                self.group_block(s.body, ind, level, (*path, i))
                continue
            self.group_stmt(s, ind, level, (*path, i))
            self.reduce_finished(ind, level)

    def barrier_before(self, path: Path, ind: int) -> None:
        """The barrier ``place_barriers`` put before the statement at ``path``, if any."""
        if path in self.st.barriers.before:
            self.emit(ind, self.barrier_global)

    def group_stmt(self, s: Stmt, ind: int, level: int, path: Path) -> None:
        st = self.st
        if isinstance(s, Comment):
            self.stmt(s, ind)
            return
        if isinstance(s, Loop):
            self.group_loop(s, ind, level, path)
            return
        self.barrier_before(path, ind)
        if isinstance(s, Declare):
            st.level[s.name] = level
            st.pristine.pop(s.name, None)
            if isinstance(s.init, Const):
                st.pristine[s.name] = s.init
            self.stmt(s, ind)
        elif isinstance(s, Assign):
            st.pristine.pop(s.name, None)
            self.stmt(s, ind)
        elif isinstance(s, Write):  # every thread has the value: the first one stores it
            self.emit(ind, f"if (pt_lid == 0) {s.buffer}[{self.offset(s.buffer, s.index)}] = {self.expr(s.value)};")
        elif isinstance(s, If):
            self.emit(ind, f"if ({self.expr(s.cond)}) {{")
            self.group_block([s.then], ind + 1, level + 1, (*path, 0))
            if s.orelse is not None:
                self.emit(ind, "} else {")
                self.group_block([s.orelse], ind + 1, level + 1, (*path, 1))
            self.emit(ind, "}")
        else:
            self.stmt(s, ind)

    def group_loop(self, s: Loop, ind: int, level: int, path: Path) -> None:
        st = self.st
        reds = shareable(s)
        form = scan_form(s) if reds is None and s.var in self.launch.prefix_loops else None
        if form is not None:  # a prefix over the group, a step per thread (plan_launch's prefix_loops)
            self.barrier_before(path, ind)
            self.scan_loop(s, form, ind)
            return
        if reds is None:  # every thread runs the loop; its body may hold shared loops
            self.barrier_before(path, ind)
            start, stop = self.index_expr(s.start), self.index_expr(s.stop, 10)
            it = self.index_type
            self.emit(ind, f"for ({it} {s.var} = {start}; {s.var} < {stop}; {s.var}++) {{")
            self.group_block([s.body], ind + 1, level + 1, (*path, 0))
            if path in st.barriers.loop_ends:
                self.emit(ind + 1, self.barrier_global)
            self.emit(ind, "}")
            return
        ops = dict(reds)
        for acc in sorted(ana.assigned(s.body)):
            if acc in st.partial:
                continue
            op = ops.get(acc) or ana.fold_op(s.body, acc)
            assert op is not None, "plan_launch gave this step a group form"
            dt = self.declared_types[acc]
            pre = None
            if st.pristine.get(acc) != identity(op, dt):  # fold the value it had in after the reduction
                st.counter += 1
                pre = f"{acc}_pre{st.counter}"
                self.emit(ind, f"const {self.ctype(dt)} {pre} = {acc};")
                self.emit(ind, f"{acc} = {self.literal(identity(op, dt).value, dt)};")
            st.partial[acc] = Partial(op, dt, pre)
            st.pristine.pop(acc, None)
        self.barrier_before(path, ind)
        self.shared_loop(s, ind)

    def reduce_finished(self, ind: int, level: int) -> None:
        for acc in [a for a, p in self.st.partial.items() if self.st.level.get(a) == level]:
            p = self.st.partial.pop(acc)
            self.st.reductions = True
            self.emit(ind, f"{acc} = {self.group_reduce_call(p.op, p.dtype, acc)};")
            if p.pre is not None:
                self.emit(ind, f"{acc} = {self.combine_text(p.op, p.dtype, p.pre, acc)};")

    def shared_loop(self, s: Loop, ind: int) -> None:
        """A loop whose iterations the group's threads share (thread ``t`` takes ``t, t + L, ...``)."""
        outer, self.st.strided = self.st.strided, s
        rows = self.unfilled_rows(s)
        place, self.shared_count = self.shared_count, self.shared_count + 1
        if self.lanes > 1 and place in self.vector_ok:
            self.shared_lanes(s, ind, rows)
            self.st.strided = outer
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
