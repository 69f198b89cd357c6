"""The ``plan_launch`` pass of the ``simt`` target: how each device kernel of the split runs.

For every step of :class:`~pypto.ir.device.DeviceSplit` it records a
:class:`~pypto.ir.device.StepLaunch`:

* a top-level parallel loop heading a perfect nest of independent loops (elementwise code, a
  matmul's output loops), or whose reductions do not walk rows of memory, is a ``map`` kernel
  over up to three of those loops;
* one whose body holds reductions over rows (row sums, softmax, layernorm) is a ``groups`` kernel,
  when the group-shared form exists (every accumulator folded with its reducer, no partial value
  read before the group's reduction); otherwise a ``map`` kernel over the loop;
* a contraction (its nest's schedule says so, and the nest has the form) is a ``tiles`` kernel
  (:mod:`pypto.targets.simt.tiles`), reductions down columns a ``columns`` kernel
  (:mod:`pypto.targets.simt.columns`);
* in a ``groups`` or shared ``single`` kernel, a loop of running values (``pt.cumsum``; the loop IR's
  ``Loop.scans``) whose steps have the form of a prefix takes ``L`` steps at a time, one per thread
  (``prefix_loops``; :func:`~pypto.targets.simt.forms.scan_form`), instead of every thread taking every step;
* a sort nest (:mod:`pypto.passes.sorting`) is a ``map`` kernel over its rows: each thread orders a row
  alone (its loops depend on what the step before wrote; a group would wait at a barrier at every step);
* anything else runs in a ``single`` work-group, its loops shared by the threads where the same
  rules allow, by every thread alike where they do not.

It also records the rows a groups kernel may keep in local memory and the loops whose bodies have
a form over vectors of contiguous points. Every question is answered by an analysis of the loop IR
(:mod:`pypto.targets.simt.forms`), nothing is printed: the backends' renderers then print the recorded
choice without trying alternatives.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import int64
from pypto.ir.device import Barriers, DeviceStep, StepLaunch
from pypto.ir.loops import Block, LoopKernel
from pypto.ir.nodes import Binary, Const, Expr
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.columns import COLS, SLICES, column_nest
from pypto.targets.simt.forms import StepForms, shared_loops, trip
from pypto.targets.simt.plan import COLUMNS, GROUPS, MAP, SINGLE, TILES
from pypto.targets.simt.split import split_kernels
from pypto.targets.simt.tiles import TILE, contraction_rows, register_tile


def choose(forms: StepForms, st: DeviceStep) -> StepLaunch:
    """How step ``st`` runs (see the module docstring)."""
    loop = st.loop
    if loop is None:
        form = forms.group_form(st.stmts, 0, vectors=True)
        if form is not None:
            hint = forms.share_hint(Block(st.stmts), {})
            return StepLaunch(SINGLE, vector_loops=form.vector_loops, hint=hint, prefix_loops=form.prefix_loops)
        return StepLaunch(SINGLE, shared=False)
    tiled = contraction_rows(loop)
    if tiled is not None:
        batches, nest = tiled
        extents = (trip(nest.cols), trip(nest.rows))
        if batches:  # every batch loop's iterations, one after the other in the third dimension
            total: Expr = _nonnegative(trip(batches[0]))
            for b in batches[1:]:
                total = Binary("mul", total, _nonnegative(trip(b)), dtype=int64)
            extents += (total,)
        group = (TILE, TILE, 1) if batches else (TILE, TILE)
        return StepLaunch(TILES, map_dims=3 if batches else 2, extents=extents, group=group)
    if column_nest(loop) is not None:
        return StepLaunch(COLUMNS, extents=(trip(loop), Const(SLICES, dtype=int64)), group=(COLS, SLICES))
    chain = forms.map_chain(loop)
    sort = loop.schedule is not None and loop.schedule.pattern == "sort"  # (rows ordered one per thread)
    if len(chain) == 1 and not sort and ana.holds_loops(loop.body) and forms.rows_in_memory(loop):
        form = forms.group_form([loop.body], 1, vectors=True)
        if form is not None:
            rows = tuple(b for b, _ in forms.cacheable_rows(loop))
            if rows:  # the variant keeping rows in local memory: a row written outside a shared loop has none
                writers = {b: [lp for lp in shared_loops(loop) if b in ana.writes(lp)] for b in rows}
                last = {b: w[-1] for b, w in writers.items() if w}
                if forms.group_form([loop.body], 1, vectors=True, caches=rows, last_writers=last) is None:
                    rows = ()
            hint = forms.share_hint(loop.body, {loop.var: loop.start})
            return StepLaunch(GROUPS, cached_rows=rows, vector_loops=form.vector_loops, extents=(trip(loop),),
                              hint=hint, prefix_loops=form.prefix_loops)  # fmt: skip
        chain = [loop]
    inner = chain[-1]
    vector = forms.lane_form(inner.body, inner.var) is None
    return StepLaunch(MAP, map_dims=len(chain), vector_loops=((0, inner.var),) if vector else (),
                      extents=tuple(trip(lp) for lp in reversed(chain)))  # fmt: skip


def _nonnegative(e: Expr) -> Expr:
    return Binary("maximum", e, Const(0, dtype=int64), dtype=int64)


def plan_launch(k: LoopKernel) -> LoopKernel:
    """Record how each device kernel of ``k``'s split runs (see the module docstring)."""
    if k.device is None:
        k = split_kernels(k)
    assert k.device is not None
    forms = StepForms(k)
    steps = tuple(replace(st, launch=choose(forms, st)) for st in k.device.steps)
    return replace(k, device=replace(k.device, steps=steps))


