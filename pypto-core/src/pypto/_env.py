"""The ``PYPTO_*`` environment variables, read in one place (documented in docs/executors.md)."""

from __future__ import annotations

import os

_RAW = getattr(os.environ, "_data", None)  # os.environ.get costs ~0.6 us; the raw mapping ~20 ns
_EXECUTOR_KEY = os.environ.encodekey("PYPTO_EXECUTOR") if hasattr(os.environ, "encodekey") else None


def flag(name: str) -> bool:
    """Whether a yes/no variable is set to yes: anything but unset, empty, ``0``, ``false``, ``no``."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def executor() -> str:
    """``$PYPTO_EXECUTOR``, or ``"auto"`` when unset or empty."""
    return os.environ.get("PYPTO_EXECUTOR", "").strip() or "auto"


def executor_raw() -> object:
    """The raw value of ``$PYPTO_EXECUTOR`` without decoding it: cheap enough for every kernel call
    (it keys the fast path, which only compares it with the value it was set up with)."""
    if _RAW is not None and _EXECUTOR_KEY is not None:
        return _RAW.get(_EXECUTOR_KEY)
    return os.environ.get("PYPTO_EXECUTOR")


def progress() -> bool | None:
    """``$PYPTO_PROGRESS``: ``"0"`` never shows compile progress, ``"1"`` always does; unset or anything else
    (None): only when stderr is a terminal."""
    v = os.environ.get("PYPTO_PROGRESS", "").strip()
    return False if v == "0" else True if v == "1" else None


def compile_jobs() -> int | None:
    """``$PYPTO_COMPILE_JOBS``: how many compiler processes may build one kernel at once (``1``: one
    translation unit); None when unset or not a positive integer (the CPUs this process may use)."""
    v = os.environ.get("PYPTO_COMPILE_JOBS", "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else None


def adapt_threads() -> bool:
    """``$PYPTO_ADAPT_THREADS``: False when set to ``0``/``false``/``no`` (parallel regions always take the whole
    team, even while other processes hold the cores); True otherwise."""
    return os.environ.get("PYPTO_ADAPT_THREADS", "").strip().lower() not in ("0", "false", "no")
