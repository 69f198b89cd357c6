"""The loop IR: what every compiled backend renders.

Lowering turns the tensor-expression IR into one :class:`LoopKernel`: a function over buffer
arguments, scalar arguments and dimension sizes whose body is a tree of statements. The
expression nodes are those of :mod:`pypto.ir.nodes` (``Const``, ``Unary``, ``Binary``, ``Where``,
``Cast``) plus :class:`Var` and :class:`Read`; integer index arithmetic uses ``Binary`` in int64.

Target passes annotate loops for their renderers: ``threads_if`` (start threads only when it holds)
and ``streaming`` (outputs written with non-temporal stores when large); renderers print these
decisions, they do not make them.

Every loop says how it may be run (``kind``): ``serial``; ``parallel`` (iterations are independent
and may run on different threads); ``vector`` (independent and contiguous: SIMD lanes);
``parallel_vector`` (both). A loop may carry ``reductions``: scalar accumulators that iterations
combine with an associative operator, which a backend may reassociate (``reduction(+:acc)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pypto.dtypes import DType
from pypto.ir.nodes import Expr, Node, _dtype, _loc, _node, children

if TYPE_CHECKING:
    from pypto.ir.device import DeviceSplit
    from pypto.ir.schedule import NestSchedule


@_node
class Var(Expr):
    """A named scalar: a loop variable, a dimension size, a scalar argument or a local."""

    name: str
    dtype: DType | None = _dtype()
    loc: object = _loc()


@_node
class Read(Expr):
    """An element of a buffer; ``index`` has one int64 expression per buffer dimension."""

    buffer: str
    index: tuple[Expr, ...]
    dtype: DType | None = _dtype()
    loc: object = _loc()


class Stmt(Node):
    """A statement of the loop IR."""


@dataclass(frozen=True)
class Streaming:
    """Outputs a loop writes with non-temporal stores, block by block through an L1 buffer, when
    together they take at least ``min_bytes`` bytes and are 64-byte aligned (checked at run time)."""

    buffers: tuple[str, ...]
    min_bytes: int
    block: int  # elements computed into the L1 buffer per streamed block


@_node
class Block(Stmt):
    """Statements run in order."""

    body: tuple[Stmt, ...]


@_node
class Loop(Stmt):
    """``for var in range(start, stop)``; ``kind`` says how iterations may be scheduled."""

    var: str
    start: Expr
    stop: Expr
    body: Stmt
    kind: str = "serial"
    reductions: tuple[tuple[str, str], ...] = ()  # (accumulator, reducer op)
    work: Expr | None = None  # estimated cost of the whole nest: points x cost per point
    threads_if: Expr | None = None  # parallel loops: start threads only when this holds (else run serially)
    streaming: Streaming | None = None  # outputs written with non-temporal stores when large
    dynamic: bool = False  # parallel loops of few, long iterations: each handed to the next free thread
    schedule: NestSchedule | None = None  # on a nest's outermost loop: the schedule it was lowered with
    # (accumulator, reducer op) of the running reductions (pt.cumsum ...) the loop carries: each step folds a
    # value that does not read them into them, then may read them. The steps run in order on a CPU; a group of
    # SIMT threads may compute them as a parallel prefix (pypto.targets.simt.forms.scan_form)
    scans: tuple[tuple[str, str], ...] = ()


LOOP_KINDS = ("serial", "parallel", "vector", "parallel_vector")


@_node
class Let(Stmt):
    """``name = value``, immutable, visible to the statements that follow in the same block."""

    name: str
    value: Expr


@_node
class Declare(Stmt):
    """A mutable local scalar (an accumulator) initialised to ``init``."""

    name: str
    dtype: DType
    init: Expr


@_node
class Assign(Stmt):
    """Overwrite a :class:`Declare`-d local."""

    name: str
    value: Expr


@_node
class Write(Stmt):
    """``buffer[index] = value``."""

    buffer: str
    index: tuple[Expr, ...]
    value: Expr


@_node
class Update(Write):
    """``buffer[index] = buffer[index] op value`` as one atomic step (``op``: "add", "max", "min"): threads may
    update one element at the same time (a scatter planned ``atomic``, ``deterministic=False``). ``value`` has
    the element's type, or float32 for a 16-bit float element (combined in float32, rounded once)."""

    op: str = "add"


@_node
class Alloc(Stmt):
    """A temporary buffer of ``shape`` that lives while ``body`` runs (heap memory in C).

    A ``local`` buffer has a small constant shape and lives on the stack (a register tile), where a
    compiler may keep it in registers."""

    buffer: str
    dtype: DType
    shape: tuple[Expr, ...]
    body: Stmt
    local: bool = False


@_node
class If(Stmt):
    """Run ``then`` when ``cond`` holds, else ``orelse`` (which may be None)."""

    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@_node
class Comment(Stmt):
    """A remark carried into the generated source (what a nest computes)."""

    text: str


@dataclass(frozen=True)
class Argument:
    """One argument of the generated function, in call order."""

    name: str
    kind: str  # "buffer" | "scalar" | "dim"
    dtype: DType
    role: str = "in"  # buffers: "in" | "out" | "inout"
    shape: tuple[Expr, ...] = ()  # buffers: one int64 expression per dimension (row-major, contiguous)


@dataclass(frozen=True)
class LoopKernel:
    """A lowered kernel: ``name(args...)`` runs ``body``; buffers are C-contiguous and row-major.

    ``noalias`` is true when the caller guarantees that no output overlaps any other argument
    (a renderer may then mark pointers ``restrict``).
    """

    name: str
    args: tuple[Argument, ...]
    body: Stmt
    noalias: bool = True
    temps: tuple[tuple[str, DType], ...] = ()
    device: DeviceSplit | None = None  # set by the simt target's split_kernels pass


def walk(stmt: Stmt) -> Iterator[Stmt]:
    """Every statement under ``stmt`` (itself included), parents first."""
    yield stmt
    if isinstance(stmt, Block):
        for s in stmt.body:
            yield from walk(s)
    elif isinstance(stmt, (Loop, Alloc)):
        yield from walk(stmt.body)
    elif isinstance(stmt, If):
        yield from walk(stmt.then)
        if stmt.orelse is not None:
            yield from walk(stmt.orelse)


def stmt_exprs(stmt: Stmt) -> Iterator[Expr]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(stmt, Loop):
        yield stmt.start
        yield stmt.stop
    elif isinstance(stmt, (Let, Assign)):
        yield stmt.value
    elif isinstance(stmt, Declare):
        yield stmt.init
    elif isinstance(stmt, Write):
        yield from stmt.index
        yield stmt.value
    elif isinstance(stmt, Alloc):
        yield from stmt.shape
    elif isinstance(stmt, If):
        yield stmt.cond


__all__ = [
    "Var", "Read", "Stmt", "Streaming", "Block", "Loop", "Let", "Declare", "Assign", "Write", "Update", "Alloc", "If",
    "Comment", "Argument", "LoopKernel", "LOOP_KINDS", "walk", "stmt_exprs", "children",
]  # fmt: skip
