"""A fuzz campaign: hypothesis draws programs for one dtype family and checks each on a backend."""

from __future__ import annotations

import zlib

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

from ..runner import Outcome, describe_exception
from .check import FuzzMismatch, FuzzStats, ToleranceFor, check_program
from .strategies import programs


def run_campaign(
    backend: str, family: str, dtypes: frozenset[str], max_examples: int, tolerance_for: ToleranceFor
) -> Outcome:
    """Check ``max_examples`` derandomised random kernels of ``family`` on ``backend``.

    The examples depend only on the family and the dtypes the backend supports, so every backend
    sees the same kernels. On a mismatch hypothesis shrinks the kernel to a small one first.
    """
    stats = FuzzStats()

    @settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,  # one smallest failing kernel, not a group of them
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    @seed(zlib.crc32(family.encode()))  # fixed, but different per family: int32 and int64 explore different kernels
    @given(programs(family, dtypes))
    def campaign(program):
        check_program(program, backend, tolerance_for, stats)

    outcome = Outcome(ok=True)
    try:
        campaign()
    except FuzzMismatch as e:
        outcome.ok = False
        outcome.message = f"fuzz [{family}] on backend '{backend}': smallest failing kernel found:\n{e}"
    except Exception as e:  # hypothesis errors (flaky results, ...) are failures too
        outcome.ok = False
        outcome.message = f"fuzz [{family}] on backend '{backend}': {describe_exception(e, 2000)}"
    outcome.absorb(stats.max_abs, stats.max_rel)
    outcome.details = {
        "examples": stats.examples,
        "elements_compared": stats.compared,
        "elements_ambiguous": stats.skipped_elements,
    }
    return outcome
