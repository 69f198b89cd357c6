"""The tensor-expression IR: small immutable nodes, one per concept.

A kernel is a list of :class:`Store` statements whose values are trees (in fact DAGs: equal
subtrees are equal objects) of the expression nodes below. Nodes compare and hash by structure;
their source location rides along without taking part in equality. ``dtype`` is ``None`` until
type inference has run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pypto.dtypes import DType
from pypto.errors import SourceLoc
from pypto.ir.affine import Affine
from pypto.ir.ops import BINARY, COMPLEX_PARTS, MATH, REDUCERS

UNARY_OPS = (
    "neg",
    "abs",
    "invert",
    *MATH,
    *COMPLEX_PARTS,
)  # math functions and complex parts: the op table (pypto.ir.ops)
TRANSCENDENTAL = frozenset(MATH)
ARITH_OPS = tuple(n for n, o in BINARY.items() if o.kind == "arith")  # the binary operators: pypto.ir.ops
COMPARE_OPS = tuple(n for n, o in BINARY.items() if o.kind == "compare")
LOGIC_OPS = tuple(n for n, o in BINARY.items() if o.kind == "logic")
BINARY_OPS = ARITH_OPS + COMPARE_OPS + LOGIC_OPS
REDUCE_OPS = tuple(REDUCERS)


class Node:
    """Base of every IR node: structural equality with a cached hash; ``loc`` is ignored by both."""

    def _key(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self) if f.compare)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return False
        return hash(self) == hash(other) and self._key() == other._key()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((type(self).__name__, self._key()))
            object.__setattr__(self, "_hash", h)
        return h


_node = dataclass(frozen=True, eq=False)


def _loc() -> Any:
    return field(default=None, compare=False, repr=False, kw_only=True)


def _dtype() -> Any:
    return field(default=None, kw_only=True)


class Expr(Node):
    """A value computed for every point of the iteration space it depends on."""

    dtype: DType | None
    loc: SourceLoc | None


@_node
class Const(Expr):
    """A literal; ``weak`` marks a Python scalar whose type adapts to the other operand."""

    value: int | float | bool
    weak: bool = False
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Index(Expr):
    """The integer value of an affine expression over axes and dims (``i``, ``N``, ``2*i + 1``)."""

    affine: Affine
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Extent(Expr):
    """The number of points along an axis; replaced by an :class:`Index` once extents are known."""

    axis: int
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Scalar(Expr):
    """The value of a scalar kernel parameter."""

    name: str
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Load(Expr):
    """An element of a tensor parameter or temporary at an affine index."""

    tensor: str
    index: tuple[Affine, ...]
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Gather(Expr):
    """An element of a tensor parameter at computed indices: ``index`` holds one integer expression per
    dimension (an :class:`Index` for an affine one, anything integer for one read from data, as in
    ``table[tok[b, s], d]``). A negative index counts from the end, as in NumPy; every gathered index is
    checked against its dimension before a call writes anything (``pypto.passes.infer_shapes``)."""

    tensor: str
    index: tuple[Expr, ...]
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Unary(Expr):
    """``op(x)`` for one of :data:`UNARY_OPS`."""

    op: str
    x: Expr
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Binary(Expr):
    """``a op b`` for one of :data:`BINARY_OPS`."""

    op: str
    a: Expr
    b: Expr
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Where(Expr):
    """``cond ? a : b`` elementwise."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Cast(Expr):
    """``x`` converted to ``dtype``."""

    x: Expr
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Bitcast(Expr):
    """The bits of ``x`` read as ``dtype``, a type of the same width (C's ``memcpy`` of a value, NumPy's
    ``view``). It appears only in the loop IR: the sort nests' radix keys are a float's bits
    (:mod:`pypto.passes.sorting`)."""

    x: Expr
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Reduce(Expr):
    """Combines ``body`` over ``axes`` with reducer ``op``; a value over the remaining axes."""

    op: str
    body: Expr
    axes: tuple[int, ...]
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Carry(Expr):
    """An argument of a scan's combine function (:class:`Combine`) of ``k`` components: slots ``0..k-1`` are the
    running values, ``k..2k-1`` the next elements. It appears only inside ``Combine.exprs``."""

    slot: int
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@dataclass(frozen=True)
class Combine:
    """The user's combine function of ``pt.associative_scan``, traced once: one expression per component of the
    scanned values, over :class:`Carry` leaves, numbers and scalar parameters. It is not an :class:`Expr` field,
    so generic walks do not enter it (its values are per step of the scan, not per point of a nest); the passes
    that must, do so explicitly."""

    exprs: tuple[Expr, ...]


