"""Lowering: the scheduled tensor IR becomes the loop IR that backends render.

Each nest becomes loops over its axes. A reduction is computed by a loop of its own, placed as far
out as its free axes allow (softmax's row max and row sum are computed once per row, before the
column loop that writes the row). Values used more than once at the innermost level are bound
with ``Let`` once. Split reductions become a parallel loop over fixed-size blocks writing partial
results, then a serial combine in block order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from pypto import dtypes
from pypto.dtypes import DType
from pypto.ir.affine import Affine
from pypto.ir.int64 import add, mul
from pypto.ir.int64 import i64 as _i64
from pypto.ir.kernel import Group, KernelIR, TensorParam
from pypto.ir.loops import (
    Alloc,
    Argument,
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
    Update,
    Var,
    Write,
)
from pypto.ir.names import NameGen
from pypto.ir.nodes import (
    TRANSCENDENTAL,
    Binary,
    Carry,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    ScatterPlan,
    Sort,
    Store,
    Unary,
    Where,
    children,
    free_axes,
    map_children,
    postorder,
    scan_bodies,
    scan_key,
    scans,
    substitute_axes,
    top_reduces,
)
from pypto.ir.ops import LAST, LOOP
from pypto.ir.reducers import combine, identity
from pypto.passes.fuse import sort_of
from pypto.passes.sorting import SortNest

I64 = dtypes.int64
MAX_SCATTER_BLOCKS = 64  # a blocked scatter's blocks at most (each beyond the first keeps a private copy)


@dataclass
class _Sink:
    """Where an innermost value goes: a buffer element or an accumulator."""

    value: Expr  # tensor-IR expression
    buffer: str | None = None
    index: tuple[Affine, ...] = ()
    acc: str | None = None
    op: str | None = None
    acc_dtype: DType | None = None
    scatter: Scatter | None = None  # the element at the scatter's computed indices, combined with the value


class _Lowerer:
    def __init__(self, k: KernelIR, noalias: bool):
        self.k = k
        self.noalias = noalias
        self.extents = {a.index: a.extent for a in k.axes}
        taken: set[str] = {p.name for p in k.params} | set(k.dims) | {t.name for t in k.temps}
        self.names = NameGen(taken | {a.name for a in k.axes})
        # reductions whose body is also written to the output: (buffer, index) to write it to
        self.write_through: dict[Reduce, tuple[str, tuple[Affine, ...]]] = {}
        # stores of a loop's every step made in the loop of the nest being lowered (see _fold_loop_stores)
        self.step_stores: list[Store] = []
        self.steps_into: dict[int, list[Store]] = {}
        # max reduction -> the sum(exp(body - max)) it pairs with, when lowering the online variant
        self.online_pair: dict[Reduce, Reduce] = {}
        self.online_block = 0
        # while lowering a blocked scatter's private copies: (scatter, copies buffer, row, its dtype)
        self.copy: tuple[Scatter, str, Expr, DType] | None = None
        self.atomic = False  # while lowering a scatter planned atomic: its writes are atomic updates
        self.carry: dict[int, Expr] = {}  # while lowering a combine function: its arguments
        self.scan_start: dict[tuple, Expr] = {}  # a blocked scan's blocks: (scan key, component) -> where it starts
        self.scan_acc: dict[tuple, list[Var]] = {}  # the accumulators of each scan (by scan_key), once declared
        self.scan_first: dict[tuple, Expr] = {}  # the point where a combine function's scan takes the elements

    # -- names and integer expressions ------------------------------------------------------
    def fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def affine(self, a: Affine, env: dict[int, str]) -> Expr:
        e: Expr = _i64(a.const)
        terms: list[Expr] = []
        for ax, c in a.axes:
            terms.append(mul(Var(env[ax], dtype=I64), _i64(c)))
        for d, c in a.dims:
            terms.append(mul(Var(d, dtype=I64), _i64(c)))
        out: Expr | None = None
        for t in terms:
            out = t if out is None else add(out, t)
        return e if out is None else add(out, e)

    def extent(self, axis: int) -> Expr:
        return self.affine(self.extents[axis], {})

    # -- expressions --------------------------------------------------------------------------
    def expr(self, e: Expr, env: dict[int, str], red: dict[Reduce, Var], memo: dict[int, tuple]) -> Expr:
        hit = memo.get(id(e))
        if hit is not None:
            return hit[1]
        r: Expr
        if isinstance(e, (Reduce, Scan, Sort)):
            r = red[e]  # type: ignore[index]
        elif isinstance(e, Carry):  # an argument of the combine function being lowered
            r = self.carry[e.slot]
        elif isinstance(e, Load):
            r = Read(e.tensor, tuple(self.affine(ix, env) for ix in e.index), dtype=e.dtype)
        elif isinstance(e, Gather):
            r = self.gather(e, env, red, memo)
        elif isinstance(e, Index):
            r = self.affine(e.affine, env)
            if e.dtype != I64:
                r = Cast(r, dtype=e.dtype)
        elif isinstance(e, Scalar):
            r = Var(e.name, dtype=e.dtype)
        elif isinstance(e, Const):
            r = Const(e.value, dtype=e.dtype)
        elif isinstance(e, Unary):
            r = Unary(e.op, self.expr(e.x, env, red, memo), dtype=e.dtype)
        elif isinstance(e, Binary):
            r = Binary(e.op, self.expr(e.a, env, red, memo), self.expr(e.b, env, red, memo), dtype=e.dtype)
        elif isinstance(e, Where):
            r = Where(
                self.expr(e.cond, env, red, memo),
                self.expr(e.a, env, red, memo),
                self.expr(e.b, env, red, memo),
                dtype=e.dtype,
            )
        elif isinstance(e, Cast):
            r = Cast(self.expr(e.x, env, red, memo), dtype=e.dtype)
        else:
            raise TypeError(f"lower: unexpected {type(e).__name__}")
        memo[id(e)] = (e, r)
        return r

    def scatter_target(self, s: Scatter, env: dict[int, str], red: dict[Reduce, Var], memo: dict) -> Read:
        """The element a scatter's point lands on: its target at the computed indices (as a gather reads)."""
        return self.gather(Gather(s.tensor, s.index, dtype=self.k.buffer(s.tensor).dtype), env, red, memo)

    def scatter_write(self, s: Scatter, v: Expr, read: Read) -> Write:
        """``buffer[index] = buffer[index] op v`` (or ``= v``) at the element ``read`` (the target at the scatter's
        computed indices); a 16-bit element is widened, combined in float32 and rounded once. In a private copy
        of a blocked scatter (``_Sink.copy``): ``copy[row, flat index] op= v``, in the copy's type."""
        if self.copy is not None and s is self.copy[0]:
            _, name, row, dtype = self.copy
            read = Read(name, (row, self.flat(s.tensor, read.index)), dtype=dtype)
        if self.atomic and s.op != "set":  # the renderer combines it with the element (halves: in float32)
            compute = dtypes.float32 if read.dtype.is_half else read.dtype
            return Update(read.buffer, read.index, v if v.dtype == compute else Cast(v, dtype=compute), s.op)
        if s.op != "set":
            old: Expr = Cast(read, dtype=dtypes.float32) if read.dtype.is_half else read
            v = combine({"add": "sum", "max": "max", "min": "min"}[s.op], old, v)
        if v.dtype != read.dtype:
            v = Cast(v, dtype=read.dtype)
        return Write(read.buffer, read.index, v)

    def flat(self, tensor: str, index: tuple[Expr, ...]) -> Expr:
        """The row-major position of ``tensor[index]`` among its elements."""
        shape = self.k.buffer(tensor).shape
        out: Expr = _i64(0)
        for pos, ix in enumerate(index):
            out = add(mul(out, self.affine(shape[pos], {})), ix) if pos else ix
        return out

    def scatter_nest(self, s: Scatter) -> list[Stmt]:
        """The points of a scatter as its plan says (:class:`~pypto.ir.nodes.ScatterPlan`): every plan updates
        each element the same way whatever the thread count, so results repeat bit for bit."""
        where = f"{s.loc.filename.rsplit('/', 1)[-1]}:{s.loc.lineno}: " if s.loc else ""
        text = s.loc.text.strip() if s.loc and s.loc.text else f"scatter into {s.tensor}"
        loops = sorted(free_axes(s.value).union(*(free_axes(ix) for ix in s.index)))
        plan = s.plan or ScatterPlan("serial")
        head: list[Stmt] = [Comment(where + text), Comment(f"scatter ({s.op}): {plan.describe(self.k.axis_name)}")]
        sink = _Sink(s.value, scatter=s)
        points: Expr = _i64(1)
        for a in loops:
            points = mul(points, self.extent(a))
        work = mul(points, _i64(point_cost(s.value) + 2))
        if plan.kind == "parallel" and loops:
            return head + self.emit(loops, [sink], {}, parallel=loops[0], work=work)
        if plan.kind == "atomic" and loops:
            self.atomic = True
            try:
                return head + self.emit(loops, [sink], {}, parallel=loops[0], work=work)
            finally:
                self.atomic = False
        if plan.kind == "owner" and plan.axis in loops:
            owner = self.owner_scatter(s, loops, plan, work)
            if not plan.block:
                return head + owner
            runs = Binary("floordiv", add(self.extent(plan.axis), _i64(plan.width - 1)), _i64(plan.width), dtype=I64)
            blocks = self.blocked_scatter(s, loops, plan, work)
            return head + [
                If(Binary("ge", runs, _i64(2), dtype=dtypes.bool_), Block(tuple(owner)), Block(tuple(blocks)))
            ]
        if plan.kind == "blocks" and loops:
            return head + self.blocked_scatter(s, loops, plan, work)
        return head + self.emit(loops, [sink], {})

    def owner_scatter(self, s: Scatter, loops: list[int], plan: ScatterPlan, work: Expr) -> list[Stmt]:
        """Runs of ``plan.width`` along the owner axis on threads; each walks every other point in order."""
        a = plan.axis
        assert a is not None
        run, lo, hi = self.fresh("_run"), self.fresh("_lo"), self.fresh("_hi")
        ext, width = self.extent(a), _i64(plan.width)
        runs = Binary("floordiv", add(ext, _i64(plan.width - 1)), width, dtype=I64)
        body: list[Stmt] = [
            Let(lo, mul(Var(run, dtype=I64), width)),
            Let(hi, Binary("minimum", ext, add(Var(lo, dtype=I64), width), dtype=I64)),
        ]
        order = [b for b in loops if b != a] + [a]
        body += self.emit(order, [_Sink(s.value, scatter=s)], {}, bounds={a: (Var(lo, dtype=I64), Var(hi, dtype=I64))})
        return [Loop(run, _i64(0), runs, Block(tuple(body)), "parallel", (), work)]

    def blocked_scatter(self, s: Scatter, loops: list[int], plan: ScatterPlan, work: Expr) -> list[Stmt]:
        """Blocks of points along the outermost axis (their number depends on the sizes only): block 0 updates
        the target, block ``b > 0`` private copy ``b - 1`` (started at the operation's identity), then every
        element of the target is combined with its copies in block order. The blocks are as many as hold
        ``plan.block`` points and twice the target's elements each (at most :data:`MAX_SCATTER_BLOCKS`), of
        equal size, so the copies cost a fraction of the scatter."""
        target = self.k.buffer(s.tensor)
        cdt = dtypes.float32 if target.dtype.is_half else target.dtype
        rop = {"add": "sum", "max": "max", "min": "min"}[s.op]
        outer, inner = loops[0], loops[1:]
        per_row: Expr = _i64(1)
        for a in inner:
            per_row = mul(per_row, self.extent(a))
        size: Expr = _i64(1)
        for d in target.shape:
            size = mul(size, self.affine(d, {}))
        e0 = self.extent(outer)
        total = mul(e0, per_row)
        rows, nblk, ncopy = self.fresh("_rows"), self.fresh("_nblocks"), self.fresh("_ncopies")
        copies, b, lo, hi, j = (self.fresh(n) for n in ("_copies", "_b", "_lo", "_hi", "_j"))

        def mx(x: Expr, y: Expr) -> Expr:
            if isinstance(x, Const) and isinstance(y, Const):
                return _i64(max(x.value, y.value))
            return Binary("maximum", x, y, dtype=I64)

        def cdiv(x: Expr, y: Expr) -> Expr:
            if isinstance(x, Const) and isinstance(y, Const):
                return _i64(-(-x.value // y.value))
            return Binary("floordiv", add(x, add(y, _i64(-1))), y, dtype=I64)

        def mn(x: Expr, y: Expr) -> Expr:
            if isinstance(x, Const) and isinstance(y, Const):
                return _i64(min(x.value, y.value))
            return Binary("minimum", x, y, dtype=I64)

        # blocks of equal size: as many as hold plan.block points and twice the target's elements each
        want = mx(_i64(1), mn(_i64(MAX_SCATTER_BLOCKS), Binary(
            "floordiv", total, mx(_i64(plan.block), mul(size, _i64(2))), dtype=I64)))  # fmt: skip
        rv, nv, bv = Var(rows, dtype=I64), Var(nblk, dtype=I64), Var(b, dtype=I64)
        bounds = {outer: (Var(lo, dtype=I64), Var(hi, dtype=I64))}
        direct = self.emit(loops, [_Sink(s.value, scatter=s)], {}, bounds=bounds)
        self.copy = (s, copies, add(bv, _i64(-1)), cdt)
        try:
            private = self.emit(loops, [_Sink(s.value, scatter=s)], {}, bounds=bounds)
        finally:
            self.copy = None
        start = Loop(
            j, _i64(0), size, Write(copies, (add(bv, _i64(-1)), Var(j, dtype=I64)), identity(rop, cdt)), "serial"
        )
        blocks = Loop(b, _i64(0), nv, Block((
            Let(lo, mul(bv, rv)),
            Let(hi, Binary("minimum", e0, add(Var(lo, dtype=I64), rv), dtype=I64)),
            If(Binary("eq", bv, _i64(0), dtype=dtypes.bool_), Block(tuple(direct)), Block((start, *private))),
        )), "parallel", (), work)  # fmt: skip
        # the combine: one loop per dimension of the target, the outermost on threads
        names = [self.fresh("_t") for _ in target.shape]
        index = tuple(Var(n, dtype=I64) for n in names)
        acc, c = self.fresh("_acc"), self.fresh("_c")
        old: Expr = Read(s.tensor, index, dtype=target.dtype)
        old = Cast(old, dtype=cdt) if old.dtype != cdt else old
        accv = Var(acc, dtype=cdt)
        part = Read(copies, (Var(c, dtype=I64), self.flat(s.tensor, index)), dtype=cdt)
        out: Expr = accv if cdt == target.dtype else Cast(accv, dtype=target.dtype)
        nest: Stmt = Block((
            Declare(acc, cdt, old),
            Loop(c, _i64(0), Var(ncopy, dtype=I64), Assign(acc, combine(rop, accv, part)), "serial"),
            Write(s.tensor, index, out),
        ))  # fmt: skip
        for pos in reversed(range(len(names))):
            kind = "parallel" if pos == 0 else "serial"
            nest = Loop(names[pos], _i64(0), self.affine(target.shape[pos], {}), nest, kind, (),
                        mul(size, Var(ncopy, dtype=I64)) if pos == 0 else None)  # fmt: skip
        return [
            Let(rows, mx(_i64(1), cdiv(e0, want))),
            Let(nblk, cdiv(e0, rv)),
            Let(ncopy, mx(_i64(0), add(nv, _i64(-1)))),
            Alloc(copies, cdt, (Var(ncopy, dtype=I64), size), Block((
                blocks,
                If(Binary("gt", Var(ncopy, dtype=I64), _i64(0), dtype=dtypes.bool_), nest),
            ))),
        ]  # fmt: skip

    def gather(self, e: Gather, env: dict[int, str], red: dict[Reduce, Var], memo: dict[int, tuple]) -> Read:
        """A read at computed indices: each one converted to int64, a negative one counted from the end (NumPy's
        rule; the call checked every index against its dimension before the kernel runs)."""
        shape = self.k.buffer(e.tensor).shape
        index = []
        for pos, ix in enumerate(e.index):
            v = self.expr(ix, env, red, memo)
            if not isinstance(ix, Index):
                v = v if v.dtype == I64 else Cast(v, dtype=I64)
                if not ix.dtype.is_unsigned:
                    negative = Binary("lt", v, _i64(0), dtype=dtypes.bool_)
                    v = Where(negative, Binary("add", v, self.affine(shape[pos], {}), dtype=I64), v, dtype=I64)
            index.append(v)
        return Read(e.tensor, tuple(index), dtype=e.dtype)

    # -- nests ----------------------------------------------------------------------------------
    def order_axes(self, axes: tuple[int, ...], body: Expr) -> list[int]:
        """Reduction loop order: the axis that walks memory contiguously goes innermost."""
        score = {a: 0 for a in axes}
        for n in postorder(body):
            if isinstance(n, Load) and n.index:
                last = n.index[-1]
                for a in axes:
                    if abs(last.coeff(a)) == 1:
                        score[a] += 1
        return sorted(axes, key=lambda a: score[a])

    def emit(
        self,
        loops: list[int],
        sinks: list[_Sink],
        env: dict[int, str],
        *,
        parallel: int | None = None,
        vector: int | None = None,
        reductions: tuple[tuple[str, str], ...] = (),
        bounds: dict[int, tuple[Expr, Expr]] | None = None,
        work: Expr | None = None,
        known: dict[Reduce, Var] | None = None,
    ) -> list[Stmt]:
        """Loops over ``loops`` (outer to inner) computing ``sinks``, with reductions hoisted.

        ``known`` maps reductions already computed in an enclosing scope to their variables.
        """
        bounds = bounds or {}
        known = known or {}
        # the scans the sinks carry along their axis's loop (the nest's last; materialize put the others in
        # nests of their own): an accumulator declared before that loop, updated at each of its steps
        nodes = list(dict.fromkeys(n for s in sinks for n in scans(s.value)))
        if nodes:  # (by value: scans() remembers the nodes of an equal expression met before)
            inside = {n for s in sinks for r in top_reduces(s.value) for n in scans(r.body)}
            nodes = [n for n in nodes if n not in inside]
        carried = list({scan_key(c): c for c in reversed(nodes)}.values())[::-1]  # one per scan (its first node)
        reduces: list[Reduce] = []
        for s in sinks:
            for r in top_reduces(s.value):
                if r not in reduces and r not in known:
                    reduces.append(r)
        reduces = _inner_first(reduces)
        level = {}
        for r in reduces:
            pos = [loops.index(a) for a in free_axes(r) if a in loops]
            level[r] = max(pos) if pos else -1
        deepest = max(level.values(), default=-1)

        def build(d: int, env: dict[int, str], red: dict[Reduce, Var]) -> list[Stmt]:
            stmts: list[Stmt] = []
            red = dict(red)
            for r in reduces:
                if level[r] == d - 1 and r not in red:
                    pair = self.online_pair.get(r)
                    if pair is not None and level.get(pair) == level[r]:
                        pre, (vmax, vsum) = self.online_softmax(r, pair, env, red)
                        stmts.extend(pre)
                        red[r], red[pair] = vmax, vsum
                        continue
                    pre, var = self.reduction(r, env, red)
                    stmts.extend(pre)
                    red[r] = var
                    if r.op == LAST:  # the loop's other results: its other variables after the same steps
                        key = scan_key(r.body)  # type: ignore[arg-type]
                        for r2 in reduces:
                            if r2.op == LAST and r2.axes == r.axes and scan_key(r2.body) == key:  # type: ignore[arg-type]
                                red[r2] = self.scan_acc[key][r2.body.which]  # type: ignore[attr-defined]
            if d == len(loops):
                stmts.extend(self.innermost(sinks, env, red, carried))
                return stmts
            ax = loops[d]
            for c in carried:
                if c.axis == ax:  # the running values start at the reducer's identity before the scan's loop
                    key, accs = scan_key(c), []
                    for j, dt in enumerate(_component_dtypes(c)):
                        acc = self.fresh(
                            "state_" if c.op == LOOP else "scan_" if c.combine is not None else f"cum{c.op}_"
                        )
                        start = self.scan_start.get((key, j))  # (a block of a long scan: where it starts)
                        if c.op == LOOP:  # a loop's variables start from their values before it
                            start = self.expr(c.init[j], env, red, {})
                        stmts.append(Declare(acc, dt, _scan_start(c, dt) if start is None else start))
                        accs.append(Var(acc, dtype=dt))
                    self.scan_acc[key] = accs
                    for node in nodes:  # every component of the scan reads its accumulator
                        if scan_key(node) == key:
                            red[node] = accs[node.which]  # type: ignore[index]
            name = self.k.axis_name(ax)
            if name in env.values():
                name = self.fresh(name + "_")
            inner_env = {**env, ax: name}
            start, stop = bounds.get(ax, (_i64(0), self.extent(ax)))
            innermost = d == len(loops) - 1
            along = [c for c in carried if c.axis == ax]
            is_par = ax == parallel and not along
            # a loop with a reduction placed inside its body holds loops itself: not a vector loop
            is_vec = ax == vector and innermost and deepest < len(loops) - 1 and not along
            kind = (
                "parallel_vector" if is_par and is_vec else "parallel" if is_par else "vector" if is_vec else "serial"
            )
            body = build(d + 1, inner_env, red)
            # running reductions (not a loop's state, not the user's function) may be computed as a prefix
            scanned = () if any(c.combine is not None or c.op == LOOP for c in along) else tuple(
                (self.scan_acc[scan_key(c)][0].name, c.op) for c in along)  # fmt: skip
            if any(c.reverse for c in along):  # a reversed scan walks its axis from the end
                step = self.fresh(f"_{name}_r")
                last = add(add(start, stop), _i64(-1))
                body = [Let(name, Binary("sub", last, Var(step, dtype=I64), dtype=I64)), *body]
                name = step
            stmts.append(
                Loop(
                    name,
                    start,
                    stop,
                    Block(tuple(body)),
                    kind,
                    reductions if innermost else (),
                    work if is_par else None,
                    scans=scanned,
                )
            )
            return stmts

        return build(0, env, dict(known))

    def innermost(
        self, sinks: list[_Sink], env: dict[int, str], red: dict[Reduce, Var], carried: list[Scan] = ()
    ) -> list[Stmt]:
        memo: dict[int, tuple] = {}
        updates: list[Stmt] = []
        for c in carried:  # each running value takes this step's body (inner scans first: postorder)
            accs = self.scan_acc[scan_key(c)]
            if c.combine is None:
                updates.append(Assign(accs[0].name, combine(c.op, accs[0], self.expr(c.body, env, red, memo))))
                continue
            # pt.associative_scan: the first point's value is the element, every later one the user's combine
            vs: list[Expr] = []
            for body in scan_bodies(c):
                v = self.expr(body, env, red, memo)
                if not isinstance(v, (Var, Const)):
                    name = self.fresh("elem_")
                    updates.append(Let(name, v))
                    v = Var(name, dtype=v.dtype)
                vs.append(v)
            at_first = None
            if c.op != LOOP:  # (a loop's first step combines with the values before the loop)
                first = add(self.extent(c.axis), _i64(-1)) if c.reverse else _i64(0)
                first = self.scan_first.get(scan_key(c), first)
                at_first = Binary("eq", Var(env[c.axis], dtype=I64), first, dtype=dtypes.bool_)
            updates += self.combine_step(c, accs, vs, at_first)
        values = [self.expr(s.value, env, red, memo) for s in sinks]
        # a scatter's computed indices: shared parts bound with the values (an index built from one value
        # several times, as pt.histogram's, would otherwise be printed as a tree of repeated subexpressions)
        targets = [self.scatter_target(s.scatter, env, red, memo) for s in sinks if s.scatter is not None]
        indices = [ix for t in targets for ix in t.index]
        lets, bound = _bind_shared(values + indices, self.fresh)
        values, indices = bound[: len(values)], bound[len(values) :]
        stmts: list[Stmt] = updates + list(lets)
        for s, v in zip(sinks, values):
            if s.scatter is not None:
                t = targets.pop(0)
                index, indices = tuple(indices[: len(t.index)]), indices[len(t.index) :]
                stmts.append(self.scatter_write(s.scatter, v, Read(t.buffer, index, dtype=t.dtype)))
            elif s.buffer is not None:
                stmts.append(Write(s.buffer, tuple(self.affine(ix, env) for ix in s.index), v))
            elif s.acc is None:  # a value computed for its scans' sake only (a blocked scan's first pass)
                continue
            else:
                assert s.acc is not None and s.op is not None and s.acc_dtype is not None
                stmts.append(Assign(s.acc, combine(s.op, Var(s.acc, dtype=s.acc_dtype), v)))
        return stmts

    def reduction(self, r: Reduce, env: dict[int, str], known: dict[Reduce, Var]) -> tuple[list[Stmt], Var]:
        """Statements computing ``r`` at this point of the nest, and the variable holding it."""
        if r.op == LAST:  # a loop's result: its steps run here, the variable after the last one is the value
            assert isinstance(r.body, Scan), r.body
            key = scan_key(r.body)
            sinks = [_Sink(r.body)]
            folded = [st for st in self.step_stores if scan_key(st.value) == key]  # type: ignore[arg-type]
            for st in folded:  # a store of each step's value, made in this loop (once)
                sinks.append(_Sink(st.value, buffer=st.tensor, index=st.index))
                self.step_stores.remove(st)
            stmts = self.emit(list(r.axes), sinks, env, known=known)
            if folded:
                names = ", ".join(f"{st.tensor}[{', '.join(ix.format(self.k.axis_name) for ix in st.index)}]"
                                  for st in folded)  # fmt: skip
                stmts.insert(0, Comment(f"the loop also stores {names} at each step (that nest folded in here)"))
            return stmts, self.scan_acc[key][r.body.which]
        acc = self.fresh(f"{r.op}_")
        axes = self.order_axes(r.axes, r.body)
        sinks = [_Sink(r.body, acc=acc, op=r.op, acc_dtype=r.dtype)]
        if r in self.write_through:
            buffer, index = self.write_through[r]
            sinks.append(_Sink(r.body, buffer=buffer, index=index))
        stmts = self.emit(axes, sinks, env, vector=axes[-1], reductions=((acc, r.op),), known=known)
        # declare the accumulator right before its loop (after any reductions nested in its body)
        first_loop = next(i for i, st in enumerate(stmts) if isinstance(st, Loop))
        stmts.insert(first_loop, Declare(acc, r.dtype, identity(r.op, r.dtype)))
        return stmts, Var(acc, dtype=r.dtype)

    def online_softmax(self, rmax: Reduce, rsum: Reduce, env: dict[int, str],
                       known: dict[Reduce, Var]) -> tuple[list[Stmt], tuple[Var, Var]]:  # fmt: skip
        """``max(e)`` and ``sum(exp(e - max(e)))`` in one read of a long row, block by block.

        Each block's maximum updates the running one and the running sum is rescaled by
        ``exp(old_max - new_max)``; blocks are small enough to stay in L1 between their two passes.
        """
        (ax,) = rmax.axes
        dt = rmax.dtype
        assert dt is not None
        m, s = self.fresh("max_"), self.fresh("sum_")
        nblk, blk, lo, hi = self.fresh("_nblocks"), self.fresh("_blk"), self.fresh("_lo"), self.fresh("_hi")
        mb, big, sb = self.fresh("blockmax_"), self.fresh("newmax_"), self.fresh("blocksum_")
        ext = self.extent(ax)
        lov, hiv = Var(lo, dtype=I64), Var(hi, dtype=I64)
        mv, sv, bigv = Var(m, dtype=dt), Var(s, dtype=dt), Var(big, dtype=dt)
        body: list[Stmt] = [
            Let(lo, mul(Var(blk, dtype=I64), _i64(self.online_block))),
            Let(hi, Binary("minimum", ext, add(lov, _i64(self.online_block)), dtype=I64)),
            Declare(mb, dt, identity("max", dt)),
        ]
        body += self.emit([ax], [_Sink(rmax.body, acc=mb, op="max", acc_dtype=dt)], env, vector=ax,
                          reductions=((mb, "max"),), bounds={ax: (lov, hiv)}, known=known)  # fmt: skip
        body.append(Let(big, Binary("maximum", mv, Var(mb, dtype=dt), dtype=dt)))
        inner: list[Stmt] = [Declare(sb, dt, identity("sum", dt))]
        inner += self.emit([ax], [_Sink(rsum.body, acc=sb, op="sum", acc_dtype=dt)], env, vector=ax,
                           reductions=((sb, "sum"),), bounds={ax: (lov, hiv)}, known={**known, rmax: bigv})  # fmt: skip
        rescale = Unary("exp", Binary("sub", mv, bigv, dtype=dt), dtype=dt)
        inner.append(Assign(s, Binary("add", Binary("mul", sv, rescale, dtype=dt), Var(sb, dtype=dt), dtype=dt)))
        # an all -inf prefix has nothing to rescale (exp(-inf - -inf) would be NaN)
        minus_inf = Const(-math.inf, dtype=dt)
        body.append(If(Binary("ne", bigv, minus_inf, dtype=dtypes.bool_), Block(tuple(inner))))
        body.append(Assign(m, bigv))
        stmts: list[Stmt] = [
            Declare(m, dt, identity("max", dt)),
            Declare(s, dt, identity("sum", dt)),
            Let(nblk, Binary("floordiv", add(ext, _i64(self.online_block - 1)), _i64(self.online_block), dtype=I64)),
            Loop(blk, _i64(0), Var(nblk, dtype=I64), Block(tuple(body)), "serial"),
        ]
        return stmts, (mv, sv)

    def combine_step(self, c: Scan, accs: list[Var], vs: list[Expr], first: Expr | None) -> list[Stmt]:
        """``accs = first ? vs : fn(accs, vs)`` for the user's function of ``c`` (``accs = fn(accs, vs)`` for a
        loop's body: ``first`` None): every new value computed from the old ones before any is assigned."""
        assert c.combine is not None
        self.carry = dict(enumerate([*accs, *vs]))
        memo: dict[int, tuple] = {}
        exprs = list(c.combine.exprs)
        cond = _while_condition(c) if first is None else None
        if cond is not None:  # a while loop's step: nothing changes once its condition fails (skipped)
            exprs = [x.a for x in exprs]  # type: ignore[attr-defined]
        steps = [self.expr(x, {}, {}, memo) for x in exprs]
        test = self.expr(cond, {}, {}, memo) if cond is not None else None
        self.carry = {}
        lets, steps = _bind_shared(steps, self.fresh)  # (the parts the variables' new values share, once)
        news: list[Stmt] = []
        for j, step in enumerate(steps):
            name = self.fresh("next_")
            news.append(Let(name, step if first is None else Where(first, vs[j], step, dtype=accs[j].dtype)))
        body = [*lets, *news] + [Assign(a.name, Var(n.name, dtype=a.dtype)) for a, n in zip(accs, news)]  # type: ignore[attr-defined]
        if test is not None:
            return [If(test, Block(tuple(body)))]
        return body

    def split_scan(self, g: Group, sinks: list[_Sink]) -> list[Stmt]:
        """A long scan (the nest's only loop) in fixed-size blocks of its steps, in three passes: each block's
        total, in parallel; every block's starting value, in block order; each block again from its starting
        value, writing the results, in parallel. The blocks depend on the sizes only: the same bits for any
        thread count (a float scan rounds as NumPy's within a block, from a starting value that sums the blocks
        before it in order, each block's total summed as a reduction)."""
        assert g.split is not None
        (ax,) = g.loops
        block = g.split.block
        carried = list({scan_key(c): c for s in reversed(sinks) for c in reversed(scans(s.value))}.values())[::-1]
        n = self.extent(ax)
        nblk, b, lo, hi, b2 = (self.fresh(x) for x in ("_nblocks", "_b", "_lo", "_hi", "_b"))
        dts = {scan_key(c): _component_dtypes(c) for c in carried}
        parts = {key: [self.fresh("_block_") for _ in d] for key, d in dts.items()}
        nv, bv, b2v = Var(nblk, dtype=I64), Var(b, dtype=I64), Var(b2, dtype=I64)

        def bounds() -> tuple[list[Stmt], dict[int, tuple[Expr, Expr]]]:
            """This block's steps as bounds of the axis (from the end for a reversed scan: its steps walk down)."""
            lets: list[Stmt] = [Let(lo, mul(bv, _i64(block))),
                                Let(hi, Binary("minimum", n, add(Var(lo, dtype=I64), _i64(block)), dtype=I64))]  # fmt: skip
            lov, hiv = Var(lo, dtype=I64), Var(hi, dtype=I64)
            if carried[0].reverse:
                return lets, {ax: (Binary("sub", n, hiv, dtype=I64), Binary("sub", n, lov, dtype=I64))}
            return lets, {ax: (lov, hiv)}

        # 1. each block's total: a reduction for a reducer's scan (vectorised: no chain of dependent steps); the
        # user's combine function in order, starting each block at its first element
        pre, bnd = bounds()
        first: list[Stmt] = []
        builtin = [c for c in carried if c.combine is None]
        user = [c for c in carried if c.combine is not None]
        if builtin:
            accs = {c: self.fresh(f"{c.op}_") for c in builtin}
            first += [Declare(accs[c], c.dtype, identity(c.op, c.dtype)) for c in builtin]  # type: ignore[arg-type]
            first += self.emit([ax], [_Sink(c.body, acc=accs[c], op=c.op, acc_dtype=c.dtype) for c in builtin], {},
                               vector=ax, reductions=tuple((accs[c], c.op) for c in builtin), bounds=bnd)  # fmt: skip
            self.scan_acc.update({scan_key(c): [Var(accs[c], dtype=c.dtype)] for c in builtin})
        if user:
            lov = Var(lo, dtype=I64)
            self.scan_first = {
                scan_key(c): add(Binary("sub", n, lov, dtype=I64), _i64(-1)) if c.reverse else lov for c in user
            }
            try:
                first += self.emit([ax], [_Sink(c) for c in user], {}, bounds=bnd)
            finally:
                self.scan_first = {}
        totals = [Write(parts[key][j], (bv,), acc) for key in dts for j, acc in enumerate(self.scan_acc[key])]
        work = mul(n, _i64(sum(point_cost(s.value) for s in g.stores)))
        pass1 = Loop(b, _i64(0), nv, Block((*pre, *first, *totals)), "parallel", (), work)
        # 2. the value each block starts from: the combined totals of the blocks before it, in order
        order: list[Stmt] = []
        starts: list[Stmt] = []
        for c in carried:
            key = scan_key(c)
            runs = [Var(self.fresh("_running"), dtype=dt) for dt in dts[key]]
            tots = [Var(self.fresh("_total"), dtype=dt) for dt in dts[key]]
            starts += [Declare(r.name, r.dtype, _scan_start(c, r.dtype)) for r in runs]  # type: ignore[arg-type]
            step: list[Stmt] = [Let(t.name, Read(p, (b2v,), dtype=t.dtype)) for t, p in zip(tots, parts[key])]
            step += [Write(p, (b2v,), r) for p, r in zip(parts[key], runs)]
            if c.combine is None:
                step.append(Assign(runs[0].name, combine(c.op, runs[0], tots[0])))
            else:  # the first block's totals start the running values
                step += self.combine_step(c, runs, tots, Binary("eq", b2v, _i64(0), dtype=dtypes.bool_))  # type: ignore[arg-type]
            order.append(Block(tuple(step)))
        pass2 = [*starts, Loop(b2, _i64(0), nv, Block(tuple(order)), "serial")]
        # 3. each block again from its starting value, writing every step
        pre, bnd = bounds()
        self.scan_start = {(key, j): Read(p, (bv,), dtype=dts[key][j]) for key in dts for j, p in enumerate(parts[key])}
        try:
            again = self.emit([ax], sinks, {}, bounds=bnd)
        finally:
            self.scan_start = {}
        pass3 = Loop(b, _i64(0), nv, Block((*pre, *again)), "parallel", (), work)
        body: Stmt = Block((pass1, *pass2, pass3))
        for key in dts:
            for p, dt in zip(parts[key], dts[key]):
                body = Alloc(p, dt, (nv,), body)
        cdiv = Binary("floordiv", add(n, _i64(block - 1)), _i64(block), dtype=I64)
        return [Let(nblk, cdiv), body]

    def split_reduction(self, r: Reduce, block: int) -> tuple[list[Stmt], Var]:
        """A full reduction in fixed-size blocks: parallel partials, then an ordered combine."""
        axes = self.order_axes(r.axes, r.body)
        outer, inner = axes[0], axes[1:]
        per_row: Expr = _i64(1)
        for a in inner:
            per_row = mul(per_row, self.extent(a))
        rows = self.fresh("_rows")
        nblk = self.fresh("_nblocks")
        part = self.fresh("_partial")
        b = self.fresh("_b")
        acc = self.fresh(f"{r.op}_")
        total = self.fresh(f"{r.op}_")
        lo, hi = self.fresh("_lo"), self.fresh("_hi")
        if isinstance(per_row, Const):
            rows_e: Expr = _i64(max(1, block // max(1, per_row.value)))
        else:
            rows_e = Binary(
                "maximum",
                _i64(1),
                Binary("floordiv", _i64(block), Binary("maximum", _i64(1), per_row, dtype=I64), dtype=I64),
                dtype=I64,
            )
        E0 = self.extent(outer)
        rv = Var(rows, dtype=I64)
        work = mul(mul(E0, per_row), _i64(point_cost(r.body)))
        block_body: list[Stmt] = [
            Declare(acc, r.dtype, identity(r.op, r.dtype)),
            Let(lo, mul(Var(b, dtype=I64), rv)),
            Let(hi, Binary("minimum", E0, add(Var(lo, dtype=I64), rv), dtype=I64)),
        ]
        sink = _Sink(r.body, acc=acc, op=r.op, acc_dtype=r.dtype)
        block_body += self.emit(
            axes,
            [sink],
            {},
            vector=axes[-1],
            reductions=((acc, r.op),),
            bounds={outer: (Var(lo, dtype=I64), Var(hi, dtype=I64))},
        )
        block_body.append(Write(part, (Var(b, dtype=I64),), Var(acc, dtype=r.dtype)))
        b2 = self.fresh("_b")
        totv = Var(total, dtype=r.dtype)
        nv = Var(nblk, dtype=I64)
        stmts: list[Stmt] = [
            Let(rows, rows_e),
            Let(nblk, Binary("floordiv", add(E0, add(rv, _i64(-1))), rv, dtype=I64)),
            Declare(total, r.dtype, identity(r.op, r.dtype)),
            Alloc(part, r.dtype, (nv,), Block((
                Loop(b, _i64(0), nv, Block(tuple(block_body)), "parallel", (), work),
                Loop(b2, _i64(0), nv, Assign(total, combine(r.op, totv, Read(part, (Var(b2, dtype=I64),), dtype=r.dtype))), "serial"),
            ))),
        ]  # fmt: skip
        return stmts, totv

    # -- groups and kernel --------------------------------------------------------------------
    def group(self, g: Group) -> list[Stmt]:
        sinks = [_Sink(s.value, buffer=s.tensor, index=s.index) for s in g.stores]
        stmts: list[Stmt] = []
        for s in g.stores:
            where = f"{s.loc.filename.rsplit('/', 1)[-1]}:{s.loc.lineno}: " if s.loc else ""
            text = s.loc.text.strip() if s.loc and s.loc.text else f"store {s.tensor}"
            stmts.append(Comment(where + text))
        if g.schedule is not None:
            stmts.append(Comment("schedule: " + g.schedule.describe(self.k.axis_name)))
        ordered = [sort_of(s) for s in g.stores]
        if ordered[0] is not None:  # a sort (with the others of its row): pypto.passes.sorting
            nest = SortNest(g, ordered, self.fresh, self.extent, self.affine,  # type: ignore[arg-type]
                            lambda e, env, known: self.expr(e, env, known, {}), self.k.axis_name)  # fmt: skip
            return stmts + nest.lower()
        if g.split is not None and g.loops:
            return stmts + self.split_scan(g, sinks)
        if g.split is not None:
            red: dict[Reduce, Var] = {}
            for s in sinks:
                for r in top_reduces(s.value):
                    if r not in red:
                        pre, var = self.split_reduction(r, g.split.block)
                        stmts.extend(pre)
                        red[r] = var
            stmts.extend(self.innermost(sinks, {}, red))
            return stmts
        # estimated cost of the nest, for the backend's "is it worth starting threads" decision
        work: Expr = _i64(sum(point_cost(s.value) for s in g.stores))
        reduced = {a for s in g.stores for r in top_reduces(s.value) for a in r.axes}
        for a in (*g.loops, *sorted(reduced - set(g.loops))):  # a column sum walks its columns' rows too
            work = mul(work, self.extent(a))
        pairs = dict(g.online.pairs) if g.online is not None else {}
        online: list[Stmt] = []
        if pairs:
            # long rows: online max/sum (no write-through: the final pass recomputes exp)
            self.online_pair = pairs
            self.online_block = g.online.block
            online = self.emit(list(g.loops), sinks, {}, parallel=g.parallel, vector=g.vector, work=work)
            self.online_pair = {}
            sinks = [_Sink(s.value, buffer=s.tensor, index=s.index) for s in g.stores]
        if self.noalias and len(g.stores) == 1 and not scans(g.stores[0].value):
            sinks[0].value = self.plan_write_through(g, g.stores[0])
        passes = _scheduled(self.emit(list(g.loops), sinks, {}, parallel=g.parallel, vector=g.vector, work=work), g)
        # a reduction is matched by value: the same one in a later nest (a softmax's sum in its gradient's
        # nests) must not write through into this nest's output
        self.write_through = {}
        online = _scheduled(online, g)
        if not pairs:
            return stmts + passes
        rmax = next(iter(pairs))
        (ax,) = rmax.axes
        assert rmax.dtype is not None
        row_bytes = mul(self.extent(ax), _i64(rmax.dtype.itemsize))
        min_bytes = g.online.min_bytes
        if isinstance(row_bytes, Const):
            return stmts + (online if row_bytes.value >= min_bytes else passes)
        cond = Binary("ge", row_bytes, _i64(min_bytes), dtype=dtypes.bool_)
        return [*stmts, If(cond, Block(tuple(online)), Block(tuple(passes)))]

    def plan_write_through(self, g: Group, s: Store) -> Expr:
        """Compute an expensive reduction body once: write it to the output in the reduction's loop,
        and read it back where the store needs it (softmax: ``exp`` is evaluated once per element).

        Applies when the reduction walks the points of the store's innermost loops (over the same axes, as
        a kernel written with one axis for both does, or over axes of its own with the same extents, as
        ``pt.softmax`` traces it: the body is then compared with the store's value at the loop point), the
        store writes exactly the loop point, the output is only written by this nest, and no output may alias
        an input (the variant compiled with ``noalias``).
        """
        plain = tuple(ix.plain_axis() for ix in s.index)
        target = self.k.buffer(s.tensor)
        if plain != g.loops:
            return s.value
        # the nest must not read what it writes (an inout buffer, a program's temporary, is fine otherwise: the
        # values written through are the final ones' inputs, and nothing else reads them before the store)
        if any(isinstance(n, Load) and n.tensor == s.tensor for n in postorder(s.value)):
            return s.value
        for r in top_reduces(s.value):
            free = free_axes(r)
            j = len(free)
            order, inner = tuple(self.order_axes(r.axes, r.body)), g.loops[j:]
            if set(g.loops[:j]) != free or len(order) != len(inner):
                continue
            body, index = r.body, s.index
            if order != inner:  # the reduction's own axes: the same points when the extents are the same
                if set(order) & set(inner) or any(self.extents[a] != self.extents[b] for a, b in zip(order, inner)):
                    continue
                body = substitute_axes(r.body, {a: Affine.axis(b) for a, b in zip(order, inner)})
                index = tuple(ix.substitute_axes({b: Affine.axis(a) for a, b in zip(order, inner)}) for ix in s.index)
            if body.dtype != target.dtype or not _expensive(body) or not _used_outside_reductions(s.value, body):
                continue
            self.write_through[r] = (s.tensor, index)
            load = Load(s.tensor, s.index, dtype=body.dtype)
            return _replace_outside_reductions(s.value, body, load)
        return s.value

    def kernel(self) -> LoopKernel:
        k = self.k
        assert k.groups is not None
        args = []
        for p in k.params:
            if isinstance(p, TensorParam):
                args.append(Argument(p.name, "buffer", p.dtype, p.role, tuple(self.affine(s, {}) for s in p.shape)))
        for p in k.scalar_params:
            args.append(Argument(p.name, "scalar", p.dtype))
        for d in k.dims:
            args.append(Argument(d, "dim", I64))
        body: list[Stmt] = []
        self.steps_into, skip = _fold_loop_stores(k)
        for gi, g in enumerate(k.groups):
            if gi in skip:  # its store is made at each step of a later nest's loop (_fold_loop_stores)
                continue
            self.step_stores = list(self.steps_into.get(gi, []))
            body += self.group(g)
            assert not self.step_stores, f"folded step stores not made: {self.step_stores}"  # never silently lost
            self.step_stores = []
        for s in k.scatters:
            body += self.scatter_nest(s)
        stmt: Stmt = Block(tuple(body))
        for t in reversed(k.temps):
            stmt = Alloc(t.name, t.dtype, tuple(self.affine(s, {}) for s in t.shape), stmt)
        return LoopKernel(k.name, tuple(args), stmt, self.noalias, tuple((t.name, t.dtype) for t in k.temps))


def _fold_loop_stores(k: KernelIR) -> tuple[dict[int, list[Store]], set[int]]:
    """Nests whose only store writes a sequential loop's value at each step (``y[r, t] = h`` in the loop's body)
    while a later nest runs the same loop for the variables after it (``last[r] = h``): the later nest's loop
    makes the store too, and the first nest is not emitted (the loop ran twice). It applies when the store writes
    the point of its nest's loops, the loop's axis innermost and the later nest's loops the others; when no nest
    in between touches the stored array or writes what the loop reads; and when the later nest does not read the
    stored array; the later nest must be a plain one (no split reduction, online softmax or sort: its LAST is
    lowered once, by :meth:`_Lowerer.reduction`). Returns the stores to make in each later nest, and the nests
    left out."""
    assert k.groups is not None
    into: dict[int, list[Store]] = {}
    skip: set[int] = set()

    def touched(g: Group) -> tuple[set[str], set[str]]:
        reads = {n.tensor for st in g.stores for n in postorder(st.value) if isinstance(n, (Load, Gather))}
        return {st.tensor for st in g.stores}, reads

    for i, g in enumerate(k.groups):
        if len(g.stores) != 1 or g.split is not None or g.online is not None:
            continue
        st = g.stores[0]
        v = st.value
        if not (isinstance(v, Scan) and v.op == LOOP) or not g.loops or g.loops[-1] != v.axis:
            continue
        if tuple(ix.plain_axis() for ix in st.index) != g.loops:
            continue
        reads = {n.tensor for n in postorder(v) if isinstance(n, (Load, Gather))}
        key = scan_key(v)
        for j in range(i + 1, len(k.groups)):
            h = k.groups[j]
            writes, h_reads = touched(h)
            if st.tensor in h_reads or st.tensor in writes or writes & reads:
                break
            plain = h.split is None and h.online is None and all(sort_of(s2) is None for s2 in h.stores)
            if h.loops == g.loops[:-1] and plain and any(
                r.op == LAST and isinstance(r.body, Scan) and scan_key(r.body) == key
                for s2 in h.stores for r in top_reduces(s2.value)
            ):  # fmt: skip
                into.setdefault(j, []).append(st)
                skip.add(i)
                break
    return into, skip


def _scan_start(c: Scan, dt: DType) -> Const:
    """What an accumulator of scan ``c`` (of type ``dt``) starts from: the reducer's identity; for the user's
    combine function any value (the first point takes the element)."""
    if c.combine is None:
        return identity(c.op, dt)
    return Const(False if dt.is_bool else 0.0 if dt.is_float else 0, dtype=dt)


def _while_condition(c: Scan) -> Expr | None:
    """The condition of a while loop's step (every variable ``where(cond, new, itself)``, one ``cond``), or None."""
    assert c.combine is not None
    exprs = c.combine.exprs
    if c.op != LOOP or not all(isinstance(x, Where) for x in exprs):
        return None
    conds = {x.cond for x in exprs}  # type: ignore[attr-defined]
    same = all(isinstance(x.b, Carry) and x.b.slot == j for j, x in enumerate(exprs))  # type: ignore[attr-defined]
    return next(iter(conds)) if len(conds) == 1 and same else None


def _component_dtypes(c: Scan) -> list[DType]:
    """The types of the values a scan carries: its own for a reducer's; each scanned value's for the user's; each
    variable's for a loop."""
    assert c.dtype is not None
    if c.op == LOOP:
        return [v.dtype for v in c.init]  # type: ignore[misc]
    return [c.dtype] if c.combine is None else [b.dtype for b in scan_bodies(c)]  # type: ignore[misc]


def point_cost(e: Expr) -> int:
    """A rough cost of evaluating ``e`` once per point: transcendental functions weigh 8,
    divisions 4, every other operation and load 1. ``Loop.work`` is points times this."""
    cost = 0
    for n in postorder(e):
        if isinstance(n, Unary) and n.op in TRANSCENDENTAL:
            cost += 8
        elif isinstance(n, Binary) and n.op in ("div", "floordiv", "mod"):
            cost += 4
        elif not isinstance(n, (Const, Index)):
            cost += 1
    return max(cost, 1)


def _expensive(e: Expr) -> bool:
    """Worth storing rather than recomputing: contains a transcendental function or a division."""
    return any((isinstance(n, Unary) and n.op in TRANSCENDENTAL) or (isinstance(n, Binary) and n.op == "div")
               for n in postorder(e))  # fmt: skip


def _used_outside_reductions(e: Expr, target: Expr) -> bool:
    stack, seen = [e], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n == target:
            return True
        if not isinstance(n, Reduce):
            stack.extend(children(n))
    return False


def _replace_outside_reductions(e: Expr, old: Expr, new: Expr) -> Expr:
    memo: dict[int, Expr] = {}

    def go(n: Expr) -> Expr:
        if id(n) in memo:
            return memo[id(n)]
        if n == old:
            r: Expr = new
        elif isinstance(n, Reduce):
            r = n  # keep reductions intact: they are matched by identity when lowered
        else:
            r = map_children(n, go)  # type: ignore[assignment]
        memo[id(n)] = r
        return r

    return go(e)


def _inner_first(reduces: list[Reduce]) -> list[Reduce]:
    """Order reductions so one used inside another's body is computed first (and reused)."""
    inside = {id(r): {id(n) for n in postorder(r.body) if isinstance(n, Reduce)} for r in reduces}
    out: list[Reduce] = []
    pending = list(reduces)
    while pending:
        for r in pending:
            if not any(id(o) in inside[id(r)] for o in pending if o is not r):
                out.append(r)
                pending.remove(r)
                break
        else:  # pragma: no cover - containment is acyclic
            out.extend(pending)
            break
    return out


_BINDABLE = (Unary, Binary, Where, Cast, Read)


def _bind_shared(values: list[Expr], fresh) -> tuple[list[Let], list[Expr]]:
    """Bind every compound subexpression used more than once to a ``Let`` (CSE)."""
    uses: dict[int, int] = {}
    order: list[Expr] = []

    def count(e: Expr) -> None:
        uses[id(e)] = uses.get(id(e), 0) + 1
        if uses[id(e)] > 1:
            return
        for c in children(e):
            count(c)
        order.append(e)

    for v in values:
        count(v)
    shared = {id(e) for e in order if uses[id(e)] > 1 and isinstance(e, _BINDABLE)}
    if not shared:
        return [], values
    lets: list[Let] = []
    repl: dict[int, Expr] = {}

    def rebuild(e: Expr) -> Expr:
        if id(e) in repl:
            return repl[id(e)]
        r = map_children(e, rebuild)
        assert isinstance(r, Expr)
        if id(e) in shared:
            name = fresh("t")
            lets.append(Let(name, r))
            r = Var(name, dtype=e.dtype)
        repl[id(e)] = r
        return r

    for e in order:
        rebuild(e)
    return lets, [rebuild(v) for v in values]


def _scheduled(stmts: list[Stmt], g: Group) -> list[Stmt]:
    """``stmts`` with the nest's schedule on its outermost loops (where the target passes find it)."""
    if g.schedule is None:
        return stmts

    def mark(s: Stmt) -> Stmt:
        if isinstance(s, Loop):
            return dataclasses.replace(s, schedule=g.schedule)
        if isinstance(s, Block):
            return Block(tuple(mark(b) for b in s.body))
        if isinstance(s, If):
            return dataclasses.replace(s, then=mark(s.then), orelse=None if s.orelse is None else mark(s.orelse))
        return s

    return [mark(s) for s in stmts]


def lower(k: KernelIR, noalias: bool = True) -> LoopKernel:
    """Lower a scheduled kernel to the loop IR."""
    return _Lowerer(k, noalias).kernel()
