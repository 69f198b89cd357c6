"""``pt.stream``: the device stream (queue) kernel launches go to, for backends that have streams.

    with pt.stream(torch.cuda.Stream()):
        softmax(x, y)              # enqueued on that stream; the call returns without waiting
    softmax(x, y, stream=s)        # the same for one call

A stream is a backend's own handle or an object that names one: an ``int``, ``torch.cuda.Stream``
(``.cuda_stream``), ``cupy.cuda.Stream`` (``.ptr``), or anything with ``__cuda_stream__``. Backends
without streams (the CPU ones) ignore it. Without a stream, a GPU backend uses the current stream of
the library whose arrays were passed (torch's or CuPy's), else the device's default stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_current: ContextVar[Any] = ContextVar("pypto_stream", default=None)


@contextlib.contextmanager
def stream(s: Any) -> Iterator[Any]:
    """Launch kernels called inside the block on ``s`` (see the module docstring)."""
    token = _current.set(s)
    try:
        yield s
    finally:
        _current.reset(token)


def current_stream() -> Any:
    """The stream set by the innermost :func:`stream` block (None outside one)."""
    return _current.get()
