"""The compiler pipeline: one ordered list of passes, read top to bottom.

    traced kernel ──PASSES──▶ scheduled tensor IR ──lower──▶ loop IR ──LOOP_PASSES──▶
        ──target passes (cpu-simd, simt: see pypto.targets)──▶ what a backend renders

Each pass takes an IR record and returns a new one (never mutating its input); the verifier runs
after every pass; ``PYPTO_DUMP_IR=1`` prints the IR after each, and ``kernel.ir(stage)`` shows it
after any one. :func:`pipeline` lists every stage for a target; ``pypto passes`` prints it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pypto import _env
from pypto.ir.kernel import KernelIR
from pypto.ir.loops import LoopKernel
from pypto.ir.printer import format_kernel, format_loops
from pypto.passes.complex import complex_pairs
from pypto.passes.fuse import fuse
from pypto.passes.halves import half_compute
from pypto.passes.hoist import hoist_broadcasts
from pypto.passes.infer_shapes import infer_shapes
from pypto.passes.infer_types import infer_types
from pypto.passes.lower import lower
from pypto.passes.materialize import materialize_temporaries
from pypto.passes.memory import plan_memory
from pypto.passes.optimize_loops import optimize_loops
from pypto.passes.prologues import contraction_operands
from pypto.passes.schedule import schedule, schedule_scatters, split_reductions
from pypto.passes.simplify import simplify
from pypto.passes.softmax import online_softmax
from pypto.passes.unit_loops import drop_unit_loops
from pypto.passes.verify import verify_kernel, verify_loops
from pypto.targets import Target

PASSES: list[tuple[str, Callable[[KernelIR], KernelIR]]] = [
    ("infer_types", infer_types),            # dtypes, weak scalars, explicit casts
    ("half_compute", half_compute),          # float16/bfloat16: computed in float32, rounded once on store
    ("infer_shapes", infer_shapes),          # axis extents, size and bounds checks
    ("complex_pairs", complex_pairs),        # complex values: pairs of floats (real, imaginary)
    ("simplify", simplify),                  # constant folding, identities, CSE
    ("fuse", fuse),                          # stores over one domain share a loop nest
    ("materialize", materialize_temporaries),  # temporaries for misplaced reductions, self-reads
    ("contraction_operands", contraction_operands),  # computed factors of a contraction: a nest of their own
    ("hoist_broadcasts", hoist_broadcasts),  # values an outer loop would recompute: a nest of their own
    ("unit_loops", drop_unit_loops),         # loops of one iteration leave their nests
    ("split_reductions", split_reductions),  # full reductions: fixed blocks, ordered combine
    ("schedule", schedule),                  # parallel and vector loops
    ("schedule_scatters", schedule_scatters),  # scatters on threads: owner runs, private blocks, or serial
    ("online_softmax", online_softmax),      # long softmax rows: online max/sum variant
    ("plan_memory", plan_memory),            # nests ordered to end scratch lives early; disjoint ones share
]  # fmt: skip

LOWER = "lower"  # scheduled tensor IR -> loop IR (pypto.passes.lower)

LOOP_PASSES: list[tuple[str, Callable[[LoopKernel], LoopKernel]]] = [
    ("optimize_loops", optimize_loops),      # hoist invariant arithmetic, reciprocals of invariant divisors
]  # fmt: skip

STAGES: tuple[str, ...] = ("traced", *(name for name, _ in PASSES), LOWER, *(name for name, _ in LOOP_PASSES))
"""The stages every kernel goes through; a backend's target appends its own (see :func:`pipeline`)."""

REFERENCE_STAGE = "simplify"  # the NumPy reference evaluates the program as written, before scheduling


def pipeline(target: Target | None = None) -> list[tuple[str, str]]:
    """Every stage in order for ``target``, as ``(name, where it is implemented)`` pairs."""
    out = [("traced", "pypto.lang.tracer.trace")]
    out += [(name, f"{fn.__module__}.{fn.__name__}") for name, fn in PASSES]
    out.append((LOWER, f"{lower.__module__}.{lower.__name__}"))
    out += [(name, f"{fn.__module__}.{fn.__name__}") for name, fn in LOOP_PASSES]
    if target is not None:
        out += [(name, f"{fn.__module__}.{fn.__name__}  [{target.name}]") for name, fn in target.passes]
    return out


def stages(target: Target | None = None) -> tuple[str, ...]:
    """The stage names accepted by ``kernel.ir`` for a backend of ``target``."""
    return STAGES + (tuple(name for name, _ in target.passes) if target is not None else ())


