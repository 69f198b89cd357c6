"""Collecting one record per result (case × dtype × backend) from pytest, and the JSON report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ._version import __version__

# pytest stashes: the result of a conformance test, and the run's collector
OUTCOME_KEY = pytest.StashKey[Any]()

OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


@dataclass
class Record:
    """One row of the conformance table."""

    case: str
    dtype: str
    backend: str
    outcome: str
    reason: str = ""
    message: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    tolerances: dict[str, dict[str, float]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    nodeid: str = ""


def headline(message: str, limit: int = 160) -> str:
    """The most telling line of a failure message: the first problem it lists, shortened."""
    lines = [ln.strip(" -") for ln in message.strip().splitlines() if ln.strip()]
    line = lines[1] if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return text.removeprefix("Skipped: ")


def forbid_silent_skip(item: pytest.Item, report: pytest.TestReport) -> None:
    """Turn a skip that no capability and no xfail entry decided into a failure.

    The suite's own skips are marks added at collection; anything else that skips a result (a
    backend raising ``pytest.skip``, a fixture skipping) would let a backend pass a case it claims
    to support without running it.
    """
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    if report.when == "setup" and item.get_closest_marker("skip") is not None:
        return
    reason = _skip_reason(report)
    report.outcome = "failed"
    report.longrepr = (
        f"a conformance result was skipped ({reason!r}) without a capability or an xfail-file entry "
        "saying so; declare it (Capabilities) or list it in --pypto-xfails with a reason"
    )


class ResultCollector:
    """A pytest plugin object that turns test reports of the suite into :class:`Record` rows."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    @staticmethod
    def target_of(item: pytest.Item) -> tuple[str, str, str] | None:
        """(case, dtype, backend) for an item of the suite, None for any other test."""
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            key = getattr(value, "result_key", None)
            if key is not None:
                return key
        return None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        made = yield
        report: pytest.TestReport = made.get_result()
        key = self.target_of(item)
        if key is None:
            return
        forbid_silent_skip(item, report)
        outcome = item.stash.get(OUTCOME_KEY, None)
        record = self._record(key, report, outcome)
        if record is not None:
            record.nodeid = item.nodeid
            self.records.append(record)

    def _record(self, key: tuple[str, str, str], report: pytest.TestReport, outcome: Any) -> Record | None:
        case, dtype, backend = key
        rec = Record(case, dtype, backend, "passed", duration=report.duration)
        if outcome is not None:
            rec.max_abs_error, rec.max_rel_error = outcome.max_abs, outcome.max_rel
            rec.tolerances = {dt: tol.as_dict() for dt, tol in outcome.tolerances.items()}
            rec.details = dict(outcome.details)
            rec.message = outcome.message
        wasxfail = getattr(report, "wasxfail", None)
        if report.when == "setup":
            if report.skipped:
                rec.outcome, rec.reason = "skipped", _skip_reason(report)
            elif report.failed:
                rec.outcome, rec.message = "error", report.longreprtext
            else:
                return None
        elif report.when == "call":
            if wasxfail is not None:
                rec.outcome = "xfailed" if report.skipped else "xpassed"
                rec.reason = wasxfail
            elif report.passed:
                rec.outcome = "passed"
            else:
                rec.outcome = "failed"
                rec.message = rec.message or report.longreprtext
        else:
            if not report.failed:
                return None
            rec.outcome, rec.message = "error", report.longreprtext
        return rec

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for r in self.records:
            counts[r.outcome] += 1
        return counts


def write_report(path: Path, records: list[Record], backends: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """Write the JSON report: versions, backends, a summary and every record."""
    import pypto

    counts = dict.fromkeys(OUTCOMES, 0)
    for r in records:
        counts[r.outcome] += 1
    data = {
        "pypto_conformance": __version__,
        "pypto_core": pypto.__version__,
        **extra,
        "backends": backends,
        "summary": counts,
        "results": [asdict(r) for r in records],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
