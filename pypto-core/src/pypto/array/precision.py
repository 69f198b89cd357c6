"""The precision of float32 contractions (``@``, ``pt.einsum``, ``pt.matmul``) in ``@pt.jit`` programs.

* ``"float32"`` (the default): operands and accumulation in float32.
* ``"mixed"``: the operands are read as bfloat16 (rounded to nearest even: 8 bits of precision) and the
  products accumulated in float32, the arithmetic of tensor cores and of AVX-512 BF16's ``vdpbf16ps``;
  elementwise work and other reductions stay float32.
* ``"highest"``: operands widened to float64 and accumulated in float64, then rounded once to float32.

``pt.set_precision(mode)`` sets the mode for the whole process, and restores the previous one when used as a
context manager (``with pt.set_precision("mixed"): ...``); ``@pt.jit(precision=...)`` fixes it for one function
(and ``pt.grad`` of it). The mode is read when a function is traced: programs are compiled and cached per mode.
The mode of each contraction is recorded on its node of the array graph, and lowering writes it into the
kernel as conversions (``kernel.ir()`` shows them).
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Any

from pypto.errors import ArgumentError

PRECISIONS = ("float32", "mixed", "highest")

_lock = threading.Lock()
_process = "float32"  # what pt.set_precision set
_tracing: ContextVar[str | None] = ContextVar("pypto_trace_precision", default=None)


def check_precision(value: Any, where: str) -> str:
    """``value`` if it names a precision mode, else a typed error."""
    if value not in PRECISIONS:
        raise ArgumentError(
            f"{where}: unknown precision {value!r}",
            param="precision",
            expected=" or ".join(map(repr, PRECISIONS)),
            got=value,
            fix='use "mixed" for bfloat16 operands with float32 accumulation, "highest" for float64 accumulation',
        )
    return value


class set_precision:  # noqa: N801 - used like a function
    """Set the precision of float32 contractions for the process (see :mod:`pypto.array.precision`); as a
    context manager, the previous mode comes back at the end of the ``with`` block."""

    def __init__(self, mode: str):
        global _process
        check_precision(mode, "pt.set_precision")
        with _lock:
            self.previous, _process = _process, mode

    def __enter__(self) -> set_precision:
        return self

    def __exit__(self, *exc: object) -> None:
        global _process
        with _lock:
            _process = self.previous

    def __repr__(self) -> str:
        return f"pt.set_precision({_process!r})"


def get_precision() -> str:
    """The precision mode functions without a ``precision=`` of their own are compiled with."""
    return _process


def tracing(mode: str) -> Any:
    """While a function is traced: the mode its contractions record (a token for :func:`done`)."""
    return _tracing.set(mode)


def done(token: Any) -> None:
    _tracing.reset(token)


def in_trace() -> bool:
    """Whether a ``@pt.jit`` function is being traced on this thread (array-creating functions then make traced
    arrays; outside, NumPy's)."""
    return _tracing.get() is not None


def contraction_mode() -> str:
    """The mode a contraction traced now records: the traced function's, else the process's."""
    mode = _tracing.get()
    return mode if mode is not None else _process


__all__ = ["PRECISIONS", "check_precision", "contraction_mode", "get_precision", "set_precision"]
