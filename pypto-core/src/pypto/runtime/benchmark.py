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
    clock: str = "host"  # "device events" when a backend timed the calls on the device

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
    the timed region measures page faults, not the kernel. When the arguments are arrays in a GPU's
    memory (torch CUDA tensors, CuPy arrays), the runs are timed with the device's events on the
    stream the calls go to (``result.clock == "device events"``), since such calls return before the
    GPU is done.
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
    timer = device_timer((*args, *kwargs.values()))
    if timer is not None:  # device arrays: the GPU's own clock, the calls being asynchronous
        for _ in range(repeat):
            timer.start()
            for _ in range(number):
                fn(*args, **kwargs)
            times.append(timer.stop() / number)
        return BenchmarkResult(tuple(times), warmup, repeat, number, clock="device events")
    clock = time.perf_counter
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn(*args, **kwargs)
        times.append((clock() - t0) / number)
    return BenchmarkResult(tuple(times), warmup, repeat, number)


def device_timer(args: Sequence[Any]) -> Any:
    """A backend's timer for calls on these arguments (arrays in a device's memory), or None.

    A backend offers one with a ``timer(args)`` method returning an object with ``start()`` and
    ``stop() -> seconds`` (CUDA: events recorded on the stream the calls go to)."""
    from pypto.plugins import get_registry

    for entry in get_registry().backends.values():
        make = getattr(entry.backend, "timer", None)
        if make is None:
            continue
        try:
            timer = make(args)
        except Exception:  # noqa: BLE001 - a backend that cannot time these arguments declines
            timer = None
        if timer is not None:
            return timer
    return None
