"""Scheduling: a :class:`~pypto.ir.schedule.NestSchedule` for every loop nest, and split reductions.

``split_reductions`` marks nests without loops (``out[0] = pt.reduce_sum(...)``): their reductions
are *split* into blocks of a fixed number of points, reduced in parallel, and the per-block partial
results are combined in block order. The block size does not depend on the thread count, so the
result is bit-for-bit the same with 1 or 64 threads. Only associative reducers are split. A long scan
whose nest has no other loop (``pt.cumsum`` of a vector) is split too: block totals in parallel, the
blocks' starting values in order, then each block again from its start.

``schedule`` classifies every nest with loops by its access pattern (see
:data:`pypto.ir.schedule.PATTERNS`) and decides, from the shapes and strides of its accesses and the
target's :class:`~pypto.targets.machine.Machine`:

* the loop order (outer to inner) and which loop runs on threads (the outermost) and which is
  vectorised (the innermost);
* tile sizes: the sides of a transpose's tiles (a tile's input lines fill a quarter of L1); the
  columns per panel of a contraction (one register tile wide by default);
* a contraction's register tile: two vectors wide, as many rows as the vector registers hold (8 with
  32 registers, 6 with 16), its rows unrolled (one statement per row), and the operands packed: the
  factor without the row axis always, in panels; the factor with it too when a task spans several
  panels (``@pt.tile(j=...)`` wider than the tile), which then read each packed row block in turn; and,
  unless hinted, wider tasks and shorter blocks of the reduction for when the rows are few at run time
  (``few_rows``, :data:`FEW_ROWS`).

The user's hints (``@pt.tile``, ``pt.kernel(schedule=...)``) override these choices; a hint that
names an axis no nest can use, or a size a pattern cannot use, is a :class:`~pypto.errors.ScheduleError`.
Lowering and the target's passes (``block_columns``, ``block_contractions``, ``tile_transposes``)
apply the schedule; ``kernel.ir("schedule")`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pypto.errors import ScheduleError
from pypto.ir.kernel import Group, KernelIR, Split
from pypto.ir.nodes import (
    REDUCE_OPS,
    Binary,
    Cast,
    Gather,
    Index,
    Load,
    Reduce,
    Scatter,
    ScatterPlan,
    free_axes,
    loads,
    postorder,
    scan_bodies,
    scans,
    top_reduces,
)
from pypto.ir.ops import LOOP
from pypto.ir.schedule import NestSchedule, Schedule
from pypto.passes.fuse import scan_of, sort_of
from pypto.targets.machine import Machine, host_cpu

SPLIT_BLOCK = 16384  # points per block of a split reduction: 64 KiB of float32, L2-resident
SCAN_BLOCK = 65536  # steps per block of a long scan: the second pass over a block reads it from L2
LINE = 64  # bytes per cache line
MICRO = 8  # a full transpose tile is walked in micro-tiles of this side (see pypto.targets.cpu.tiles)


def split_reductions(k: KernelIR, block: int = SPLIT_BLOCK, scan_block: int = SCAN_BLOCK) -> KernelIR:
    """Mark loop-less nests whose values contain associative reductions, and long one-loop scans, for block
    splitting."""
    assert k.groups is not None
    groups = []
    for g in k.groups:
        if not g.loops and any(
            isinstance(e, Reduce) and e.op in REDUCE_OPS for s in g.stores for e in postorder(s.value)
        ):
            g = replace(g, split=Split(block))
        elif _long_scan(k, g, scan_block):
            g = replace(g, split=Split(scan_block))
        groups.append(g)
    return k.replace(groups=tuple(groups))


def _long_scan(k: KernelIR, g: Group, block: int) -> bool:
    """A nest whose only loop carries its scans (``pt.cumsum`` of a 1-D array), none inside another's body, and
    that may have more than one block of steps: its blocks run on threads (``pypto.passes.lower.split_scan``)."""
    if len(g.loops) != 1:
        return False
    carried = [c for s in g.stores for c in scans(s.value)]
    if not carried or any(c.op == LOOP or scans(b) for c in carried for b in scan_bodies(c)):  # (a loop's steps
        # run in order: its body need not be associative)
        return False
    extent = k.axis(g.loops[0]).extent
    return extent is None or not extent.is_const or extent.const > block


# -- access patterns ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Contraction:
    rows: int  # i
    cols: int  # j
    red: int  # k
    packed: tuple[str, ...]  # tensors read by the factor without i
    rows_packed: tuple[str, ...]  # tensors read by the factor with i (packed when a task has several panels)


def _factors(e):
    """``(a, b)`` when ``e`` is a product ``a * b`` (through casts)."""
    while isinstance(e, Cast):
        e = e.x
    if isinstance(e, Binary) and e.op == "mul":
        return e.a, e.b
    return None


def _axes(e) -> set[int]:
    """The axes ``e`` reads along: its loads' indices and the axes its gathers' indices depend on."""
    gathers = {a for n in postorder(e) if isinstance(n, Gather) for a in free_axes(n)}
    return {a for ld in loads(e) for ix in ld.index for a in ix.axis_set()} | gathers


def contraction(g: Group) -> _Contraction | None:
    """The nest as a contraction ``f(reduce_sum(a[.., i, k] * b[.., k, j], axis=k))``, or None."""
    if len(g.stores) != 1 or len(g.loops) < 2 or scans(g.stores[0].value):
        return None
    s = g.stores[0]
    i, j = g.loops[-2], g.loops[-1]
    if not s.index or j not in s.index[-1].axis_set():
        return None
    reds = top_reduces(s.value)
    if len(reds) != 1 or reds[0].op != "sum" or len(reds[0].axes) != 1:
        return None
    (r,) = reds
    if any(isinstance(n, Reduce) for n in postorder(r.body) if n is not r):
        return None
    pair = _factors(r.body)
    if pair is None:
        return None
    for a, b in (pair, pair[::-1]):
        ax_a, ax_b = _axes(a), _axes(b)
        if j not in ax_a and i not in ax_b and i in ax_a and j in ax_b:
            tensors = (tuple(sorted({ld.tensor for ld in loads(f)})) for f in (b, a))
            return _Contraction(i, j, r.axes[0], *tensors)
    return None


def _strided(ld: Load, inner: int, along: int | None = None) -> bool:
    """Whether ``ld`` moves a whole row per step of ``inner`` (``inner`` in a non-last index and
    not in the last), reading contiguously along ``along`` when given."""
    if len(ld.index) < 2:
        return False
    last = ld.index[-1].axis_set()
    if inner in last or not any(inner in ix.axis_set() for ix in ld.index[:-1]):
        return False
    return along is None or along in last


def classify(g: Group) -> tuple[str, _Contraction | None]:
    """The nest's access pattern (see :data:`pypto.ir.schedule.PATTERNS`)."""
    if not g.loops:
        return "full-reduction", None
    if any(scan_of(s) is not None for s in g.stores):  # (a loop's result is a reduction: its steps inside)
        inner = g.loops[-1]
        if len(g.loops) >= 2 and all(_strided(ld, inner, g.loops[-2]) for s in g.stores for ld in loads(s.value)):
            return "column-scan", None  # down columns: every step a row apart, the outer loop along the rows
        return "scan", None
    if any(sort_of(s) is not None for s in g.stores):
        return "sort", None
    c = contraction(g)
    if c is not None:
        return "contraction", c
    inner = g.loops[-1]
    reduces = [r for s in g.stores for r in top_reduces(s.value)]
    if reduces:
        for r in reduces:
            for a in r.axes:
                if a not in g.loops and any(_strided(ld, a, inner) for ld in loads(r.body)):
                    return "columns", None
        return "rows", None
    stores_along = all(s.index and inner in s.index[-1].axis_set() for s in g.stores)
    if len(g.loops) >= 2 and stores_along and any(_strided(ld, inner) for s in g.stores for ld in loads(s.value)):
        return "transpose", None
    return "map", None


