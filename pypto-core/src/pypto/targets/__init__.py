"""Targets: the kinds of machine a backend generates code for, and the passes each adds.

The core's pipeline (:mod:`pypto.passes`) ends with the loop IR every backend can render. A target
appends its own passes, which turn target-specific decisions into data on the IR, so that
renderers only print: ``cpu-simd`` (OpenMP, TBB) decides when parallel loops start threads and
which outputs are written with streaming stores. A backend names its target in its
:class:`~pypto.backend_api.BackendSpec`; a backend without one renders the core's loop IR.

Targets are declared by plugins through the ``pypto_targets`` hook, the core's own ones too
(:mod:`pypto.targets.builtin`); :func:`pypto.plugins.targets` lists every declared target and
:func:`pypto.plugins.get_target` finds one by name.
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

    def extend(
        self, name: str, *passes: tuple[str, LoopPass], description: str = "", before: str | None = None
    ) -> Target:
        """A new target called ``name``: this one's passes and machine, then ``passes`` (each a
        ``(stage name, LoopKernel -> LoopKernel)`` pair), or with ``before=`` a stage of this target,
        ``passes`` just before that stage. A plugin's variant of a core target."""
        taken = {n for n, _ in self.passes}
        if before is not None and before not in taken:
            raise ValueError(
                f"Target.extend: target '{self.name}' has no stage '{before}' (its stages: {', '.join(n for n, _ in self.passes)})"
            )
        for stage, fn in passes:
            if not (isinstance(stage, str) and stage.isidentifier()) or not callable(fn):
                raise TypeError(f"Target.extend: each pass is a (stage name, function) pair, got {(stage, fn)!r}")
            if stage in taken:
                raise ValueError(f"Target.extend: target '{self.name}' already has a stage named '{stage}'")
            taken.add(stage)
        at = len(self.passes) if before is None else [n for n, _ in self.passes].index(before)
        ordered = (*self.passes[:at], *passes, *self.passes[at:])
        return Target(name, ordered, description or self.description, self.machine)


__all__ = ["Target", "LoopPass"]
