"""The SIMT renderer: the loop IR as device kernels for GPU-style targets (CUDA, OpenCL).

One loop-IR kernel becomes a sequence of device kernels plus a host-side
:class:`~pypto.codegen.simt_plan.LaunchPlan` (which kernels to launch, with how many threads, and
which device buffers to allocate). The top-level statements are split into *steps*:

* a top-level parallel loop whose nest is a perfect nest of independent loops (elementwise code,
  a matmul's output loops) becomes a ``map`` kernel: one thread per point of up to three loops
  (an NDRange, or grid-stride loops on CUDA); whatever the nest holds inside runs per thread;
* a top-level parallel loop whose body holds reduction loops walking rows of memory (row
  reductions, softmax, layernorm, the blocks of a split full reduction) becomes a ``groups``
  kernel: one work-group per iteration; the group's threads share the inner vector loops
  (block-strided), keep per-thread partial results and combine them with a deterministic
  work-group reduction whose result every thread sees; statements outside the shared loops run
  in every thread (values stay uniform) and writes there are done by thread 0;
* every other statement (the ordered combine of a split reduction, ``out[0] = total``) runs in a
  ``single`` kernel of one work-group, rendered the same way (a combine loop is shared by the
  group's threads and reduced like a row).

Temporaries (``Alloc``) become device buffers the host allocates; scalars computed in one kernel
and used in a later one live in one-element device buffers. Pure values of the dims (``_rows``,
``_nblocks``) are recomputed in every kernel that needs them and by the host for the sizes.
Semantics match the CPU backends: NaN-propagating max/min, floor division and modulo helpers
that never trap, wrap-around integer arithmetic (rendered through unsigned types, since OpenCL C
and CUDA C do not promise wrapping for signed overflow).

A language configures the printer through the settings below (the defaults spell OpenCL C) and
overrides a few methods: the work-group reduction (warp shuffles in CUDA), how local memory is
declared, the prelude.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..dtypes import DType, bool_, float32, float64, int32, int64
from ..ir.loops import (
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
    Var,
    Write,
    stmt_exprs,
    walk,
)
from ..ir.nodes import Binary, Const, Expr, Unary, children, map_children
from ..ir.reducers import COMBINE_OP, identity
from .cstyle import CRenderer
from .simt_plan import (
    GROUPS,
    MAP,
    SINGLE,
    DeviceBuffer,
    HostExpressionError,
    KernelLaunch,
    LaunchPlan,
    LocalBuffer,
    host_names,
    py_expr,
)

PLAN_MARKER = "/* pypto launch plan: "
_PARALLEL = ("parallel", "parallel_vector")
_SHAREABLE = ("vector", "parallel", "parallel_vector")
_REDUCER_OF = {v: k for k, v in COMBINE_OP.items()}  # "add" -> "sum", ...
SCRATCH = "pt_scratch"
MAX_MAP_DIMS = 3


class Unsupported(Exception):
    """A loop shape a mapping does not handle; the caller falls back to a simpler mapping."""


@dataclass
class _Step:
    """One device kernel to be: a top-level parallel loop, or a run of other statements."""

    stmts: list[Stmt]
    loop: Loop | None = None
    comments: list[str] = field(default_factory=list)
    when: str | None = None  # host condition (Python) under which the kernel runs


@dataclass
class _Partial:
    """An accumulator holding per-thread partial results until the group reduces it."""

    op: str
    dtype: DType
    pre: str | None  # saved value to combine with after the reduction (None: started at the identity)


@dataclass
class _KernelState:
    """What rendering one device kernel tracks."""

    buffers: set[str] = field(default_factory=set)  # buffers the kernel touches
    names: set[str] = field(default_factory=set)  # scalars, dims and lets it reads
    reductions: bool = False  # uses the work-group reduction scratch
    partial: dict[str, _Partial] = field(default_factory=dict)
    level: dict[str, int] = field(default_factory=dict)  # accumulator -> block depth of its Declare
    pristine: dict[str, Const] = field(default_factory=dict)  # accumulators still at their initial value
    written: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)  # buffer -> owners
    caches: dict[str, str] = field(default_factory=dict)  # buffer -> local cache name
    filled: set[str] = field(default_factory=set)  # cached rows holding their values already
    last_writer: dict[str, Loop] = field(default_factory=dict)  # cached output -> the loop writing it out
    strided: Loop | None = None  # the shared loop being rendered (its thread owns these elements)
    width: int = 1  # lanes of the shared loop being rendered (which elements a thread owns)
    last_width: int = 1  # lanes of the last shared loop rendered
    row_count: str = "0"  # elements of a cached row (C expression)

    counter: int = 0


class SimtRenderer(CRenderer):
    """Renders a :class:`LoopKernel` as device kernels and a launch plan (OpenCL C spellings)."""

    # -- settings a language overrides ----------------------------------------------------------
    includes: tuple[str, ...] = ()
    kernel_prefix = "__kernel void "
    restrict = "restrict"
    buffer_qualifier = "__global "
    local_qualifier = "__local "
    static_inline = "inline"
    math_suffix_f32 = ""  # OpenCL math functions are overloaded
    index_type = "long"
    types = {float32: "float", float64: "double", int32: "int", int64: "long", bool_: "bool"}
    buffer_types = {bool_: "uchar"}  # OpenCL has no bool buffers or kernel arguments
    scalar_types = {bool_: "uchar"}
    unsigned_types = {int32: "uint", int64: "ulong"}
    reinterpret = {int32: "as_int", int64: "as_long"}  # unsigned bits -> signed; None: a C cast
    int64_suffix = "L"
    local_id = "(long)get_local_id(0)"
    local_size = "(long)get_local_size(0)"
    group_id = "(long)get_group_id(0)"
    num_groups = "(long)get_num_groups(0)"
    global_id = "(long)get_global_id({d})"  # {d}: dimension number, {c}: its letter (x, y, z)
    global_size = "(long)get_global_size({d})"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    barrier_global = "barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);"
    grid_stride = False  # map kernels: one point per thread (NDRange) or grid-stride loops (CUDA)
    cache_rows = True  # groups kernels: a variant keeping rows read twice in local memory
    lanes = 1  # > 1: loops over contiguous points use vectors of this many lanes (CPU OpenCL)

    local_scratch_param = True  # the reduction scratch is a kernel argument (OpenCL __local)

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[str] = []
        self.launches: list[KernelLaunch] = []
        self.st = _KernelState()
        self._index_ctx = False
        self.host: dict[str, str] = {}  # loop-IR name -> host (Python) name, for evaluable values
        self.pure: dict[str, Let] = {}  # top-level lets of dims and scalars, by name
        self.args: dict[str, Argument] = {}
        self.temps: dict[str, tuple[DType, tuple[Expr, ...]]] = {}
        self.slots: dict[str, DType] = {}  # device scalars living across kernels -> 1-element buffers
        self.declared_types: dict[str, DType] = {}
        self.dtypes_used: set[DType] = set()  # every type in the kernel (OpenCL enables fp64 on demand)

    # -- types and literals ------------------------------------------------------------------------
    def literal(self, value: object, dt: DType) -> str:
        text = super().literal(value, dt)
        if dt == int64 and text.endswith("LL"):
            return text[:-2] + self.int64_suffix
        return text

    def scalar_ctype(self, dt: DType) -> str:
        return self.scalar_types.get(dt, self.types[dt])

    def as_signed(self, text: str, dt: DType) -> str:
        """``text`` (an unsigned value) reinterpreted as the signed type ``dt``."""
        fn = self.reinterpret.get(dt) if self.reinterpret else None
        return f"{fn}({text})" if fn else f"(({self.ctype(dt)})({text}))"

    def wrapping(self, sym: str, dt: DType, a: str, b: str | None) -> str:
        """Integer ``a sym b`` (or ``sym a``) with two's-complement wrap-around."""
        u = self.unsigned_types[dt]
        if b is None:
            return self.as_signed(f"({u})0 - ({u})({a})", dt)
        return self.as_signed(f"({u})({a}) {sym} ({u})({b})", dt)

    # -- expressions --------------------------------------------------------------------------------
    def offset(self, buffer: str, index: tuple[Expr, ...]) -> str:
        self.st.buffers.add(buffer)
        outer, self._index_ctx = self._index_ctx, True
        try:
            return super().offset(buffer, index)
        finally:
            self._index_ctx = outer

    def index_expr(self, e: Expr, prec: int = 0) -> str:
        """An index or loop bound: int64 arithmetic that cannot overflow (calls are bounds-checked)."""
        outer, self._index_ctx = self._index_ctx, True
        try:
            return self.expr(e, prec)
        finally:
            self._index_ctx = outer

    def _expr(self, e: Expr) -> tuple[str, int]:
        if isinstance(e, Var):
            self.st.names.add(e.name)
        elif isinstance(e, Read) and e.buffer in self.st.caches:
            return self.cached_read(e), 100
        return super()._expr(e)

    def unary(self, e: Unary) -> tuple[str, int]:
        dt = e.dtype
        assert dt is not None
        if e.op == "neg" and dt.is_int and not self._index_ctx:
            return self.wrapping("-", dt, self.expr(e.x), None), 100
        return super().unary(e)

    def binary(self, e: Binary) -> tuple[str, int]:
        dt = e.dtype
        if e.op in ("add", "sub", "mul") and dt is not None and dt.is_int and not self._index_ctx:
            sym = {"add": "+", "sub": "-", "mul": "*"}[e.op]
            return self.wrapping(sym, dt, self.expr(e.a), self.expr(e.b)), 100
        return super().binary(e)

    def helper_source(self, name: str, dt: DType, fn: str) -> str:
        t, si = self.ctype(dt), self.static_inline
        if name == "iabs":
            return f"{si} {t} {fn}({t} a) {{ return a < 0 ? {self.wrapping('-', dt, 'a', None)} : a; }}"
        if name == "floordiv" and dt.is_int:  # as the C helper, with the negation wrapping
            return (
                f"{si} {t} {fn}({t} a, {t} b) {{\n"
                f"    if (b == 0) return 0;\n"
                f"    if (b == -1) return {self.wrapping('-', dt, 'a', None)};\n"
                f"    {t} q = a / b;\n"
                f"    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n"
                f"    return q;\n}}"
            )
        if name.startswith("group_"):
            return self.group_reduce_source(name[len("group_") :], dt, fn)
        return super().helper_source(name, dt, fn)

    # -- work-group reduction -----------------------------------------------------------------------
    def combine_text(self, op: str, dt: DType, a: str, b: str) -> str:
        """``a ⊕ b`` for reducer ``op`` (NaN-propagating max/min, wrapping integer sums)."""
        if op in ("max", "min"):
            return f"{self.helper(op, dt)}({a}, {b})"
        sym = "+" if op == "sum" else "*"
        return self.wrapping(sym, dt, a, b) if dt.is_int else f"{a} {sym} {b}"

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

    # -- statements in one thread (plain C, as on a CPU) ---------------------------------------------
    def loop(self, s: Loop, ind: int) -> None:
        it = self.index_type
        start, stop = self.index_expr(s.start), self.index_expr(s.stop, 10)
        self.emit(ind, f"for ({it} {s.var} = {start}; {s.var} < {stop}; {s.var}++) {{")
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")

    def stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, Alloc):
            raise Unsupported("a temporary inside a device kernel")
        if isinstance(s, Write):
            self.thread_write(s, ind)
            return
        if isinstance(s, Declare):
            self.declared_types[s.name] = s.dtype
        super().stmt(s, ind)

    def thread_write(self, s: Write, ind: int) -> None:
        """A write by the thread that owns the element (inside a shared loop, or in a map kernel)."""
        off = self.offset(s.buffer, s.index)
        value = self.expr(s.value)
        if s.buffer in self.st.caches and self.st.last_writer.get(s.buffer) is not self.st.strided:
            self.emit(ind, f"{self.st.caches[s.buffer]}[{self.cache_index(s)}] = {value};")
            self.st.filled.add(s.buffer)
            if s.buffer in self.st.last_writer:
                return  # a later loop writes the row out
        owner = self.owner_key(off)
        self.st.written.setdefault(s.buffer, set()).add(owner)
        self.emit(ind, f"{s.buffer}[{off}] = {value};")

    def owner_key(self, off: str) -> tuple[str, str, str]:
        """Which thread writes an element: the shared loop's bounds, its lane width and the offset."""
        lp = self.st.strided
        if lp is None:
            return ("", "", off)
        return (f"{lp.var}:{lp.start}:{lp.stop}:{self.st.width}", lp.var, off)

    # -- statements shared by a work-group --------------------------------------------------------------
    def shareable(self, s: Loop) -> tuple[tuple[str, str], ...] | None:
        """The reductions of a loop the group's threads may share, or None if they must not.

        Vector and parallel loops are independent up to their declared reductions. A serial loop
        whose body only folds values into accumulators (the ordered combine of a split reduction)
        is a reduction too.
        """
        if s.kind in _SHAREABLE or s.reductions:
            return s.reductions
        body = s.body.body if isinstance(s.body, Block) else (s.body,)
        reds: list[tuple[str, str]] = []
        for b in body:
            if isinstance(b, Comment) or (isinstance(b, Let) and not _mentions(b.value, {a for a, _ in reds})):
                continue
            if not isinstance(b, Assign):
                return None
            v = b.value
            if not (isinstance(v, Binary) and v.op in _REDUCER_OF and isinstance(v.a, Var) and v.a.name == b.name):
                return None
            reds.append((b.name, _REDUCER_OF[v.op]))
        names = {a for a, _ in reds}
        for b in body:
            if isinstance(b, Assign) and _mentions(b.value.b, names):  # type: ignore[attr-defined]
                return None
        return tuple(reds) if reds else None

    def check_uniform(self, exprs: Iterable[Expr]) -> None:
        """Statements every thread runs may not read an accumulator holding per-thread partials."""
        partial = set(self.st.partial)
        if partial and any(_mentions(e, partial) for e in exprs):
            raise Unsupported("a partial accumulator is read before its group reduction")

    def group_block(self, stmts: Iterable[Stmt], ind: int, level: int) -> None:
        """Statements run by every thread of the group; reductions land after their statement."""
        for s in stmts:
            if isinstance(s, Block):
                self.group_block(s.body, ind, level)
                continue
            self.group_stmt(s, ind, level)
            self.reduce_finished(ind, level)

    def reduce_finished(self, ind: int, level: int) -> None:
        for acc in [a for a, p in self.st.partial.items() if self.st.level.get(a) == level]:
            p = self.st.partial.pop(acc)
            self.st.reductions = True
            self.emit(ind, f"{acc} = {self.group_reduce_call(p.op, p.dtype, acc)};")
            if p.pre is not None:
                self.emit(ind, f"{acc} = {self.combine_text(p.op, p.dtype, p.pre, acc)};")

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
            if _reads_what_it_writes(s):
                self.emit(ind + 1, self.barrier_global)
                st.written.clear()
            self.emit(ind, "}")
            return
        accs = _assigned(s.body)
        for acc in accs:
            if acc not in st.level:
                raise Unsupported(f"accumulator '{acc}' is not declared in this kernel")
        ops = dict(reds)
        for acc in sorted(accs):
            if acc in st.partial:
                continue
            op = ops.get(acc) or _fold_op(s.body, acc)
            if op is None:
                raise Unsupported(f"'{acc}' is assigned in a shared loop without being reduced")
            dt = self.declared_types[acc]
            pre = None
            if st.pristine.get(acc) != identity(op, dt):  # fold the value it had in after the reduction
                st.counter += 1
                pre = f"{acc}_pre{st.counter}"
                self.emit(ind, f"const {self.ctype(dt)} {pre} = {acc};")
                self.emit(ind, f"{acc} = {self.literal(identity(op, dt).value, dt)};")
            st.partial[acc] = _Partial(op, dt, pre)
            st.pristine.pop(acc, None)
        # inside the loop the accumulators may only be folded into
        for b in walk(s.body):
            for e in stmt_exprs(b):
                if isinstance(b, Assign) and b.name in accs and isinstance(e, Binary):
                    e = e.b
                if _mentions(e, set(st.partial)):
                    raise Unsupported("a partial accumulator is read inside a shared loop")
        self.synced_shared_loop(s, ind)

    def shared_loop(self, s: Loop, ind: int) -> None:
        """A loop whose iterations the group's threads share (thread ``t`` takes ``t, t + L, ...``)."""
        outer, self.st.strided = self.st.strided, s
        rows = self.unfilled_rows(s)
        self.st.last_width = 1
        if self.lanes > 1 and not _holds_loops(s.body):
            mark, written = len(self.lines), {b: set(o) for b, o in self.st.written.items()}
            filled = set(self.st.filled)
            try:
                self.shared_lanes(s, ind, rows)
                self.st.strided = outer
                self.st.last_width = self.lanes
                return
            except Unsupported:
                del self.lines[mark:]
                self.st.written, self.st.filled = written, filled
        start, stop = self.index_expr(s.start, 12), self.index_expr(s.stop, 10)
        self.emit(ind, f"for ({self.index_type} {s.var} = {start} + pt_lid; {s.var} < {stop}; {s.var} += pt_L) {{")
        self.fill_rows(rows, ind + 1)
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")
        self.st.strided = outer

    def shared_lanes(self, s: Loop, ind: int, rows: dict[str, tuple[Expr, ...]]) -> None:
        """A shared loop over vectors of ``lanes`` points (thread ``t`` takes vectors ``t, t + L, ...``),
        then the points left over, one at a time."""
        from .simt_lanes import LaneWriter

        w, it = self.lanes, self.index_type
        accs = {a: p.op for a, p in self.st.partial.items() if a in _assigned(s.body)}
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

    def conflicts(self, s: Stmt, written: dict[str, set[tuple[str, str, str]]], width: int | None) -> bool:
        """Whether ``s`` reads an element of ``written`` that another thread may have written.

        A shared loop (``width`` = its lane width) over the bounds of the loop that wrote the
        elements, reading them at the offsets written, only reads its own thread's elements.
        """
        reads = _reads(s)
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

    # -- row caches ---------------------------------------------------------------------------------------
    def unfilled_rows(self, s: Loop) -> dict[str, tuple[Expr, ...]]:
        """Cached rows that loop ``s`` reads first (it copies them from global memory as it goes)."""
        reads = _reads(s)
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

    # -- whole program ------------------------------------------------------------------------------------
    def render(self, k: LoopKernel) -> str:
        """Device source for ``k`` with its launch plan appended as a comment (see :meth:`program`)."""
        source, plan = self.program(k)
        return source + "\n" + PLAN_MARKER + plan.to_json() + " */\n"

    def program(self, k: LoopKernel) -> tuple[str, LaunchPlan]:
        """The device kernels' source and the host's launch plan for ``k``."""
        self.helpers.clear()
        self.kernels, self.launches = [], []
        self.args = {a.name: a for a in k.args}
        self.buffers = {a.name: (a.dtype, a.shape) for a in k.args if a.kind == "buffer"}
        self.temps, self.slots, self.pure, self.declared_types = {}, {}, {}, {}
        self.dtypes_used = _dtypes(k)
        inputs = [a.name for a in k.args if a.kind == "dim"] + [a.name for a in k.args if a.kind == "scalar"]
        self.host = host_names(inputs)
        flat = self.flatten(k.body)
        known = set(inputs)
        self.find_pure(flat, known)
        lets = []
        for name, let in self.pure.items():
            try:
                lets.append((name, py_expr(let.value, self.host)))
                self.host[name] = host_names([name])[name]
            except HostExpressionError:
                pass
        steps = self.steps(flat, known)
        self.plan_slots(steps)
        for i, step in enumerate(steps):
            self.render_step(k, step, f"{k.name}_k{i}")
        buffers = [DeviceBuffer(n, dt.name, self.host_count(shape)) for n, (dt, shape) in self.temps.items()]
        buffers += [DeviceBuffer(f"_v_{n}", dt.name, "1") for n, dt in self.slots.items()]
        plan = LaunchPlan(tuple(self.launches), tuple(buffers), tuple(inputs), (), {"kernel": k.name})
        plan = LaunchPlan(plan.kernels, plan.buffers, plan.inputs, _needed_lets(lets, plan.to_json()), plan.meta)
        out = [
            f"/* pypto kernel {k.name}: generated code, do not edit */",
            *self.prelude(),
            *self.extra_declarations(k),
            *self.helpers.values(),
            "",
            *self.kernels,
        ]
        return "\n".join(out) + "\n", plan

    def host_count(self, shape: tuple[Expr, ...]) -> str:
        count: Expr = Const(1, dtype=int64)
        for d in shape:
            count = Binary("mul", count, d, dtype=int64)
        try:
            return py_expr(count, self.host)
        except HostExpressionError as e:
            raise Unsupported(f"a temporary's size is not known on the host: {e}") from None

    def flatten(self, s: Stmt) -> list[Stmt]:
        """The top-level statements, with temporaries registered as device buffers."""
        if isinstance(s, Block):
            return [x for b in s.body for x in self.flatten(b)]
        if isinstance(s, Alloc):
            self.temps[s.buffer] = (s.dtype, s.shape)
            self.buffers[s.buffer] = (s.dtype, s.shape)
            return self.flatten(s.body)
        return [s]

    def find_pure(self, flat: list[Stmt], known: set[str]) -> None:
        """Lets computed from dims and scalars alone (also in branches the host decides)."""
        for s in flat:
            if isinstance(s, Let) and _only(s.value, known):
                self.pure[s.name] = s
                known.add(s.name)
            elif isinstance(s, If) and _only(s.cond, known):
                self.find_pure(self.flatten(s.then), known)
                if s.orelse is not None:
                    self.find_pure(self.flatten(s.orelse), known)

    def steps(self, flat: list[Stmt], known: set[str], when: str | None = None) -> list[_Step]:
        """Top-level statements grouped into device kernels (see the module docstring).

        A branch on values of the dims (softmax's online variant for long rows) is taken on the
        host: each branch's kernels run under its condition.
        """
        flat = _sink_declares([s for s in flat if not (isinstance(s, Let) and s.name in self.pure)], known)
        steps: list[_Step] = []
        run: list[Stmt] = []
        comments: list[str] = []
        for s in flat:
            if isinstance(s, Comment) and not run:
                comments.append(s.text)
                continue
            if isinstance(s, If) and _only(s.cond, set(self.host)) and not _declares(s, set(self.pure)):
                if run:
                    steps.append(_Step(run, None, comments, when))
                    run, comments = [], []
                cond = py_expr(s.cond, self.host)
                steps += self.steps(self.flatten(s.then), known, _both(when, cond))
                if s.orelse is not None:
                    steps += self.steps(self.flatten(s.orelse), known, _both(when, f"not {cond}"))
                continue
            if (
                isinstance(s, Loop)
                and s.kind in _PARALLEL
                and not s.reductions
                and _only_many((s.start, s.stop), known)
            ):
                if run:
                    steps.append(_Step(run, None, [], when))
                    run = []
                steps.append(_Step([s], s, comments, when))
                comments = []
                continue
            run.append(s)
        if run:
            steps.append(_Step(run, None, comments, when))
        return steps

    def plan_slots(self, steps: list[_Step]) -> None:
        """Scalars defined by one kernel and used by another get one-element device buffers."""
        owner: dict[str, int] = {}
        for i, step in enumerate(steps):
            for s in step.stmts:
                if isinstance(s, (Declare, Let)) and step.loop is None:
                    owner[s.name] = i
                    self.declared_types[s.name] = s.dtype if isinstance(s, Declare) else s.value.dtype  # type: ignore[assignment]
        for i, step in enumerate(steps):
            used = _names(step.stmts)
            for n in used:
                if n in owner and owner[n] != i:
                    self.slots[n] = self.declared_types[n]

    # -- one device kernel ------------------------------------------------------------------------------
    def render_step(self, k: LoopKernel, step: _Step, name: str) -> None:
        loop = step.loop
        if loop is not None:
            chain = self.map_chain(loop)
            if len(chain) > 1 or not _holds_loops(chain[-1].body) or not self.rows_in_memory(loop):
                self.render_map(k, step, name, chain)
                return
            try:
                self.render_groups(k, step, name)
                return
            except Unsupported:
                self.render_map(k, step, name, [loop])
                return
        try:
            self.render_single(k, step, name, shared=True)
        except Unsupported:
            self.render_single(k, step, name, shared=False)

    def begin(self) -> list[str]:
        self.lines = []
        self.st = _KernelState()
        return self.lines

    def map_chain(self, loop: Loop) -> list[Loop]:
        """The perfect nest of independent loops from ``loop`` that a map kernel spreads over threads."""
        chain = [loop]
        known = set(self.host) | set(self.pure)
        while len(chain) < MAX_MAP_DIMS:
            body = chain[-1].body.body if isinstance(chain[-1].body, Block) else (chain[-1].body,)
            inner = [b for b in body if not isinstance(b, (Let, Comment))]
            if len(inner) != 1 or not isinstance(inner[0], Loop) or body[-1] is not inner[0]:
                break
            s = inner[0]
            if s.reductions or _assigned_outside(s) or not _only_many((s.start, s.stop), known):
                break
            chain.append(s)
        return chain

    def rows_in_memory(self, loop: Loop) -> bool:
        """Whether the loop's reduction loops walk memory contiguously (then a group shares a row)."""
        found = False
        for s in walk(loop.body):
            if isinstance(s, Loop) and s.reductions:
                found = True
                var = Var(s.var, dtype=int64)
                for st in walk(s.body):
                    for e in stmt_exprs(st):
                        for n in deep(e):
                            if isinstance(n, Read) and _unit_stride(self.flat_index(n), var):
                                return True
                if not any(isinstance(n, Read) for st in walk(s.body) for e in stmt_exprs(st) for n in deep(e)):
                    return True
        return not found

    def flat_index(self, r: Read | Write) -> Expr:
        shape = self.buffers[r.buffer][1]
        if not r.index:
            return Const(0, dtype=int64)
        acc: Expr = r.index[0]
        for dim, ix in zip(shape[1:], r.index[1:]):
            acc = Binary("add", Binary("mul", acc, dim, dtype=int64), ix, dtype=int64)
        return acc

    def preamble(self, stmts: list[Stmt], ind: int, extra: Iterable[Expr] = ()) -> list[str]:
        """Pure lets and device scalars a kernel's statements need, computed at its start."""
        used = _names(stmts) | {n.name for e in extra for n in deep(e) if isinstance(n, Var)}
        need: list[str] = []
        for name, let in reversed(list(self.pure.items())):
            if name in used or name in need:
                need.append(name)
                used |= {n.name for n in deep(let.value) if isinstance(n, Var)}
        lines = []
        saved, self.lines = self.lines, lines
        for name in self.pure:
            if name in need:
                self.stmt(self.pure[name], ind)
        self.lines = saved
        return lines

    def load_slots(self, stmts: list[Stmt], ind: int, single: bool) -> tuple[list[str], list[str]]:
        """Loads of device scalars defined by earlier kernels, and stores of those this one defines."""
        defined = {s.name for s in stmts if isinstance(s, (Declare, Let))}
        assigned = {st.name for s in stmts for st in walk(s) if isinstance(st, Assign)}
        used = _names(stmts)
        loads, stores = [], []
        for n, dt in self.slots.items():
            slot = f"_v_{n}"
            self.buffers[slot] = (dt, (Const(1, dtype=int64),))
            if n in used and n not in defined:
                const = "" if n in assigned else "const "
                loads.append(self.indent_unit * ind + f"{const}{self.ctype(dt)} {n} = {slot}[0];")
                self.declared_types[n] = dt
                self.st.buffers.add(slot)
            if n in defined or n in assigned:
                stores.append(self.indent_unit * ind + ("if (pt_lid == 0) " if single else "") + f"{slot}[0] = {n};")
                self.st.buffers.add(slot)
        return loads, stores

    def render_map(self, k: LoopKernel, step: _Step, name: str, chain: list[Loop]) -> None:
        """One thread per point of the chain's loops (dimension 0 = the innermost loop), or per
        ``lanes`` consecutive points of the innermost loop when its body has a vector form."""
        dims = list(reversed(chain))
        extents = [Binary("sub", lp.stop, lp.start, dtype=int64) for lp in dims]
        widths = [self.lanes, 1] if self.lanes > 1 and not self.grid_stride else [1]
        for width in widths:
            body = self.begin()
            loads, _ = self.load_slots(step.stmts, 1, single=False)
            try:
                self.map_body(chain, extents, 1, width)
            except Unsupported:
                if width == widths[-1]:
                    raise
                continue
            break
        pre = self.preamble(step.stmts, 1, [e for lp in chain for e in (lp.start, lp.stop)])
        ext = tuple(py_expr(e, self.host) for e in extents)
        launch, text = self.finish_kernel(k, name, step, [*pre, *loads, *body], MAP, ext, None, False)
        if width > 1:
            launch = KernelLaunch(launch.name, launch.kind, launch.params, launch.extents, width=width)
        self.add((launch, text), step.when)

    def add(self, kernel: tuple[KernelLaunch, str], when: str | None) -> None:
        launch = kernel[0]
        if when is not None:
            launch = KernelLaunch(launch.name, launch.kind, launch.params, launch.extents, launch.hint,
                                  launch.serial, launch.width, launch.local, launch.cached, when)  # fmt: skip
        self.launches.append(launch)
        self.kernels.append(kernel[1])

    def map_body(self, chain: list[Loop], extents: list[Expr], ind: int, width: int = 1) -> None:
        """The chain's loop variables from the thread's global id (or grid-stride loops), then the body."""
        depth = len(chain)
        it = self.index_type
        for level, lp in enumerate(chain):
            d = depth - 1 - level
            gid = self.global_id.format(d=d, c="xyz"[d])
            start = self.index_expr(lp.start, 12)
            ext = self.index_expr(extents[d], 10)
            body = lp.body.body if isinstance(lp.body, Block) else (lp.body,)
            if level < depth - 1:
                body = tuple(b for b in body if not isinstance(b, Loop))
            if self.grid_stride:
                g = f"pt_g{d}"
                step = self.global_size.format(d=d, c="xyz"[d])
                self.emit(ind, f"for ({it} {g} = {gid}; {g} < {ext}; {g} += {step}) {{")
                ind += 1
                self.emit(ind, f"const {it} {lp.var} = {start} + {g};")
            elif width > 1 and level == depth - 1:
                self.map_lanes(lp, Block(body), gid, ind, width)
                return
            else:
                self.emit(ind, f"if ({gid} >= {ext}) return;")
                self.emit(ind, f"const {it} {lp.var} = {start} + {gid};")
            for b in body:
                self.stmt(b, ind)
        if self.grid_stride:
            for _ in chain:
                ind -= 1
                self.emit(ind, "}")

    def map_lanes(self, lp: Loop, body: Block, gid: str, ind: int, width: int) -> None:
        """The innermost loop of a map kernel, ``width`` consecutive points per work-item."""
        from .simt_lanes import LaneWriter

        it = self.index_type
        stop = self.index_expr(lp.stop, 6)
        self.emit(ind, f"const {it} pt_first = {self.index_expr(lp.start, 12)} + {gid} * {width};")
        self.emit(ind, f"if (pt_first + {width} <= {stop}) {{")
        self.emit(ind + 1, f"const {it} {lp.var} = pt_first;")
        LaneWriter(self, lp.var, width, {}).body(body, ind + 1)
        self.emit(ind, "} else {")
        self.emit(ind + 1, f"for ({it} {lp.var} = pt_first; {lp.var} < {stop}; {lp.var}++) {{")
        self.stmt(body, ind + 2)
        self.emit(ind + 1, "}")
        self.emit(ind, "}")

    def render_groups(self, k: LoopKernel, step: _Step, name: str) -> None:
        """One work-group per iteration of the step's parallel loop; the group shares its inner loops."""
        loop = step.loop
        assert loop is not None
        hint = self.host_hint(loop.body, {loop.var: loop.start})
        plain, text = self.groups_kernel(k, step, name, loop, hint, ())
        rows = self.cacheable_rows(loop) if self.cache_rows else ()
        if rows:
            try:
                cached, ctext = self.groups_kernel(k, step, name + "_rows", loop, hint, rows)
            except Unsupported:
                pass
            else:
                text += "\n" + ctext
                plain = KernelLaunch(plain.name, plain.kind, plain.params, plain.extents, plain.hint,
                                     plain.serial, plain.width, plain.local, cached)  # fmt: skip
        self.add((plain, text), step.when)

    def groups_kernel(self, k: LoopKernel, step: _Step, name: str, loop: Loop, hint: str | None,
                      cached: tuple[tuple[str, Loop], ...]) -> tuple[KernelLaunch, str]:  # fmt: skip
        """The groups kernel's text and plan entry, keeping the ``cached`` rows in local memory."""
        body = self.begin()
        loads, _ = self.load_slots(step.stmts, 1, single=False)
        # group-stride: a host may launch fewer groups than iterations (CPU devices: a group per core or so)
        it, stop = self.index_type, self.index_expr(loop.stop, 10)
        start = self.index_expr(loop.start, 12)
        self.emit(
            1,
            f"for ({it} {loop.var} = {start} + {self.group_id}; {loop.var} < {stop}; {loop.var} += {self.num_groups}) {{",
        )
        local: list[LocalBuffer] = []
        for buf, lp in cached:
            cname = f"pt_row_{buf}"
            self.st.caches[buf] = cname
            count = Binary("sub", lp.stop, lp.start, dtype=int64)
            self.st.row_count = self.index_expr(count)
            local.append(LocalBuffer(cname, self.buffers[buf][0].itemsize, py_expr(count, self.host)))
            writers = [b for b in _shared_loops(loop, self) if buf in _writes(b)]
            if writers:
                self.st.last_writer[buf] = writers[-1]
        self.group_block([loop.body], 2, 1)
        self.emit(1, "}")
        pre = self.preamble(step.stmts, 1, (loop.start, loop.stop))
        ext = (py_expr(Binary("sub", loop.stop, loop.start, dtype=int64), self.host),)
        return self.finish_kernel(k, name, step, [*pre, *loads, *body], GROUPS, ext, hint, False, tuple(local))

    def render_single(self, k: LoopKernel, step: _Step, name: str, shared: bool) -> None:
        """The step's statements in one work-group (shared loops split over its threads when ``shared``)."""
        body = self.begin()
        loads, stores = self.load_slots(step.stmts, 1, single=shared)
        if shared:
            self.group_block(step.stmts, 1, 0)
            hint = self.host_hint(Block(tuple(step.stmts)), {})
        else:
            for s in step.stmts:
                self.stmt(s, 1)
            hint = None
        body.extend(stores)  # every thread's copy is the same: the first one stores it
        pre = self.preamble(step.stmts, 1)
        self.add(self.finish_kernel(k, name, step, [*pre, *loads, *body], SINGLE, (), hint, not shared), step.when)

    def finish_kernel(self, k: LoopKernel, name: str, step: _Step, body: list[str], kind: str,
                      extents: tuple[str, ...], hint: str | None, serial: bool,
                      local: tuple[LocalBuffer, ...] = ()) -> tuple[KernelLaunch, str]:  # fmt: skip
        """The kernel's text (signature, thread indices, local memory, body) and its plan entry."""
        st = self.st
        params: list[str] = []
        for a in k.args:
            if a.kind == "buffer" and a.name in st.buffers:
                params.append(a.name)
        params += [t for t in self.temps if t in st.buffers]
        params += [f"_v_{n}" for n in self.slots if f"_v_{n}" in st.buffers]
        params += [a.name for a in k.args if a.kind == "scalar" and a.name in st.names]
        params += [a.name for a in k.args if a.kind == "dim" and a.name in st.names]
        uses_lid = st.reductions or any("pt_lid" in ln for ln in body)
        head = []
        if kind != MAP:
            if uses_lid or kind == GROUPS:
                head.append(self.indent_unit + f"const {self.index_type} pt_lid = {self.local_id};")
                head.append(self.indent_unit + f"const {self.index_type} pt_L = {self.local_size};")
        local_all = list(local)
        if st.reductions:
            if self.local_scratch_param:
                local_all.insert(0, LocalBuffer(SCRATCH, 8, "1", per_thread=True))
        text = "\n".join([
            *("/* " + c.replace("*/", "* /") + " */" for c in step.comments),
            self.kernel_signature(name, params, k, tuple(local_all)) + " {",
            *head,
            *self.local_declarations(tuple(local_all)),
            *body,
            "}",
            "",
        ])  # fmt: skip
        return KernelLaunch(name, kind, tuple(params), extents, hint, serial, 1, tuple(local_all)), text

    # -- signatures and local memory (what CUDA spells differently) ----------------------------------------
    def kernel_signature(self, name: str, params: list[str], k: LoopKernel, local: tuple[LocalBuffer, ...]) -> str:
        out = []
        for p in params:
            out.append(self.kernel_param(p, k))
        if self.local_scratch_param:
            for b in local:
                t = "uchar" if b.name == SCRATCH else self.ctype(self.cache_dtype(b.name))
                out.append(f"{self.local_qualifier}{t} *{self.restrict} {b.name}")
        return f"{self.kernel_prefix}{name}({', '.join(out)})"

    def cache_dtype(self, cname: str) -> DType:
        return self.buffers[cname[len("pt_row_") :]][0]

    def kernel_param(self, p: str, k: LoopKernel) -> str:
        a = self.args.get(p)
        if a is not None and a.kind == "buffer":
            return self.param(a, k.noalias)
        if a is not None:
            t = self.scalar_ctype(a.dtype) if a.kind == "scalar" else self.index_type
            return f"const {t} {p}"
        dt = self.buffers[p][0]
        ptr = f"*{self.restrict} " if self.restrict else "*"
        return f"{self.buffer_qualifier}{self.buffer_ctype(dt)} {ptr}{p}"

    def local_declarations(self, local: tuple[LocalBuffer, ...]) -> list[str]:
        """Kernel-body lines that set up local buffers (none in OpenCL: they are arguments)."""
        return []

    def prelude(self) -> list[str]:
        return [f"#include {h}" for h in self.includes]

    # -- plan helpers ---------------------------------------------------------------------------------
    def host_hint(self, body: Stmt, subst: dict[str, Expr]) -> str | None:
        """The trip count of the first shared loop, for the first group: what sizes the group."""
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
                if self.shareable(s) is not None:
                    found.append(s)
                else:
                    lets[s.var] = s.start
                    visit(s.body)

        visit(body)
        if not found:
            return None
        trip = _substitute(Binary("sub", found[0].stop, found[0].start, dtype=int64), lets)
        try:
            return py_expr(trip, self.host)
        except HostExpressionError:
            return None

    def cacheable_rows(self, loop: Loop) -> tuple[tuple[str, Loop], ...]:
        """Buffers a group reads (or writes, then reads back) in several shared loops over one row.

        Such a row is kept in local memory: read from global memory once, and a row written then
        read back (softmax's exponentials) is written to global memory only by the last loop.
        Applies to shared loops over the same bounds, directly in the group's body, each touching
        the buffer only at one row offset plus the loop variable.
        """
        body = _body(loop.body)
        loops = [b for b in body if isinstance(b, Loop) and self.shareable(b) is not None]
        if len(loops) < 2 or any(_holds_loops(b.body) for b in loops):
            return ()
        first = loops[0]
        if any((b.start, b.stop) != (first.start, first.stop) for b in loops):
            return ()
        rest = [b for b in body if not any(b is lp for lp in loops)]
        out = []
        for buf in self.buffers:
            uses = [b for b in loops if buf in _reads(b) or buf in _writes(b)]
            if len(uses) < 2 or any(buf in _reads(o) or buf in _writes(o) for o in rest):
                continue
            offsets = {self.row_offset(b, a) for b in uses for a in _accesses(b, buf)}
            if len(offsets) != 1 or None in offsets:
                continue
            writers = [b for b in uses if buf in _writes(b)]
            arg = self.args.get(buf)
            if writers and (arg is None or arg.role != "out" or writers[-1] is not uses[-1]):
                continue  # a written row must be rewritten completely by the last loop touching it
            out.append((buf, first))
        return tuple(out)

    def row_offset(self, lp: Loop, access: Read | Write) -> Expr | None:
        """The flat offset of an access with the loop variable renamed, if it walks the row by one."""
        flat = self.flat_index(access)
        if _coefficient(flat, lp.var) != 1:
            return None
        return _substitute(flat, {lp.var: Var("pt_c", dtype=int64)})


