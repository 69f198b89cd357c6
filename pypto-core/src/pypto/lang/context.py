"""Which kernel is being traced on this thread (set by the tracer, read by the functions)."""

from __future__ import annotations

import threading
from typing import Any

_state = threading.local()


def active_tracer() -> Any:
    """The :class:`~pypto.lang.tracer.Tracer` running a kernel body on this thread, or ``None``."""
    return getattr(_state, "tracer", None)


def set_active_tracer(tracer: Any) -> Any:
    """Make ``tracer`` the active one (``None``: no kernel is traced); returns the previous one."""
    previous = getattr(_state, "tracer", None)
    _state.tracer = tracer
    return previous