def place_barriers(k: LoopKernel) -> LoopKernel:
    """Record where each ``groups`` and shared ``single`` kernel of ``k`` waits for its group: before a statement
    that may read an element another thread wrote, and at the end of loops every thread runs that read what they
    write (:meth:`~pypto.targets.simt.forms.StepForms.group_form`). Where a thread's points lie depends on the
    vector width the split records (``DeviceSplit.lanes``, chosen by a backend's pass before this one)."""
    split = k.device
    assert split is not None and all(st.launch is not None for st in split.steps), (
        "place_barriers runs after plan_launch"
    )
    forms = StepForms(k)

    def barriers(st: DeviceStep, launch: StepLaunch, caches: tuple[str, ...] = ()) -> Barriers:
        vectors = {n for n, _ in launch.vector_loops} if split.lanes > 1 else ()
        if st.loop is None:
            form = forms.group_form(st.stmts, 0, vectors=vectors)
        else:
            writers = {b: [lp for lp in shared_loops(st.loop) if b in ana.writes(lp)] for b in caches}
            last = {b: w[-1] for b, w in writers.items() if w}
            form = forms.group_form([st.loop.body], 1, vectors=vectors, caches=caches, last_writers=last)
        assert form is not None, "plan_launch chose a group form this step does not have"
        return Barriers(form.barriers, form.loop_barriers)

    steps = []
    for st in split.steps:
        launch = st.launch
        assert launch is not None
        if launch.kind == GROUPS or (launch.kind == SINGLE and launch.shared):
            cached = barriers(st, launch, launch.cached_rows) if launch.cached_rows else None
            launch = replace(launch, barriers=barriers(st, launch), cached_barriers=cached)
        steps.append(replace(st, launch=launch))
    return replace(k, device=replace(split, steps=tuple(steps)))


def register_tiles(k: LoopKernel, outputs: int) -> LoopKernel:
    """Give each thread of ``k``'s tiles kernels ``outputs`` x ``outputs`` outputs in registers where the
    contraction allows (:func:`~pypto.targets.simt.tiles.register_tile`): the grid then covers the outputs in
    steps of that many. For a backend's target (CUDA's ``register_tiles`` pass)."""
    split = k.device
    assert split is not None and all(st.launch is not None for st in split.steps), (
        "register_tiles runs after plan_launch"
    )
    steps = []
    for st in split.steps:
        launch = st.launch
        assert launch is not None
        if launch.kind == TILES and st.loop is not None:
            tiled = contraction_rows(st.loop)
            assert tiled is not None
            r = register_tile(outputs, tiled[1])
            if r > 1:
                step = Const(r, dtype=int64)
                cover = tuple(Binary("floordiv", Binary("add", e, Const(r - 1, dtype=int64), dtype=int64), step, dtype=int64)
                              for e in launch.extents[:2])  # fmt: skip
                launch = replace(launch, register_tile=r, extents=(*cover, *launch.extents[2:]))
        steps.append(replace(st, launch=launch))
    return replace(k, device=replace(split, steps=tuple(steps)))
