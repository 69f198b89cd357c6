"""What one conformance run is configured with: backends, tolerances, expected failures, fuzz budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .backends import BackendTarget, SelectionError, capability_skip, select_backends
from .datafile import DataFileError
from .tolerances import Tolerance, ToleranceTable, load_tolerances
from .xfails import XfailEntry, find_xfail, load_xfails

DEFAULT_MAX_EXAMPLES = 300
SLICES = ("full", "dtypes")  # which (case, dtype) pairs run: all, or each case in one dtype taken in turn


@dataclass
class ConformanceSettings:
    """The run's configuration, read once from the command line (``--pypto-*`` options)."""

    backend_option: str | None = None
    tolerances: ToleranceTable = field(default_factory=load_tolerances)
    xfails: list[XfailEntry] = field(default_factory=list)
    max_examples: int = DEFAULT_MAX_EXAMPLES
    report: Path | None = None
    slice: str = "full"
    used_xfails: set[XfailEntry] = field(default_factory=set)
    _targets: list[BackendTarget] | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> ConformanceSettings:
        """Read and validate the options; a bad file or value is a usage error naming it."""
        opt = config.getoption
        try:
            tolerances = load_tolerances(opt("pypto_tolerances"))
            xfails = load_xfails(opt("pypto_xfails"))
        except DataFileError as e:
            raise pytest.UsageError(str(e)) from None
        max_examples = opt("pypto_max_examples")
        if max_examples is None:
            max_examples = DEFAULT_MAX_EXAMPLES
        if max_examples < 1:
            raise pytest.UsageError(f"--pypto-max-examples must be at least 1, got {max_examples}")
        report = opt("pypto_report")
        return cls(opt("pypto_backend"), tolerances, xfails, max_examples, Path(report) if report else None,
                   opt("pypto_slice") or "full")  # fmt: skip

    def targets(self) -> list[BackendTarget]:
        """The selected backends (resolved on first use, so unrelated pytest runs load no plugins)."""
        if self._targets is None:
            try:
                self._targets = select_backends(self.backend_option)
            except SelectionError as e:
                raise pytest.UsageError(str(e)) from None
        return self._targets

    def marks(
        self, case: str, dtype: str, target: BackendTarget, required: Iterable[str], slow: bool = False
    ) -> list[Any]:
        """The pytest marks of one result: ``slow``, a capability skip, or an xfail-file entry."""
        marks: list[Any] = [pytest.mark.slow] if slow else []
        reason = capability_skip(target, required)
        if reason is not None:
            return [*marks, pytest.mark.skip(reason=reason)]
        entry = find_xfail(self.xfails, case, dtype, target.name)
        if entry is not None:
            self.used_xfails.add(entry)
            if not entry.run:
                return [*marks, pytest.mark.skip(reason=f"not run (xfail file, run = false): {entry.reason}")]
            marks.append(pytest.mark.xfail(reason=entry.reason, strict=entry.strict, run=True))
        return marks

    def examples_per_family(self, target: BackendTarget) -> int:
        """Fuzz examples for each dtype family ``target`` supports: ``max_examples`` per backend in all."""
        from .fuzz import FAMILIES

        families = [f for f in FAMILIES if capability_skip(target, {f}) is None]
        return math.ceil(self.max_examples / max(1, len(families)))

    def tolerance_for(
        self, target: BackendTarget, case: str, case_declared: Mapping[str, Any] | None = None
    ) -> Callable[..., Tolerance]:
        """``f(dtype, functions=())`` giving the tolerance of a result of ``case`` on ``target``."""

        def resolve(dtype: str, functions: Iterable[str] = ()) -> Tolerance:
            return self.tolerances.resolve(
                dtype,
                backend=target.name,
                backend_declared=target.tolerances,
                case=case,
                case_declared=case_declared,
                functions=functions,
            )

        return resolve
