"""The planner: the dask graph of one kernel IR on given arrays (see :mod:`pypto.dask`)."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.dask.graph import Combine, Run, dask_array, identity
from pypto.errors import ArgumentError, RechunkWarning
from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisInfo, KernelIR, ScalarParam, TensorParam
from pypto.ir.nodes import (
    Binary,
    Const,
    Expr,
    Extent,
    Gather,
    Index,
    Load,
    Node,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    Sort,
    Store,
    Unary,
    Where,
    free_axes,
    map_children,
    postorder,
    scans,
    top_reduces,
)
from pypto.ir.ops import scan_name
from pypto.ir.reducers import COMBINE_OP
from pypto.ir.reducers import identity as identity_value
from pypto.runtime.foreign import is_dask_array

# ---------------------------------------------------------------------------------------------------------
# The planner


class _Classes:
    """Union-find over kernel axes and tensor dimensions that must be chunked alike."""

    def __init__(self) -> None:
        self.parent: dict[tuple, tuple] = {}

    def find(self, x: tuple) -> tuple:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple, b: tuple) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _accesses(ir: KernelIR) -> list[tuple[str, tuple[Affine, ...]]]:
    out: list[tuple[str, tuple[Affine, ...]]] = []
    for s in ir.stores:
        out.append((s.tensor, s.index))
    for e in _values(ir):
        for n in postorder(e):
            if isinstance(n, Load):
                out.append((n.tensor, n.index))
    return out


def _values(ir: KernelIR) -> list[Expr]:
    """Every value the kernel computes: its stores' and its scatters' (indices included)."""
    return [s.value for s in ir.stores] + [e for c in ir.scatters for e in (*c.index, c.value)]


def _replace(e: Expr, table: dict[Node, Expr]) -> Expr:
    """``e`` with every sub-expression found in ``table`` replaced (top down)."""
    memo: dict[int, Expr] = {}

    def go(n: Expr) -> Expr:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        r = table.get(n)
        if r is None:
            r = map_children(n, go)  # type: ignore[assignment]
        memo[id(n)] = r  # type: ignore[assignment]
        return r  # type: ignore[return-value]

    return go(e)


def _contains(e: Expr, target: Expr) -> bool:
    return any(n == target for n in postorder(e))


def _online_form(body: Expr, m: Reduce) -> bool:
    """Whether ``body`` is ``exp(e - m)`` or a product of it with factors free of ``m``."""
    if isinstance(body, Unary) and body.op == "exp":
        x = body.x
        return isinstance(x, Binary) and x.op == "sub" and x.b == m and not _contains(x.a, m)
    if isinstance(body, Binary) and body.op in ("mul", "div"):
        a_has, b_has = _contains(body.a, m), _contains(body.b, m)
        if body.op == "mul" and a_has != b_has:
            return _online_form(body.a if a_has else body.b, m)
        if body.op == "div" and a_has and not b_has:
            return _online_form(body.a, m)
    return False


@dataclass
class Plan:
    """What :func:`explain` prints: the layers of the graph and the kernels behind them."""

    name: str
    layers: list[str] = field(default_factory=list)
    rechunked: list[str] = field(default_factory=list)
    kernels: list[KernelIR] = field(default_factory=list)

    def text(self) -> str:
        from pypto.ir.printer import format_kernel

        lines = [f"dask plan of {self.name}:"]
        lines += [f"  {k + 1}. {layer}" for k, layer in enumerate(self.layers)]
        if self.rechunked:
            lines.append("  rechunked to one chunk: " + "; ".join(self.rechunked))
        for k in self.kernels:
            lines += ["", format_kernel(k).rstrip()]
        return "\n".join(lines)


_WARNED: set[tuple] = set()

# An output dimension of a layer: ("axis", a) follows axis a's chunks; ("one", a) is one element per chunk
# of axis a (a partial); ("new", n) is a new dimension of n elements in one chunk.
OutDim = tuple


class Planner:
    """Builds the dask graph of one kernel IR on given arrays (see the module docstring)."""

    def __init__(self, ir: KernelIR, arrays: dict[str, Any], scalars: dict[str, Any], dimvals: dict[str, int],
                 extents: dict[int, int], executor: str | None, fastmath: bool):  # fmt: skip
        from pypto.passes.infer_types import _Typer

        self.da = dask_array()
        self.ir = ir
        self.executor = executor
        self.fastmath = fastmath
        self.scalars = scalars
        self.dimvals = dimvals
        self.typer = _Typer(ir)
        self.plan = Plan(ir.name)
        self.counter = itertools.count()
        self.types: dict[str, tuple[Any, tuple[int, ...]]] = {}  # generated tensors: dtype, shape
        self.pair_max: dict[Node, Expr] = {}  # maxima computed with an online sum, read back from its pairs
        self.dimnames: dict[tuple, str] = {}
        self.full: dict[str, tuple[int, ...]] = {
            p.name: tuple(e.evaluate(dimvals) for e in p.shape) for p in ir.tensor_params
        }
        self.extents = dict(extents)  # axis -> its extent in this call
        self.axis_names = {a.index: a.name for a in ir.axes}
        self.env: dict[str, Any] = {}
        self.per_chunk: dict[str, int] = {}  # a scan's carries -> the dimension holding one value per chunk
        self._chunking(arrays)

    # -- chunking ------------------------------------------------------------------------------------------
    def _chunking(self, arrays: dict[str, Any]) -> None:
        """Classes of axes and tensor dimensions chunked alike, their chunks, and the inputs rechunked to them."""
        ir, uf = self.ir, _Classes()
        whole: dict[tuple, str] = {}  # class member -> why it must be one chunk
        for t, index in _accesses(ir):
            for p, e in enumerate(index):
                a = e.plain_axis()
                if a is not None:
                    uf.union(("a", a), ("t", t, p))
                    continue
                uf.find(("t", t, p))
                if e.axis_set():
                    why = f"{t} is indexed by {_fmt(e, ir)}"
                    whole[("t", t, p)] = why
                    for ax in e.axis_set():
                        whole[("a", ax)] = why
        scattered = {id(ix) for c in ir.scatters for ix in c.index}  # a scatter's target is a whole partial
        for value in _values(ir):
            gathers = [e for e in postorder(value) if isinstance(e, Gather)]
            entries = {id(ix) for g in gathers for ix in g.index} | scattered  # affine positions are not values
            for e in postorder(value):
                if isinstance(e, Index) and id(e) not in entries:
                    for ax in e.affine.axis_set():
                        whole[("a", ax)] = f"axis {ir.axis_name(ax)} is used as a value"
                elif isinstance(e, Scan) and not _blockwise_scan(e):  # a loop's or the user's scan: in order
                    whole[("a", e.axis)] = f"{scan_name(e.op)} runs along axis {ir.axis_name(e.axis)}"
                elif isinstance(e, Sort):  # an ordered row needs all of the row
                    why = f"a sort runs along axis {ir.axis_name(e.axis)}"
                    whole[("a", e.axis)] = whole[("a", e.out)] = why
            # a gathered tensor: whole along the positions read at indices from data (every block may read any
            # of it: it is passed whole to each), chunked with its axis along a plain one (table[tok[i], d]: d)
            for g in gathers:
                for p, ix in enumerate(g.index):
                    a = ix.affine.plain_axis() if isinstance(ix, Index) else None
                    if a is not None:
                        uf.union(("a", a), ("t", g.tensor, p))
                        continue
                    uf.find(("t", g.tensor, p))
                    whole[("t", g.tensor, p)] = f"{g.tensor} is gathered at indices read from data"
                    if isinstance(ix, Index):
                        for ax in ix.affine.axis_set():
                            whole[("a", ax)] = f"{g.tensor} is indexed by {_fmt(ix.affine, ir)}"
        for a in ir.axes:
            uf.find(("a", a.index))
        # a class is cut into chunks only if its tensor dimensions all have the axis's extent
        size: dict[tuple, int] = {}
        for a, n in self.extents.items():
            size[uf.find(("a", a))] = n
        for t, shape in self.full.items():
            for p, n in enumerate(shape):
                r = uf.find(("t", t, p))
                if size.setdefault(r, n) != n:
                    whole[("t", t, p)] = f"{t}.shape[{p}] = {n} differs from the extent of its axis"
        given: dict[tuple, list[tuple[int, ...]]] = {}
        for t, arr in arrays.items():
            if is_dask_array(arr):
                for p, c in enumerate(arr.chunks):
                    given.setdefault(uf.find(("t", t, p)), []).append(tuple(c))
        bad = {uf.find(m): why for m, why in whole.items()}
        self.uf, self.size, self.chunks = uf, size, {}
        reasons: list[str] = []
        for r in size:
            cs = given.get(r, [])
            if r in bad or not cs:
                self.chunks[r] = None
                if r in bad and any(len(c) > 1 for c in cs) and bad[r] not in reasons:
                    reasons.append(bad[r])
            elif all(c == cs[0] for c in cs):
                self.chunks[r] = cs[0]
            else:
                self.chunks[r] = tuple(self.da.core.common_blockdim(cs))
        self.plan.rechunked = reasons
        for t, arr in arrays.items():
            want = tuple(self.chunks[uf.find(("t", t, p))] or (n,) for p, n in enumerate(self.full[t]))
            if not is_dask_array(arr):
                arr = self.da.from_array(np.asarray(arr), chunks=want)
            elif tuple(map(tuple, arr.chunks)) != want:
                arr = arr.rechunk(want)
            self.env[t] = arr
        if reasons:
            key = (ir.name, tuple(reasons))
            if key not in _WARNED:
                _WARNED.add(key)
                warnings.warn(
                    f"{ir.name} on dask arrays: rechunked to one chunk along axes that cannot be cut into "
                    f"independent blocks ({'; '.join(reasons)}); chunk them whole yourself to silence this",
                    RechunkWarning,
                    stacklevel=5,
                )

    def cls(self, a: int) -> tuple:
        return self.uf.find(("a", a))

    def chunked(self, a: int) -> bool:
        return self.chunks.get(self.cls(a)) is not None and len(self.chunks[self.cls(a)]) > 1

    def dim_of(self, a: int) -> str:
        """The dim that sizes axis ``a`` in generated kernels (one per class of axes chunked alike)."""
        r = self.cls(a)
        name = self.dimnames.get(r)
        if name is None:
            name = f"n_{self.ir.axis_name(a)}"
            while name in self.dimnames.values():
                name += "_"
            self.dimnames[r] = name
        return name

    # -- the graph -----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        for s in self.ir.stores:
            self.env[s.tensor] = self.store(s)
        for c in self.ir.scatters:
            self.env[c.tensor] = self.scatter(c)
        return self.env

    def scatter(self, c: Scatter) -> Any:
        """A scatter-add (max, min) on blocks: each block of its points scatters into a partial target of its
        own (started at the identity), the partials are combined by a tree reduction in block order, and the
        result is combined with the target's values so far (zeros when it was not passed)."""
        target, full = self.ir.buffer(c.tensor), self.full[c.tensor]
        rop = {"add": "sum", "max": "max", "min": "min"}[c.op]
        pdt = dtypes.float32 if target.dtype.is_half else target.dtype  # a 16-bit target: partials in float32
        loops = sorted(free_axes(c.value).union(*(free_axes(ix) for ix in c.index)))
        # a target position indexed by a plain axis (dtable[tok[b, s], d]: d) follows that axis's chunks: blocks
        # along it write different elements. Blocks along the other chunked axes each make a partial target.
        owned = {p: ix.affine.plain_axis() for p, ix in enumerate(c.index) if isinstance(ix, Index)}
        owned = {p: a for p, a in owned.items() if a is not None}
        cut = [a for a in loops if self.chunked(a) and a not in owned.values()]
        first = max([a.index for a in self.ir.axes] + list(self.extents)) + 1
        at: list[Affine] = []
        out: list[OutDim] = [("one", a) for a in cut]
        for p, n in enumerate(full):
            if p in owned:
                at.append(Affine.axis(owned[p]))
                out.append(("axis", owned[p]))
            else:
                self.extents[first + p] = n
                self.axis_names[first + p] = f"t{p}"
                at.append(Affine.axis(first + p))
                out.append(("new", n))
        lead = tuple(Affine.constant(0) for _ in cut)
        init = (lead + tuple(at), identity_value(rop, pdt))
        index = tuple(Index(Affine.constant(0)) for _ in cut) + tuple(self.split(ix) for ix in c.index)
        value = self.split(c.value)
        part = f"{c.tensor}_part"
        what = f"{c.tensor}: scatter-{c.op} into a partial {c.tensor} per block"
        partial = self.layer(what, part, [init], out, pdt, scatter=(index, value, c.op))
        axis = tuple(range(len(cut)))
        if axis:
            reduce = {"sum": partial.sum, "max": partial.max, "min": partial.min}[rop]
            partial = reduce(axis=axis, dtype=pdt.numpy) if rop == "sum" else reduce(axis=axis)
            self.plan.layers.append(f"{c.tensor}: the partials combined ({rop}, a tree over the blocks)")
        base = self.env.get(c.tensor)
        if base is None and rop == "sum":
            return partial.astype(target.dtype.numpy) if pdt != target.dtype else partial
        if base is None:  # an output not passed in starts as zeros
            base = self.da.zeros(full, dtype=target.dtype.numpy, chunks=partial.chunks)
        fn = {"sum": self.da.add, "max": self.da.maximum, "min": self.da.minimum}[rop]  # NaN wins, as in NumPy
        combined = fn(base.astype(pdt.numpy) if pdt != target.dtype else base, partial)
        self.plan.layers.append(f"{c.tensor}: its values so far {c.op} the combined partials")
        return combined.astype(target.dtype.numpy) if combined.dtype != target.dtype.numpy else combined

    def store(self, s: Store) -> Any:
        value = self.split(s.value)
        t, full = s.tensor, self.full[s.tensor]
        plain = [e.plain_axis() for e in s.index]
        whole = any(a is None or self.extents.get(a) != n for a, n in zip(plain, full))
        dtype = self.ir.buffer(t).dtype
        kind = "blockwise" if not top_reduces(value) else "blockwise, reductions inside each block"
        if not whole:
            out: list[OutDim] = [("axis", a) for a in plain]
            return self.layer(f"{t}: {kind}", t, [(s.index, value)], out, dtype)
        # the store writes part of the tensor: one block, starting from its values so far (zeros if none)
        first = max([a.index for a in self.ir.axes] + list(self.extents)) + 1
        copy = tuple(Affine.axis(first + p) for p in range(len(full)))
        for p, n in enumerate(full):
            self.extents[first + p] = n
            self.axis_names[first + p] = f"j{p}"
        prev: Expr = Load(t, copy) if t in self.env else Const(False if dtype.is_bool else 0, weak=True)
        return self.layer(f"{t}: one block (the kernel writes part of it)", t, [(copy, prev), (s.index, value)],
                          [("new", n) for n in full], dtype)  # fmt: skip

    def split(self, value: Expr) -> Expr:
        """``value`` with every reduction over a chunked axis computed by its own layers and read back, and every
        running reduction along one started from its earlier chunks' totals (:meth:`scan`)."""
        value = self.split_reductions(value)
        table: dict[Node, Expr] = {}
        for c in scans(value):  # inner ones first: an outer scan's body reads their replacements
            if c in table or not self.chunked(c.axis) or not _blockwise_scan(c):
                continue
            body = _replace(c.body, table) if table else c.body
            # (typed as the original: its body may read layers the kernel's typer does not know)
            table[c] = self.scan(Scan(c.op, body, c.axis, c.reverse, dtype=c.dtype, loc=c.loc), self.typer(c).dtype)
        return _replace(value, table) if table else value

    def scan(self, c: Scan, scan_dtype: Any) -> Expr:
        """A running reduction along a chunked axis: each chunk's total (a layer), the totals of the chunks before
        each one combined in order (after it, for a reversed scan: the chunk's *carry*, one value per chunk), and
        the running reduction within each chunk started from its carry, in the layer that reads the scan."""
        dtype = scan_dtype.compute  # (16-bit floats: totals and carries in float32, as in one kernel)
        a = c.axis
        free = sorted(free_axes(c.body) - {a})
        tmp = f"part{next(self.counter)}"
        out: list[OutDim] = [("axis", f) for f in free] + [("one", a)]
        index = tuple(Affine.axis(f) for f in free) + (Affine.constant(0),)
        name = self.ir.axis_name(a)
        part = self.layer(f"{tmp}: {c.op} of each chunk of {name} (the chunks' totals)", tmp,
                          [(index, Reduce(c.op, c.body, (a,), loc=c.loc))], out, dtype)  # fmt: skip
        carry = f"{tmp}_carry"
        self.env[carry] = _carries(part, len(free), c.op, identity_value(c.op, dtype).value, c.reverse, dtype.numpy)
        self.types[carry] = (dtype, self.env[carry].shape)
        self.per_chunk[carry] = len(free)
        order = "after" if c.reverse else "before"
        self.plan.layers.append(f"{carry}: the totals of the chunks {order} each one, combined ({c.op}) in order")
        start = Load(carry, tuple(Affine.axis(f) for f in free) + (Affine.axis(a),), loc=c.loc)
        return Binary(COMBINE_OP[c.op], start, c, loc=c.loc)

    def split_reductions(self, value: Expr) -> Expr:
        """``value`` with every reduction over a chunked axis computed by its own layers and read back."""
        table: dict[Node, Expr] = {}
        for r in sorted(top_reduces(value), key=lambda r: r.op != "sum"):  # sums first: they may carry a max
            if r in table:
                continue
            if r in self.pair_max:
                table[r] = self.pair_max[r]
            elif any(self.chunked(a) for a in r.axes):
                table[r] = self.reduction(r)
            else:
                inner = self.split(r.body)
                if inner is not r.body:
                    table[r] = Reduce(r.op, inner, r.axes, loc=r.loc)
        return _replace(value, table) if table else value

    def _pair(self, r: Reduce) -> Reduce | None:
        """The max that ``r`` (a sum) can be computed with online, if any."""
        inner = [m for m in top_reduces(r.body) if any(self.chunked(a) for a in m.axes)]
        if r.op != "sum" or len(inner) != 1 or len(r.axes) != 1:
            return None
        m = inner[0]
        if m.op != "max" or len(m.axes) != 1 or self.cls(m.axes[0]) != self.cls(r.axes[0]):
            return None
        if free_axes(m) - free_axes(r) or not _online_form(r.body, m):
            return None
        return m

    def reduction(self, r: Reduce) -> Expr:
        """Layers computing ``r`` over its chunked axes; returns the load that reads the combined value."""
        dtype = self.typer(r).dtype.compute  # 16-bit partials are kept in float32, as in one kernel
        free = sorted(free_axes(r))
        cut = [a for a in r.axes if self.chunked(a)]
        pair = self._pair(r)
        tmp = f"part{next(self.counter)}"
        out: list[OutDim] = [("axis", a) for a in free] + [("one", a) for a in cut]
        index = tuple(Affine.axis(a) for a in free) + (Affine.constant(0),) * len(cut)
        where = ", ".join(self.ir.axis_name(a) for a in cut)
        if pair is None:
            body = self.split(r.body)  # reductions inside it over chunked axes are computed first
            part = self.layer(f"{tmp}: {r.op} of each chunk of {where}", tmp,
                              [(index, Reduce(r.op, body, r.axes, loc=r.loc))], out, dtype)  # fmt: skip
            comb = self.combine(tmp, r.op, part, len(free), len(cut), dtype, None)
            read = Load(f"{tmp}c", index, loc=r.loc)
        else:
            m = Reduce("max", _rename(pair.body, pair.axes[0], r.axes[0]), r.axes, loc=pair.loc)
            s = Reduce("sum", _replace(r.body, {pair: m}), r.axes, loc=r.loc)
            stores = [(index + (Affine.constant(0),), m), (index + (Affine.constant(1),), s)]
            part = self.layer(f"{tmp}: (max, sum) of each chunk of {where}", tmp, stores, [*out, ("new", 2)], dtype)
            comb = self.combine(tmp, "online", part, len(free), len(cut), dtype, 2)
            read = Load(f"{tmp}c", index + (Affine.constant(1),), loc=r.loc)
            self.pair_max[pair] = Load(f"{tmp}c", index + (Affine.constant(0),), loc=pair.loc)
        self.env[f"{tmp}c"] = comb
        self.types[f"{tmp}c"] = (dtype, comb.shape)
        return read

    def combine(self, tmp: str, op: str, part: Any, nfree: int, ncut: int, dtype: Any, pair: int | None) -> Any:
        """A dask tree reduction of per-chunk partials with a generated combine kernel."""
        f_axes, c_axes = list(range(nfree)), list(range(nfree, nfree + ncut))
        dims = [Affine.dim(f"n{k}") for k in range(nfree + ncut)]
        idx = tuple(Affine.axis(k) for k in f_axes + c_axes)
        out_idx = tuple(Affine.axis(k) for k in f_axes) + (Affine.constant(0),) * ncut
        extra = () if pair is None else (Affine.constant(pair),)
        src, dst = tmp, f"{tmp}c"
        if pair is None:
            stores: tuple[Store, ...] = (Store(dst, out_idx, Reduce(op, Load(src, idx), tuple(c_axes))),)
        else:  # (m, s) pairs: m = max m_c, s = sum s_c * exp(m_c - m)
            mv = Load(src, (*idx, Affine.constant(0)))
            sv = Load(src, (*idx, Affine.constant(1)))
            m = Reduce("max", mv, tuple(c_axes))
            scale = Unary("exp", Binary("sub", mv, m))  # 0 for a chunk whose max is -inf (its sum may be NaN)
            term = Where(Binary("eq", scale, Const(0.0, weak=True)), Const(0.0, weak=True), Binary("mul", sv, scale))
            s = Reduce("sum", term, tuple(c_axes))
            stores = (Store(dst, (*out_idx, Affine.constant(0)), m), Store(dst, (*out_idx, Affine.constant(1)), s))
        ir = KernelIR(
            name=f"{self.ir.name}_{dst}",
            params=(
                TensorParam(src, dtype, (*dims, *extra), "in"),
                TensorParam(dst, dtype, (*dims[:nfree], *(Affine.constant(1),) * ncut, *extra), "out"),
            ),
            dims=tuple(f"n{k}" for k in range(nfree + ncut)),
            axes=tuple(AxisInfo(k, f"i{k}" if k < nfree else f"c{k - nfree}") for k in f_axes + c_axes),
            stores=stores,
        )
        self.plan.kernels.append(ir)
        what = "online (max, sum) rescaling" if pair is not None else op
        self.plan.layers.append(f"{dst}: tree reduction of {tmp}, {what}, kernel {ir.name}")
        fn = Combine(Run(ir, self.executor, self.fastmath, (src,), dst))
        return self.da.reduction(
            part, identity, fn, combine=fn, axis=tuple(c_axes), keepdims=True, dtype=dtype.numpy,
            concatenate=True, split_every=8, meta=np.empty((0,) * part.ndim, dtype.numpy),
        )  # fmt: skip

    def layer(self, what: str, out: str, stores: list[tuple[tuple[Affine, ...], Expr]], out_dims: list[OutDim],
              dtype: Any, scatter: tuple[tuple[Expr, ...], Expr, str] | None = None) -> Any:  # fmt: skip
        """One blockwise layer: a generated kernel computing ``stores`` (then ``scatter``: index, value, op) into
        ``out`` on each block."""
        if self.pair_max:
            stores = [(ix, _replace(v, self.pair_max)) for ix, v in stores]
            if scatter is not None:
                scatter = (tuple(_replace(i, self.pair_max) for i in scatter[0]), _replace(scatter[1], self.pair_max),
                           scatter[2])  # fmt: skip
        exprs = [v for _, v in stores] + ([*scatter[0], scatter[1]] if scatter is not None else [])
        loads: list[Load] = []
        for v in exprs:
            for e in postorder(v):
                if isinstance(e, Load) and e not in loads:
                    loads.append(e)
        params: list[Any] = []
        rename: dict[Node, Expr] = {}
        args: list[Any] = []
        unaligned = False  # a scan's carries (one element per chunk) are aligned with the chunks by block
        late: list[tuple[Any, tuple[str, ...], str]] = []
        inputs: list[str] = []
        taken: set[str] = {out}
        plain: set[int] = set()
        for ld in loads:
            name, k = ld.tensor, 0
            while name in taken:
                k += 1
                name = f"{ld.tensor}_{k}"
            taken.add(name)
            arr = self.env.get(ld.tensor)
            if arr is None:
                raise ArgumentError(
                    f"{self.ir.name}(): {ld.tensor} is read before the kernel writes it",
                    param=ld.tensor,
                    expected="an array",
                    got=None,
                    fix=f"pass {ld.tensor} (a dask or NumPy array)",
                )
            shape, letters = [], []
            index = list(ld.index)
            for p, e in enumerate(ld.index):
                a = e.plain_axis()
                if self.per_chunk.get(ld.tensor) == p:  # a scan's carry: one value per chunk of the axis
                    assert a is not None
                    letters.append(f"a{a}")
                    shape.append(Affine.constant(1))
                    index[p] = Affine.constant(0)
                    unaligned = True
                elif a is not None and self.chunked(a):
                    plain.add(a)
                    letters.append(f"a{a}")
                    shape.append(Affine.dim(self.dim_of(a)))
                else:  # one chunk (a whole dimension, or a constant index into the concatenated chunks)
                    shape.append(Affine.constant(arr.shape[p]))
                    letters.append(f"w{next(self.counter)}")
            dt = self.types[ld.tensor][0] if ld.tensor in self.types else self.ir.buffer(ld.tensor).dtype
            params.append(TensorParam(name, dt, tuple(shape), "in"))
            rename[ld] = Load(name, tuple(map(self.global_index, index)), loc=ld.loc)
            if ld.tensor in self.per_chunk:  # (last: dask takes the output's chunks from the first array)
                late += [(arr, tuple(letters), name)]
            else:
                args += [arr, tuple(letters)]
                inputs.append(name)
        for arr, letters, name in late:
            args += [arr, letters]
            inputs.append(name)
        gathered: dict[str, str] = {}  # gathered tensor -> its parameter in the generated kernel
        for g in (e for v in exprs for e in postorder(v) if isinstance(e, Gather)):
            if g.tensor in gathered:
                continue
            name, k = g.tensor, 0
            while name in taken:
                k += 1
                name = f"{g.tensor}_{k}"
            taken.add(name)
            gathered[g.tensor] = name
            arr = self.env[g.tensor]
            shape, letters = [], []
            for p, ix in enumerate(g.index):
                a = ix.affine.plain_axis() if isinstance(ix, Index) else None
                if a is not None and self.chunked(a):
                    plain.add(a)
                    letters.append(f"a{a}")
                    shape.append(Affine.dim(self.dim_of(a)))
                else:  # the whole dimension: every block may read anywhere along it
                    shape.append(Affine.constant(arr.shape[p]))
                    letters.append(f"w{next(self.counter)}")
            dt = self.types[g.tensor][0] if g.tensor in self.types else self.ir.buffer(g.tensor).dtype
            params.append(TensorParam(name, dt, tuple(shape), "in"))
            args += [arr, tuple(letters)]
            inputs.append(name)
        values = [(ix, self.globalize(_retensor(_replace(v, rename), gathered))) for ix, v in stores]
        scatters: tuple[Scatter, ...] = ()
        if scatter is not None:
            sindex = tuple(self.globalize(_retensor(_replace(i, rename), gathered)) for i in scatter[0])
            svalue = self.globalize(_retensor(_replace(scatter[1], rename), gathered))
            scatters = (Scatter(out, sindex, svalue, scatter[2], loc=self.ir.loc),)
        out_shape, out_letters, adjust, new_axes = [], [], {}, {}
        for kind, x in out_dims:
            if kind == "new":
                out_letters.append(f"n{next(self.counter)}")
                new_axes[out_letters[-1]] = x
                out_shape.append(Affine.constant(x))
                continue
            letter = f"a{x}" if kind == "one" or (x in plain and self.chunked(x)) else f"n{next(self.counter)}"
            out_letters.append(letter)
            if kind == "one":
                adjust[letter] = 1
                out_shape.append(Affine.constant(1))
            elif letter == f"a{x}":
                out_shape.append(Affine.dim(self.dim_of(x)))
            else:  # an axis in one chunk
                new_axes[letter] = self.extents[x]
                out_shape.append(Affine.constant(self.extents[x]))
        finals = [v for _, v in values] + [e for c in scatters for e in (*c.index, c.value)]
        used = {e.name for v in finals for e in postorder(v) if isinstance(e, Scalar)}
        scal = [p for p in self.ir.scalar_params if p.name in used]
        params.append(TensorParam(out, dtype, tuple(out_shape), "out"))
        params += [ScalarParam(p.name, p.dtype) for p in scal]
        axes_used: set[int] = set()
        for ix, _ in values:
            axes_used |= {a for e in ix for a in e.axis_set()}
        for v in finals:
            for e in postorder(v):
                if isinstance(e, Load):
                    axes_used |= {a for i in e.index for a in i.axis_set()}
                elif isinstance(e, Reduce):
                    axes_used |= set(e.axes)
                elif isinstance(e, Scan):
                    axes_used.add(e.axis)
                elif isinstance(e, Sort):
                    axes_used |= {e.axis, e.out}
                elif isinstance(e, Index):
                    axes_used |= e.affine.axis_set()
        axes = [
            AxisInfo(a, self.axis_names[a], None if self.chunked(a) else Affine.constant(self.extents[a]))
            for a in sorted(axes_used)
        ]
        dims = sorted({d for p in params if isinstance(p, TensorParam) for e in p.shape for d in e.dim_set()})
        ir = KernelIR(
            name=f"{self.ir.name}_{out}",
            params=tuple(params),
            dims=tuple(dims),
            axes=tuple(axes),
            stores=tuple(Store(out, tuple(map(self.global_index, ix)), v) for ix, v in values),
            loc=self.ir.loc,
            scatters=scatters,
        )
        self.plan.kernels.append(ir)
        self.plan.layers.append(f"{what}, kernel {ir.name}")
        run = Run(ir, self.executor, self.fastmath, tuple(inputs), out,
                   tuple((p.name, self.scalars[p.name]) for p in scal))  # fmt: skip
        return self.da.blockwise(
            run, tuple(out_letters), *args, dtype=dtype.numpy, adjust_chunks=adjust or None,
            new_axes=new_axes or None, concatenate=True, meta=np.empty((0,) * len(out_letters), dtype.numpy),
            align_arrays=not unaligned,  # (every other input has its class's chunks already: _chunking)
        )  # fmt: skip

    def global_index(self, e: Affine) -> Affine:
        """An index with the call's dims replaced by their values (generated kernels have dims of their own)."""
        return Affine(e.axes, (), e.without_axes().evaluate(self.dimvals)) if e.dims else e

    def globalize(self, v: Expr) -> Expr:
        """Extents and dims used as values take the whole array's sizes (a block only knows its own)."""
        table: dict[Node, Expr] = {}
        for e in postorder(v):
            if isinstance(e, Extent):
                table[e] = Const(int(self.extents[e.axis]), weak=True, loc=e.loc)
            elif isinstance(e, Index) and e.affine.dims:
                const = e.affine.without_axes().evaluate(self.dimvals)
                if e.affine.axes:
                    table[e] = Index(Affine(e.affine.axes, (), const), loc=e.loc)
                else:
                    table[e] = Const(const, weak=True, loc=e.loc)
        return _replace(v, table) if table else v


