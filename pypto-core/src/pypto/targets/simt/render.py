"""The SIMT renderer: the loop IR as device kernels for GPU-style targets (CUDA, OpenCL).

One loop-IR kernel becomes a sequence of device kernels plus a host-side
:class:`~pypto.targets.simt.plan.LaunchPlan` (which kernels to launch, with how many threads, and
which device buffers to allocate). The ``simt`` target's passes split the top-level statements into
*steps* (``split_kernels``) and choose how each runs (``plan_launch``); this module prints them:

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

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from pypto._hashing import source_digest
from pypto.dtypes import (
    INTEGER_DTYPES,
    DType,
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    int32,
    int64,
    integer_spellings,
    uint64,
)
from pypto.ir.device import Barriers, DeviceStep, StepLaunch
from pypto.ir.loops import (
    Alloc,
    Argument,
    Assign,
    Block,
    Declare,
    Let,
    Loop,
    LoopKernel,
    Read,
    Stmt,
    Update,
    Var,
    Write,
    walk,
)
from pypto.ir.nodes import Binary, Const, Expr, Unary
from pypto.targets.contraction import ContractionNest
from pypto.targets.cstyle import CRenderer
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.analysis import Unsupported
from pypto.targets.simt.columns import ColumnNest, ColumnsWriter, column_nest
from pypto.targets.simt.forms import StepForms, shared_loops
from pypto.targets.simt.groups import SCRATCH, GroupSharing, Partial
from pypto.targets.simt.plan import (
    COLUMNS,
    GROUPS,
    MAP,
    SINGLE,
    TILES,
    DeviceBuffer,
    HostExpressionError,
    HostNames,
    KernelLaunch,
    LaunchPlan,
    LocalBuffer,
    host_names,
    py_expr,
)
from pypto.targets.simt.tiles import RegisterTilesWriter, TilesWriter, contraction_rows

PLAN_MARKER = "/* pypto launch plan: "


OPENCL_HALF_HELPERS = {
    "pt_f16_f32": "inline float pt_f16_f32(ushort h) { return vload_half(0, (const half *)&h); }",
    "pt_f32_f16": "inline ushort pt_f32_f16(float x) { ushort h; vstore_half_rte(x, 0, (half *)&h); return h; }",
    "pt_bf16_f32": "inline float pt_bf16_f32(ushort h) { return as_float((uint)h << 16); }",
    "pt_f32_bf16": """inline ushort pt_f32_bf16(float x) {
    const uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);  /* NaN stays a quiet NaN */
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  /* nearest, ties to even */
}""",
}
"""The OpenCL C of the 16-bit float conversions (:attr:`SimtRenderer.half_conversions`)."""


@dataclass
class _Step:
    """One device kernel to be: a top-level parallel loop, or a run of other statements."""

    stmts: list[Stmt]
    loop: Loop | None = None
    comments: list[str] = field(default_factory=list)
    when: str | None = None  # host condition (Python) under which the kernel runs


@dataclass
class _KernelState:
    """What rendering one device kernel tracks."""

    buffers: set[str] = field(default_factory=set)  # buffers the kernel touches
    names: set[str] = field(default_factory=set)  # scalars, dims and lets it reads
    reductions: bool = False  # uses the work-group reduction scratch
    prefix: bool = False  # computes running values as prefixes over the group (a scan loop)
    partial: dict[str, Partial] = field(default_factory=dict)
    level: dict[str, int] = field(default_factory=dict)  # accumulator -> block depth of its Declare
    pristine: dict[str, Const] = field(default_factory=dict)  # accumulators still at their initial value
    caches: dict[str, str] = field(default_factory=dict)  # buffer -> local cache name
    filled: set[str] = field(default_factory=set)  # cached rows holding their values already
    last_writer: dict[str, Loop] = field(default_factory=dict)  # cached output -> the loop writing it out
    strided: Loop | None = None  # the shared loop being rendered
    barriers: Barriers = Barriers()  # where this kernel waits for its group (place_barriers)
    row_count: str = "0"  # elements of a cached row (C expression)
    counter: int = 0


class SimtRenderer(GroupSharing, CRenderer):
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
    # 16-bit floats are held as their bits (a ushort) and converted where loaded and stored: vload_half and
    # vstore_half_rte are core OpenCL 1.2 (no cl_khr_fp16 needed), bfloat16 is a shift and a rounding
    types = {float32: "float", float64: "double", bool_: "bool", float16: "ushort", bfloat16: "ushort",
             **integer_spellings({8: "char", 16: "short", 32: "int", 64: "long"}, "u")}  # fmt: skip
    half_conversions = {float16: ("pt_f16_f32", "pt_f32_f16"), bfloat16: ("pt_bf16_f32", "pt_f32_bf16")}
    half_helpers = OPENCL_HALF_HELPERS
    buffer_types = {bool_: "uchar"}  # OpenCL has no bool buffers or kernel arguments
    scalar_types = {bool_: "uchar"}
    # wrap-around arithmetic of each integer type is computed in (narrower types: in 32 bits, converted back)
    unsigned_types = {d: "ulong" if d.bits == 64 else "uint" for d in INTEGER_DTYPES}
    reinterpret = {int32: "as_int", int64: "as_long"}  # unsigned bits -> signed; None: a C cast
    int64_suffix = "L"
    local_id = "(long)get_local_id(0)"
    local_size = "(long)get_local_size(0)"
    group_id = "(long)get_group_id(0)"
    num_groups = "(long)get_num_groups(0)"
    global_id = "(long)get_global_id({d})"  # {d}: dimension number, {c}: its letter (x, y, z)
    local_id_dim = "(long)get_local_id({d})"
    group_id_dim = "(long)get_group_id({d})"
    global_size = "(long)get_global_size({d})"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    barrier_global = "barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);"
    grid_stride = False  # map kernels: one point per thread (NDRange) or grid-stride loops (CUDA)
    cache_rows = True  # groups kernels: a variant keeping rows read twice in local memory
    lanes = 1  # > 1: loops over contiguous points use vectors of this many lanes (DeviceSplit.lanes)
    register_tile_bounds = ""  # printed before a register-tiled kernel's name (its launch bounds)
    strided_loop_pragma = ""  # printed before loops whose threads stride through points (unrolling them)
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
        self.vector_ok: set[int] = set()  # shared loops (by place) printed over vectors of lanes (the step's launch)
        self.shared_count = 0  # shared loops printed so far in the kernel
        self.launch = StepLaunch(MAP)  # the launch of the step being printed

    # -- types and literals ------------------------------------------------------------------------
    def literal(self, value: object, dt: DType) -> str:
        text = super().literal(value, dt)
        if dt == uint64 and text.endswith("ULL"):
            return text[:-3] + "U" + self.int64_suffix
        if dt == int64 and text.endswith("LL"):
            return text[:-2] + self.int64_suffix
        return text

    def scalar_ctype(self, dt: DType) -> str:
        return self.scalar_types.get(dt, self.types[dt.compute])  # a 16-bit float scalar arrives as a float

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
        if name == "floordiv" and dt.is_int and not dt.is_unsigned:  # as the C helper, with the negation wrapping
            return (
                f"{si} {t} {fn}({t} a, {t} b) {{\n"
                f"    if (b == 0) return 0;\n"
                f"    if (b == -1) return {self.wrapping('-', dt, 'a', None)};\n"
                f"    {t} q = a / b;\n"
                f"    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n"
                f"    return q;\n}}"
            )
        if name.startswith("groupscan_"):
            return self.group_scan_source(name[len("groupscan_") :], dt, fn)
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
        if isinstance(s, Update):
            self.atomic_update(s, ind)
            return
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
        self.emit(ind, f"{s.buffer}[{off}] = {value};")

    def atomic_update(self, s: Update, ind: int) -> None:
        """An atomic update of a 32- or 64-bit element (OpenCL C): ``atomic_add`` for a 32-bit integer sum, else
        a compare-and-swap loop on the element's bits (``atom_cmpxchg`` and ``cl_khr_int64_base_atomics`` for
        64 bits); the loop ends when the bits read are the bits swapped, NaN included."""
        dt = self.buffers[s.buffer][0]
        t, ref, g = self.ctype(dt), f"{s.buffer}[{self.offset(s.buffer, s.index)}]", self.buffer_qualifier
        if dt.bits not in (32, 64):
            raise Unsupported(f"an atomic update of a {dt.bits}-bit element")
        if dt.is_int and s.op == "add" and dt.bits == 32:
            self.emit(ind, f"atomic_add((volatile {g}{t} *)&{ref}, ({t})({self.expr(s.value)}));")
            return
        word, cas = ("uint", "atomic_cmpxchg") if dt.bits == 32 else ("ulong", "atom_cmpxchg")
        if dt.bits == 64:
            self.helpers["pt_int64_atomics"] = "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable"
        self.cas_loop(s, ind, f"volatile {g}{word}", f"as_{t}({{}})", f"as_{word}({{}})", cas)

    def cas_loop(self, s: Update, ind: int, word: str, from_bits: str, to_bits: str, cas: str) -> None:
        """An atomic update as a compare-and-swap loop on the element's bits seen as ``word`` (a pointer
        qualifier included): ``from_bits``/``to_bits`` format the conversions between the element and the word,
        ``cas(pointer, expected, new)`` swaps and returns the word it found. The loop ends when the bits read are
        the bits swapped (NaN included)."""
        t = self.ctype(self.buffers[s.buffer][0])
        plain = word.removeprefix("volatile ").removeprefix(self.buffer_qualifier)
        new = self.expr(self.update_value(s, "_pt_o", "_pt_v"))
        self.emit(ind, "{")
        self.emit(ind + 1, f"const {self.ctype(s.value.dtype)} _pt_v = {self.expr(s.value)};")  # type: ignore[arg-type]
        self.emit(ind + 1, f"{word} *_pt_p = ({word} *)&{s.buffer}[{self.offset(s.buffer, s.index)}];")
        self.emit(ind + 1, f"{plain} _pt_was, _pt_now = *_pt_p;")
        self.emit(ind + 1, "do {")
        self.emit(ind + 2, "_pt_was = _pt_now;")
        self.emit(ind + 2, f"const {t} _pt_o = {from_bits.format('_pt_was')};")
        self.emit(ind + 2, f"_pt_now = {cas}(_pt_p, _pt_was, {to_bits.format(f'({t})({new})')});")
        self.emit(ind + 1, "} while (_pt_now != _pt_was);")
        self.emit(ind, "}")

    # -- whole program ------------------------------------------------------------------------------------
    def render(self, k: LoopKernel) -> str:
        """Device source for ``k`` with its launch plan appended as a comment, for reading (see
        :meth:`render_device`: backends take the plan as data)."""
        source, plan = self.render_device(k)
        return source + "\n" + PLAN_MARKER + plan.to_json() + " */\n"

    def render_device(self, k: LoopKernel) -> tuple[str, LaunchPlan]:
        """The device kernels' source and the host's launch plan for ``k``, as the ``simt`` target's
        passes (``split_kernels``, ``plan_launch``, ``place_barriers``) decided them: the renderer only prints."""
        if k.device is None or any(st.launch is None or not _barriers_placed(st.launch) for st in k.device.steps):
            raise ValueError(
                f"kernel '{k.name}' has not been through the simt target's passes (split_kernels, plan_launch, "
                "place_barriers): render the loop IR a simt backend receives, kernel.program(backend=...).loops"
            )
        self.lanes = k.device.lanes
        lets = self.setup(k)
        inputs = [a.name for a in k.args if a.kind == "dim"] + [a.name for a in k.args if a.kind == "scalar"]
        for i, st in enumerate(k.device.steps):
            self.render_step(k, st, f"{k.name}_k{i}")
        buffers = [DeviceBuffer(n, dt.name, self.host_count(shape)) for n, (dt, shape) in self.temps.items()]
        buffers += [DeviceBuffer(f"_v_{n}", dt.name, "1") for n, dt in self.slots.items()]
        needed = _needed_lets(lets, self.host.used, self.let_uses)
        plan = LaunchPlan(tuple(self.launches), tuple(buffers), tuple(inputs), needed, {"kernel": k.name})
        out = [
            f"/* pypto kernel {k.name}: generated code, do not edit */",
            *self.prelude(),
            *self.extra_declarations(k),
            *self.helpers.values(),
            "",
            *self.kernels,
        ]
        return "\n".join(out) + "\n", plan

    def setup(self, k: LoopKernel) -> list[tuple[str, str]]:
        """Start rendering ``k`` (already split): its buffers, device scalars and pure values; returns
        the host lets (name, Python expression)."""
        self.helpers.clear()
        self.kernels, self.launches = [], []
        self.args = {a.name: a for a in k.args}
        self.buffers = {a.name: (a.dtype, a.shape) for a in k.args if a.kind == "buffer"}
        self.temps, self.slots, self.pure, self.declared_types = {}, {}, {}, {}
        self.dtypes_used = ana.dtypes(k)
        self.forms = StepForms(k)
        inputs = [a.name for a in k.args if a.kind == "dim"] + [a.name for a in k.args if a.kind == "scalar"]
        split = k.device
        assert split is not None
        self.host = HostNames(host_names(inputs))
        for name, dt, shape in split.temps:
            self.temps[name] = self.buffers[name] = (dt, shape)
        self.pure = {let.name: let for let in split.pure}
        lets = []
        self.let_uses: dict[str, set[str]] = {}  # host let -> the host values its expression reads
        for name in split.host_lets:
            self.host.used = set()
            lets.append((name, py_expr(self.pure[name].value, self.host)))
            self.let_uses[name] = self.host.used
            self.host[name] = host_names([name])[name]
        self.host.used = set()  # from here on: the values the launch plan's expressions read
        self.slots = dict(split.slots)
        self.declared_types = dict(split.declared)
        return lets

    def host_count(self, shape: tuple[Expr, ...]) -> str:
        count: Expr = Const(1, dtype=int64)
        for d in shape:
            count = Binary("mul", count, d, dtype=int64)
        try:
            return py_expr(count, self.host)
        except HostExpressionError as e:
            raise Unsupported(f"a temporary's size is not known on the host: {e}") from None

    def step(self, st: DeviceStep) -> _Step:
        """A step of the device split, with its host condition as a Python expression of the plan."""
        when = None
        for cond, holds in st.when:
            text = py_expr(cond, self.host)
            when = _both(when, text if holds else f"not {text}")
        return _Step(list(st.stmts), st.loop, list(st.comments), when)

    # -- one device kernel ------------------------------------------------------------------------------
    def render_step(self, k: LoopKernel, st: DeviceStep, name: str) -> None:
        """Print one step the way ``plan_launch`` chose (:class:`~pypto.ir.device.StepLaunch`)."""
        launch = st.launch
        assert launch is not None, "plan_launch has not run"
        step = self.step(st)
        self.launch = launch
        self.vector_ok = {n for n, _ in launch.vector_loops} if self.lanes > 1 else set()
        if launch.kind == MAP:
            assert step.loop is not None
            chain = self.forms.map_chain(step.loop)[: launch.map_dims]
            vector = self.lanes > 1 and not self.grid_stride and 0 in self.vector_ok
            self.render_map(k, step, name, chain, self.lanes if vector else 1)
        elif launch.kind == GROUPS:
            self.render_groups(k, step, name, launch.cached_rows if self.cache_rows else ())
        elif launch.kind == COLUMNS:
            assert step.loop is not None
            nest = column_nest(step.loop)
            assert nest is not None, "plan_launch chose columns for a loop that is not a column reduction"
            self.render_columns(k, step, name, nest)
        elif launch.kind == TILES:
            assert step.loop is not None
            tiled = contraction_rows(step.loop)
            assert tiled is not None, "plan_launch chose tiles for a loop that is not a contraction"
            self.render_tiles(k, step, name, *tiled)
        else:
            self.render_single(k, step, name, launch.shared)

    def begin(self) -> list[str]:
        self.lines = []
        self.st = _KernelState()
        self.shared_count = 0
        return self.lines

    def flat_index(self, r: Read | Write) -> Expr:
        return self.forms.flat_index(r)

    def preamble(self, stmts: list[Stmt], ind: int, extra: Iterable[Expr] = ()) -> list[str]:
        """Pure lets and device scalars a kernel's statements need, computed at its start."""
        used = ana.names(stmts) | {n.name for e in extra for n in ana.deep(e) if isinstance(n, Var)}
        need: list[str] = []
        for name, let in reversed(list(self.pure.items())):
            if name in used or name in need:
                need.append(name)
                used |= {n.name for n in ana.deep(let.value) if isinstance(n, Var)}
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
        used = ana.names(stmts)
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

    def render_map(self, k: LoopKernel, step: _Step, name: str, chain: list[Loop], width: int) -> None:
        """One thread per point of the chain's loops (dimension 0 = the innermost loop), or per
        ``width`` consecutive points of the innermost loop (its body's vector form)."""
        extents = list(self.launch.extents)
        body = self.begin()
        loads, _ = self.load_slots(step.stmts, 1, single=False)
        self.map_body(chain, extents, 1, width)
        pre = self.preamble(step.stmts, 1, [e for lp in chain for e in (lp.start, lp.stop)])
        ext = tuple(py_expr(e, self.host) for e in extents)
        launch, text = self.finish_kernel(k, name, step, [*pre, *loads, *body], MAP, ext, None, False)
        self.add((replace(launch, width=width), text), step.when)

    def add(self, kernel: tuple[KernelLaunch, str], when: str | None) -> None:
        self.launches.append(replace(kernel[0], when=when))
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
                if level == depth - 1 and self.strided_loop_pragma:
                    self.emit(ind, self.strided_loop_pragma)
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
        from pypto.targets.simt.lanes import LaneWriter

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

    def render_groups(self, k: LoopKernel, step: _Step, name: str, cached_rows: tuple[str, ...]) -> None:
        """One work-group per iteration of the step's parallel loop; the group shares its inner loops.
        With ``cached_rows``, a second variant keeps those rows in local memory (the host picks one)."""
        loop = step.loop
        assert loop is not None
        hint = self.host_text(self.launch.hint)
        plain, text = self.groups_kernel(k, step, name, loop, hint, ())
        rows = tuple((b, lp) for b, lp in self.forms.cacheable_rows(loop) if b in cached_rows)
        if rows:
            cached, ctext = self.groups_kernel(k, step, name + "_rows", loop, hint, rows)
            text += "\n" + ctext
            plain = replace(plain, cached=cached)
        self.add((plain, text), step.when)

    def groups_kernel(self, k: LoopKernel, step: _Step, name: str, loop: Loop, hint: str | None,
                      cached: tuple[tuple[str, Loop], ...]) -> tuple[KernelLaunch, str]:  # fmt: skip
        """The groups kernel's text and plan entry, keeping the ``cached`` rows in local memory."""
        body = self.begin()
        barriers = self.launch.cached_barriers if cached else self.launch.barriers
        assert barriers is not None
        self.st.barriers = barriers
        loads, _ = self.load_slots(step.stmts, 1, single=False)
        # group-stride: a host may launch fewer groups than iterations (a grid has a size limit)
        it, stop = self.index_type, self.index_expr(loop.stop, 10)
        start = self.index_expr(loop.start, 12)
        self.emit(
            1,
            f"for ({it} {loop.var} = {start} + {self.group_id}; {loop.var} < {stop}; {loop.var} += {self.num_groups}) {{",
        )
        # every iteration starts at a barrier: OpenCL compilers that run a group's threads as loops (PoCL) then
        # find a region boundary there even when the row's own loops fold away (a sum of x * 0)
        self.emit(2, self.barrier)
        local: list[LocalBuffer] = []
        for buf, lp in cached:
            cname = f"pt_row_{buf}"
            self.st.caches[buf] = cname
            count = Binary("sub", lp.stop, lp.start, dtype=int64)
            self.st.row_count = self.index_expr(count)
            local.append(LocalBuffer(cname, self.buffers[buf][0].itemsize, py_expr(count, self.host)))
            writers = [b for b in shared_loops(loop) if buf in ana.writes(b)]
            if writers:
                self.st.last_writer[buf] = writers[-1]
        self.group_block([loop.body], 2, 1)
        self.emit(1, "}")
        pre = self.preamble(step.stmts, 1, (loop.start, loop.stop))
        ext = (py_expr(self.launch.extents[0], self.host),)
        return self.finish_kernel(k, name, step, [*pre, *loads, *body], GROUPS, ext, hint, False, tuple(local))

    def render_tiles(
        self, k: LoopKernel, step: _Step, name: str, batches: tuple[Loop, ...], nest: ContractionNest
    ) -> None:
        """A contraction as work-groups over tiles of outputs (see :mod:`pypto.targets.simt.tiles`)."""
        body = self.begin()
        loads, _ = self.load_slots(step.stmts, 1, single=False)
        per_thread = self.launch.register_tile
        if per_thread > 1:
            RegisterTilesWriter(self, batches, nest, per_thread).body(1)
        else:
            TilesWriter(self, batches, nest).body(1)
        rows, cols = nest.rows, nest.cols
        extra = [rows.start, rows.stop, cols.start, cols.stop, nest.red.start, nest.red.stop]
        for b in batches:
            extra += [b.start, b.stop]
        pre = self.preamble(step.stmts, 1, extra)
        ext = tuple(py_expr(e, self.host) for e in self.launch.extents)
        launch, text = self.finish_kernel(k, name, step, [*pre, *loads, *body], TILES, ext, None, False)
        if per_thread > 1 and self.register_tile_bounds:
            text = text.replace(f"void {name}(", f"void {self.register_tile_bounds} {name}(", 1)
        self.add((replace(launch, group=self.launch.group), text), step.when)

    def render_columns(self, k: LoopKernel, step: _Step, name: str, nest: ColumnNest) -> None:
        """Reductions down columns, a work-group per block of columns (see :mod:`pypto.targets.simt.columns`)."""
        body = self.begin()
        loads, _ = self.load_slots(step.stmts, 1, single=False)
        ColumnsWriter(self, nest).body(1)
        col = nest.loop
        pre = self.preamble(step.stmts, 1, [col.start, col.stop, nest.reds[0].start, nest.reds[0].stop])
        ext = tuple(py_expr(e, self.host) for e in self.launch.extents)
        launch, text = self.finish_kernel(k, name, step, [*pre, *loads, *body], COLUMNS, ext, None, False)
        self.add((replace(launch, group=self.launch.group), text), step.when)

    def render_single(self, k: LoopKernel, step: _Step, name: str, shared: bool) -> None:
        """The step's statements in one work-group (shared loops split over its threads when ``shared``)."""
        body = self.begin()
        loads, stores = self.load_slots(step.stmts, 1, single=shared)
        if shared:
            assert self.launch.barriers is not None
            self.st.barriers = self.launch.barriers
            self.group_block(step.stmts, 1, 0)
            hint = self.host_text(self.launch.hint)
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
        if st.reductions and self.local_scratch_param:
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
        launch = KernelLaunch(name, kind, tuple(params), extents, hint, serial, 1, tuple(local_all), prefix=st.prefix)
        return launch, text

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
    def host_text(self, e: Expr | None) -> str | None:
        """``e`` as a host expression of the plan (None when the host cannot compute it)."""
        if e is None:
            return None
        try:
            return py_expr(e, self.host)
        except HostExpressionError:
            return None