# -- small analyses ----------------------------------------------------------------------------------------


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


def _mentions(e: Expr, names: set[str]) -> bool:
    return bool(names) and any(isinstance(n, Var) and n.name in names for n in deep(e))


def _only(e: Expr, known: set[str]) -> bool:
    """Whether ``e`` is computed from ``known`` names alone (no memory, no locals)."""
    return all(not isinstance(n, Read) and (not isinstance(n, Var) or n.name in known) for n in deep(e))


def _only_many(es: Iterable[Expr], known: set[str]) -> bool:
    return all(_only(e, known) for e in es)


def _names(stmts: Iterable[Stmt]) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        for st in walk(s):
            if isinstance(st, Assign):
                out.add(st.name)
            for e in stmt_exprs(st):
                out |= {n.name for n in deep(e) if isinstance(n, Var)}
    return out


def _assigned(s: Stmt) -> set[str]:
    """Variables assigned in ``s`` that are declared outside it."""
    declared = {st.name for st in walk(s) if isinstance(st, Declare)}
    return {st.name for st in walk(s) if isinstance(st, Assign) and st.name not in declared}


def _assigned_outside(loop: Loop) -> bool:
    return bool(_assigned(loop.body))


def _fold_op(s: Stmt, acc: str) -> str | None:
    """The reducer every assignment of ``acc`` in ``s`` folds with, if they all use one."""
    ops = set()
    for st in walk(s):
        if isinstance(st, Assign) and st.name == acc:
            v = st.value
            if not (isinstance(v, Binary) and v.op in _REDUCER_OF and isinstance(v.a, Var) and v.a.name == acc):
                return None
            if _mentions(v.b, {acc}):
                return None
            ops.add(_REDUCER_OF[v.op])
    return ops.pop() if len(ops) == 1 else None


