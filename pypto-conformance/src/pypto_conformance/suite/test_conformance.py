"""Every backend against the catalogue, the differential fuzzer and its own declaration."""

from __future__ import annotations

import pytest

from pypto_conformance.backends import declaration_problems
from pypto_conformance.fuzz import run_campaign
from pypto_conformance.runner import Outcome, run_array_case, run_case, run_gradient_case


def _fail_unless_ok(outcome: Outcome) -> None:
    if not outcome.ok:
        pytest.fail(outcome.message, pytrace=False)


def test_case(conformance_case, conformance_settings, conformance_record):
    """One catalogue case, one dtype, one backend: every size agrees with the NumPy reference."""
    p = conformance_case
    tolerance = conformance_settings.tolerance_for(p.target, p.case.name, p.case.tolerances)
    outcome = run_case(p.case, p.dtype, p.target.name, lambda dt: tolerance(dt, p.case.functions))
    conformance_record(outcome)
    _fail_unless_ok(outcome)


def test_array_case(conformance_array, conformance_settings, conformance_record):
    """One array-API program, one dtype, one backend: every size agrees with the NumPy reference."""
    p = conformance_array
    tolerance = conformance_settings.tolerance_for(p.target, p.case.name, p.case.tolerances)
    outcome = run_array_case(p.case, p.dtype, p.target.name, tolerance)
    conformance_record(outcome)
    _fail_unless_ok(outcome)


def test_gradient_case(conformance_gradient, conformance_record):
    """One gradient case, one dtype, one backend: pt.grad agrees with finite differences of NumPy."""
    p = conformance_gradient
    outcome = run_gradient_case(p.case, p.dtype, p.target.name)
    conformance_record(outcome)
    _fail_unless_ok(outcome)


def test_fuzz(conformance_fuzz, conformance_settings, conformance_record):
    """Random kernels of one dtype family agree with an independent NumPy evaluation."""
    p = conformance_fuzz
    outcome = run_campaign(
        p.target.name,
        p.family,
        frozenset(p.target.dtypes),
        conformance_settings.examples_per_family(p.target),
        conformance_settings.tolerance_for(p.target, "fuzz"),
    )
    conformance_record(outcome)
    _fail_unless_ok(outcome)


def test_declaration(conformance_backend, conformance_record):
    """The backend's declared capabilities are well-formed (dtypes known, fp64 consistent, tolerances valid)."""
    problems = declaration_problems(conformance_backend.target)
    outcome = Outcome(ok=not problems)
    if problems:
        outcome.message = f"backend '{conformance_backend.target.name}' declares: " + "; ".join(problems)
    conformance_record(outcome)
    _fail_unless_ok(outcome)
