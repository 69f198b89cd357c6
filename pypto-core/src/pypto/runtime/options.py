"""Keyword options of ``@pt.kernel`` and ``@pt.jit`` checked when the function is decorated.

The core reads ``executor``, ``fastmath`` and ``schedule`` (and ``dims`` for ``@pt.jit``); any other
keyword must be one a backend declares in ``Capabilities.options`` (and reads with
``KernelOptions.get``). Anything else is a typo or an option no installed backend knows: an
:class:`~pypto.errors.ArgumentError` naming it, with the closest known names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pypto.errors import ArgumentError

KERNEL_OPTIONS = ("executor", "fastmath", "schedule", "boundscheck", "deterministic")
JIT_OPTIONS = (*KERNEL_OPTIONS, "dims", "precision")


def backend_options() -> dict[str, list[str]]:
    """Option name -> the installed backends that declare it."""
    from pypto.plugins import get_registry

    out: dict[str, list[str]] = {}
    for name, entry in get_registry().backends.items():
        for opt in getattr(entry.spec.capabilities, "options", ()):
            out.setdefault(opt, []).append(name)
    return out


def check_options(where: str, given: Mapping[str, Any], core: Iterable[str]) -> None:
    """Raise an :class:`ArgumentError` for the first option in ``given`` that neither the core nor a backend reads."""
    if not given:
        return
    declared = backend_options()
    known = [*core, *sorted(declared)]
    for name in given:
        if name in declared:
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        raise ArgumentError(
            f"{where}: unknown option {name!r}" + (f"; did you mean {' or '.join(map(repr, close))}?" if close else ""),
            param=name,
            expected="one of: " + ", ".join(known),
            got=name,
            fix=f"use {close[0]}=" if close else "remove it (no installed backend reads it)",
        )
