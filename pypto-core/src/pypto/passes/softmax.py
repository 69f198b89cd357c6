"""Softmax-style nests: choose the online max/sum variant for rows that do not fit in cache.

A nest computing ``max(x)`` and ``sum(exp(x - max(x)))`` over one axis (softmax, log-softmax,
logsumexp) reads each row three times when rows stay in cache (max, sum, write), which is the
fastest form for short rows. Rows longer than the cache are read once for an *online* max and
sum: each block's maximum updates the running one and rescales the running sum. This pass marks
such nests with an :class:`~pypto.ir.kernel.OnlineSoftmax` record; lowering emits the online form
for rows of at least ``min_bytes`` bytes (a run-time branch when the row length is symbolic).
"""

from __future__ import annotations

from dataclasses import replace

from pypto.ir.kernel import KernelIR, OnlineSoftmax
from pypto.ir.nodes import Binary, Expr, Reduce, Unary, postorder, scans

# Measured (softmax, 2 threads): per-row passes beat online softmax for rows up to about 16 KiB;
# rows of at least this many bytes do not stay in cache between passes.
ONLINE_MIN_BYTES = 512 << 10
ONLINE_BLOCK = 4096  # elements per block of the online max/sum (16 KiB of float32: L1-resident)


def softmax_pairs(e: Expr) -> dict[Reduce, Reduce]:
    """``max(b)`` -> ``sum(exp(b - max(b)))`` over the same single axis, for each such pair in ``e``."""
    out: dict[Reduce, Reduce] = {}
    for n in postorder(e):
        if not (
            isinstance(n, Reduce) and n.op == "sum" and len(n.axes) == 1 and n.dtype is not None and n.dtype.is_float
        ):
            continue
        body = n.body
        if isinstance(body, Unary) and body.op == "exp" and isinstance(body.x, Binary) and body.x.op == "sub":
            rmax = body.x.b
            if isinstance(rmax, Reduce) and rmax.op == "max" and rmax.axes == n.axes and rmax.body == body.x.a:
                out.setdefault(rmax, n)
    return out


def online_softmax(k: KernelIR, min_bytes: int = ONLINE_MIN_BYTES, block: int = ONLINE_BLOCK) -> KernelIR:
    """Mark one-store nests holding a max→exp→sum pair for the online variant (see module docstring)."""
    assert k.groups is not None
    groups = []
    for g in k.groups:
        if g.loops and g.split is None and len(g.stores) == 1 and not scans(g.stores[0].value):
            pairs = softmax_pairs(g.stores[0].value)
            if pairs:
                g = replace(g, online=OnlineSoftmax(tuple(pairs.items()), min_bytes, block))
        groups.append(g)
    return k.replace(groups=tuple(groups))