@_node
class Scan(Expr):
    """The running ``op`` (a reducer) of ``body`` along ``axis``: at point ``t`` of the axis, ``body``'s values at
    ``0..t`` combined in order (``reverse``: at ``t..end``, combined from the end). Unlike a :class:`Reduce` it
    binds nothing: its value depends on ``axis`` as ``body`` does, and a loop nest computes it with an
    accumulator carried along that axis's loop, which therefore runs in order, innermost (``pypto.passes.lower``).
    With ``op`` "fn" (``pt.associative_scan``) ``combine`` holds the function: the first point's value is the
    body's, every later one ``combine(previous, body)``. A function of several values scans the tuple
    ``(body, *others)`` at once; the node is its component ``which`` (one node per component, all with the same
    bodies and function: a nest computes them together, see :func:`scan_key`).

    With ``op`` :data:`~pypto.ir.ops.LOOP` (a sequential loop, ``for t in pt.range(n)``) the components are the
    loop's state: ``combine`` has one expression per component, over the running values (``Carry`` slots
    ``0..k-1``, ``k = len(combine.exprs)``) and the step's values (slots ``k..``: ``body``, then ``others``); the
    value at ``t`` is the state after step ``t``, starting from ``init`` (one value per component, over the axes
    around the loop) before step 0. ``Reduce(LAST, scan, (axis,))`` is the state after the loop."""

    op: str
    body: Expr
    axis: int
    reverse: bool = False
    combine: Combine | None = None
    others: tuple[Expr, ...] = ()
    which: int = 0
    init: tuple[Expr, ...] = ()  # a loop's (op LOOP) carried values before its first step
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


@_node
class Sort(Expr):
    """``body``'s values along ``axis`` in order (``pt.sort``, ``pt.argsort``, ``pt.topk``): the value at point ``p``
    of ``out`` is the ``p``-th of them (``which`` "values") or its position along ``axis`` (``which`` "indices",
    int64). It binds ``axis`` (as a :class:`Reduce` binds its axes) and depends on ``out`` instead: a sort is a
    reduction of a row to a row. The order is ascending, NaN last, as ``np.sort`` (``descending``: the reverse,
    NaN first, as ``torch.sort(descending=True)`` and ``torch.topk``), and stable: equal values keep the order of
    their positions. With ``top`` (``pt.topk``) ``out`` may have fewer points than ``axis``: the first of them (the
    k smallest or largest); otherwise as many. A nest computes one sort alone, from a row of scratch per point of its other axes
    (``pypto.passes.lower``)."""

    body: Expr
    axis: int
    out: int
    which: str = "values"
    descending: bool = False
    top: bool = False  # pt.topk: ``out`` may have fewer points than ``axis`` (else the same number)
    dtype: DType | None = _dtype()
    loc: SourceLoc | None = _loc()


SORT_RESULTS = ("values", "indices")  # what a Sort node gives: the ordered values or their positions


@_node
class Store(Node):
    """``tensor[index] = value`` for every point of the index's axes (a statement, not a value)."""

    tensor: str
    index: tuple[Affine, ...]
    value: Expr
    loc: SourceLoc | None = _loc()


SCATTER_OPS = ("add", "max", "min", "set")  # how a scatter combines a value with the element it lands on
SCATTER_PLANS = ("serial", "owner", "blocks", "parallel", "atomic")  # how a scatter's points are shared among threads


@dataclass(frozen=True)
class ScatterPlan:
    """How a scatter runs (chosen by the ``schedule_scatters`` pass; the same bits for any thread count):

    * ``serial``: every point in order, on one thread;
    * ``owner``: the target's index holds a plain loop axis (``dtable[tok[t], d]``: ``d``), so points with
      different values of it land on different elements: runs of ``width`` of that axis go to threads, each
      walking all the other points in order, so every element is updated in the serial order (the serial bits);
      when the axis's size is known at run time only and is one run or less, the scatter runs in ``blocks``;
    * ``blocks``: the points in blocks of at least ``block`` along the outermost axis (a number of blocks that
      depends on the sizes only, never on the threads); block 0 updates the target, every other block a private
      copy of it, and the copies are combined into the target in block order afterwards (small targets: a
      histogram; integers give the serial result, floats a fixed rounding);
    * ``parallel``: a plain store through indices declared unique: any order gives the same result;
    * ``atomic`` (only with ``deterministic=False``): every point on any thread, each update one atomic
      read-modify-write; integers, maxima and minima are exact, a float sum's rounding depends on the order the
      threads happen to take.
    """

    kind: str
    axis: int | None = None  # owner: the axis whose runs go to threads
    width: int = 0  # owner: points of ``axis`` per run
    block: int = 0  # blocks: points per block at least; owner: the same, for when the axis has one run only

    def describe(self, name: Callable[[int], str]) -> str:
        if self.kind == "owner":
            assert self.axis is not None
            text = f"owner: runs of {self.width} of {name(self.axis)} on threads, the rest in order"
            if self.block:
                text += f" (blocks of >= {self.block} points when {name(self.axis)} has room for one run only)"
            return text
        if self.kind == "blocks":
            return f"blocks of >= {self.block} points, private copies combined in block order"
        if self.kind == "parallel":
            return "parallel (indices declared unique)"
        if self.kind == "atomic":
            return "atomic updates from every thread (deterministic=False)"
        return "serial, in order"


