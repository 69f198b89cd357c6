"""Device programs: the loop IR of a kernel split into the device kernels a GPU-style target launches.

The ``simt`` target's ``split_kernels`` pass (:mod:`pypto.targets.simt.split`) records the split on the
:class:`~pypto.ir.loops.LoopKernel` as a :class:`DeviceSplit`; the SIMT renderer prints each step as a
device kernel and the host's launch plan. ``kernel.ir("split_kernels")`` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pypto.dtypes import DType

if TYPE_CHECKING:
    from pypto.ir.loops import Let, Loop, Stmt
    from pypto.ir.nodes import Expr


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
    """

    kind: str  # "map", "groups", "single", "tiles" or "columns" (see pypto.targets.simt.tiles and .columns)
    map_dims: int = 1  # map kernels: loops spread over threads; tiles kernels: the contraction's loops
    shared: bool = True
    cached_rows: tuple[str, ...] = ()
    vector_loops: tuple[tuple[int, str], ...] = ()

    def describe(self) -> str:
        text = {
            "map": f"map over {self.map_dims} loop(s)",
            "groups": "groups",
            "single": "single group" + ("" if self.shared else ", every thread alike"),
            "tiles": f"tiles over {self.map_dims} loop(s): a work-group per tile of outputs, factors in local memory",
            "columns": "columns: a work-group per block of columns, its threads splitting the rows",
        }[self.kind]
        if self.cached_rows:
            text += "; rows kept in local memory: " + ", ".join(self.cached_rows)
        if self.vector_loops:
            text += "; vector form: " + ", ".join(f"{v} (#{n})" for n, v in self.vector_loops)
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
