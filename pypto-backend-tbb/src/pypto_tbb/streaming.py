"""Which loops may write their outputs with non-temporal (streaming) stores.

A large one-dimensional elementwise loop (``c[i] = a[i] + b[i]`` over 16M points) is bound by
memory traffic; writing through an L1 buffer with streaming stores saves reading every output
line into the cache first. That is only correct when the loop writes each output element at the
loop point itself, once, and never reads an output it writes.
"""

from __future__ import annotations

from pypto.dtypes import int64
from pypto.ir.loops import Alloc, Loop, Read, Var, Write, stmt_exprs, walk
from pypto.ir.nodes import postorder

# Outputs of at least this many bytes are streamed; smaller ones are better left in the cache.
STREAM_MIN_BYTES = 16 << 20
# Elements computed into an L1 buffer per streamed block: 1 KiB of float32, a multiple of 64 bytes.
STREAM_BLOCK = 256


def streamed_outputs(s: Loop, ranks: dict[str, int]) -> list[str] | None:
    """The buffers ``s`` may stream, or None; ``ranks`` gives the number of dimensions of each buffer."""
    if s.kind != "parallel_vector" or s.reductions or s.work is None:
        return None
    point = (Var(s.var, dtype=int64),)
    written: list[str] = []
    for st in walk(s.body):
        if isinstance(st, (Loop, Alloc)):
            return None
        if isinstance(st, Write):
            if st.index != point or ranks.get(st.buffer) != 1 or st.buffer in written:
                return None
            written.append(st.buffer)
    if not written:
        return None
    reads = {n.buffer for st in walk(s.body) for e in stmt_exprs(st) for n in postorder(e) if isinstance(n, Read)}
    return None if reads & set(written) else written
