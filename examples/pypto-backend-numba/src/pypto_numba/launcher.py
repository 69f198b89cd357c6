"""Loading generated source into Numba and calling it: a serial and a parallel compilation.

The same source is compiled twice, lazily: with ``parallel=True`` its ``prange`` loops run on
Numba's thread pool; without it they are plain loops. Each call picks one by the estimated work
of its largest parallel loop nest (``_pt_parallel_work``): starting threads costs microseconds,
more than a small kernel takes, and compiling the parallel version takes several times longer.
Importing this module imports Numba, so the plugin imports it only when a kernel is launched.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np

from pypto.errors import CompileError

from .renderer import WORK_FUNCTION

# Parallel loop nests whose estimated cost (points times cost per point, as pypto's lowering
# estimates it) is below this run on one thread: the pool's start-up costs more than it saves.
PARALLEL_MIN_WORK = 1 << 19


def namespace() -> dict[str, Any]:
    """The globals the generated source runs in (see :mod:`pypto_numba.renderer`)."""
    return {
        "_np": np,
        "_math": math,
        "_prange": numba.prange,
        "_range": range,
        "_max": max,
        "_pt_f32": np.float32,
        "_pt_f64": np.float64,
        "_pt_i32": np.int32,
        "_pt_i64": np.int64,
        "_pt_i8": np.int8,
        "_pt_i16": np.int16,
        "_pt_u8": np.uint8,
        "_pt_u16": np.uint16,
        "_pt_u32": np.uint32,
        "_helper": shared_helper,
    }


_helpers: dict[tuple[str, bytes, str], Any] = {}


def shared_helper(fn: Callable[..., Any]) -> Any:
    """``numba.njit`` for a generated helper, compiled once per process, not once per kernel.

    Helpers are named after their operation and dtype and rendered the same for every kernel, so
    one compiled copy serves them all. They follow NumPy's error handling: ``x / 0.0`` gives inf
    or nan, never an exception.
    """
    code = fn.__code__
    key = (fn.__name__, code.co_code, repr(code.co_consts))
    helper = _helpers.get(key)
    if helper is None:
        helper = _helpers.setdefault(key, numba.njit(error_model="numpy")(fn))
    return helper


def parallel_min_work() -> int:
    """The threshold, overridable with ``PYPTO_NUMBA_PARALLEL_MIN_WORK`` (0: always parallel)."""
    value = os.environ.get("PYPTO_NUMBA_PARALLEL_MIN_WORK", "").strip()
    return int(value) if value.isdigit() else PARALLEL_MIN_WORK


def requested_threads() -> int | None:
    """``PYPTO_NUM_THREADS`` capped to Numba's pool, or None to use the whole pool."""
    value = os.environ.get("PYPTO_NUM_THREADS", "").split(",")[0].strip()
    if not value.isdigit() or int(value) < 1:
        return None
    return min(int(value), numba.config.NUMBA_NUM_THREADS)


class NumbaLauncher:
    """Calls a kernel compiled by Numba with validated arguments (buffers, scalars, dims)."""

    def __init__(self, name: str, source: str, *, parallel: bool, fastmath: bool = False):
        self.name = name
        self.source = source
        scope = namespace()
        exec(compile(source, f"<pypto numba: {name}>", "exec"), scope)
        fn = scope[name]
        options = {"error_model": "numpy", "fastmath": fastmath, "nogil": True}  # other threads run meanwhile
        self.serial = numba.njit(**options)(fn)
        self.parallel = numba.njit(parallel=True, **options)(fn) if parallel else None
        self.work: Callable[..., int] | None = scope.get(WORK_FUNCTION)
        self.min_work = parallel_min_work()
        self.threads = requested_threads()

    def choose(self, args: Sequence[Any]) -> Any:
        """The compiled function for this call: parallel only when there is enough work."""
        if self.parallel is None:
            return self.serial
        if self.work is not None and self.work(*args) < self.min_work:
            return self.serial
        if self.threads is not None:
            numba.set_num_threads(self.threads)
        return self.parallel

    def __call__(self, *args: Any) -> None:
        fn = self.choose(args)
        try:
            fn(*args)
        except numba.core.errors.NumbaError as e:  # raised while compiling on first use
            raise CompileError(
                f"Numba could not compile kernel '{self.name}':\n{e}\n--- source ---\n{self.source}"
            ) from None
