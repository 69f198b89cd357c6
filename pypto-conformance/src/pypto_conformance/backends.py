"""The backends the suite runs against: every installed pypto backend, or the ones named.

Backends come from pypto's plugin registry, so a newly installed backend plugin is picked up
without any change here. ``capability_skip`` turns a backend's declared capabilities into the
reason a result is skipped; nothing else may skip a result (see :mod:`pypto_conformance.xfails`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .tolerances import DTYPE_NAMES


class SelectionError(ValueError):
    """``--pypto-backend`` names a backend that is not installed or cannot run here."""


@dataclass(frozen=True)
class BackendTarget:
    """A backend as the suite sees it: name, availability and declared capabilities."""

    name: str
    version: str
    available: bool
    reason: str
    dtypes: frozenset[str]
    fp64: bool
    tolerances: Mapping[str, Any] = field(default_factory=dict)
    plugin: str = ""
    distribution: str | None = None
    capabilities: Any = None  # the BackendSpec's Capabilities object, kept for declaration checks

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description for reports."""
        return {
            "name": self.name,
            "version": self.version,
            "available": self.available,
            "reason": self.reason,
            "dtypes": sorted(self.dtypes),
            "fp64": self.fp64,
            "tolerances": {k: list(v) if isinstance(v, tuple) else v for k, v in dict(self.tolerances).items()},
            "plugin": self.plugin,
            "distribution": self.distribution,
        }


def installed_backends() -> list[BackendTarget]:
    """Every backend pypto knows, highest priority first, with availability probed now."""
    from pypto.plugins import get_registry

    targets = []
    for entry in get_registry().ordered():
        caps = entry.spec.capabilities
        av = entry.availability
        targets.append(
            BackendTarget(
                name=entry.spec.name,
                version=str(entry.spec.version),
                available=bool(av.available),
                reason=av.reason,
                dtypes=frozenset(getattr(caps, "dtypes", DTYPE_NAMES)),
                fp64=bool(getattr(caps, "fp64", True)),
                tolerances=dict(getattr(caps, "tolerances", {}) or {}),
                plugin=entry.plugin,
                distribution=entry.distribution,
                capabilities=caps,
            )
        )
    return targets


def select_backends(option: str | None, installed: list[BackendTarget] | None = None) -> list[BackendTarget]:
    """The backends ``--pypto-backend`` asks for.

    ``None`` or ``all``: every installed backend (unavailable ones are reported as skipped, with
    their reason). Otherwise a comma-separated list of names, each of which must be installed and
    available: a backend asked for by name never silently skips.
    """
    installed = installed_backends() if installed is None else installed
    if option is None or option.strip() in ("", "all"):
        return installed
    by_name = {t.name: t for t in installed}
    chosen = []
    for name in (n.strip() for n in option.split(",")):
        if not name:
            continue
        target = by_name.get(name)
        if target is None:
            known = ", ".join(by_name) or "none"
            raise SelectionError(f"--pypto-backend {name}: no such pypto backend is installed (installed: {known})")
        if not target.available:
            raise SelectionError(
                f"--pypto-backend {name}: the backend is installed but cannot run here: {target.reason}"
            )
        if target not in chosen:
            chosen.append(target)
    if not chosen:
        raise SelectionError("--pypto-backend: no backend named; pass a name, a comma-separated list or 'all'")
    return chosen


def capability_skip(target: BackendTarget, required: Iterable[str]) -> str | None:
    """Why ``target`` does not run a result needing the dtypes ``required``, or None if it does."""
    required = set(required)
    if "float64" in required and not target.fp64:
        return f"backend '{target.name}' declares fp64=False (capabilities.fp64)"
    missing = sorted(required - set(target.dtypes))
    if missing:
        return f"backend '{target.name}' does not declare dtype(s) {', '.join(missing)} (capabilities.dtypes)"
    return None


def declaration_problems(target: BackendTarget) -> list[str]:
    """What is wrong with a backend's declared capabilities (empty when they are well-formed)."""
    problems = []
    unknown = sorted(set(target.dtypes) - set(DTYPE_NAMES))
    if unknown:
        problems.append(f"capabilities.dtypes names unknown dtype(s) {unknown}; known: {', '.join(DTYPE_NAMES)}")
    if target.fp64 and "float64" not in target.dtypes:
        problems.append("capabilities.fp64 is True but 'float64' is not in capabilities.dtypes")
    if not target.fp64 and "float64" in target.dtypes:
        problems.append("capabilities.dtypes lists 'float64' but capabilities.fp64 is False")
    for dt, tol in dict(target.tolerances).items():
        if dt not in DTYPE_NAMES:
            problems.append(f"capabilities.tolerances has unknown dtype {dt!r}")
            continue
        ok = isinstance(tol, (tuple, list)) and len(tol) == 2
        ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in tol)
        if not ok:
            problems.append(f"capabilities.tolerances[{dt!r}] must be (rtol, atol) with numbers >= 0, got {tol!r}")
        elif dt not in target.dtypes:
            problems.append(f"capabilities.tolerances[{dt!r}] is given but {dt!r} is not in capabilities.dtypes")
    return problems