def _transpose_order(g: Group, order: tuple[int, ...]) -> tuple[int, ...]:
    """A transpose's loops with the axis its strided reads run along (stride 1 in their last index) second to
    last, just outside the inner one the writes run along, so that ``tile_transposes`` tiles those two:
    ``y[j, 64*a + b] = f(x[a, b, j])`` walks (a, j, b), not (j, a, b), whose reads of ``x`` are each a row apart
    and never reused from L1 (the weight gradient of a batched product: a gelu so transposed, 32 x 64 x 512,
    and its product, 2.4 -> 1.6 ms)."""
    inner = order[-1]
    if len(order) < 3:
        return order
    along: list[int] = []
    for s in g.stores:
        for ld in loads(s.value):
            if _strided(ld, inner):
                along += [a for a, c in ld.index[-1].axes if abs(c) == 1 and a in order and a != inner]
    if not along or along[0] == order[-2]:
        return order
    return tuple(a for a in order if a not in (along[0], inner)) + (along[0], inner)


# -- tile sizes from the machine ---------------------------------------------------------------------


REDUCTION_BLOCK = 1024
"""Points of a contraction's reduction per block by default (BLIS's ``kc``): the packed panel a block reads
stays in cache however long the reduction is, and a register tile's accumulators are stored and reloaded once
per block. Measured here (2 threads): a skinny (8 x 30,000) @ (30,000 x 2,000) float64 product 194 ms without
blocks, 58 ms with blocks of 1024, 50 ms with 256; but 256 costs square float32 products of 1024 and 2048
about 2 %, which 1024 leaves as they were (one or two blocks)."""


