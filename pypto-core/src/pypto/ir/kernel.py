"""The kernel record that the tensor-level passes read and return (never mutate).

A :class:`KernelIR` holds the signature (parameters, dimensions, axes), the stores in program
order, and what the passes add: runtime checks, temporaries, and the grouping of stores into loop
nests with their schedule.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pypto.dtypes import DType
from pypto.errors import SourceLoc
from pypto.ir.affine import Affine
from pypto.ir.nodes import Expr, Reduce, Scatter, Store
from pypto.ir.schedule import NestSchedule, Schedule
from pypto.targets.machine import Machine


@dataclass(frozen=True)
class TensorParam:
    """A tensor argument: element type, shape (affine in the dims) and role in/out/inout."""

    name: str
    dtype: DType
    shape: tuple[Affine, ...]
    role: str = "in"

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class ScalarParam:
    """A scalar argument passed by value."""

    name: str
    dtype: DType


Param = TensorParam | ScalarParam


@dataclass(frozen=True)
class AxisInfo:
    """Iteration axis ``pt.axis(index)``: its name in the source and, once inferred, its extent."""

    index: int
    name: str
    extent: Affine | None = None
    extent_source: str = ""  # e.g. "y.shape[0]": where the extent was read from


@dataclass(frozen=True)
class Temp:
    """A buffer introduced by a pass (never visible to the caller)."""

    name: str
    dtype: DType
    shape: tuple[Affine, ...]


@dataclass(frozen=True)
class DimEqual:
    """Runtime check: two shape expressions must be equal (they size the same axis)."""

    a: Affine
    a_source: str
    b: Affine
    b_source: str
    axis: str


@dataclass(frozen=True)
class IndexInBounds:
    """Runtime check: ``index`` stays inside ``[0, size)`` over the axes' extents."""

    tensor: str
    position: int
    index: Affine
    size: Affine
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class GatherInBounds:
    """Runtime check on the arguments' values: the computed ``index`` of a gather from ``tensor`` stays
    inside ``[-size, size)`` (a negative index counts from the end) at every point of its axes. Checked
    before the call writes anything; a kernel compiled with ``boundscheck=False`` skips it."""

    tensor: str
    position: int
    index: Expr
    size: Affine
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class AxisNotEmpty:
    """Runtime check: ``axis`` has at least one point (``what`` needs one: ``pt.argmax`` over an empty axis
    has no answer, and NumPy raises too)."""

    axis: int
    what: str
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class DimAtMost:
    """Runtime check: size ``a`` is at most size ``b`` (``pt.topk``: k values of a row of ``b``)."""

    a: Affine
    a_source: str
    b: Affine
    b_source: str
    what: str
    loc: SourceLoc | None = None


Check = DimEqual | IndexInBounds | GatherInBounds | AxisNotEmpty | DimAtMost


@dataclass(frozen=True)
class Split:
    """A full reduction computed in fixed-size blocks: per-block partials, then an ordered combine."""

    block: int  # points per block; fixed, so results do not depend on the thread count


@dataclass(frozen=True)
class OnlineSoftmax:
    """Softmax rows whose max and sum are computed online: one read of the row, block by block.

    ``pairs`` holds each ``max(x)`` with the ``sum(exp(x - max(x)))`` it pairs with. Rows of at
    least ``min_bytes`` bytes use the online form; shorter rows stay in cache between per-row
    passes (decided at run time when the row length is symbolic).
    """

    pairs: tuple[tuple[Reduce, Reduce], ...]
    min_bytes: int
    block: int  # elements per block: small enough to stay in L1 between its two passes


@dataclass(frozen=True)
class Group:
    """Stores computed together in one loop nest over ``loops`` (outer to inner)."""

    stores: tuple[Store, ...]
    loops: tuple[int, ...]
    split: Split | None = None  # set for full reductions split into blocks
    online: OnlineSoftmax | None = None  # set for softmax-style nests with an online variant
    schedule: NestSchedule | None = None  # set by the schedule pass
    notes: tuple[str, ...] = ()  # decisions passes took about this nest, with their estimates (printed)

    @property
    def parallel(self) -> int | None:
        """The axis whose loop runs in parallel."""
        return self.schedule.parallel if self.schedule is not None else None

    @property
    def vector(self) -> int | None:
        """The axis whose loop is vectorised."""
        return self.schedule.vector if self.schedule is not None else None


class ParamViews:
    """The parameters of a kernel by kind (for records with a ``params`` field)."""

    params: tuple[Param, ...]

    @property
    def tensor_params(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorParam))

    @property
    def scalar_params(self) -> tuple[ScalarParam, ...]:
        return tuple(p for p in self.params if isinstance(p, ScalarParam))

    @property
    def outputs(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.tensor_params if p.role != "in")


@dataclass(frozen=True)
class KernelIR(ParamViews):
    """An immutable kernel: passes return new records with :meth:`replace`."""

    name: str
    params: tuple[Param, ...]
    dims: tuple[str, ...]
    axes: tuple[AxisInfo, ...]
    stores: tuple[Store, ...]
    checks: tuple[Check, ...] = ()
    temps: tuple[Temp, ...] = ()
    groups: tuple[Group, ...] | None = None
    loc: SourceLoc | None = None
    machine: Machine | None = None  # what the schedule pass targets (None: a generic CPU)
    hints: Schedule | None = None  # the user's schedule hints
    scatters: tuple[Scatter, ...] = ()  # run after the stores, in order (pypto.ir.nodes.Scatter)
    deterministic: bool = True  # False (``@pt.kernel(deterministic=False)``): scatters may use atomic updates
    scratch: frozenset[str] = frozenset()  # outputs whose contents the caller never reads (a jit's temporaries)
    shares: tuple[tuple[str, str], ...] = ()  # (scratch, the scratch whose buffer it uses): see passes/memory.py

    def replace(self, **changes) -> KernelIR:
        return dataclasses.replace(self, **changes)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def buffer(self, name: str) -> TensorParam | Temp:
        for p in self.params:
            if p.name == name and isinstance(p, TensorParam):
                return p
        for t in self.temps:
            if t.name == name:
                return t
        raise KeyError(name)

    def axis(self, index: int) -> AxisInfo:
        for a in self.axes:
            if a.index == index:
                return a
        raise KeyError(index)

    def axis_name(self, index: int) -> str:
        for a in self.axes:
            if a.index == index:
                return a.name
        return f"axis{index}"

    def argument_names(self) -> tuple[str, ...]:
        """Call order of generated functions: tensors, then scalars (declaration order), then dims."""
        return tuple(p.name for p in self.tensor_params) + tuple(p.name for p in self.scalar_params) + self.dims