def _blockwise_scan(c: Scan) -> bool:
    """Whether a scan can run chunk by chunk, each chunk started from the earlier chunks' total: a running
    reduction (``pt.cumsum`` ...); not a sequential loop's state or the user's function (steps in order)."""
    return c.combine is None and c.op in COMBINE_OP and not c.others


_ACCUMULATE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}  # NaN-propagating, wrapping


def _carries(part: Any, axis: int, op: str, start: Any, reverse: bool, dtype: Any) -> Any:
    """Each chunk's carry from the chunks' totals ``part`` (one per chunk along ``axis``): the totals of the chunks
    before it (after it, ``reverse``) combined in order, the identity ``start`` for the first. The totals are one
    small array per row: combined in one block with NumPy's accumulate, then one value per chunk again."""
    whole = part.rechunk({axis: -1})

    def exclusive(t: np.ndarray) -> np.ndarray:
        t = np.flip(t, axis) if reverse else t
        run = _ACCUMULATE[op].accumulate(t, axis=axis, dtype=dtype)
        first = np.full(t.shape[:axis] + (1,) + t.shape[axis + 1 :], start, dtype)
        out = np.concatenate([first, np.delete(run, -1, axis)], axis=axis)
        return np.flip(out, axis) if reverse else out

    return whole.map_blocks(exclusive, dtype=dtype).rechunk({axis: 1})