@_node
class Scatter(Node):
    """``tensor[index] op= value`` for every point of the axes ``index`` and ``value`` depend on, where
    ``index`` holds one integer expression per dimension (as :class:`Gather`'s): several points may land on
    the same element, and ``op`` ("add", "max", "min") accumulates them there; "set" stores, for indices the
    user declared unique. A kernel's scatters run after its stores, in order, each over its points in order
    (deterministic), and their indices are checked before the call writes anything."""

    tensor: str
    index: tuple[Expr, ...]
    value: Expr
    op: str
    loc: SourceLoc | None = _loc()
    plan: ScatterPlan | None = None  # set by the schedule_scatters pass; None runs serially


# ---------------------------------------------------------------------------------------------
# Generic traversal: passes use these instead of knowing every node's fields.


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A node class's field names (``dataclasses.fields`` once per class: the walks below run millions of times)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    return names


def children(node: Node) -> list[Expr]:
    """The direct sub-expressions of ``node``."""
    if type(node) is Gather:
        return list(node.index)
    if type(node) is Scan:
        return [node.body, *node.others, *node.init]
    if type(node) is Scatter:
        return [*node.index, node.value]
    out = []
    for name in _field_names(type(node)):
        v = getattr(node, name)
        if isinstance(v, Expr):
            out.append(v)
    return out


def map_children(node: Node, fn: Callable[[Expr], Expr]) -> Node:
    """``node`` with each direct sub-expression replaced by ``fn(child)``; ``node`` itself if unchanged."""
    if type(node) is Gather:
        index = tuple(fn(ix) for ix in node.index)
        return node if all(a is b for a, b in zip(index, node.index)) else replace(node, index=index)
    if type(node) is Scan:
        body, others, init = fn(node.body), tuple(fn(o) for o in node.others), tuple(fn(v) for v in node.init)
        same = body is node.body and all(a is b for a, b in zip((*others, *init), (*node.others, *node.init)))
        return node if same else replace(node, body=body, others=others, init=init)
    if type(node) is Scatter:
        index, value = tuple(fn(ix) for ix in node.index), fn(node.value)
        same = value is node.value and all(a is b for a, b in zip(index, node.index))
        return node if same else replace(node, index=index, value=value)
    changes = {}
    for name in _field_names(type(node)):
        v = getattr(node, name)
        if isinstance(v, Expr):
            nv = fn(v)
            if nv is not v:
                changes[name] = nv
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


