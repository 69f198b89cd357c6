"""Targets: the kinds of machine a backend generates code for, and the passes each adds.

The core's pipeline (:mod:`pypto.passes`) ends with the loop IR every backend can render. A target
appends its own passes, which turn target-specific decisions into data on the IR, so that
renderers only print: ``cpu-simd`` (OpenMP, TBB) decides when parallel loops start threads and
which outputs are written with streaming stores. A backend names its target in its
:class:`~pypto.backend_api.BackendSpec`; a backend without one renders the core's loop IR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pypto.ir.loops import LoopKernel
from pypto.targets.machine import Machine

LoopPass = Callable[[LoopKernel], LoopKernel]


@dataclass(frozen=True)
class Target:
    """A kind of machine: its name and the passes it appends to the core pipeline, in order."""

    name: str
    passes: tuple[tuple[str, LoopPass], ...]
    description: str = ""
    machine: Callable[[], Machine] | None = None  # what the schedule pass targets (probed on first use)


def targets() -> dict[str, Target]:
    """Every target the core knows, by name."""
    from pypto.targets.cpu import CPU_SIMD
    from pypto.targets.simt import SIMT

    return {t.name: t for t in (CPU_SIMD, SIMT)}


def get_target(name: str | None) -> Target | None:
    """The target called ``name`` (``None`` for a backend that declares none)."""
    if name is None:
        return None
    known = targets()
    if name not in known:
        raise KeyError(f"unknown target {name!r}; known targets: {', '.join(known)}")
    return known[name]


__all__ = ["Target", "LoopPass", "targets", "get_target"]