FEW_ROWS = 128
"""A contraction whose factor with the row axis has at most this many rows at run time (a small batch through
a dense layer: ``x`` of 8 x 4096 times ``w`` of 4096 x 11008) reads the other factor once per task and block
of rows, so its speed is that of reading it: tasks of :data:`FEW_ROWS_BYTES` of columns walk it a block of
:data:`FEW_ROWS_BLOCK` points of the reduction at a time, each block's rows read contiguously. Measured here
(float32, K 4096, N 11008, 2 threads; ``x @ w`` and ``x @ w.T``): 8 rows 35.9 -> 15.7 ms and 39 -> 18 ms
(NumPy 14.9 and 21.7 ms), 128 rows 90 -> 70 ms (NumPy 68-74 ms); square products keep the default tiles, which
measured 5-15 % faster there (1024 to 2048 points a side)."""
FEW_ROWS_BYTES = 1024  # columns per task: a kilobyte of each row of the factor without i
FEW_ROWS_TASKS = 8
"""...and only with at least this many such tasks (2048 float32 columns): with fewer, wide tasks leave threads
idle, and the factor is small enough to stay in cache. The SwiGLU MLP at x 128 x 256, hidden 704, ran at 0.62x
NumPy's speed with three wide tasks on two threads, 1.17x with the default tiles."""
FEW_ROWS_BLOCK = 128  # points of the reduction per block


