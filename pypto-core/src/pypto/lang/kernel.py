"""``@pt.kernel``: the kernel language's front end.

A decorated function becomes a :class:`KernelFunction`: a :class:`~pypto.runtime.kernel.Kernel` (traced from
the body, compiled per backend, called with arrays) that also runs on dask arrays (:mod:`pypto.dask`) and
has a ``vjp`` (:mod:`pypto.array.kernel_grad`). The runtime's ``Kernel`` knows neither: the front ends
that need them sit above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pypto.errors import ArgumentError
from pypto.ir.schedule import Schedule
from pypto.runtime.foreign import is_dask_array
from pypto.runtime.kernel import Kernel


class KernelFunction(Kernel):
    """A ``@pt.kernel`` function (see :class:`~pypto.runtime.kernel.Kernel` for calls, ``ir``, ``get_code``)."""

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if any(map(is_dask_array, args)) or any(map(is_dask_array, kwargs.values())):
            from pypto import dask

            return dask.call_kernel(self, args, kwargs)
        return super()._call(args, kwargs)

    def vjp(self, *args: Any, **kwargs: Any) -> tuple[Any, Callable[..., tuple]]:
        """Run the kernel on ``args`` (its outputs filled as by a call) and return ``(outputs, pullback)``:
        ``pullback(*cotangents)``, one per output, returns the cotangents of the input arrays (one kernel,
        see :mod:`pypto.array.kernel_grad`)."""
        from pypto.array.kernel_grad import kernel_vjp

        return kernel_vjp(self, *args, **kwargs)


def kernel(
    fn: Callable | None = None,
    *,
    executor: str | None = None,
    fastmath: bool = False,
    schedule: Schedule | dict | None = None,
    boundscheck: bool = True,
    deterministic: bool = True,
    **options: Any,
):
    """Decorate a function as a pypto kernel: ``@pt.kernel`` or ``@pt.kernel(executor="openmp")``.

    ``executor`` picks the backend (default: ``$PYPTO_EXECUTOR``, else the highest-priority
    available backend); ``fastmath=True`` lets backends use faster, less exact math
    (reassociation, approximate functions, no NaN/inf guarantees); ``schedule`` (a
    :class:`pypto.Schedule` or a dict of its arguments) overrides the schedule pass's choices, laid
    over any ``@pt.tile`` hints. ``boundscheck=False`` skips the check of indices read from data (a gather
    such as ``table[tok[i], d]``) that every call otherwise makes before writing anything: an out-of-range
    index then reads arbitrary memory (unsafe; for indices known to be valid). ``deterministic=False`` lets a
    scatter update its target with atomic operations from all threads at once: faster for large targets and on
    GPUs, but a float sum then adds in a different order on every run (see the indirect indexing chapter).
    """
    if schedule is not None:
        Schedule.of(schedule)  # a bad schedule fails here, at the decorator
    if options:
        from pypto.runtime.options import KERNEL_OPTIONS, check_options

        check_options("pt.kernel", options, KERNEL_OPTIONS)
    if fn is None:
        return lambda f: kernel(
            f,
            executor=executor,
            fastmath=fastmath,
            schedule=schedule,
            boundscheck=boundscheck,
            deterministic=deterministic,
            **options,
        )
    if not callable(fn):
        raise ArgumentError(f"pt.kernel decorates a function, got {fn!r}", expected="a function", got=fn)
    return KernelFunction(fn, executor=executor, fastmath=fastmath, schedule=schedule, boundscheck=boundscheck,
                          deterministic=deterministic, **options)  # fmt: skip


def tile(size: int | None = None, **axes: int) -> Callable[[Any], Any]:
    """Tile sizes for a kernel's axes: ``@pt.tile(i=64, j=256)`` (``size=`` for every tiled axis).

    Put it under or over ``@pt.kernel``. What a tile means depends on the nest's pattern (printed by
    ``kernel.ir("schedule")``): the rows per block and columns per task of a contraction, the sides
    of a transpose's (or another two-loop nest's) tiles, the rows and columns per block of a reduction
    down columns. Sizes are checked against the kernel when it compiles; a bad one is a
    :class:`~pypto.errors.ScheduleError` naming the axis and the values allowed.
    """
    hints = Schedule(tile=axes, size=size)

    def apply(target: Any) -> Any:
        if isinstance(target, Kernel):
            merged = type(target)(
                target.fn,
                executor=target.executor,
                fastmath=target.options.fastmath,
                schedule=target.schedule.merged(hints),
                **dict(target.options.extra),
            )
            return merged
        if not callable(target):
            raise ArgumentError(
                f"pt.tile decorates a kernel or a function, got {target!r}", expected="a function", got=target
            )
        previous = getattr(target, "__pypto_schedule__", None)
        target.__pypto_schedule__ = previous.merged(hints) if previous is not None else hints
        return target

    return apply