def postorder(root: Node) -> Iterator[Expr]:
    """Every distinct expression under ``root`` (itself included), children before parents."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            if isinstance(n, Expr):
                yield n
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for c in reversed(children(n)):
            if id(c) not in seen:
                stack.append((c, False))


def transform(root: Node, fn: Callable[[Node], Node | None], memo: dict | None = None) -> Node:
    """Bottom-up rewrite: children first, then ``fn(new_node)`` (``None`` keeps the node)."""
    memo = {} if memo is None else memo

    def go(n: Node) -> Node:
        key = id(n)
        if key in memo:
            return memo[key][1]
        m = map_children(n, go)  # type: ignore[arg-type]
        r = fn(m)
        r = m if r is None else r
        memo[key] = (n, r)  # keep ``n`` alive so its id is not reused
        return r

    return go(root)


def substitute_axes(e: Expr, mapping: dict[int, Affine], memo: dict | None = None) -> Expr:
    """``e`` with each axis in ``mapping`` replaced by its affine expression in every index and
    :class:`Index` (an axis a :class:`Reduce` inside binds is not expected in ``mapping``)."""

    def fn(n: Node) -> Node | None:
        if isinstance(n, Load) and any(a in mapping for ix in n.index for a, _ in ix.axes):
            return replace(n, index=tuple(ix.substitute_axes(mapping) for ix in n.index))
        if isinstance(n, Index) and any(a in mapping for a, _ in n.affine.axes):
            return replace(n, affine=n.affine.substitute_axes(mapping))
        if isinstance(n, Scan) and n.axis in mapping:  # a scan moves with its axis: to another plain axis only
            b = mapping[n.axis].plain_axis()
            if b is None:
                raise ValueError(f"substitute_axes: the axis of a scan replaced by {mapping[n.axis]}")
            return replace(n, axis=b)
        if isinstance(n, Sort) and n.out in mapping:  # a sort's positions move to another plain axis only
            b = mapping[n.out].plain_axis()
            if b is None:
                raise ValueError(f"substitute_axes: the positions of a sort replaced by {mapping[n.out]}")
            return replace(n, out=b)
        return None

    return transform(e, fn, memo)  # type: ignore[return-value]


def free_axes(e: Expr, _memo: dict | None = None) -> frozenset[int]:
    """The axes ``e`` depends on (reduced axes are bound inside their :class:`Reduce`)."""
    memo = {} if _memo is None else _memo
    key = id(e)
    if key in memo:
        return memo[key][1]
    if isinstance(e, Load):
        r: frozenset[int] = frozenset().union(*(ix.axis_set() for ix in e.index)) if e.index else frozenset()
    elif isinstance(e, Index):
        r = e.affine.axis_set()
    elif isinstance(e, Reduce):
        r = free_axes(e.body, memo) - frozenset(e.axes)
    elif isinstance(e, Scan):
        r = frozenset().union(*(free_axes(b, memo) for b in (e.body, *e.others, *e.init))) | {e.axis}
    elif isinstance(e, Sort):
        r = (free_axes(e.body, memo) - {e.axis}) | {e.out}
    else:
        r = frozenset().union(*(free_axes(c, memo) for c in children(e)))
    memo[key] = (e, r)
    return r


def loads(root: Node) -> Iterator[Load]:
    """Every distinct :class:`Load` under ``root``."""
    for n in postorder(root):
        if isinstance(n, Load):
            yield n


def load_accesses(e: Expr) -> list[tuple[str, tuple[Affine, ...], bool]]:
    """(tensor, index, inside a reduction) for every distinct load in ``e``."""
    out = []
    seen: set[tuple[int, bool]] = set()
    stack = [(e, False)]
    while stack:
        n, in_reduce = stack.pop()
        if (id(n), in_reduce) in seen:
            continue
        seen.add((id(n), in_reduce))
        if isinstance(n, Load):
            out.append((n.tensor, n.index, in_reduce))
        elif isinstance(n, (Reduce, Scan, Sort)):  # (a scan reads its body at every earlier point of its axis)
            stack.extend((c, True) for c in children(n))
        else:
            stack.extend((c, in_reduce) for c in reversed(list(children(n))))
    return out


def top_reduces(e: Expr) -> list[Reduce]:
    """The reductions in ``e`` that are not inside another reduction, each once, in visit order."""
    out: list[Reduce] = []
    seen: set[int] = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Reduce):
            if n not in out:
                out.append(n)
            continue
        stack.extend(reversed(list(children(n))))
    return out


@functools.lru_cache(maxsize=4096)
def scans(e: Node) -> tuple[Scan, ...]:
    """Every distinct :class:`Scan` under ``e``, inner ones (those in another's body) first (remembered: several
    passes ask it of every store, and most have none)."""
    return tuple(n for n in postorder(e) if isinstance(n, Scan))


@functools.lru_cache(maxsize=4096)
def sorts(e: Node) -> tuple[Sort, ...]:
    """Every distinct :class:`Sort` under ``e`` (remembered, as :func:`scans`)."""
    return tuple(n for n in postorder(e) if isinstance(n, Sort))


def scan_key(c: Scan) -> tuple:
    """What the components of one scan share (all but ``which`` and the type): a nest carries them together."""
    return (c.op, c.body, c.others, c.axis, c.reverse, c.combine, c.init)


def scan_bodies(c: Scan) -> tuple[Expr, ...]:
    """The scanned values of ``c``: its body, then the other components' (``pt.associative_scan`` of a tuple; a
    loop's step values)."""
    return (c.body, *c.others)


def scan_width(c: Scan) -> int:
    """How many values a scan carries: one for a reducer's, one per scanned value for ``pt.associative_scan``,
    one per component of a loop's state."""
    if c.combine is None:
        return 1
    return len(c.combine.exprs)
