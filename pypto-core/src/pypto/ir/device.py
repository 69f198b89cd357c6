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
class DeviceStep:
    """One device kernel to be: a top-level parallel loop (``loop``), or a run of other statements.

    ``when`` lists host conditions, each with the truth value it must have, under which the kernel
    runs (a branch the host decides from the dims, such as softmax's online variant for long rows).
    """

    stmts: tuple[Stmt, ...]
    loop: Loop | None = None
    comments: tuple[str, ...] = ()
    when: tuple[tuple[Expr, bool], ...] = ()


@dataclass(frozen=True)
class DeviceSplit:
    """A kernel's device kernels in launch order, and what lives between them.

    ``temps`` are the temporaries (device buffers the host allocates); ``pure`` the lets computed
    from dims and scalars alone (recomputed in every kernel that needs them, and by the host where
    ``host_lets`` says it can); ``slots`` the scalars one kernel computes and a later one reads (kept
    in one-element device buffers); ``declared`` the types of the scalars the steps declare.
    """

    steps: tuple[DeviceStep, ...]
    temps: tuple[tuple[str, DType, tuple[Expr, ...]], ...] = ()
    pure: tuple[Let, ...] = ()
    host_lets: tuple[str, ...] = ()
    slots: tuple[tuple[str, DType], ...] = ()
    declared: tuple[tuple[str, DType], ...] = ()