def _holds_loops(s: Stmt) -> bool:
    return any(isinstance(st, Loop) for st in walk(s))


def _reads(s: Stmt) -> dict[str, list[tuple[Expr, ...]]]:
    out: dict[str, list[tuple[Expr, ...]]] = {}
    for st in walk(s):
        for e in stmt_exprs(st):
            for n in deep(e):
                if isinstance(n, Read):
                    out.setdefault(n.buffer, []).append(n.index)
    return out


def _writes(s: Stmt) -> set[str]:
    return {st.buffer for st in walk(s) if isinstance(st, Write)}


def _reads_what_it_writes(s: Stmt) -> bool:
    return bool(_writes(s) & _reads(s).keys())


def _unit_stride(e: Expr, var: Var) -> bool:
    """Whether the int64 expression ``e`` grows by exactly one when ``var`` does."""
    return _coefficient(e, var.name) == 1


def _coefficient(e: Expr, name: str) -> int | None:
    """The coefficient of ``name`` in an affine int64 expression (None if not affine in it)."""
    if isinstance(e, Var):
        return 1 if e.name == name else 0
    if isinstance(e, Const):
        return 0
    if isinstance(e, Binary) and e.op in ("add", "sub"):
        a, b = _coefficient(e.a, name), _coefficient(e.b, name)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b
    if isinstance(e, Binary) and e.op == "mul":
        a, b = _coefficient(e.a, name), _coefficient(e.b, name)
        if a == 0 and b == 0:
            return 0
        if a == 0 and isinstance(e.a, Const):
            return None if b is None else int(e.a.value) * b
        if b == 0 and isinstance(e.b, Const):
            return None if a is None else int(e.b.value) * a
        return None if (a != 0 or b != 0) else 0
    return None if _mentions(e, {name}) else 0