def register_tile(machine: Machine, itemsize: int) -> tuple[int, int]:
    """Rows x columns of a contraction's register tile: two vectors wide, and as many rows as leave
    three registers for the loaded row of ``b`` and a broadcast value (at most 8)."""
    return max(1, min(8, (machine.vector_registers - 3) // 2)), 2 * machine.lanes(itemsize)


def transpose_tile(machine: Machine) -> int:
    """Sides of a transpose's tiles: a power of two whose input lines take about a quarter of L1,
    between 32 and 256."""
    side = 32
    while side * 2 <= 256 and side * 2 * LINE * 4 <= machine.l1:
        side *= 2
    return side


# -- the pass ----------------------------------------------------------------------------------------


class _Scheduler:
    def __init__(self, k: KernelIR):
        self.k = k
        self.machine = k.machine if k.machine is not None else host_cpu()
        self.cpu = self.machine.kind == "cpu"
        self.hints = k.hints if k.hints is not None else Schedule()
        self.used: set[str] = set()  # hinted axes some nest used
        self.allowed: list[str] = []  # what each nest would have accepted (for error messages)
        names = {a.name: a.index for a in k.axes}
        for where, axis in self._hinted_axes():
            if axis not in names:
                unnamed = bool(k.axes) and all(a.name == f"i{a.index}" for a in k.axes)
                why = (" (its source could not be read, typed at a prompt or built by exec, so its axes are named "
                       "after their numbers)") if unnamed else ""  # fmt: skip
                raise ScheduleError(
                    f"{where}: kernel '{k.name}' has no axis '{axis}'; its axes are "
                    f"{', '.join(sorted(names)) or '(none)'}{why}",
                    param=axis,
                    expected=f"one of {sorted(names)}",
                    got=axis,
                    fix="use those names (pt.axis(0) is i0)"
                    if unnamed
                    else "use the name of a variable given pt.axis(...) in the kernel",
                )
        self.index = names

    def _hinted_axes(self):
        h = self.hints
        for a, _ in h.tile:
            yield "tile", a
        for a in h.order or ():
            yield "order", a
        if isinstance(h.parallel, str):
            yield "parallel", h.parallel

    def name(self, axis: int) -> str:
        return self.k.axis_name(axis)

    def where(self, gi: int, g: Group) -> str:
        s = g.stores[0]
        text = s.loc.text.strip() if s.loc is not None and s.loc.text else f"store {s.tensor}"
        return f"nest {gi} ({text})"

    def tile(self, axis: int, default: int | None, hinted: list[str]) -> int | None:
        n = self.hints.tile_of(self.name(axis))
        if n is None:
            return default
        self.used.add(self.name(axis))
        hinted.append(f"tile {self.name(axis)}")
        return n

    def nest(self, gi: int, g: Group) -> Group:
        pattern, c = classify(g)
        if pattern == "full-reduction":
            return replace(g, schedule=NestSchedule(pattern, (), None, None))
        hinted: list[str] = []
        if pattern in ("scan", "column-scan"):  # the scan's axis (the last loop) in order; an outer axis on threads
            parallel = self.parallel(gi, g, g.loops, hinted) if len(g.loops) > 1 else None
            self.allowed.append(f"{self.where(gi, g)}: none (a scan nest has no tiles)")
            return replace(g, schedule=NestSchedule(pattern, g.loops, parallel, None, hinted=tuple(hinted)))
        if pattern == "sort":  # each point of the other axes sorts its row; the outermost of them on threads
            outer = tuple(a for a in g.loops if a not in {sort_of(s).out for s in g.stores})  # type: ignore[union-attr]
            parallel = self.parallel(gi, g, outer, hinted) if outer else None
            self.allowed.append(f"{self.where(gi, g)}: none (a sort nest has no tiles)")
            return replace(g, schedule=NestSchedule(pattern, g.loops, parallel, None, hinted=tuple(hinted)))
        order = self.order(gi, g, pattern, hinted)
        if pattern == "transpose" and "order" not in hinted:
            order = _transpose_order(g, order)
        if order != g.loops:  # the pattern as the nest will be walked
            pattern, c = classify(replace(g, loops=order))
        parallel = self.parallel(gi, g, order, hinted)
        sched = NestSchedule(pattern, order, parallel, order[-1])
        where = self.where(gi, g)
        if pattern == "contraction":
            assert c is not None
            sched = self.contraction(gi, g, c, sched, hinted)
        elif pattern == "transpose" or (pattern == "map" and len(order) >= 2):
            a, b = order[-2], order[-1]
            side = transpose_tile(self.machine) if pattern == "transpose" and self.cpu else None
            ta, tb = self.tile(a, side, hinted), self.tile(b, side, hinted)
            if ta is not None or tb is not None:
                sched = replace(sched, tiles=((a, ta or side or tb), (b, tb or side or ta)))  # type: ignore[arg-type]
            self.allowed.append(f"{where}: {self.name(a)}, {self.name(b)} (sides of square tiles)")
        elif pattern == "columns":
            red = next(a for s in g.stores for r in top_reduces(s.value) for a in r.axes if a not in g.loops)
            rows, cols = self.tile(red, None, hinted), self.tile(order[-1], None, hinted)
            tiles = tuple((a, n) for a, n in ((red, rows), (order[-1], cols)) if n is not None)
            sched = replace(sched, tiles=tiles)
            self.allowed.append(
                f"{where}: {self.name(red)} (rows per block), {self.name(order[-1])} (columns per block)"
            )
        else:
            self.allowed.append(f"{where}: none (a {pattern} nest has no tiles)")
        return replace(g, loops=order, schedule=replace(sched, hinted=tuple(hinted)))

    def order(self, gi: int, g: Group, pattern: str, hinted: list[str]) -> tuple[int, ...]:
        want = self.hints.order
        if want is None or {self.name(a) for a in g.loops} != set(want):
            return g.loops
        if pattern not in ("map", "transpose"):
            raise ScheduleError(
                f"order={want!r}: {self.where(gi, g)} is a {pattern} nest, whose loop order the schedule fixes; "
                "only nests without reductions take an order",
                param="order",
                expected="the axes of a nest without reductions",
                got=want,
            )
        self.used.update(want)
        hinted.append("order")
        return tuple(self.index[a] for a in want)

    def parallel(self, gi: int, g: Group, order: tuple[int, ...], hinted: list[str]) -> int | None:
        p = self.hints.parallel
        if p is None:
            return order[0]
        if p is False:
            hinted.append("parallel")
            return None
        if p not in {self.name(a) for a in order}:
            return order[0]
        if self.name(order[0]) != p:
            raise ScheduleError(
                f"parallel={p!r}: only the outermost loop of a nest runs on threads, and the outermost loop of "
                f"{self.where(gi, g)} is {self.name(order[0])!r} (loops {', '.join(self.name(a) for a in order)}); "
                f"allowed: {self.name(order[0])!r} or False",
                param="parallel",
                expected=f"{self.name(order[0])!r} or False",
                got=p,
                fix="name the outermost axis, reorder the nest with order=..., or pass parallel=False",
            )
        self.used.add(p)
        hinted.append("parallel")
        return order[0]

    def contraction(self, gi: int, g: Group, c: _Contraction, sched: NestSchedule, hinted: list[str]) -> NestSchedule:
        where = self.where(gi, g)
        if not self.cpu:  # SIMT targets record the hints; their contraction tiles are their own
            sizes = [(a, self.tile(a, None, hinted)) for a in (c.rows, c.cols, c.red)]
            self.allowed.append(f"{where}: {self.name(c.rows)}, {self.name(c.cols)}, {self.name(c.red)} (recorded)")
            tiles = tuple((a, n) for a, n in sizes if n is not None)
            return replace(sched, tiles=tiles)
        # the accumulators' type (a 16-bit result is rounded from float32 ones: its tile is float32's)
        reds = top_reduces(g.stores[0].value)
        dt = reds[0].dtype if reds else g.stores[0].value.dtype
        itemsize = dt.itemsize if dt is not None else 4
        lanes = self.machine.lanes(itemsize)
        mr, nr = register_tile(self.machine, itemsize)
        if self.hints.register is not None:
            mr, nr = self.hints.register
            regs = self.machine.vector_registers
            if nr % lanes or mr > 16 or mr * (nr // lanes) > regs - 3:
                raise ScheduleError(
                    f"register={self.hints.register!r}: {where} needs a register tile of at most 16 rows whose "
                    f"columns are a multiple of {lanes} ({self.machine.vector_bytes}-byte vectors of {dt}) and whose "
                    f"rows x vectors leave 3 of the {regs} vector registers free",
                    param="register",
                    expected=f"(rows, columns) with columns a multiple of {lanes}, rows x columns / {lanes} <= {regs - 3}",
                    got=self.hints.register,
                    fix=f"try register={register_tile(self.machine, itemsize)!r} (this machine's default)",
                )
            hinted.append("register")
        mc = self.tile(c.rows, None, hinted)
        nc = self.tile(c.cols, nr, hinted)
        kc = self.tile(c.red, REDUCTION_BLOCK, hinted)
        self.allowed.append(
            f"{where}: {self.name(c.rows)} (rows per block; best a multiple of {mr}), "
            f"{self.name(c.cols)} (columns per task; best a multiple of {nr}), "
            f"{self.name(c.red)} (points of the reduction per block)"
        )
        tiles = ((c.rows, mc),) if mc is not None else ()
        tiles += ((c.cols, nc),) + (((c.red, kc),) if kc is not None else ())  # type: ignore[assignment]
        pack = c.packed + (tuple(t for t in c.rows_packed if t not in c.packed) if nc > nr else ())
        few = None
        if not {self.name(c.cols), self.name(c.red)} & {a for a, _ in self.hints.tile} and self.hints.size is None:
            few = (FEW_ROWS, max(nr, FEW_ROWS_BYTES // itemsize // nr * nr), FEW_ROWS_BLOCK)
        return replace(sched, tiles=tiles, register=(mr, nr), pack=pack, unroll=((c.rows, mr),), few_rows=few)

    def run(self) -> KernelIR:
        assert self.k.groups is not None
        groups = tuple(self.nest(gi, g) for gi, g in enumerate(self.k.groups))
        for a, _ in self.hints.tile:
            if a not in self.used:
                raise ScheduleError(
                    f"tile {a}=...: no loop nest of kernel '{self.k.name}' tiles axis '{a}'; tiles allowed: "
                    + ("; ".join(self.allowed) or "none (the kernel has no loop nests)"),
                    param=a,
                    expected="an axis a nest tiles",
                    got=dict(self.hints.tile)[a],
                )
        if self.hints.size is not None and not self.used:
            raise ScheduleError(
                f"size={self.hints.size}: no loop nest of kernel '{self.k.name}' has tiles; tiles allowed: "
                + ("; ".join(self.allowed) or "none"),
                param="size",
                expected="a kernel with a tiled nest",
                got=self.hints.size,
            )
        p = self.hints.parallel
        if isinstance(p, str) and p not in self.used:
            raise ScheduleError(
                f"parallel={p!r}: no loop nest of kernel '{self.k.name}' has a loop over '{p}' to run on threads "
                "(a reduced axis is not a loop of its own)",
                param="parallel",
                expected="the outermost axis of a nest, or False",
                got=p,
            )
        if self.hints.order is not None and "order" not in {h for g in groups if g.schedule for h in g.schedule.hinted}:
            nests = "; ".join(
                f"{self.where(gi, g)}: ({', '.join(self.name(a) for a in g.loops)})"
                for gi, g in enumerate(groups) if g.loops
            )  # fmt: skip
            raise ScheduleError(
                f"order={self.hints.order!r}: no loop nest of kernel '{self.k.name}' has exactly these axes; "
                f"nests: {nests or 'none'}",
                param="order",
                expected="the axes of one of the kernel's nests",
                got=self.hints.order,
            )
        return self.k.replace(groups=groups, machine=self.machine)


def schedule(k: KernelIR) -> KernelIR:
    """A :class:`NestSchedule` for every nest (see the module docstring)."""
    return _Scheduler(k).run()


# -- scatters ------------------------------------------------------------------------------------------

OWNER_RUN_BYTES = 256  # owner scatters: a thread's run of the plain axis (four cache lines)
SCATTER_BLOCK = SPLIT_BLOCK  # blocked scatters: points per block at least (see pypto.passes.lower)


def _owner_axis(s: Scatter) -> int | None:
    """The loop axis the target's last index is an affine function of alone (``d`` in ``dtable[tok[t], d]``):
    points with different values of it land on different elements, and a run of it is contiguous in memory."""
    ix = s.index[-1] if s.index else None
    if isinstance(ix, Index) and len(ix.affine.axes) == 1 and ix.affine.axes[0][1] != 0:
        return ix.affine.axes[0][0]
    return None


def schedule_scatters(k: KernelIR) -> KernelIR:
    """A :class:`~pypto.ir.nodes.ScatterPlan` for every scatter: ``parallel`` for indices declared unique,
    ``atomic`` for accumulations when the kernel says ``deterministic=False`` (on GPUs, into 32- and 64-bit
    elements), ``owner`` when the target's index holds a plain loop axis with room for two runs, ``blocks`` for
    the other accumulations, ``serial`` when the scatter has no loop. Every plan but ``atomic`` gives the same
    bits for any thread count."""
    if not k.scatters:
        return k
    extents = {a.index: a.extent for a in k.axes}
    simt = k.machine is not None and k.machine.kind == "simt"  # GPUs update 32- and 64-bit words atomically only
    scatters = []
    for s in k.scatters:
        loops = free_axes(s.value).union(*(free_axes(ix) for ix in s.index))
        plan = ScatterPlan("serial")
        itemsize = max(1, k.buffer(s.tensor).dtype.itemsize)
        if loops and s.op == "set":
            plan = ScatterPlan("parallel")
        elif loops and not k.deterministic and (not simt or itemsize >= 4):
            plan = ScatterPlan("atomic")
        elif loops:
            width = max(1, OWNER_RUN_BYTES // itemsize)
            owner = _owner_axis(s)
            small = owner is not None and extents[owner].is_const and extents[owner].const < 2 * width
            if owner is not None and not small:
                fallback = 0 if extents[owner].is_const else SCATTER_BLOCK  # a size known at run time only
                plan = ScatterPlan("owner", axis=owner, width=width, block=fallback)
            else:
                plan = ScatterPlan("blocks", block=SCATTER_BLOCK)
        scatters.append(replace(s, plan=plan))
    return k.replace(scatters=tuple(scatters))
