"""``pt.benchmark``: time a callable the way performance claims should be timed."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pypto.errors import ArgumentError


@dataclass(frozen=True)
class BenchmarkResult:
    """Timings of ``repeat`` calls after ``warmup`` untimed ones, in seconds."""

    times: tuple[float, ...] = field(repr=False)
    warmup: int
    repeat: int
    number: int = 1

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.times) if len(self.times) > 1 else 0.0

    def __str__(self) -> str:
        def fmt(t: float) -> str:
            if t >= 1:
                return f"{t:.3f} s"
            if t >= 1e-3:
                return f"{t * 1e3:.3f} ms"
            return f"{t * 1e6:.2f} us"

        return (
            f"median {fmt(self.median)}, min {fmt(self.min)}, mean {fmt(self.mean)} "
            f"+- {fmt(self.std)} ({self.repeat} runs of {self.number} call(s))"
        )


def benchmark(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    warmup: int = 10,
    repeat: int = 50,
    number: int = 1,
) -> BenchmarkResult:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untimed, then time ``repeat`` runs.

    Each run makes ``number`` calls and records the time per call, so very short kernels can be
    timed above the clock's resolution. Use preallocated outputs in ``args``: allocating inside
    the timed region measures page faults, not the kernel.
    """
    if not callable(fn):
        raise ArgumentError(f"pt.benchmark: fn must be callable, got {fn!r}", param="fn", expected="callable", got=fn)
    for name, v, lo in (("warmup", warmup, 0), ("repeat", repeat, 1), ("number", number, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ArgumentError(
                f"pt.benchmark: {name} must be an int >= {lo}, got {v!r}", param=name, expected=f"int >= {lo}", got=v
            )
    kwargs = kwargs or {}
    args = tuple(args)
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    clock = time.perf_counter
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn(*args, **kwargs)
        times.append((clock() - t0) / number)
    return BenchmarkResult(tuple(times), warmup, repeat, number)
