"""The compiler pipeline: one ordered list of passes, read top to bottom.

Each pass takes a :class:`~pypto.ir.kernel.KernelIR` and returns a new one; the verifier runs after
every pass; ``PYPTO_DUMP_IR=1`` prints the IR after each. Then ``lower`` produces the loop IR
(:class:`~pypto.ir.loops.LoopKernel`) and ``optimize_loops`` tidies it; that is what compiled
backends render.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from ..ir.kernel import KernelIR
from ..ir.loops import LoopKernel
from ..ir.printer import format_kernel, format_loops
from .fuse import fuse
from .infer_shapes import infer_shapes
from .infer_types import infer_types
from .lower import lower
from .materialize import materialize_temporaries
from .optimize_loops import optimize_loops
from .schedule import schedule, split_reductions
from .simplify import simplify
from .verify import verify_kernel, verify_loops

PASSES: list[tuple[str, Callable[[KernelIR], KernelIR]]] = [
    ("infer_types", infer_types),            # dtypes, weak scalars, explicit casts
    ("infer_shapes", infer_shapes),          # axis extents, size and bounds checks
    ("simplify", simplify),                  # constant folding, identities, CSE
    ("fuse", fuse),                          # stores over one domain share a loop nest
    ("materialize", materialize_temporaries),  # temporaries for misplaced reductions, self-reads
    ("split_reductions", split_reductions),  # full reductions: fixed blocks, ordered combine
    ("schedule", schedule),                  # parallel and vector loops
]  # fmt: skip

LOOP_PASSES: list[tuple[str, Callable[[LoopKernel], LoopKernel]]] = [
    ("optimize_loops", optimize_loops),      # hoist invariant arithmetic, reciprocals of invariant divisors
]  # fmt: skip

STAGES: tuple[str, ...] = ("traced", *(name for name, _ in PASSES), "lower", *(name for name, _ in LOOP_PASSES))

REFERENCE_STAGE = "simplify"  # the NumPy reference evaluates the program as written, before scheduling


def dump_enabled() -> bool:
    return os.environ.get("PYPTO_DUMP_IR", "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class Compilation:
    """Every stage of one kernel's compilation: tensor-level IR by pass name, then the loop IR."""

    stages: dict[str, KernelIR]
    loop_stages: dict[str, LoopKernel]

    @property
    def final(self) -> KernelIR:
        return self.stages[PASSES[-1][0]]

    @property
    def loops(self) -> LoopKernel:
        """The loop IR after the last loop pass: what backends render."""
        return self.loop_stages[STAGES[-1]]

    def text(self, stage: str) -> str:
        if stage in self.loop_stages:
            return format_loops(self.loop_stages[stage])
        return format_kernel(self.stages[stage])


def run_pipeline(traced: KernelIR, *, noalias: bool = True, dump: bool | None = None) -> Compilation:
    """Run every pass on a traced kernel, verifying (and optionally printing) after each."""
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
    verify_loops(loops)
    if dump:
        _print("lower", format_loops(loops))
    loop_stages = {"lower": loops}
    for name, fn in LOOP_PASSES:
        loops = fn(loops)
        verify_loops(loops, name)
        loop_stages[name] = loops
        if dump:
            _print(name, format_loops(loops))
    return Compilation(stages, loop_stages)


def _print(stage: str, text: str) -> None:
    print(f"--- pypto IR after {stage} ---\n{text}", file=sys.stderr)


__all__ = ["PASSES", "STAGES", "Compilation", "run_pipeline", "REFERENCE_STAGE"]
