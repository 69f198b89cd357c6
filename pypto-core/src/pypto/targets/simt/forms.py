"""Which forms a device step has: the analyses the ``plan_launch`` pass decides with.

Nothing here prints. :class:`StepForms` reads a split kernel's loop IR and answers the questions that
choose how a step runs and what its code does:

* which loops a map kernel spreads over threads (:meth:`StepForms.map_chain`), whether its row
  reductions walk memory (:meth:`StepForms.rows_in_memory`), which rows a group may keep in local
  memory (:meth:`StepForms.cacheable_rows`);
* whether a body has a form over vectors of contiguous points (:meth:`StepForms.lane_form`: every value
  varying with the loop variable read and written contiguously, every operation with a vector spelling);
* whether the statements of a ``groups`` or ``single`` step can be run by a work-group together
  (:meth:`StepForms.group_form`): the loops its threads share, the accumulators each shared loop leaves
  with per-thread partial results (combined by the group after the statement holding the loop), which
  shared loops have a vector form, and where a barrier must stand because a thread may read an element
  another thread wrote (:class:`GroupForm`).

The SIMT printer then prints what the pass recorded (:class:`~pypto.ir.device.StepLaunch`) without trying
alternatives. Statements are named by their path: the indices from the step's statement list down through
blocks, loop bodies and branches (:data:`Path`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from pypto.dtypes import DType, int64
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
    stmt_exprs,
    walk,
)
from pypto.ir.nodes import COMPARE_OPS, Binary, Cast, Const, Expr, Unary, Where
from pypto.ir.ops import FUNCTIONS2
from pypto.ir.reducers import COMBINE_OP
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.analysis import Unsupported

MAX_MAP_DIMS = 3
SHAREABLE = ("vector", "parallel", "parallel_vector")

Path = tuple[int, ...]
"""A statement's place in a step: indices through statement lists, block bodies (a loop's body and an
``if``'s branches count as one-element lists, the ``else`` branch as index 1 of its ``if``)."""