def _retensor(e: Expr, names: dict[str, str]) -> Expr:
    """``e`` with every gather from a tensor in ``names`` reading the tensor it maps to."""
    if not names:
        return e
    memo: dict[int, Expr] = {}

    def go(n: Expr) -> Expr:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        r = map_children(n, go)
        if isinstance(r, Gather) and r.tensor in names:
            r = Gather(names[r.tensor], r.index, dtype=r.dtype, loc=r.loc)
        memo[id(n)] = r  # type: ignore[assignment]
        return r  # type: ignore[return-value]

    return go(e)


def _rename(e: Expr, old: int, new: int) -> Expr:
    """``e`` with axis ``old`` renamed ``new`` (in loads, indices, extents and reductions)."""
    if old == new:
        return e
    m = {old: Affine.axis(new)}
    memo: dict[int, Expr] = {}

    def go(n: Expr) -> Expr:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        if isinstance(n, Load):
            r: Expr = Load(n.tensor, tuple(ix.substitute_axes(m) for ix in n.index), loc=n.loc)
        elif isinstance(n, Index):
            r = Index(n.affine.substitute_axes(m), loc=n.loc)
        elif isinstance(n, Extent) and n.axis == old:
            r = Extent(new, loc=n.loc)
        else:
            r = map_children(n, go)  # type: ignore[assignment]
            if isinstance(r, Reduce):
                r = Reduce(r.op, r.body, tuple(new if a == old else a for a in r.axes), loc=r.loc)
        memo[id(n)] = r
        return r

    return go(e)


def _fmt(e: Affine, ir: KernelIR) -> str:
    parts = [f"{c}*{ir.axis_name(a)}" if c != 1 else ir.axis_name(a) for a, c in e.axes]
    parts += [f"{c}*{d}" if c != 1 else d for d, c in e.dims]
    if e.const or not parts:
        parts.append(str(e.const))
    return " + ".join(parts).replace("+ -", "- ")