# -- small analyses ----------------------------------------------------------------------------------------


SIMT_MODULES = (
    "pypto.targets.cstyle",
    "pypto.targets.simt.render",
    "pypto.targets.simt.analysis",
    "pypto.targets.simt.groups",
    "pypto.targets.simt.lanes",
    "pypto.targets.simt.plan",
    "pypto.targets.simt.split",
    "pypto.targets.simt.launch",
    "pypto.targets.simt.tiles",
    "pypto.targets.simt.columns",
    "pypto.targets.simt.forms",
    "pypto.targets.contraction",
)


def codegen_digest(*modules: str) -> str:
    """A digest of the SIMT code generators' sources and ``modules``, for cache keys."""
    return source_digest(*SIMT_MODULES, *modules)


def excerpt(source: str, line: int, context: int = 4) -> str:
    """Lines of ``source`` around ``line`` (1-based), the line itself marked with ``>>``."""
    lines = source.splitlines()
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return "\n".join(f"{'>>' if i == line else '  '} {i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1))


def _needed_lets(lets: list[tuple[str, str]], used: set[str], uses: dict[str, set[str]]) -> tuple[tuple[str, str], ...]:
    """The host lets the plan's expressions read (``used``, recorded as they were printed), directly or through
    other lets (``uses``: what each let's expression reads)."""
    used = set(used)
    keep = []
    for name, e in reversed(lets):
        if name in used:
            keep.append((name, e))
            used |= uses[name]
    return tuple(reversed(keep))


def _barriers_placed(launch: StepLaunch) -> bool:
    return launch.barriers is not None or not (launch.kind == GROUPS or (launch.kind == SINGLE and launch.shared))


def _both(a: str | None, b: str) -> str:
    return f"({b})" if a is None else f"({a}) and ({b})"


__all__ = [
    "SimtRenderer", "Unsupported", "LaunchPlan", "KernelLaunch", "excerpt", "PLAN_MARKER",
    "codegen_digest",
]  # fmt: skip
