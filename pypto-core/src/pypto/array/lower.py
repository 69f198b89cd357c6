"""Lowering an array program to a kernel: every output (and each temporary) becomes a store.

Each node is evaluated *at an index*: ``at(node, (i, j))`` is the IR expression for element
``[i, j]`` of the node, built from the loads of the inputs. Elementwise operations and views are
inlined (a view only changes the index of the loads); a reduction over axis ``d`` reads its input
at a fresh reduction axis in position ``d`` under a ``Reduce``; a contraction (``@``, ``einsum``)
is a ``Reduce("sum")`` of the product of its operands, one reduction axis per contracted index.
The kernel compiler then fuses, schedules and generates code for these stores as for any kernel:
a softmax is one nest, ``gelu(x @ w + b)`` a contraction with its epilogue.

A node is *materialised* (stored into a temporary the plan allocates, then loaded) where inlining
would recompute a reduction: when a node containing a reduction is read at an index that varies
with another reduction's axis (the hidden layer of an MLP read inside the next matmul, attention
scores read inside the softmax's maximum). A reshape that merges axes reads its input from a
temporary too, stored flat.

A program is one kernel unless it reads a scatter's result: a kernel's scatters run after its stores,
so the scatters read are computed first, by kernels of their own (the plan's ``steps``, see :func:`lower`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pypto import dtypes
from pypto.array.graph import Array, walk
from pypto.array.sizes import Size, depends, factors, same
from pypto.dtypes import DType
from pypto.errors import TracingError
from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisInfo, KernelIR, TensorParam
from pypto.ir.nodes import (
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Reduce,
    Scan,
    Scatter,
    Sort,
    Store,
    Unary,
    Where,
)
from pypto.ir.ops import LOOP

MAX_AXES = 256  # a guard against runaway programs; each reduction of a program has its own axes


@dataclass
class Buffer:
    """An array the compiled program reads or writes: an input, an output or a temporary."""

    name: str
    shape: tuple[int, ...]  # as declared to the kernel ((1,) for a 0-d array)
    dtype: DType
    kind: str  # "input", "output" or "temp"
    node: Array | None = None  # what it holds (outputs and temporaries)
    flat: bool = False  # read through a reshape that merges axes: the axes from ``lead`` on are one flat axis
    lead: int = 0  # leading axes a flat buffer keeps (those the reshape leaves alone)
    source: str | None = None  # a flat view of this input (bound as ``input.reshape(shape)``)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class Plan:
    """The kernel and the buffers a call binds to it, in the kernel's parameter order."""

    kernel: KernelIR
    buffers: list[Buffer]
    outputs: list[int] = field(default_factory=list)  # positions in ``buffers`` of the results, in order
    nodes: list[Array] = field(default_factory=list)  # the program's nodes, operands first
    computed_in: dict[int, list[str]] = field(default_factory=dict)  # node id -> buffers computing it inline
    # plans run first, in order, when the program reads a scatter's result: each computes scatter results the
    # later ones take as inputs (the program's inputs come first in every step's inputs, then the results of
    # the steps before it, in order)
    steps: list[Plan] = field(default_factory=list)
    n_inputs: int = 0  # the program's own inputs among this plan's input buffers (the rest: earlier steps' results)