def _substitute(e: Expr, values: dict[str, Expr]) -> Expr:
    def go(n: Expr) -> Expr:
        if isinstance(n, Var) and n.name in values:
            return go(values[n.name])
        if isinstance(n, Read):
            return Read(n.buffer, tuple(go(i) for i in n.index), dtype=n.dtype)
        return map_children(n, go)  # type: ignore[return-value]

    return go(e)


def _sink_declares(flat: list[Stmt], known: set[str]) -> list[Stmt]:
    """Move declarations with pure initial values next to their first use (saves a kernel launch)."""
    out = list(flat)
    for s in list(out):
        if not (isinstance(s, Declare) and _only(s.init, known)):
            continue
        i = out.index(s)
        j = i + 1
        while j < len(out) and s.name not in _names([out[j]]) and not isinstance(out[j], Comment):
            j += 1
        while j < len(out) and isinstance(out[j], Comment):
            j += 1
        if j > i + 1:
            out.pop(i)
            out.insert(j - 1, s)
    return out


def _dtypes(k: LoopKernel) -> set[DType]:
    out = {a.dtype for a in k.args}
    for st in walk(k.body):
        if isinstance(st, (Declare, Alloc)):
            out.add(st.dtype)
        for e in stmt_exprs(st):
            out |= {n.dtype for n in deep(e) if n.dtype is not None}
    return out


