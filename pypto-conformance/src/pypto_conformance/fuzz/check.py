"""Running one random kernel on a backend and comparing it with the independent NumPy evaluation."""

from __future__ import annotations

import hashlib
import linecache
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

import pypto as pt

from ..compare import LargestErrors, compare_arrays
from ..runner import call_kernel, fresh_output
from ..tolerances import Tolerance
from .evaluate import evaluate
from .tree import Program

M, N = pt.dims("M N")

ToleranceFor = Callable[[str, Iterable[str]], Tolerance]
SAFETY = 2.0  # the reference and the backend may each be off by the error bound


class FuzzMismatch(AssertionError):
    """A backend disagreed with the NumPy evaluation of a random kernel (or raised)."""


@dataclass
class FuzzStats(LargestErrors):
    """What a campaign saw: examples run, elements compared and left out, the largest errors."""

    examples: int = 0
    compared: int = 0
    skipped_elements: int = 0


def build_kernel(program: Program) -> Callable[..., None]:
    """The program's kernel function, compiled from its source (registered with linecache so that
    tracebacks and pypto's own error messages can quote it)."""
    source = program.source()
    filename = f"<pypto-conformance fuzz {hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"pt": pt, "M": M, "N": N}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["fuzz_kernel"]


def program_inputs(program: Program) -> dict[str, np.ndarray]:
    """The input arrays of a program, drawn from its seed."""
    rng = np.random.default_rng(program.seed)
    arrays = {}
    for t in program.tensors:
        arrays[t.name] = t.values(rng, program.m, program.n)
        if t.index_name is not None:
            arrays[t.index_name] = t.index_values(rng, program.m, program.n)
    return arrays


def check_program(program: Program, backend: str, tolerance_for: ToleranceFor, stats: FuzzStats) -> None:
    """Run ``program`` on ``backend``; raise :class:`FuzzMismatch` if it disagrees with NumPy."""
    kernel = pt.kernel(executor=backend)(build_kernel(program))
    arrays = program_inputs(program)
    want = evaluate(program, arrays)
    out = fresh_output(want.v)
    raised = call_kernel(kernel, {**{k: v.copy() for k, v in arrays.items()}, "out": out})
    if raised is not None:
        raise FuzzMismatch(f"{program!r}{raised}")
    checked = np.isfinite(want.e)
    tol = tolerance_for(program.out_dtype, program.root.functions)
    cmp = compare_arrays("out", out, want.v, tol, allowance=np.where(checked, SAFETY * want.e, 0.0), checked=checked)
    stats.examples += 1
    stats.compared += int(checked.sum())
    stats.skipped_elements += int(checked.size - checked.sum())
    stats.absorb(cmp.max_abs, cmp.max_rel)
    if not cmp.ok:
        raise FuzzMismatch(f"{program!r}{cmp.problem}")