def _declared(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if shape else (1,)


def _expensive(node: Array, memo: dict[int, bool]) -> bool:
    """Whether computing the node involves a reduction (so inlining it per point of a loop repeats one)."""
    hit = memo.get(id(node))
    if hit is None and node.op in ("reshape", "concat"):
        hit = memo[id(node)] = False  # it reads its input from a buffer the input is stored in first
    if hit is None:
        hit = node.op in ("reduce", "contract", "scan", "sort") or any(
            isinstance(a, Array) and a.op != "input" and _expensive(a, memo) for a in node.args
        )
        memo[id(node)] = hit
    return hit


class Lowering:
    def __init__(self, name: str, inputs: Sequence[tuple[str, Array]], force: frozenset[int] = frozenset()):
        self.name = name
        self.force = force  # nodes to store wherever they are first read (found by a first pass)
        self.storing: set[int] = set()  # nodes whose store is being built
        self.buffers: list[Buffer] = []
        self.by_node: dict[int, Buffer] = {}
        self.stores: list[Store] = []
        self.scatters: list[Scatter] = []  # gradients of gathers, run after the stores
        self.extents: dict[int, int] = {}
        self.store_axes: list[int] = []
        self.reduce_axes: dict[tuple[int, int], int] = {}
        self.reduction_axis_set: set[int] = set()
        self.memo: dict[tuple[int, tuple[Affine, ...]], Expr] = {}
        self.costly: dict[int, bool] = {}
        self.taken = {n for n, _ in inputs}
        self.temp_count = 0
        self.keep: list[Array] = []  # nodes keyed by id stay alive while lowering
        self.flat_bufs: dict[tuple[int, int], Buffer] = {}  # (node id, lead) -> its flat buffer
        self.current = ""  # the buffer whose store is being built
        self.computed_in: dict[int, list[str]] = {}  # node id -> the buffers whose stores compute it inline
        self.in_scatter = False  # while a scatter's value and indices are built
        for n, node in inputs:
            buf = Buffer(n, _declared(node.shape), node.dtype, "input", node)
            self.buffers.append(buf)
            self.by_node[id(node)] = buf

    # -- axes ------------------------------------------------------------------------------------------------
    def _new_axis(self, extent: int) -> int:
        k = len(self.extents)
        if k >= MAX_AXES:
            raise TracingError(
                f"@pt.jit function '{self.name}' needs more than {MAX_AXES} loop axes in one kernel",
                None,
                "split the function into two jit functions",
            )
        self.extents[k] = extent
        return k

    def _store_axes(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """One axis per output dimension; stores share axes of equal extent."""
        out: list[int] = []
        for n in shape:
            a = next((a for a in self.store_axes if same(self.extents[a], n) and a not in out), None)
            if a is None:
                a = self._new_axis(n)
                self.store_axes.append(a)
            out.append(a)
        return tuple(out)

    def _reduce_axis(self, node: Array, dim: object, extent: int) -> int:
        """The reduction axis of ``node`` for its reduced dimension (or contracted letter) ``dim``."""
        key = (id(node), hash(dim))
        a = self.reduce_axes.get(key)
        if a is None:
            a = self.reduce_axes[key] = self._new_axis(extent)
            self.reduction_axis_set.add(a)
            self.keep.append(node)
        return a

    # -- buffers -----------------------------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        while True:
            name = f"{stem}{self.temp_count}"
            self.temp_count += 1
            if name not in self.taken:
                self.taken.add(name)
                return name

    def scatter_into(self, buf: Buffer, node: Array) -> None:
        """Fill ``buf`` with a scatter-add node: its base stored, then the scatter (run after the kernel's stores)."""
        base, g, *indices = node.args
        positions, first, nb = node.attrs
        self.store(buf, base)
        self.memo.clear()
        idx = tuple(Affine.axis(a) for a in self._store_axes(g.shape))
        outer, self.current = self.current, buf.name
        self.in_scatter = True  # (a scan or sort read here is stored first: a scatter's points are no such nest)
        try:
            value = self.at(g, idx)
            entries = self.indexed_at(node, base, g.shape, idx)
        finally:
            self.in_scatter = False
        self.current = outer
        self.scatters.append(Scatter(buf.name, entries, value, "add", loc=node.loc))

    def indexed_at(self, node: Array, target: Array, shape: tuple, idx: tuple[Affine, ...]) -> tuple[Expr, ...]:
        """The element of ``target`` a gather (or scatter) ``node`` of result ``shape`` reaches at ``idx``: its index
        arrays' values, read at the broadcast part of ``idx``, and the remaining axes."""
        indices = node.args[1:] if node.op == "gather" else node.args[2:]
        positions, first, nb = node.attrs
        bidx, bshape = idx[first : first + nb], shape[first : first + nb]
        rest = iter((*idx[:first], *idx[first + nb :]))
        entries: list[Expr] = []
        for d in range(target.ndim):
            if d not in positions:
                entries.append(Index(next(rest), loc=node.loc))
                continue
            ix = indices[positions.index(d)]
            if isinstance(ix, Array):
                entries.append(self.at(ix, self.operand_index(ix, bidx, bshape)))
            else:  # an int among index arrays: a constant position (negative: from the end)
                n = target.shape[d]
                if not isinstance(n, Size) and not -n <= ix < n:
                    raise TracingError(f"index {ix} is out of bounds for axis {d} of size {n}", node.loc)
                entries.append(Index(Affine.constant(ix % n if ix < 0 else ix), loc=node.loc))
        return tuple(entries)

    def store(self, buf: Buffer, node: Array) -> None:
        """Emit the store that fills ``buf`` with ``node`` (flat when ``buf.flat``)."""
        if node.op == "scatter_add" and id(node) not in self.by_node:  # (else computed by an earlier step)
            self.scatter_into(buf, node)
            return
        if node.op == "concat":  # one store per part, each at its offset along the axis
            self.store_parts(buf, node, node.shape, (0,) * node.ndim)
            return
        self.memo.clear()  # reduction axes inside memoised values may be a store axis of this store
        axes = self._store_axes(node.shape)
        idx = tuple(Affine.axis(a) for a in axes)
        outer, self.current = self.current, buf.name
        value = self.at(node, idx)
        self.current = outer
        if buf.flat:
            target: tuple[Affine, ...] = _flat_index(idx, node.shape, buf.lead)
        else:
            target = idx if idx else (Affine.constant(0),)
        self.stores.append(Store(buf.name, target, value, loc=node.loc))

    def store_parts(self, buf: Buffer, node: Array, shape: tuple, offsets: tuple) -> None:
        """The stores of a concatenation's parts at ``offsets`` in ``buf`` (of ``shape``); a part that is itself
        a concatenation (not stored elsewhere) has its parts stored in place, not copied from a buffer."""
        axis = node.attrs
        offset = 0
        for part in node.args:
            at_off = tuple(o + offset if d == axis else o for d, o in enumerate(offsets))
            offset += part.shape[axis]
            if part.op == "concat" and id(part) not in self.by_node:
                self.store_parts(buf, part, shape, at_off)
                continue
            self.memo.clear()
            idx = tuple(Affine.axis(a) for a in self._store_axes(part.shape))
            outer, self.current = self.current, buf.name
            value = self.at(part, idx)
            self.current = outer
            at = tuple(ix + o for ix, o in zip(idx, at_off))
            target = _flat_index(at, shape, buf.lead) if buf.flat else at
            self.stores.append(Store(buf.name, target, value, loc=node.loc))

    def output(self, node: Array, name: str, direct: bool = False) -> Buffer:
        """Store result ``node`` in output ``name``; ``direct``: computed there even if it is to be stored once
        (``force``), the value the program's other reads then load (not a temporary copied to the output)."""
        buf = Buffer(name, _declared(node.shape), node.dtype, "output", node)
        self.taken.add(name)
        self.buffers.append(buf)
        if direct and id(node) not in self.by_node:
            saved = dict(self.memo)
            self.storing.add(id(node))
            self.store(buf, node)
            self.storing.discard(id(node))
            self.memo = saved
        else:
            self.store(buf, node)
        if id(node) not in self.by_node:  # later outputs read it from here instead of computing it again
            self.by_node[id(node)] = buf
            self.keep.append(node)
        return buf

    def materialize(self, node: Array, flat: bool = False, lead: int = 0) -> Buffer:
        """The buffer ``node`` is stored in (first storing it); ``flat``: with its axes from ``lead`` on merged
        into one, for a reshape that merges them (the leading axes stay axes, so their sizes can stay dims)."""
        buf = self.by_node.get(id(node))
        if buf is not None and not flat:
            return buf
        if flat:
            hit = self.flat_bufs.get((id(node), lead))
            if hit is not None:
                return hit
        shape = _flat_shape(node.shape, lead) if flat else _declared(node.shape)
        if flat and buf is not None and buf.kind == "input" and buf.source is None:  # a view of the input, no copy
            view = Buffer(self.fresh(f"{buf.name}_flat"), shape, node.dtype, "input", node, flat=True, lead=lead,
                          source=buf.name)  # fmt: skip
            self.buffers.append(view)
            self.flat_bufs[(id(node), lead)] = view
            self.keep.append(node)
            return view
        # a 16-bit float temporary holds float32 (its values are computed in float32 and rounded once, where a
        # result is stored): where the plan stores a value does not change the program's result
        buf = Buffer(self.fresh("tmp"), shape, node.dtype.compute, "temp", node, flat=flat, lead=lead)
        self.buffers.append(buf)
        saved, scatter = dict(self.memo), self.in_scatter
        self.storing.add(id(node))
        self.in_scatter = False  # (its own store is a plain one)
        self.store(buf, node)
        self.in_scatter = scatter
        self.storing.discard(id(node))
        self.memo = saved
        self.by_node.setdefault(id(node), buf)
        if flat:
            self.flat_bufs[(id(node), lead)] = buf
        self.keep.append(node)
        return buf

    # -- values ------------------------------------------------------------------------------------------------
    def at(self, node: Array | int | float | bool, idx: tuple[Affine, ...]) -> Expr:
        if not isinstance(node, Array):
            return Const(node, weak=True)
        key = (id(node), idx)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        buf = self.by_node.get(id(node))
        assert buf is not None or node.op != "scatter_add", "a scatter read inside a step (see lower)"
        stored = node.op == "concat" or (node.op == "stop" and node.attrs in ("store", "keep"))  # (written once, read)
        if buf is None and (stored or id(node) in self.force) and id(node) not in self.storing:
            buf = self.materialize(node)  # written part by part, then read; or stored in an earlier pass
        if buf is None and node.op != "input" and _expensive(node, self.costly) and self.varies(node, idx):
            buf = self.materialize(node)
        if buf is not None:
            e: Expr = self.load(buf, node, idx)
        else:
            e = self.compute(node, idx)
            where = self.computed_in.setdefault(id(node), [])
            if self.current not in where:
                where.append(self.current)
        self.memo[key] = e
        return e

    def varies(self, node: Array | int | float | bool, idx: tuple[Affine, ...]) -> bool:
        """Whether a reduction inside ``node``, read at ``idx``, would be evaluated at an index that moves with
        a reduction axis (so inlining it would compute the reduction again at every step of that axis)."""
        if not isinstance(node, Array) or node.op in ("input", "reshape", "concat") or id(node) in self.by_node:
            return False
        if node.op == "stop" and node.attrs in ("store", "keep"):  # stored where it is first read
            return False
        if node.op in ("reduce", "contract", "scan", "sort"):
            return any(a in self.reduction_axis_set for ix in idx for a in ix.axis_set())
        if node.op == "view":
            return self.varies(node.args[0], _apply_view(node.attrs, idx))
        if node.op in ("cast", "custom", "stop"):
            return self.varies(node.args[0], idx)
        if node.op == "gather":  # the gathered array is stored first; the index arrays are read at idx's part
            positions, first, nb = node.attrs
            bidx, bshape = idx[first : first + nb], node.shape[first : first + nb]
            return any(self.varies(x, self.operand_index(x, bidx, bshape)) for x in node.args[1:])
        if node.op == "iota":
            return False
        return any(self.varies(x, self.operand_index(x, idx, node.shape)) for x in node.args)

    def load(self, buf: Buffer, node: Array, idx: tuple[Affine, ...]) -> Expr:
        if buf.flat:
            return Load(buf.name, _flat_index(idx, node.shape, buf.lead), loc=node.loc)
        return Load(buf.name, idx if idx else (Affine.constant(0),), loc=node.loc)

    def operand_index(self, x: Array | int | float | bool, idx: tuple[Affine, ...], shape: tuple[int, ...]):
        """``idx`` (an index of a result of ``shape``) for operand ``x``, broadcast NumPy's way."""
        if not isinstance(x, Array):
            return idx
        off = len(shape) - x.ndim
        return tuple(Affine.constant(0) if s == 1 and shape[off + k] != 1 else idx[off + k]
                     for k, s in enumerate(x.shape))  # fmt: skip

    def compute(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        op, loc = node.op, node.loc
        if op == "unary":
            (x,) = node.args
            return Unary(node.attrs, self.at(x, self.operand_index(x, idx, node.shape)), loc=loc)
        if op == "binary":
            a, b = node.args
            return Binary(node.attrs, self.at(a, self.operand_index(a, idx, node.shape)),
                          self.at(b, self.operand_index(b, idx, node.shape)), loc=loc)  # fmt: skip
        if op == "where":
            c, a, b = (self.at(x, self.operand_index(x, idx, node.shape)) for x in node.args)
            return Where(c, a, b, loc=loc)
        if op == "cast":
            (x,) = node.args
            return Cast(self.at(x, idx), dtype=node.attrs, loc=loc)
        if op == "fill":
            return Const(node.attrs, dtype=node.dtype, loc=loc)
        if op in ("custom", "stop"):  # a custom op with its own gradient, or stop_gradient: the value's
            return self.at(node.args[0], idx)
        if op == "view":
            return self.at(node.args[0], _apply_view(node.attrs, idx))
        if op == "reshape":
            (x,) = node.args
            base = x
            while base.op in ("view", "cast"):
                base = base.args[0]
            if base.op != "input" and id(base) not in self.by_node and _expensive(base, self.costly):
                self.materialize(base)  # computed in its own layout (a contraction stays one), then copied flat
            lead = 0  # the leading axes the reshape leaves alone stay axes of the flat buffer
            while lead < min(x.ndim, node.ndim) - 1 and x.shape[lead] == node.shape[lead]:
                lead += 1
            buf = self.materialize(x, flat=True, lead=lead)
            return Load(buf.name, _flat_index(idx, node.shape, lead), loc=loc)
        if op == "reduce":
            return self.reduce(node, idx)
        if op == "scan":
            return self.scan(node, idx)
        if op == "sort":
            return self.sort(node, idx)
        if op == "contract":
            return self.contract(node, idx)
        if op == "gather":
            return self.gather(node, idx)
        if op == "iota":  # the position along an axis
            return Index(idx[node.attrs], loc=loc)
        raise AssertionError(op)

    def gather(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        """``x[i0, :, i2]`` at ``idx``: a read of ``x``'s buffer (stored first unless it is an input) at the index
        arrays' values (read at the broadcast part of ``idx``) and the remaining axes."""
        buf = self.materialize(node.args[0])
        return Gather(buf.name, self.indexed_at(node, node.args[0], node.shape, idx), loc=node.loc)

    def reduce(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        (x,) = node.args
        op, axes, keepdims = node.attrs
        src: list[Affine] = []
        red: list[int] = []
        it = iter(idx)
        for d, n in enumerate(x.shape):
            if d in axes:
                a = self._reduce_axis(node, d, n)
                red.append(a)
                src.append(Affine.axis(a))
                if keepdims:
                    next(it)
            else:
                src.append(next(it))
        body = self.at(x, tuple(src))
        if x.dtype.is_int and op == "mean":  # the integers are summed exactly (in int64), then divided
            body = Cast(body, dtype=dtypes.int64, loc=node.loc)
        elif x.dtype.is_int and node.dtype != x.dtype:  # narrow integers summed in the default integer's width
            body = Cast(body, dtype=node.dtype, loc=node.loc)
        if op == "mean":  # (a 16-bit mean divides in float32: the sum is not rounded to 16 bits in between)
            total = Cast(Reduce("sum", body, tuple(red), loc=node.loc), dtype=node.dtype.compute, loc=node.loc)
            count: Expr = Const(float(factors(tuple(x.shape[d] for d in axes))[1]), weak=True)
            for d in axes:  # a symbolic size is read from its dim at run time
                if isinstance(x.shape[d], Size):
                    n = Cast(Index(Affine.dim(x.shape[d].name)), dtype=node.dtype.compute, loc=node.loc)
                    count = Binary("mul", count, n, loc=node.loc)
            return Binary("div", total, count, loc=node.loc)
        return Reduce(op, body, tuple(red), loc=node.loc)

    def scan(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        """A running reduction at ``idx``: a ``Scan`` along the axis at its position when that is a plain axis of
        the store (its loop carries the scan); read from a temporary it is stored in first otherwise (a reversed
        or shifted view of it, one element of it, a scan read inside a reduction)."""
        op, a, reverse, combine, which = node.attrs
        starts: tuple[Array, ...] = ()
        if op == LOOP:  # (a sequential loop's values before its first step: the last operands)
            k = len(combine.exprs)
            starts = node.args[len(node.args) - k :]
            x, *others = node.args[: len(node.args) - k]
        else:
            x, *others = node.args
        axis = idx[a].plain_axis()
        if (
            self.in_scatter  # (a scatter's points are no scan nest: stored first)
            or axis is None
            or (reverse and not same(self.extents[axis], node.shape[a]))  # (a part of a reversed scan: the
            # scan starts at the end, which the nest's loop over the part does not reach)
            or axis in self.reduction_axis_set
            or any(axis in ix.axis_set() for ix in idx[:a] + idx[a + 1 :])
        ):
            return self.load(self.materialize(node), node, idx)
        body = self.at(x, idx)
        if combine is None and x.dtype != node.dtype:  # booleans and narrow integers summed in a wider type
            body = Cast(body, dtype=node.dtype, loc=node.loc)
        rest = tuple(self.at(o, idx) for o in others)  # pt.associative_scan of a tuple: the other values
        init = tuple(self.at(s, idx) for s in starts)  # (broadcast along the loop's axis: read before it)
        return Scan(op, body, axis, reverse, combine, rest, which, init, loc=node.loc)

    def sort(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        """An ordering (``pt.sort``, ``pt.argsort``, ``pt.topk``) at ``idx``: a ``Sort`` whose positions run along
        the store's plain axis at the ordered dimension, reading the row along an axis of its own (shared by the
        orderings of one array, so ``pt.topk``'s values and indices are one nest); read from a temporary it is
        stored in first when that position is not a plain axis of the store."""
        (x,) = node.args
        a, which, descending, top = node.attrs
        out = idx[a].plain_axis()
        if (
            self.in_scatter
            or out is None
            or out in self.reduction_axis_set
            or any(out in ix.axis_set() for ix in idx[:a] + idx[a + 1 :])
        ):
            return self.load(self.materialize(node), node, idx)
        inner = self._reduce_axis(x, ("sort", a), x.shape[a])
        body = self.at(x, idx[:a] + (Affine.axis(inner),) + idx[a + 1 :])
        return Sort(body, inner, out, which, descending, top, loc=node.loc)

    def contract(self, node: Array, idx: tuple[Affine, ...]) -> Expr:
        subscripts, out, sizes, mode = node.attrs
        size = dict(sizes)
        at: dict[str, Affine] = dict(zip(out, idx))
        red: list[int] = []
        for letter in sorted(size):
            if letter not in at:
                a = self._reduce_axis(node, letter, size[letter])
                red.append(a)
                at[letter] = Affine.axis(a)
        body: Expr | None = None
        for x, sub in zip(node.args, subscripts):
            if x.op != "input" and id(x) not in self.by_node and _expensive(x, self.costly):
                self.materialize(x)  # an operand with reductions inside: computed once, not once per product
            src = tuple(Affine.constant(0) if n == 1 and size[c] != 1 else at[c] for c, n in zip(sub, x.shape))
            v = self.at(x, src)
            if mode == "mixed" and x.dtype == dtypes.float32:  # read as bfloat16, multiplied in float32
                v = Cast(Cast(v, dtype=dtypes.bfloat16, loc=node.loc), dtype=dtypes.float32, loc=node.loc)
            elif mode == "highest":  # multiplied and accumulated in float64
                v = Cast(v, dtype=dtypes.float64, loc=node.loc)
            body = v if body is None else Binary("mul", body, v, loc=node.loc)
        assert body is not None
        if not red:
            return Cast(body, dtype=node.dtype, loc=node.loc) if mode == "highest" else body
        total: Expr = Reduce("sum", body, tuple(red), loc=node.loc)
        return Cast(total, dtype=node.dtype, loc=node.loc) if mode == "highest" else total

    # -- the kernel --------------------------------------------------------------------------------------------
    def kernel(self) -> KernelIR:
        stored = {s.tensor for s in (*self.stores, *self.scatters)}
        from pypto.ir.nodes import loads

        loaded = {ld.tensor for s in (*self.stores, *self.scatters) for ld in loads(s)} | {
            s.tensor for s in self.scatters
        }
        # Sizes are passed to the generated code as arguments, one per distinct size (``n512``), as in a kernel
        # with symbolic dims: compilers schedule those loops better than loops of constant trip counts (a
        # register-tiled contraction measured 1.3x faster). Flat buffers and the axes of their mixed-radix
        # indices keep constant sizes, which those indices need.
        buffers = {b.name: b for b in self.buffers}
        static_buf = {b.name for b in self.buffers if b.node is not None and b.node.op == "concat"}
        accesses = [(s.tensor, s.index) for s in self.stores]
        accesses += [(ld.tensor, ld.index) for s in (*self.stores, *self.scatters) for ld in loads(s)]
        sliced: set[tuple[str, int]] = set()
        for tensor, index in accesses:  # a buffer read through a slice keeps constant sizes
            for pos, ix in enumerate(index):
                a = ix.plain_axis()
                if a is not None and not same(buffers[tensor].shape[pos], self.extents[a]):
                    static_buf.add(tensor)
                    sliced.add((tensor, pos))

        def static(tensor: str, pos: int) -> bool:  # a flat buffer's flat axis has a constant size
            b = buffers[tensor]
            if b.flat and pos >= b.lead:
                return True
            # a symbolic size stays a dim unless its own axis is sliced
            return tensor in static_buf and (not isinstance(b.shape[pos], Size) or (tensor, pos) in sliced)

        const_axes: set[int] = set()  # axes whose loops keep a constant trip count
        for tensor, index in accesses:
            for pos, ix in enumerate(index):
                a = ix.plain_axis()
                if a is None and len(ix.axes) > 1:  # mixed-radix (flat) indices need constant sizes
                    const_axes |= ix.axis_set()
                elif a is not None and static(tensor, pos):
                    const_axes.add(a)
        dims: dict[str, None] = {}

        def size(n: int | Size, const: bool) -> Affine:
            if const and isinstance(n, Size):
                depends(f"symbolic size {n.name} in a flat buffer or a slice's bounds")
                n = n.value
            if const or n <= 1:
                return Affine.constant(n)
            name = _dim_name(n)
            dims[name] = None
            return Affine.dim(name)

        params = []
        for b in self.buffers:
            role = "in"
            if b.name in stored:
                role = "inout" if b.name in loaded else "out"
            params.append(TensorParam(b.name, b.dtype, tuple(size(n, static(b.name, k)) for k, n in enumerate(b.shape)),
                                      role))  # fmt: skip
        from_params = set(dims)  # an axis's size is a dim only where some array's shape gives it at a call
        axes = tuple(
            AxisInfo(a, _axis_name(a, a in self.reduction_axis_set),
                     size(n, a in const_axes or _dim_name(n) not in from_params),
                     f"its size, {n.name if isinstance(n, Size) else n}")
            for a, n in sorted(self.extents.items())
        )  # fmt: skip
        scratch = frozenset(b.name for b in self.buffers if b.kind == "temp")
        return KernelIR(self.name, tuple(params), tuple(dims), axes, tuple(self.stores), scatters=tuple(self.scatters),
                        scratch=scratch)  # fmt: skip


def _dim_name(n: int | Size) -> str:
    """The dim a loop or shape of size ``n`` reads: the symbolic size's, or ``n512`` for a static 512."""
    return n.name if isinstance(n, Size) else f"n{n}"


def _axis_name(a: int, reduction: bool) -> str:
    return f"{'r' if reduction else 'i'}{a}"


def _apply_view(index, idx: tuple[Affine, ...]) -> tuple[Affine, ...]:
    """The input's index for ``idx`` of a view (see :data:`pypto.array.views.ViewMap`)."""
    src = []
    for const, terms in index:
        a = Affine.constant(const)
        for o, k in terms:
            a = a + idx[o].scale(k)
        src.append(a)
    return tuple(src)


def _flat_shape(shape: tuple[int, ...], lead: int) -> tuple[int, ...]:
    """The declared shape of a flat buffer: the leading axes, then the rest as one axis."""
    return (*shape[:lead], max(1, math.prod(shape[lead:])))


def _flat_index(idx: tuple[Affine, ...], shape: tuple[int, ...], lead: int) -> tuple[Affine, ...]:
    """``idx`` of an array of ``shape`` in its flat buffer (axes from ``lead`` on merged)."""
    return (*idx[:lead], _linear(idx[lead:], shape[lead:]))


def _linear(idx: tuple[Affine, ...], shape: tuple[int, ...]) -> Affine:
    """The row-major offset of ``idx`` in an array of ``shape``."""
    out = Affine.constant(0)
    stride = 1
    for ix, n in zip(reversed(idx), reversed(shape)):
        out = out + ix.scale(stride)
        stride *= n
    return out


def lower(name: str, inputs: Sequence[tuple[str, Array]], outputs: Sequence[tuple[str, Array]]) -> Plan:
    """The kernel computing ``outputs`` (name, node) from ``inputs`` (name, node), and its buffers.

    A :class:`~pypto.array.sizes.Size` in a shape (``pt.jit(dims=...)``) becomes the dim it names: loops and
    shapes of that size read it from the arrays at each call. Where the kernel needs its value instead (a flat
    buffer's constant sizes), the use is recorded in the symbolic trace under way.

    A kernel's scatters run after its stores, so a program that reads a scatter's result (``x.at[i].add(v) * 2``,
    a gradient through ``x[idx]`` flowing on into ``x``'s own operands) runs as several kernels, one after
    another: each step computes the scatter results the later steps read (:func:`scatter_steps`), and the last
    computes the outputs. So does a program that gathers or scatters at indices it computes with a reduction
    (``pt.take_along_axis(x, pt.argmax(x, 1, keepdims=True), 1)``). The plan returned is the last; ``plan.steps`` are the ones before it.
    """
    levels = scatter_steps([node for _, node in outputs])
    if not levels:
        return _lower(name, inputs, outputs)
    taken = {n for n, _ in (*inputs, *outputs)}
    done: list[tuple[str, Array]] = []
    steps: list[Plan] = []
    count = 0
    for k, group in enumerate(levels):
        outs = []
        for node in group:
            while f"scattered{count}" in taken:
                count += 1
            outs.append((f"scattered{count}", node))
            taken.add(f"scattered{count}")
        step = _lower(f"{name}_step{k}", [*inputs, *done], outs)
        step.n_inputs = len(inputs)
        steps.append(step)
        done += outs
    plan = _lower(name, [*inputs, *done], outputs)
    plan.steps, plan.n_inputs = steps, len(inputs)
    return plan


def computed_indices(nodes: Sequence[Array]) -> list[Array]:
    """The index arrays of gathers and scatters that need a reduction, a scan, a sort or a contraction (an index
    by ``pt.argmax``, the positions of ``pt.topk``): the call checks a kernel's indices before it runs, on the
    caller's values, so these are computed by an earlier step and passed in."""
    memo: dict[int, bool] = {}
    out: dict[int, Array] = {}
    for n in nodes:
        if n.op in ("gather", "scatter_add"):
            for ix in n.args[1:] if n.op == "gather" else n.args[2:]:
                if isinstance(ix, Array) and ix.op != "input" and _expensive(ix, memo):
                    out.setdefault(id(ix), ix)
    return list(out.values())


def scatter_steps(outputs: Sequence[Array]) -> list[list[Array]]:
    """The scatter results the program reads (not only returns), and the index arrays it computes with
    reductions (:func:`computed_indices`), grouped into the steps computing them: one whose operands read no
    other such node is in step 0, one reading a step-0 result in step 1 ..."""
    nodes = walk(list(outputs))
    read = {id(a) for n in nodes for a in n.args if isinstance(a, Array) and a.op == "scatter_add"}
    read |= {id(ix) for ix in computed_indices(nodes)}
    if not read:
        return []
    below: dict[int, int] = {}  # node id -> the latest step among the read scatters it depends on (-1: none)
    levels: list[list[Array]] = []
    for n in nodes:
        deepest = max((below[id(a)] for a in n.args if isinstance(a, Array)), default=-1)
        if id(n) in read:
            level = deepest + 1
            while len(levels) <= level:
                levels.append([])
            levels[level].append(n)
            deepest = level
        below[id(n)] = deepest
    return levels


def _lower(name: str, inputs: Sequence[tuple[str, Array]], outputs: Sequence[tuple[str, Array]]) -> Plan:
    # A first pass finds the nodes worth storing; the second stores each of them before its first read, so
    # a value read inline before the read that decided to store it is loaded too, not computed twice.
    nodes = walk([node for _, node in outputs])
    # the values marked to be stored once (a factorisation's steps: hundreds in a chain), stored in order before
    # the outputs: each then finds the one before it stored (stored when first read instead, a chain would be
    # lowered as deep a recursion as it is long)
    ends = {id(node) for _, node in outputs}
    marked = [n for n in nodes if n.op == "stop" and n.attrs in ("store", "keep") and id(n) not in ends]
    first = Lowering(name, inputs)
    for node in marked:
        if id(node) not in first.by_node:
            first.materialize(node)
    for n, node in outputs:
        first.output(node, n)
    stored = frozenset(id(b.node) for b in first.buffers if b.kind == "temp" and not b.flat)

    place = {id(n): k for k, n in enumerate(nodes)}

    def run(force: frozenset[int]) -> tuple[Lowering, list[int]]:
        low = Lowering(name, inputs, force)
        for node in marked:
            if id(node) not in low.by_node:
                low.materialize(node)
        positions = [0] * len(outputs)
        # a result the program also reads (stored once anyway: a forward value its gradient reads, a residual a
        # backward reads) is computed straight into its output, in the graph's order, and read from there, not
        # stored in a temporary and copied (a 16-bit float result: its temporary holds float32, kept)
        direct = sorted((k for k, (_, node) in enumerate(outputs)
                         if id(node) in force and node.dtype == node.dtype.compute and node.op != "input"),
                        key=lambda k: place[id(outputs[k][1])])  # fmt: skip
        for k in [*direct, *(k for k in range(len(outputs)) if k not in direct)]:
            n, node = outputs[k]
            positions[k] = len(low.buffers)
            low.output(node, n, k in direct)
        return low, positions

    low, positions = run(stored)
    # a contraction still computed inline by several stores (a forward value and its gradient both read
    # x @ w) is computed once and stored instead
    again = {id(n) for n in nodes if n.op == "contract" and len(low.computed_in.get(id(n), ())) > 1}
    if again:
        low, positions = run(stored | again)
    return Plan(low.kernel(), low.buffers, positions, nodes, low.computed_in, n_inputs=len(inputs))
