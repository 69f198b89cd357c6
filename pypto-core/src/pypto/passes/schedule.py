"""Scheduling: which loops run in parallel, which are vectorised, which reductions are split.

* A nest with loops runs its outermost loop in parallel and vectorises its innermost loop (a
  one-loop nest does both).
* A nest without loops is a full reduction (``out[0] = pt.reduce_sum(...)``): its reductions are
  *split* into blocks of a fixed number of points, reduced in parallel, and the per-block partial
  results are combined in block order. The block size does not depend on the thread count, so
  the result is bit-for-bit the same with 1 or 64 threads. Only associative reducers (sum, prod,
  max, min) are split.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.kernel import KernelIR, Split
from pypto.ir.nodes import REDUCE_OPS, Reduce, postorder

SPLIT_BLOCK = 16384  # points per block of a split reduction: 64 KiB of float32, L2-resident


def split_reductions(k: KernelIR, block: int = SPLIT_BLOCK) -> KernelIR:
    """Mark loop-less nests whose values contain associative reductions for block splitting."""
    assert k.groups is not None
    groups = []
    for g in k.groups:
        if not g.loops and any(
            isinstance(e, Reduce) and e.op in REDUCE_OPS for s in g.stores for e in postorder(s.value)
        ):
            g = replace(g, split=Split(block))
        groups.append(g)
    return k.replace(groups=tuple(groups))


def schedule(k: KernelIR) -> KernelIR:
    """Choose the parallel and the vector loop of every nest."""
    assert k.groups is not None
    groups = []
    for g in k.groups:
        if g.loops:
            g = replace(g, parallel=g.loops[0], vector=g.loops[-1])
        groups.append(g)
    return k.replace(groups=tuple(groups))
