"""Expected failures: the only way besides declared capabilities for a backend to not pass a case.

An xfail file (TOML, or JSON by suffix) lists entries; each needs a ``reason``::

    [[xfail]]
    case = "softmax*"          # glob on the case name ("fuzz" for the differential fuzzer)
    backend = "openmp"         # glob, default "*"
    dtype = "float32"          # glob, default "*"
    reason = "online softmax loses the NaN of an all -inf row (issue #12)"
    run = true                 # false: do not run it at all (it crashes); reported as skipped
    strict = true              # an unexpected pass fails the run, so stale entries get noticed
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .datafile import DataFileError, load_data_file

_KEYS = {"case", "backend", "dtype", "reason", "run", "strict"}


@dataclass(frozen=True)
class XfailEntry:
    """One expected failure: which results it covers, why, and whether to run them."""

    case: str
    reason: str
    backend: str = "*"
    dtype: str = "*"
    run: bool = True
    strict: bool = True

    def matches(self, case: str, dtype: str, backend: str) -> bool:
        """Whether this entry covers ``case`` × ``dtype`` × ``backend``."""
        return (
            fnmatch.fnmatchcase(case, self.case)
            and fnmatch.fnmatchcase(dtype, self.dtype)
            and fnmatch.fnmatchcase(backend, self.backend)
        )

    def describe(self) -> str:
        return f"case={self.case!r} dtype={self.dtype!r} backend={self.backend!r}"


def _entry(raw: Any, where: str) -> XfailEntry:
    if not isinstance(raw, Mapping):
        raise DataFileError(f"{where}: expected a table, got {raw!r}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise DataFileError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise DataFileError(f"{where}: every entry needs a non-empty 'reason' saying why it fails")
    if not isinstance(raw.get("case"), str) or not raw["case"]:
        raise DataFileError(f"{where}: 'case' (a case name or glob) is required")
    for key in ("backend", "dtype"):
        if key in raw and not isinstance(raw[key], str):
            raise DataFileError(f"{where}: '{key}' must be a string (a name or a glob)")
    for key in ("run", "strict"):
        if key in raw and not isinstance(raw[key], bool):
            raise DataFileError(f"{where}: '{key}' must be true or false")
    return XfailEntry(
        case=raw["case"],
        reason=reason.strip(),
        backend=raw.get("backend", "*"),
        dtype=raw.get("dtype", "*"),
        run=raw.get("run", True),
        strict=raw.get("strict", True),
    )


def parse_xfails(data: Mapping[str, Any], source: str) -> list[XfailEntry]:
    """The entries of an xfail file's content (the ``xfail`` array of tables)."""
    unknown = set(data) - {"xfail"}
    if unknown:
        raise DataFileError(f"{source}: unknown section(s) {sorted(unknown)}; entries go in [[xfail]] tables")
    raw = data.get("xfail", [])
    if not isinstance(raw, list):
        raise DataFileError(f"{source}: 'xfail' must be an array of tables ([[xfail]])")
    return [_entry(r, f"{source}: xfail entry {k + 1}") for k, r in enumerate(raw)]


def load_xfails(path: str | Path | None) -> list[XfailEntry]:
    """The entries of the xfail file at ``path``; none without a file."""
    if path is None:
        return []
    return parse_xfails(load_data_file(path), str(path))


def find_xfail(entries: Sequence[XfailEntry], case: str, dtype: str, backend: str) -> XfailEntry | None:
    """The first entry covering the result, if any."""
    for e in entries:
        if e.matches(case, dtype, backend):
            return e
    return None
