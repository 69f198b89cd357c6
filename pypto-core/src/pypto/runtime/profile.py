"""``pt.profile()``: time every kernel call made inside a ``with`` block, per kernel.

    with pt.profile() as prof:
        for _ in range(100):
            y = attention(x)
    print(prof)          # a table: calls, total and mean time, bytes moved, GB/s, GFLOP/s per kernel

Kernels of ``@pt.kernel`` and of ``@pt.jit`` functions (and of custom ops called on their own) are
counted under their names. Bytes moved are the bytes of the arrays passed (inputs read, outputs
written, temporaries of a jit plan both); operations are counted from the kernel's IR with the
op table's costs (:mod:`pypto.ir.ops`: each operator, function, reducer and conversion states its
operations per point; a formula such as ``sigmoid`` counts the operations it is made of, a
conversion none), each value once (a row's maximum once per row, not once per element that uses
it): the work the program asks for, not a hardware count. Outside a ``with pt.profile()`` block
calls are not timed.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto.hookspecs import hookimpl
from pypto.ir.kernel import KernelIR, TensorParam
from pypto.ir.nodes import Binary, Cast, Expr, Reduce, Scan, Sort, Unary, Where, free_axes, postorder
from pypto.ir.ops import BINARY, CAST, MATH, ORDERINGS, REDUCERS, SCANS
from pypto.plugins import register_plugin, unregister_plugin


@dataclass
class KernelStats:
    """What one kernel's calls added up to inside a profile."""

    name: str
    calls: int = 0
    seconds: float = 0.0
    bytes: int = 0
    flops: float = 0.0

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    @property
    def gbytes_per_second(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds else 0.0

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.seconds else 0.0


def _extent(a, dims: dict[str, int], extents: dict[int, Any]) -> int:
    e = extents.get(a)
    if e is None:
        return 1
    return int(e.evaluate(dims)) if hasattr(e, "evaluate") else int(e)


def op_cost(e: Expr) -> int:
    """Operations one evaluation of node ``e`` counts, from the op table (0 for reads and constants)."""
    if isinstance(e, Binary):
        return BINARY[e.op].flops
    if isinstance(e, Unary):
        f = MATH.get(e.op)
        return f.flops if f is not None else 1  # neg, abs, invert
    if isinstance(e, Reduce):
        return REDUCERS[e.op].flops if e.op in REDUCERS else 0  # per element reduced (a loop's result: its steps')
    if isinstance(e, Scan) and e.combine is not None:  # per step: the combine's (a loop's body) operations
        return max(1, sum(op_cost(n) for x in e.combine.exprs for n in postorder(x)) // len(e.combine.exprs))
    if isinstance(e, Scan):
        return SCANS[e.op].flops  # per element
    if isinstance(e, Cast):
        return CAST.flops
    if isinstance(e, Where):
        return 1  # a select
    return 0


def kernel_flops(kir: KernelIR, dims: dict[str, int]) -> float:
    """Operations one call performs: each node's :func:`op_cost` once per value it computes, that is once
    per point of the axes it depends on (a row's maximum once per row, however many elements use it; a
    reduction's combine once per element reduced). Nodes shared by several uses count once."""
    extents = {a.index: a.extent for a in kir.axes}
    memo: dict = {}
    seen: set[int] = set()
    total = 0.0
    for s in kir.stores:
        for e in postorder(s.value):
            if id(e) in seen:
                continue
            seen.add(id(e))
            if isinstance(e, Sort):  # compares: n log2 n per row of n (a row's values are sorted once)
                n = _extent(e.axis, dims, extents)
                rows = math.prod(_extent(a, dims, extents) for a in free_axes(e, memo) - {e.out})
                total += ORDERINGS["sort"].flops * float(rows * n * max(1, math.ceil(math.log2(max(n, 1)))))
                continue
            cost = op_cost(e)
            if cost:
                axes = free_axes(e.body, memo) if isinstance(e, Reduce) else free_axes(e, memo)
                total += cost * float(math.prod(_extent(a, dims, extents) for a in axes))
    return total


class Profile:
    """Per-kernel statistics of the calls made while it is active (see :func:`profile`)."""

    def __init__(self) -> None:
        self.stats: dict[str, KernelStats] = {}
        self._lock = threading.Lock()
        self._flops: dict[tuple[int, tuple], float] = {}
        self._plugin_name = ""

    def record(self, kernel: Any, args: tuple, seconds: float) -> None:
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        nbytes = sum(a.nbytes for a in arrays)
        flops = self._flops_of(kernel, arrays)
        with self._lock:
            st = self.stats.get(kernel.name)
            if st is None:
                st = self.stats[kernel.name] = KernelStats(kernel.name)
            st.calls += 1
            st.seconds += seconds
            st.bytes += nbytes
            st.flops += flops

    def _flops_of(self, kernel: Any, arrays: list[np.ndarray]) -> float:
        key = (id(kernel), tuple(a.shape for a in arrays))
        hit = self._flops.get(key)
        if hit is None:
            try:
                kir = kernel.traced
                dims: dict[str, int] = {}
                tensors = [p for p in kir.params if isinstance(p, TensorParam)]
                for p, a in zip(tensors, arrays):
                    for s, n in zip(p.shape, a.shape):
                        d = s.plain_dim()
                        if d is not None:
                            dims[d] = n
                comp = kernel.compilation()
                hit = kernel_flops(comp.stages["simplify"], dims)  # after common subexpressions are shared
            except Exception:  # an estimate only: a kernel it cannot read counts no operations
                hit = 0.0
            self._flops[key] = hit
        return hit

    def table(self):
        """The statistics as a ``rich`` table, slowest kernel first."""
        from rich.table import Table

        t = Table(title="pypto profile")
        t.add_column("kernel")
        for col in ("calls", "total ms", "mean µs", "bytes moved", "GB/s", "GFLOP/s"):
            t.add_column(col, justify="right")
        for st in sorted(self.stats.values(), key=lambda s: -s.seconds):
            t.add_row(st.name, str(st.calls), f"{st.seconds * 1e3:.3f}", f"{st.mean_seconds * 1e6:.1f}",
                      f"{st.bytes:,}", f"{st.gbytes_per_second:.2f}", f"{st.gflops:.2f}")  # fmt: skip
        return t

    def __str__(self) -> str:
        from rich.console import Console

        console = Console(width=110, record=True, file=_Null())
        console.print(self.table())
        return console.export_text()

    def print(self) -> None:
        """Print the table to the terminal (with colour where it supports it)."""
        from rich.console import Console

        Console().print(self.table())

    def __enter__(self) -> Profile:
        _activate(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _deactivate(self)


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


class _Recorder:
    """The plugin a profile registers while it is active: a wrapper on the ``pypto_launch`` hook."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    @hookimpl(wrapper=True)
    def pypto_launch(self, kernel: Any, args: tuple, kwargs: dict) -> Generator[None, Any, Any]:
        start = time.perf_counter()
        result = yield
        self.profile.record(kernel, (*args, *kwargs.values()), time.perf_counter() - start)
        return result


def _activate(p: Profile) -> None:
    p._plugin_name = f"pypto-profile-{id(p):x}"
    register_plugin(_Recorder(p), p._plugin_name)


def _deactivate(p: Profile) -> None:
    unregister_plugin(p._plugin_name)


def profile() -> Profile:
    """A context manager that times every kernel call inside its ``with`` block (see the module doc)."""
    return Profile()


def now() -> float:
    return time.perf_counter()