def dump_enabled() -> bool:
    return _env.flag("PYPTO_DUMP_IR")


@dataclass(frozen=True)
class Compilation:
    """Every stage of one kernel's compilation: tensor-level IR by pass name, then the loop IR;
    the stages of each target are added the first time a backend of that target asks for them."""

    stages: dict[str, KernelIR]
    loop_stages: dict[str, LoopKernel]
    dump: bool = False
    _targets: dict[str, dict[str, LoopKernel]] = field(default_factory=dict, repr=False)
    _unverified: list[tuple[str, LoopKernel]] = field(default_factory=list, repr=False)

    def verify(self) -> None:
        """Verify the loop IR of every stage run so far and not yet verified (:func:`run_pipeline` verifies
        the tensor stages at once; the loop stages, most of the verifier's time, before anything is built
        from them: a kernel found in the disk cache was built from the same, verified IR)."""
        while self._unverified:
            name, loops = self._unverified[0]
            verify_loops(loops, name)
            self._unverified.pop(0)

    @property
    def final(self) -> KernelIR:
        """The scheduled tensor IR (after the last tensor pass)."""
        return self.stages[PASSES[-1][0]]

    @property
    def loops(self) -> LoopKernel:
        """The loop IR after the last core loop pass (before any target pass)."""
        return self.loop_stages[STAGES[-1]]

    def target_stages(self, target: Target | None) -> dict[str, LoopKernel]:
        """The loop IR after each of ``target``'s passes (run, verified and dumped once)."""
        if target is None:
            return {}
        done = self._targets.get(target.name)
        if done is None:
            done = {}
            loops = self.loops
            for name, fn in target.passes:
                loops = fn(loops)
                self._unverified.append((name, loops))
                done[name] = loops
                if self.dump:
                    self.verify()
                    _print(name, format_loops(loops))
            self._targets[target.name] = done
        return done

    def for_target(self, target: Target | None) -> LoopKernel:
        """The loop IR a backend of ``target`` renders: after the target's last pass."""
        done = self.target_stages(target)
        return done[target.passes[-1][0]] if target is not None and target.passes else self.loops

    def text(self, stage: str, target: Target | None = None) -> str:
        if stage in self.loop_stages:
            return format_loops(self.loop_stages[stage])
        if stage in self.stages:
            return format_kernel(self.stages[stage])
        return format_loops(self.target_stages(target)[stage])


def run_pipeline(traced: KernelIR, *, noalias: bool = True, dump: bool | None = None) -> Compilation:
    """Run every core pass on a traced kernel, verifying (and optionally printing) after each: the tensor
    stages at once, the loop stages when :meth:`Compilation.verify` is called (before a build)."""
    dump = dump_enabled() if dump is None else dump
    stages: dict[str, KernelIR] = {"traced": traced}
    done: set[str] = set()
    verify_kernel(traced, "traced", done)
    if dump:
        _print("traced", format_kernel(traced))
    k = traced
    for name, fn in PASSES:
        k = fn(k)
        done.add(name)
        verify_kernel(k, name, done)
        stages[name] = k
        if dump:
            _print(name, format_kernel(k))
    loops = lower(k, noalias=noalias)
    unverified = [(LOWER, loops)]
    if dump:
        _print(LOWER, format_loops(loops))
    loop_stages = {LOWER: loops}
    for name, fn in LOOP_PASSES:
        loops = fn(loops)
        unverified.append((name, loops))
        loop_stages[name] = loops
        if dump:
            _print(name, format_loops(loops))
    comp = Compilation(stages, loop_stages, dump, _unverified=unverified)
    if dump:
        comp.verify()
    return comp


def _print(stage: str, text: str) -> None:
    print(f"--- pypto IR after {stage} ---\n{text}", file=sys.stderr)


def format_pipeline(target: Target | None = None) -> str:
    """The pipeline for ``target`` as a numbered list (what ``pypto passes`` prints)."""
    rows: list[Any] = pipeline(target)
    width = max(len(n) for n, _ in rows)
    return "\n".join(f"{i:2d}. {n:<{width}}  {where}" for i, (n, where) in enumerate(rows))


__all__ = [
    "PASSES", "LOOP_PASSES", "STAGES", "Compilation", "run_pipeline", "REFERENCE_STAGE", "pipeline", "stages",
    "format_pipeline",
]  # fmt: skip
