"""Device programs: the loop IR of a kernel split into the device kernels a GPU-style target launches.

The ``simt`` target's ``split_kernels`` pass (:mod:`pypto.targets.simt.split`) records the split on the
:class:`~pypto.ir.loops.LoopKernel` as a :class:`DeviceSplit`; the SIMT renderer prints each step as a
device kernel and the host's launch plan. ``kernel.ir("split_kernels")`` shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pypto.dtypes import DType

if TYPE_CHECKING:
    from pypto.ir.loops import Let, Loop, Stmt
    from pypto.ir.nodes import Expr


@dataclass(frozen=True)
class Barriers:
    """Where a ``groups`` or ``single`` kernel waits for its whole group (the ``simt`` target's ``place_barriers``
    pass): before the statements at the paths ``before`` (a thread may read there an element another thread
    wrote), and at the end of each iteration of the loops at ``loop_ends`` (loops every thread runs that read
    what they write). A path numbers a statement from the step's statement list down through blocks, loop
    bodies and branches (:data:`pypto.targets.simt.forms.Path`)."""

    before: tuple[tuple[int, ...], ...] = ()
    loop_ends: tuple[tuple[int, ...], ...] = ()

    def describe(self) -> str:
        def path(p: tuple[int, ...]) -> str:
            return ".".join(map(str, p))

        parts = []
        if self.before:
            parts.append("before " + ", ".join(path(p) for p in self.before))
        if self.loop_ends:
            parts.append("ending loop " + ", ".join(path(p) for p in self.loop_ends))
        return "; ".join(parts) or "none"


@dataclass(frozen=True)
class StepLaunch:
    """How one device kernel runs, chosen by the ``simt`` target's ``plan_launch`` pass.

    ``kind`` is ``"map"`` (one thread per point of the ``map_dims`` outermost independent loops),
    ``"groups"`` (one work-group per iteration of the step's parallel loop, its threads sharing the
    inner loops) or ``"single"`` (one work-group runs the step; its loops shared by the threads
    when ``shared``, run by every thread alike otherwise). ``cached_rows`` are the buffers a groups
    kernel may keep in local memory (a backend that caches rows renders that variant too);
    ``vector_loops`` the loops whose bodies have a form over vectors of contiguous points (used by
    backends with vector lanes), as (place, variable): the place is the loop's number among the
    kernel's shared loops in the order they are printed (0 for a map kernel's innermost loop).
    What the host needs to size the launch is IR over the dims and scalars: ``extents`` (the points or
    work-groups of each grid dimension, dimension 0 first), ``hint`` (the elements a group's threads
    share, which sizes the group); ``group`` is a fixed work-group shape (tiles and columns kernels),
    ``register_tile`` the outputs per thread along each side of a tiles kernel (a backend's pass
    sets it). The device's launch policy turns these into numbers at each call. ``prefix_loops`` are the
    loops of running values (``pt.cumsum``) whose steps the group's threads take ``L`` at a time, as prefixes
    over the group (:func:`~pypto.targets.simt.forms.scan_form`); other loops of a groups kernel that are not
    shared run in every thread alike.
    ``barriers`` (and ``cached_barriers``, for the variant keeping rows in local memory) are where a
    groups or shared single kernel waits for its group, for the vector width of the kernel's split
    (set by ``place_barriers``; None before it, and for the other kinds, whose barriers are fixed).
    """

    kind: str  # "map", "groups", "single", "tiles" or "columns" (see pypto.targets.simt.tiles and .columns)
    map_dims: int = 1  # map kernels: loops spread over threads; tiles kernels: the contraction's loops
    shared: bool = True
    cached_rows: tuple[str, ...] = ()
    vector_loops: tuple[tuple[int, str], ...] = ()
    extents: tuple[Expr, ...] = ()
    hint: Expr | None = None
    group: tuple[int, ...] = ()
    register_tile: int = 1
    barriers: Barriers | None = None
    cached_barriers: Barriers | None = None
    prefix_loops: tuple[str, ...] = ()  # loops of running values whose steps the group's threads take at once

    def describe(self, expr: Callable[[Expr], str] = str) -> str:
        text = {
            "map": f"map over {self.map_dims} loop(s)",
            "groups": "groups",
            "single": "single group" + ("" if self.shared else ", every thread alike"),
            "tiles": f"tiles over {self.map_dims} loop(s): a work-group per tile of outputs, factors in local memory",
            "columns": "columns: a work-group per block of columns, its threads splitting the rows",
        }[self.kind]
        if self.extents:
            text += "; extents " + ", ".join(expr(e) for e in self.extents)
        if self.group:
            text += "; groups of " + " x ".join(map(str, self.group))
        if self.register_tile > 1:
            text += f"; {self.register_tile} x {self.register_tile} outputs per thread"
        if self.hint is not None:
            text += f"; shared elements {expr(self.hint)}"
        if self.cached_rows:
            text += "; rows kept in local memory: " + ", ".join(self.cached_rows)
        if self.vector_loops:
            text += "; vector form: " + ", ".join(f"{v} (#{n})" for n, v in self.vector_loops)
        if self.prefix_loops:
            text += "; running values as group prefixes: " + ", ".join(self.prefix_loops)
        if self.barriers is not None:
            text += "; barriers: " + self.barriers.describe()
        if self.cached_barriers is not None and self.cached_barriers != self.barriers:
            text += " (keeping rows: " + self.cached_barriers.describe() + ")"
        return text


@dataclass(frozen=True)
class DeviceStep:
    """One device kernel to be: a top-level parallel loop (``loop``), or a run of other statements.

    ``when`` lists host conditions, each with the truth value it must have, under which the kernel
    runs (a branch the host decides from the dims, such as softmax's online variant for long rows).
    ``launch`` is how it runs (set by ``plan_launch``).
    """

    stmts: tuple[Stmt, ...]
    loop: Loop | None = None
    comments: tuple[str, ...] = ()
    when: tuple[tuple[Expr, bool], ...] = ()
    launch: StepLaunch | None = None


@dataclass(frozen=True)
class DeviceSplit:
    """A kernel's device kernels in launch order, and what lives between them.

    ``temps`` are the temporaries (device buffers the host allocates); ``pure`` the lets computed
    from dims and scalars alone (recomputed in every kernel that needs them, and by the host where
    ``host_lets`` says it can); ``slots`` the scalars one kernel computes and a later one reads (kept
    in one-element device buffers); ``declared`` the types of the scalars the steps declare.
    ``lanes`` is the width of the vector types the loops with a vector form are printed with (1: none,
    as on GPUs; a backend's target chooses it by a pass, e.g. OpenCL's ``vector_lanes`` on CPU devices).
    """

    steps: tuple[DeviceStep, ...]
    temps: tuple[tuple[str, DType, tuple[Expr, ...]], ...] = ()
    pure: tuple[Let, ...] = ()
    host_lets: tuple[str, ...] = ()
    slots: tuple[tuple[str, DType], ...] = ()
    declared: tuple[tuple[str, DType], ...] = ()
    lanes: int = 1
