"""The conformance table: case × dtype × backend → result, largest errors, and why (plain text)."""

from __future__ import annotations

from collections.abc import Sequence

from .results import Record, headline

COLUMNS = ("case", "dtype", "backend", "result", "max abs err", "max rel err", "note")
RESULT_WORDS = {
    "passed": "pass",
    "failed": "FAIL",
    "error": "ERROR",
    "skipped": "skip",
    "xfailed": "xfail",
    "xpassed": "XPASS",
}


def _err(v: float | None) -> str:
    return "-" if v is None else f"{v:.2e}"


def _note(r: Record, width: int) -> str:
    if r.outcome in ("skipped", "xfailed", "xpassed"):
        text = r.reason
    elif r.outcome in ("failed", "error"):
        text = headline(r.message, width)
    elif r.details.get("examples"):
        text = f"{r.details['examples']} random kernels"
    else:
        text = ""
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(records: Sequence[Record], note_width: int = 100) -> str:
    """Rows in run order, columns aligned; an empty string when there is nothing to show."""
    if not records:
        return ""
    rows = [
        (r.case, r.dtype, r.backend, RESULT_WORDS.get(r.outcome, r.outcome), _err(r.max_abs_error),
         _err(r.max_rel_error), _note(r, note_width))
        for r in records
    ]  # fmt: skip
    widths = [max(len(str(row[k])) for row in [COLUMNS, *rows]) for k in range(len(COLUMNS))]
    lines = []
    for row in [COLUMNS, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row, widths)]
        lines.append("  ".join(cells).rstrip())
        if row is COLUMNS:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_summary(records: Sequence[Record]) -> str:
    """``233 passed, 2 failed, 4 skipped`` (outcomes that occurred, in a fixed order)."""
    counts: dict[str, int] = {}
    for r in records:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    return ", ".join(f"{counts[k]} {k}" for k in order if k in counts) or "no results"