def split_plan(source: str) -> tuple[str, LaunchPlan]:
    """The device source and the launch plan of text made by :meth:`SimtRenderer.render`."""
    at = source.rindex(PLAN_MARKER)
    text = source[at + len(PLAN_MARKER) :].rstrip()
    return source[:at], LaunchPlan.from_json(text[: -len("*/")].rstrip())


def excerpt(source: str, line: int, context: int = 4) -> str:
    """Lines of ``source`` around ``line`` (1-based), the line itself marked with ``>>``."""
    lines = source.splitlines()
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return "\n".join(f"{'>>' if i == line else '  '} {i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1))


def _needed_lets(lets: list[tuple[str, str]], text: str) -> tuple[tuple[str, str], ...]:
    """The host lets that the plan's expressions (``text``) use, directly or through other lets."""
    used = set(re.findall(r"\bv_(\w+)", text))
    keep = []
    for name, e in reversed(lets):
        if name in used:
            keep.append((name, e))
            used |= set(re.findall(r"\bv_(\w+)", e))
    return tuple(reversed(keep))


def _both(a: str | None, b: str) -> str:
    return f"({b})" if a is None else f"({a}) and ({b})"


def _declares(s: If, pure: set[str]) -> bool:
    """Whether a branch declares variables (other than pure lets) that code after it could see."""
    for b in (s.then, s.orelse):
        for x in b.body if isinstance(b, Block) else (b,) if b is not None else ():
            if isinstance(x, (Declare, Let)) and x.name not in pure:
                return True
    return False


def _shared_loops(loop: Loop, r: SimtRenderer) -> list[Loop]:
    return [b for b in _body(loop.body) if isinstance(b, Loop) and r.shareable(b) is not None]


def _body(s: Stmt) -> tuple[Stmt, ...]:
    return s.body if isinstance(s, Block) else (s,)


def _accesses(s: Stmt, buf: str) -> list[Read | Write]:
    """Every read and write of ``buf`` in ``s``."""
    out: list[Read | Write] = []
    for st in walk(s):
        if isinstance(st, Write) and st.buffer == buf:
            out.append(st)
        for e in stmt_exprs(st):
            out += [n for n in deep(e) if isinstance(n, Read) and n.buffer == buf]
    return out


__all__ = ["SimtRenderer", "Unsupported", "LaunchPlan", "KernelLaunch", "excerpt", "PLAN_MARKER", "split_plan"]