def shareable(s: Loop) -> tuple[tuple[str, str], ...] | None:
    """The reductions of a loop a group's threads may share, or None if they must not.

    Vector and parallel loops are independent up to their declared reductions. A serial loop whose body
    only folds values into accumulators (the ordered combine of a split reduction) is a reduction too.
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


@dataclass(frozen=True)
class ScanForm:
    """A loop's steps as a parallel prefix (see :func:`scan_form`): each step runs ``before`` (lets of values
    that do not read the running values), folds ``value`` into each accumulator with its reducer (``folds``:
    accumulator, reducer, value), then runs ``after`` (lets and writes that may read the folded values)."""

    before: tuple[Stmt, ...]
    folds: tuple[tuple[str, str, Expr], ...]
    after: tuple[Stmt, ...]


def scan_form(s: Loop) -> ScanForm | None:
    """The loop's steps as a parallel prefix, when a group's threads may take one step each at once.

    The loop carries running reductions (``Loop.scans``: ``pt.cumsum``, ``cumprod``, ``cummax``, ``cummin``;
    not a sequential loop's state, not the user's combine function), its body is straight-line code (lets,
    the folds, then lets and writes), no step reads what the loop writes, and each step writes elements of
    its own (every written index moves with the step). Then thread ``t`` of a group computes step ``s + t``:
    its value folded with those of the steps before it in the group (a prefix over the group, combined in a
    fixed tree: a float sum rounds differently from the serial order, as a GPU's ``cumsum`` does), started
    from the running values before step ``s``.
    """
    if not s.scans or s.reductions or s.kind != "serial":
        return None
    ops = dict(s.scans)
    stmts: list[Stmt] = []

    def flat(st: Stmt) -> None:
        if isinstance(st, Block):
            for b in st.body:
                flat(b)
        elif not isinstance(st, Comment):
            stmts.append(st)

    flat(s.body)
    before: list[Stmt] = []
    folds: list[tuple[str, str, Expr]] = []
    after: list[Stmt] = []
    lets: dict[str, Expr] = {}
    for st in stmts:
        if isinstance(st, Assign) and st.name in ops:
            v = st.value
            op = ops[st.name]
            if after or any(a == st.name for a, _, _ in folds):
                return None
            if not (isinstance(v, Binary) and v.op == COMBINE_OP[op] and isinstance(v.a, Var) and v.a.name == st.name):
                return None
            if ana.mentions(v.b, set(ops)):
                return None
            folds.append((st.name, op, v.b))
        elif isinstance(st, Let) and not folds:
            if ana.mentions(st.value, set(ops)):
                return None
            before.append(st)
            lets[st.name] = st.value
        elif isinstance(st, (Let, Write)) and folds:
            after.append(st)
            if isinstance(st, Let):
                lets[st.name] = st.value
        else:
            return None
    if len(folds) != len(ops) or ana.reads_what_it_writes(s):
        return None
    for st in after:  # every step writes its own elements (the last step's value is not the last one written)
        if isinstance(st, Write):
            if not st.index or any(isinstance(n, Read) for ix in st.index for n in ana.deep(ix)):
                return None
            moves = [ana.coefficient(_expand(ix, lets), s.var) for ix in st.index]
            if None in moves or not any(moves):  # (affine in the step, and not the same element at every step)
                return None
    return ScanForm(tuple(before), tuple(folds), tuple(after))


def _expand(e: Expr, lets: Mapping[str, Expr]) -> Expr:
    """``e`` with the step's lets replaced by their values (a let may read an earlier one)."""
    return ana.substitute(e, dict(lets))


def trip(loop: Loop) -> Expr:
    """A loop's number of iterations (``stop - start``, negative when it runs none)."""
    return Binary("sub", loop.stop, loop.start, dtype=int64)


def shared_loops(loop: Loop) -> list[Loop]:
    """The shareable loops directly in ``loop``'s body."""
    return [b for b in ana.body(loop.body) if isinstance(b, Loop) and shareable(b) is not None]


@dataclass(frozen=True)
class GroupForm:
    """How a work-group runs a step's statements together (see :meth:`StepForms.group_form`).

    ``vector_loops`` are the shared loops with a vector form, as (place, variable): the place is the
    loop's number among the step's shared loops in the order they run. ``barriers`` are the paths of the
    statements a barrier precedes; ``loop_barriers`` the per-thread loops whose body ends with one (a loop
    every thread runs that reads what it writes).
    """

    vector_loops: tuple[tuple[int, str], ...] = ()
    barriers: tuple[Path, ...] = ()
    loop_barriers: tuple[Path, ...] = ()
    prefix_loops: tuple[str, ...] = ()


Owner = tuple[str, Expr | None]
"""Which thread writes an element: ``("", offset)`` every thread's own copy or the first thread's, or
``(shared loop key, offset)``: the thread the shared loop gives that point (its bounds and lane width)."""


@dataclass
class _Walk:
    """The state of one :meth:`StepForms.group_form` walk."""

    vectors: bool | Collection[int]
    caches: frozenset[str]
    level: dict[str, int] = field(default_factory=dict)  # accumulator -> block depth of its Declare
    partial: dict[str, str] = field(default_factory=dict)  # accumulator -> its reducer, until the group combines
    written: dict[str, set[tuple[str, Expr]]] = field(default_factory=dict)  # buffer -> owners of its elements
    last_writer: dict[str, Loop] = field(default_factory=dict)  # cached row -> the loop writing it out
    places: int = 0
    vector_loops: list[tuple[int, str]] = field(default_factory=list)
    barriers: list[Path] = field(default_factory=list)
    loop_barriers: list[Path] = field(default_factory=list)
    prefix_loops: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # buffers every thread read since the last barrier


class StepForms:
    """The questions :func:`~pypto.targets.simt.launch.plan_launch` asks of a split kernel (see the module
    docstring); the SIMT printer asks the same ones of the kernel it prints."""

    def __init__(self, k: LoopKernel):
        split = k.device
        assert split is not None, "StepForms reads a split kernel (split_kernels)"
        self.args: dict[str, Argument] = {a.name: a for a in k.args}
        self.buffers: dict[str, tuple[DType, tuple[Expr, ...]]] = {
            a.name: (a.dtype, a.shape) for a in k.args if a.kind == "buffer"
        }
        for name, dt, shape in split.temps:
            self.buffers[name] = (dt, shape)
        inputs = {a.name for a in k.args if a.kind in ("dim", "scalar")}
        self.known = inputs | set(split.host_lets) | {let.name for let in split.pure}
        self.declared: dict[str, DType] = dict(split.declared)

    # -- layout ------------------------------------------------------------------------------------------
    def flat_index(self, r: Read | Write) -> Expr:
        """The element offset of an access (row-major over the buffer's shape)."""
        shape = self.buffers[r.buffer][1]
        if not r.index:
            return Const(0, dtype=int64)
        acc: Expr = r.index[0]
        for dim, ix in zip(shape[1:], r.index[1:]):
            acc = Binary("add", Binary("mul", acc, dim, dtype=int64), ix, dtype=int64)
        return acc

    def map_chain(self, loop: Loop) -> list[Loop]:
        """The perfect nest of independent loops from ``loop`` that a map kernel spreads over threads."""
        chain = [loop]
        while len(chain) < MAX_MAP_DIMS:
            body = chain[-1].body.body if isinstance(chain[-1].body, Block) else (chain[-1].body,)
            inner = [b for b in body if not isinstance(b, (Let, Comment))]
            if len(inner) != 1 or not isinstance(inner[0], Loop) or body[-1] is not inner[0]:
                break
            s = inner[0]
            if s.reductions or ana.assigned_outside(s) or not ana.only_all((s.start, s.stop), self.known):
                break
            if ana.writes_through_data(s):  # a scatter's points in order: the loop stays in the thread
                break
            chain.append(s)
        return chain

    def rows_in_memory(self, loop: Loop) -> bool:
        """Whether the loop's reduction loops (and loops of running values) walk memory contiguously (then a
        group shares a row; a scan down columns is better a thread per column, its reads side by side)."""
        found = False
        for s in walk(loop.body):
            if isinstance(s, Loop) and (s.reductions or s.scans):
                found = True
                lets = {st.name: st.value for st in walk(s.body) if isinstance(st, Let)}  # (a reversed scan's step)
                for st in walk(s.body):
                    for e in stmt_exprs(st):
                        for n in ana.deep(e):
                            if not isinstance(n, Read):
                                continue
                            if ana.coefficient(_expand(self.flat_index(n), lets), s.var) in (1, -1):
                                return True
                if not any(isinstance(n, Read) for st in walk(s.body) for e in stmt_exprs(st) for n in ana.deep(e)):
                    return True
        return not found

    def cacheable_rows(self, loop: Loop) -> tuple[tuple[str, Loop], ...]:
        """Buffers a group reads (or writes, then reads back) in several shared loops over one row.

        Such a row is kept in local memory: read from global memory once, and a row written then read back
        (softmax's exponentials) is written to global memory only by the last loop. Applies to shared loops
        over the same bounds, directly in the group's body, each touching the buffer only at one row offset
        plus the loop variable.
        """
        body = ana.body(loop.body)
        loops = [b for b in body if isinstance(b, Loop) and shareable(b) is not None]
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

    def share_hint(self, body: Stmt, subst: Mapping[str, Expr]) -> Expr | None:
        """The trip count of the first shared loop in ``body`` (for the first group: ``subst`` gives the values of
        the variables around it): the number of elements a group's threads share, which sizes the group."""
        lets: dict[str, Expr] = dict(subst)
        found: list[Loop] = []

        def visit(s: Stmt) -> None:
            if found:
                return
            if isinstance(s, Block):
                for b in s.body:
                    visit(b)
            elif isinstance(s, Let):
                lets[s.name] = s.value
            elif isinstance(s, Loop):
                if shareable(s) is not None or scan_form(s) is not None:
                    found.append(s)
                else:
                    lets[s.var] = s.start
                    visit(s.body)

        visit(body)
        return ana.substitute(trip(found[0]), lets) if found else None

    # -- vector form ---------------------------------------------------------------------------------------
    def lane_form(self, body: Stmt, var: str, accs: Mapping[str, str] = {}) -> str | None:  # noqa: B006
        """Why ``body`` has no form over vectors of consecutive values of ``var`` (None when it has one).

        ``accs`` maps the accumulators the body folds into to their reducers (each then has a vector partial).
        """
        try:
            _Lanes(self, var, accs).check(body)
        except Unsupported as e:
            return str(e)
        return None

    # -- group form ----------------------------------------------------------------------------------------
    def group_form(self, stmts: Iterable[Stmt], level: int, *, vectors: bool | Collection[int], caches: Iterable[str] = (),
                   last_writers: Mapping[str, Loop] | None = None) -> GroupForm | None:  # fmt: skip
        """How a work-group runs ``stmts`` together (the body of a ``groups`` kernel's loop at ``level`` 1, a
        ``single`` kernel's statements at level 0), or None when it cannot: an accumulator assigned in a shared
        loop without being folded, a partial result read before the group combines it, a temporary or a
        statement the group form has no spelling for, a cached row written outside a shared loop.

        ``vectors``: True to try each shared loop in a vector form, else the places of the shared loops printed in
        one (barriers depend on it: a thread owns other points of a row in a vector loop than in a scalar one);
        ``caches``: the rows kept in local memory (``last_writers``: the shared loop writing each one out).
        """
        w = _Walk(vectors, frozenset(caches), last_writer=dict(last_writers or {}))
        try:
            self._block(w, list(stmts), level, ())
        except Unsupported:
            return None
        prefixes = tuple(dict.fromkeys(w.prefix_loops))
        return GroupForm(tuple(w.vector_loops), tuple(w.barriers), tuple(w.loop_barriers), prefixes)

    def _block(self, w: _Walk, stmts: list[Stmt], level: int, path: Path) -> None:
        for i, s in enumerate(stmts):
            if isinstance(s, Block):
                self._block(w, list(s.body), level, (*path, i))
                continue
            self._stmt(w, s, level, (*path, i))
            for acc in [a for a in w.partial if w.level.get(a) == level]:  # the group combines them here
                del w.partial[acc]

    def _stmt(self, w: _Walk, s: Stmt, level: int, path: Path) -> None:
        if isinstance(s, Comment):
            return
        if isinstance(s, Alloc):
            raise Unsupported("a temporary inside a device kernel")
        if isinstance(s, Loop):
            self._loop(w, s, level, path)
            return
        self._uniform(w, stmt_exprs(s))
        if isinstance(s, Update):  # a group writes once what every thread holds: an atomic update is not that
            raise Unsupported("an atomic update outside a shared loop")
        if self._conflicts(w, s, w.written, None) or (isinstance(s, Write) and s.buffer in w.read):
            # (the first thread's write of an element the other threads may not have read yet waits for them)
            self._wait(w, path)
        if not isinstance(s, Write):  # (a write's value is computed by the first thread alone)
            w.read |= ana.reads(s).keys()
        if isinstance(s, Declare):
            w.level[s.name] = level
            self.declared[s.name] = s.dtype
        elif isinstance(s, Write):  # every thread has the value: the first one stores it
            if s.buffer in w.caches:
                raise Unsupported("a cached row written outside a shared loop")
            w.written.setdefault(s.buffer, set()).add(("lid0", self.flat_index(s)))
        elif isinstance(s, If):
            self._block(w, [s.then], level + 1, (*path, 0))
            if s.orelse is not None:
                self._block(w, [s.orelse], level + 1, (*path, 1))
        elif not isinstance(s, (Assign, Let)):
            raise Unsupported(f"statement {type(s).__name__}")

    def _loop(self, w: _Walk, s: Loop, level: int, path: Path) -> None:
        self._uniform(w, (s.start, s.stop))
        reds = shareable(s)
        if reds is None and scan_form(s) is not None:  # a prefix over the group, a step per thread
            for acc, _ in s.scans:
                if acc not in w.level or acc in w.partial:
                    raise Unsupported(f"running value '{acc}' is not a value of the whole group here")
            if self._conflicts(w, s, w.written, None) or ana.writes(s) & w.read:
                self._wait(w, path)
            self._thread_writes(w, s, f"{s.var}:{s.start}:{s.stop}:scan")
            w.prefix_loops.append(s.var)
            return
        if reds is None:  # every thread runs the loop; its body may hold shared loops
            if self._conflicts(w, s, w.written, None):
                self._wait(w, path)
            self._block(w, [s.body], level + 1, (*path, 0))
            if ana.reads_what_it_writes(s):
                w.loop_barriers.append(path)
                w.written.clear()
                w.read.clear()
            return
        accs = ana.assigned(s.body)
        for acc in accs:
            if acc not in w.level:
                raise Unsupported(f"accumulator '{acc}' is not declared in this kernel")
        ops = dict(reds)
        for acc in sorted(accs):
            if acc in w.partial:
                continue
            op = ops.get(acc) or ana.fold_op(s.body, acc)
            if op is None:
                raise Unsupported(f"'{acc}' is assigned in a shared loop without being reduced")
            w.partial[acc] = op
        for b in walk(s.body):  # inside the loop the accumulators may only be folded into
            for e in stmt_exprs(b):
                if isinstance(b, Assign) and b.name in accs and isinstance(e, Binary):
                    e = e.b
                if ana.mentions(e, set(w.partial)):
                    raise Unsupported("a partial accumulator is read inside a shared loop")
        self._shared(w, s, path)

    def _shared(self, w: _Walk, s: Loop, path: Path) -> None:
        """A loop the group's threads share: its place, its vector form, the barrier before it."""
        before = {b: set(o) for b, o in w.written.items()}
        place, w.places = w.places, w.places + 1
        width = "1"
        if w.vectors is True and not ana.holds_loops(s.body):
            accs = {a: op for a, op in w.partial.items() if a in ana.assigned(s.body)}
            if self.lane_form(s.body, s.var, accs) is None:
                w.vector_loops.append((place, s.var))
                width = "v"
        elif w.vectors is not True and w.vectors and place in w.vectors:
            w.vector_loops.append((place, s.var))
            width = "v"
        self._thread_writes(w, s, f"{s.var}:{s.start}:{s.stop}:{width}")
        if self._conflicts(w, s, before, width) or ana.writes(s) & w.read:
            w.barriers.append(path)
            w.read.clear()
            now = {b: o - before.get(b, set()) for b, o in w.written.items()}
            w.written = {b: o for b, o in now.items() if o}

    @staticmethod
    def _wait(w: _Walk, path: Path) -> None:
        """A barrier before the statement at ``path``: every thread's earlier reads and writes are done."""
        w.barriers.append(path)
        w.written.clear()
        w.read.clear()

    def _thread_writes(self, w: _Walk, s: Loop, key: str) -> None:
        """The elements a shared loop's threads write (into ``w.written``, owned by the thread of their point);
        a cached row is written to global memory only by the loop writing it out."""
        for st in walk(s.body):
            if isinstance(st, Alloc):
                raise Unsupported("a temporary inside a device kernel")
            if isinstance(st, Update):  # atomic: no thread owns the element
                if self.buffers[st.buffer][0].bits not in (32, 64):
                    raise Unsupported(f"an atomic update of a {self.buffers[st.buffer][0].bits}-bit element")
                continue
            if isinstance(st, Write):
                if st.buffer in w.caches and w.last_writer.get(st.buffer) is not s and st.buffer in w.last_writer:
                    continue
                w.written.setdefault(st.buffer, set()).add((key, self.flat_index(st)))

    def _uniform(self, w: _Walk, exprs: Iterable[Expr]) -> None:
        """Statements every thread runs may not read an accumulator holding per-thread partials."""
        partial = set(w.partial)
        if partial and any(ana.mentions(e, partial) for e in exprs):
            raise Unsupported("a partial accumulator is read before its group reduction")

    def _conflicts(self, w: _Walk, s: Stmt, written: dict[str, set[tuple[str, Expr]]], width: str | None) -> bool:
        """Whether ``s`` reads an element of ``written`` that another thread may have written.

        A shared loop (``width``: its lanes) over the bounds of the loop that wrote the elements, reading them
        at the offsets written, only reads its own thread's elements.
        """
        reads = ana.reads(s)
        if not reads.keys() & written.keys():
            return False
        if width is None or not isinstance(s, Loop):
            return True
        key = f"{s.var}:{s.start}:{s.stop}:{width}"
        for buf, offs in reads.items():
            owners = written.get(buf)
            if owners is None:
                continue
            mine = {(key, self.flat_index(Read(buf, ix, dtype=self.buffers[buf][0]))) for ix in offs}
            if any(o[0] != key for o in owners) or not mine <= owners:
                return True
        return False


class _Lanes:
    """The checks of :meth:`StepForms.lane_form`: raises :class:`Unsupported` naming what has no vector form."""

    def __init__(self, forms: StepForms, var: str, accs: Mapping[str, str]):
        self.f = forms
        self.var = var
        self.accs = accs
        self.varying = {var}

    @staticmethod
    def no(why: str) -> Unsupported:
        return Unsupported(f"lane vectors: {why}")

    def vtype(self, dt: DType) -> None:
        if dt.is_bool:
            raise self.no("a boolean value varies across lanes")
        if dt.is_half:
            raise self.no("a 16-bit float varies across lanes (converted one value at a time)")
        if dt.is_unsigned or dt.is_narrow_int:
            raise self.no(f"a value of {dt} varies across lanes (computed one value at a time)")

    def varies(self, e: Expr) -> bool:
        return any(isinstance(n, Var) and n.name in self.varying for n in ana.deep(e))

    def vec(self, e: Expr) -> None:
        assert e.dtype is not None
        if not self.varies(e):
            self.vtype(e.dtype)  # broadcast to a vector of its type
            return
        self.value(e)

    def value(self, e: Expr) -> None:
        dt = e.dtype
        assert dt is not None
        if isinstance(e, Var):
            return
        if isinstance(e, Read):
            self.vtype(dt)
            if ana.coefficient(self.f.flat_index(e), self.var) != 1:
                raise self.no(f"'{e.buffer}' is not read contiguously")
        elif isinstance(e, Cast):
            src = e.x.dtype
            assert src is not None
            if src.is_bool or dt.is_bool:
                raise self.no("a cast to or from bool")
            if src.is_float and dt.is_int:  # pt.cast's rule (saturating, NaN gives 0) is a helper per value
                raise self.no("a conversion of a float to an integer")
            self.vec(e.x)
            if src != dt:
                self.vtype(dt)
        elif isinstance(e, Where):
            self.vec(e.a)
            self.vec(e.b)
            if self.varies(e.cond):
                c = e.cond
                if not (isinstance(c, Binary) and c.op in COMPARE_OPS):
                    raise self.no("a varying condition that is not a comparison")
                self.vec(c.a)
                self.vec(c.b)
        elif isinstance(e, Unary):
            self.vec(e.x)
            if e.op == "neg" and dt.is_int:
                self.vtype(dt)
            elif not (e.op == "neg" or (e.op == "invert" and dt.is_int)) and not dt.is_float:
                raise self.no(f"{e.op} of {dt}")
        elif isinstance(e, Binary):
            adt = e.a.dtype
            assert adt is not None
            if dt.is_bool or adt.is_bool:
                raise self.no(f"boolean '{e.op}'")
            self.vec(e.a)
            self.vec(e.b)
            ok = (
                (e.op in ("add", "sub", "mul") and dt.is_int)
                or (e.op in ("add", "sub", "mul", "div") and dt.is_float)
                or e.op in ("and", "or", "xor", "maximum", "minimum")
                or (e.op in FUNCTIONS2 and dt.is_float)
            )
            if not ok:
                raise self.no(f"'{e.op}'")
            if e.op in ("add", "sub", "mul", "maximum", "minimum"):
                self.vtype(dt)
        else:
            raise self.no(f"expression {type(e).__name__}")

    def check(self, s: Stmt) -> None:
        for acc in self.accs:
            self.vtype(self.f.declared[acc])  # the vector partial
        self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Block):
            for b in s.body:
                self.stmt(b)
        elif isinstance(s, Comment):
            return
        elif isinstance(s, Let):
            if self.varies(s.value):
                assert s.value.dtype is not None
                self.vtype(s.value.dtype)
                self.value(s.value)
                self.varying.add(s.name)
        elif isinstance(s, Assign) and s.name in self.accs:
            v = s.value
            op = self.accs[s.name]
            if not (isinstance(v, Binary) and v.op == COMBINE_OP[op] and isinstance(v.a, Var) and v.a.name == s.name):
                raise self.no(f"'{s.name}' is not folded with its reducer")
            self.vec(v.b)
            self.vtype(self.f.declared[s.name])
        elif isinstance(s, Write):
            self.vtype(self.f.buffers[s.buffer][0])
            if ana.coefficient(self.f.flat_index(s), self.var) != 1:
                raise self.no(f"'{s.buffer}' is not written contiguously")
            self.vec(s.value)
        else:
            raise self.no(f"statement {type(s).__name__}")


__all__ = [
    "StepForms", "GroupForm", "Path", "ScanForm", "scan_form", "shareable", "shared_loops", "trip", "MAX_MAP_DIMS",
]  # fmt: skip
