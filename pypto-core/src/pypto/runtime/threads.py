"""``pt.set_num_threads`` / ``pt.get_num_threads``: the threads of the CPU backends' parallel loops, at run time.

    pt.set_num_threads(1)     # from now on, every kernel of the OpenMP and TBB backends runs on one thread
    pt.get_num_threads()      # 1; pt.get_runtime_info() reports it per backend

The count applies at once to kernels already loaded and to those loaded later, in this process; it takes
precedence over ``PYPTO_NUM_THREADS`` and ``OMP_NUM_THREADS``. Schedules (which loops run in parallel, the
sizes below which a loop runs on one thread) are chosen once per process for the thread count at the first
compilation and are not re-chosen.
"""

from __future__ import annotations

import numbers

from pypto.errors import ArgumentError
from pypto.targets import machine


def set_num_threads(n: int) -> None:
    """Run the CPU backends' parallel loops on ``n`` threads from now on (kernels already loaded included)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ArgumentError(
            f"pt.set_num_threads({n!r}): the thread count must be a positive int",
            param="n",
            expected="an int >= 1",
            got=repr(n),
            fix="pass e.g. pt.set_num_threads(2); os.cpu_count() gives the cores",
        )
    from pypto.targets.cpu.backend import apply_threads

    machine.set_threads(int(n))
    apply_threads(int(n))


def get_num_threads() -> int:
    """The threads the CPU backends' parallel loops run on: ``pt.set_num_threads``, else ``PYPTO_NUM_THREADS``,
    else ``OMP_NUM_THREADS``, else every core."""
    return machine.num_threads()


__all__ = ["set_num_threads", "get_num_threads"]
