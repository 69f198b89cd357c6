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
* anything else runs in a ``single`` work-group, its loops shared by the threads where the same
  rules allow, by every thread alike where they do not.

It also records the rows a groups kernel may keep in local memory and the loops whose bodies have
a form over vectors of contiguous points. Whether a form exists is decided by the shared SIMT
printer itself, printing the step once in that form (OpenCL spellings, vectors of
:data:`PROBE_LANES`): what the pass records is exactly what every SIMT backend can print, and the
backends' renderers then print the recorded choice without trying alternatives.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.device import DeviceStep, StepLaunch
from pypto.ir.loops import LoopKernel
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.analysis import Unsupported
from pypto.targets.simt.columns import column_nest
from pypto.targets.simt.plan import COLUMNS, GROUPS, MAP, SINGLE, TILES
from pypto.targets.simt.render import SimtRenderer
from pypto.targets.simt.split import split_kernels
from pypto.targets.simt.tiles import contraction_rows

PROBE_LANES = 4
"""Vector width the pass prints with to learn which loops have a vector form (the form does not
depend on the width: a backend prints it with its own)."""


class _Planner:
    def __init__(self, k: LoopKernel):
        self.k = k
        self.r = SimtRenderer()
        self.r.lanes = PROBE_LANES
        self.r.setup(k)

    def tried(self, print_step) -> tuple[bool, tuple[tuple[int, str], ...]]:
        """Whether ``print_step()`` prints, and the shared loops it printed over vectors."""
        r = self.r
        r.vector_ok, r.vector_found = None, {}
        try:
            print_step()
        except Unsupported:
            return False, ()
        finally:
            r.vector_ok = set()
        return True, tuple(sorted(r.vector_found.items()))

    def choose(self, st: DeviceStep, name: str) -> StepLaunch:
        r, k = self.r, self.k
        step = r.step(st)
        loop = step.loop
        if loop is None:
            ok, vec = self.tried(lambda: r.render_single(k, step, name, True))
            if ok:
                return StepLaunch(SINGLE, vector_loops=vec)
            return StepLaunch(SINGLE, shared=False)
        tiled = contraction_rows(loop)
        if tiled is not None:
            ok, _ = self.tried(lambda: r.render_tiles(k, step, name, *tiled))
            if ok:
                return StepLaunch(TILES, map_dims=3 if tiled[0] else 2)
        cols = column_nest(loop)
        if cols is not None:
            ok, _ = self.tried(lambda: r.render_columns(k, step, name, cols))
            if ok:
                return StepLaunch(COLUMNS)
        chain = r.map_chain(loop)
        if len(chain) == 1 and ana.holds_loops(loop.body) and r.rows_in_memory(loop):
            ok, vec = self.tried(lambda: r.render_groups(k, step, name, ()))
            if ok:
                rows = tuple(b for b, _ in r.cacheable_rows(loop))
                if rows:
                    # the variant keeping rows in local memory, printed with the same vector loops
                    r.vector_ok = {n for n, _ in vec}
                    try:
                        r.render_groups(k, step, name, rows)
                    except Unsupported:
                        rows = ()
                    finally:
                        r.vector_ok = set()
                return StepLaunch(GROUPS, cached_rows=rows, vector_loops=vec)
            chain = [loop]
        ok, _ = self.tried(lambda: r.render_map(k, step, name, chain, PROBE_LANES))
        return StepLaunch(MAP, map_dims=len(chain), vector_loops=((0, chain[-1].var),) if ok else ())


def plan_launch(k: LoopKernel) -> LoopKernel:
    """Record how each device kernel of ``k``'s split runs (see the module docstring)."""
    if k.device is None:
        k = split_kernels(k)
    assert k.device is not None
    planner = _Planner(k)
    steps = tuple(replace(st, launch=planner.choose(st, f"{k.name}_k{i}")) for i, st in enumerate(k.device.steps))
    return replace(k, device=replace(k.device, steps=steps))
