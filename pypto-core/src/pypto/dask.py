"""Kernels and ``@pt.jit`` functions on dask arrays: a dask graph built from the kernel's IR.

Calling a kernel (or a jit function) with ``dask.array`` arguments returns dask arrays; nothing runs
until the user computes them, on whatever scheduler is active (threads, processes, a
``dask.distributed`` cluster). The graph is made of generated pypto kernels, each run on NumPy blocks:

- a store whose value reads its inputs at plain axes (``x[i, j]``, ``x[j, i]``, broadcasts) is one
  ``blockwise`` layer over matching chunks;
- a reduction over an axis with several chunks is split: a *partial* kernel reduces each block (the
  reduced axis kept with one element per chunk), a *combine* kernel generated from the reducer (sum,
  prod, max, min; a mean is a sum and a count) merges partials in a dask tree reduction, and the
  store's kernel reads the combined value;
- a softmax-style ``sum(exp(x - max(x)))`` over a chunked axis keeps ``(max, sum)`` pairs per chunk
  and merges them with the online rescaling ``s = s1·exp(m1 - m) + s2·exp(m2 - m)``, so one pass
  over the data gives the right sum however long the row;
- a contraction (``matmul``, ``einsum``) is a sum of products: blockwise partial products, then a
  sum over the contracted chunks;
- a reduction nested in another one over a chunked axis (``sum((x - mean(x))**2)``) is computed first
  and read back by the outer one.

An axis read at a shifted, reversed or strided index (``x[i + 1]``), or whose index is used as a
value, cannot be cut into independent blocks: its inputs are rechunked to one chunk along it, with one
:class:`pypto.RechunkWarning` per kernel saying which. Generated kernels are compiled on the worker that
runs them, through the ordinary disk cache, with the executor resolved there (``PYPTO_EXECUTOR`` or
the best available backend) unless the kernel names one. :func:`explain` prints the plan.
"""

from __future__ import annotations

import itertools
import numbers
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto._lru import LRUCache
from pypto.errors import ArgumentError, DTypeError, RechunkWarning, ShapeError
from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisInfo, KernelIR, ScalarParam, TensorParam
from pypto.ir.nodes import (
    Binary,
    Const,
    Expr,
    Extent,
    Index,
    Load,
    Node,
    Reduce,
    Scalar,
    Store,
    Unary,
    Where,
    children,
    free_axes,
    map_children,
    postorder,
)
from pypto.runtime.foreign import is_dask_array

__all__ = ["is_dask_array", "call_kernel", "call_jit", "explain", "RechunkWarning"]


def _da():
    try:
        import dask.array as da
    except ImportError as e:  # pragma: no cover - only without the extra
        raise ArgumentError(
            "pypto: dask arrays were passed but dask is not installed",
            expected="dask[array]",
            got="no dask",
            fix="pip install 'pypto-core[dask]'",
        ) from e
    return da


# ---------------------------------------------------------------------------------------------------------
# Generated kernels, run on blocks (these objects travel to the workers: they hold IR, never compiled code)

KERNEL_CACHE_SIZE = 256  # generated kernels a process (a worker) keeps loaded, least recently used dropped
_KERNELS: LRUCache[tuple, Any] = LRUCache(KERNEL_CACHE_SIZE)
_KERNELS_LOCK = threading.Lock()


def _kernel_for(ir: KernelIR, executor: str | None, fastmath: bool) -> Any:
    """The compiled kernel of ``ir`` in this process (built once per process, through the disk cache; the
    ``KERNEL_CACHE_SIZE`` most recently used stay loaded)."""
    key = (ir, executor, fastmath)
    k = _KERNELS.get(key)
    if k is None:
        from pypto.runtime.kernel import Kernel

        with _KERNELS_LOCK:
            k = _KERNELS.get(key)
            if k is None:
                k = Kernel.from_ir(ir, executor=executor, fastmath=fastmath)
                _KERNELS[key] = k
    return k


@dataclass(frozen=True)
class _Run:
    """One generated kernel with one output, run on NumPy blocks (the function of a dask layer)."""

    ir: KernelIR
    executor: str | None
    fastmath: bool
    inputs: tuple[str, ...]  # tensor parameters fed by the blocks, in order
    output: str
    scalars: tuple[tuple[str, Any], ...] = ()

    def _out_shape(self, blocks: Sequence[np.ndarray]) -> tuple[int, ...]:
        dims: dict[str, int] = {}
        for name, b in zip(self.inputs, blocks):
            for e, n in zip(self.ir.buffer(name).shape, b.shape):
                d = e.plain_dim()
                if d is not None:
                    dims[d] = n
        return tuple(e.evaluate(dims) for e in self.ir.buffer(self.output).shape)

    def run(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        out_param = self.ir.buffer(self.output)
        out = np.empty(self._out_shape(blocks), out_param.dtype.numpy)
        if out.size == 0:
            return out
        values: dict[str, Any] = dict(zip(self.inputs, (np.ascontiguousarray(b) for b in blocks)))
        values[self.output] = out
        values.update(self.scalars)
        _kernel_for(self.ir, self.executor, self.fastmath)(*(values[p.name] for p in self.ir.params))
        return out

    def __call__(self, *blocks: np.ndarray) -> np.ndarray:
        return self.run(blocks)


@dataclass(frozen=True)
class _Combine:
    """A combine kernel as dask's ``combine``/``aggregate`` callback (partials concatenated along ``axis``)."""

    run: _Run

    def __call__(self, x: np.ndarray, axis: Any = None, keepdims: bool = True, **_: Any) -> np.ndarray:
        return self.run.run((x,))


def _identity(x: np.ndarray, axis: Any = None, keepdims: bool = True, **_: Any) -> np.ndarray:
    return x  # partial kernels already give one element per chunk along the reduced axes


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
        for e in postorder(s.value):
            if isinstance(e, Load):
                out.append((e.tensor, e.index))
    return out


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


def _reduces(e: Expr) -> list[Reduce]:
    """The outermost reductions in ``e`` (not those nested in another one), in order."""
    out: list[Reduce] = []
    seen: set[int] = set()

    def go(n: Expr) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        if isinstance(n, Reduce):
            if n not in out:
                out.append(n)
            return
        for c in children(n):
            go(c)

    go(e)
    return out


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
class _Plan:
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


class _Planner:
    """Builds the dask graph of one kernel IR on given arrays (see the module docstring)."""

    def __init__(self, ir: KernelIR, arrays: dict[str, Any], scalars: dict[str, Any], dimvals: dict[str, int],
                 extents: dict[int, int], executor: str | None, fastmath: bool):  # fmt: skip
        from pypto.passes.infer_types import _Typer

        self.da = _da()
        self.ir = ir
        self.executor = executor
        self.fastmath = fastmath
        self.scalars = scalars
        self.dimvals = dimvals
        self.typer = _Typer(ir)
        self.plan = _Plan(ir.name)
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
        for s in ir.stores:
            for e in postorder(s.value):
                if isinstance(e, Index):
                    for ax in e.affine.axis_set():
                        whole[("a", ax)] = f"axis {ir.axis_name(ax)} is used as a value"
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
        return self.env

    def store(self, s: Store) -> Any:
        value = self.split(s.value)
        t, full = s.tensor, self.full[s.tensor]
        plain = [e.plain_axis() for e in s.index]
        whole = any(a is None or self.extents.get(a) != n for a, n in zip(plain, full))
        dtype = self.ir.buffer(t).dtype
        kind = "blockwise" if not _reduces(value) else "blockwise, reductions inside each block"
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
        """``value`` with every reduction over a chunked axis computed by its own layers and read back."""
        table: dict[Node, Expr] = {}
        for r in sorted(_reduces(value), key=lambda r: r.op != "sum"):  # sums first: they may carry a max
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
        inner = [m for m in _reduces(r.body) if any(self.chunked(a) for a in m.axes)]
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
        dtype = self.typer(r).dtype
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
        fn = _Combine(_Run(ir, self.executor, self.fastmath, (src,), dst))
        return self.da.reduction(
            part, _identity, fn, combine=fn, axis=tuple(c_axes), keepdims=True, dtype=dtype.numpy,
            concatenate=True, split_every=8, meta=np.empty((0,) * part.ndim, dtype.numpy),
        )  # fmt: skip

    def layer(self, what: str, out: str, stores: list[tuple[tuple[Affine, ...], Expr]], out_dims: list[OutDim],
              dtype: Any) -> Any:  # fmt: skip
        """One blockwise layer: a generated kernel computing ``stores`` into ``out`` on each block."""
        if self.pair_max:
            stores = [(ix, _replace(v, self.pair_max)) for ix, v in stores]
        loads: list[Load] = []
        for _, v in stores:
            for e in postorder(v):
                if isinstance(e, Load) and e not in loads:
                    loads.append(e)
        params: list[Any] = []
        rename: dict[Node, Expr] = {}
        args: list[Any] = []
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
            for p, e in enumerate(ld.index):
                a = e.plain_axis()
                if a is not None and self.chunked(a):
                    plain.add(a)
                    letters.append(f"a{a}")
                    shape.append(Affine.dim(self.dim_of(a)))
                else:  # one chunk (a whole dimension, or a constant index into the concatenated chunks)
                    shape.append(Affine.constant(arr.shape[p]))
                    letters.append(f"w{next(self.counter)}")
            dt = self.types[ld.tensor][0] if ld.tensor in self.types else self.ir.buffer(ld.tensor).dtype
            params.append(TensorParam(name, dt, tuple(shape), "in"))
            rename[ld] = Load(name, tuple(map(self.global_index, ld.index)), loc=ld.loc)
            args += [arr, tuple(letters)]
            inputs.append(name)
        values = [(ix, self.globalize(_replace(v, rename))) for ix, v in stores]
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
        used = {e.name for _, v in values for e in postorder(v) if isinstance(e, Scalar)}
        scal = [p for p in self.ir.scalar_params if p.name in used]
        params.append(TensorParam(out, dtype, tuple(out_shape), "out"))
        params += [ScalarParam(p.name, p.dtype) for p in scal]
        axes_used: set[int] = set()
        for ix, v in values:
            axes_used |= {a for e in ix for a in e.axis_set()}
            for e in postorder(v):
                if isinstance(e, Load):
                    axes_used |= {a for i in e.index for a in i.axis_set()}
                elif isinstance(e, Reduce):
                    axes_used |= set(e.axes)
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
        )
        self.plan.kernels.append(ir)
        self.plan.layers.append(f"{what}, kernel {ir.name}")
        run = _Run(ir, self.executor, self.fastmath, tuple(inputs), out,
                   tuple((p.name, self.scalars[p.name]) for p in scal))  # fmt: skip
        return self.da.blockwise(
            run, tuple(out_letters), *args, dtype=dtype.numpy, adjust_chunks=adjust or None,
            new_axes=new_axes or None, concatenate=True, meta=np.empty((0,) * len(out_letters), dtype.numpy),
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


# ---------------------------------------------------------------------------------------------------------
# Entry points


def _is_array(v: Any) -> bool:
    return is_dask_array(v) or isinstance(v, np.ndarray)


def _check_dtype(where: str, name: str, arr: Any, want: Any) -> None:
    if np.dtype(arr.dtype) != np.dtype(want.numpy):
        raise DTypeError(
            f"{where}: {name} has dtype {arr.dtype}, the kernel declares {want.name}",
            param=name,
            expected=want.name,
            got=str(arr.dtype),
            fix=f"convert it with .astype(np.{np.dtype(want.numpy).name})",
        )


def _kernel_plan(kernel: Any, args: tuple, kwargs: dict) -> tuple[_Planner, dict[str, Any]]:
    """The planner of a destination-passing kernel called on dask arrays, and the outputs given."""
    ir = kernel.traced
    where = f"{ir.name}()"
    names = [p.name for p in ir.params]
    if len(args) > len(names):
        raise ArgumentError(f"{where} takes {len(names)} arguments, {len(args)} were given", param="args",
                            expected=f"at most {len(names)}", got=len(args))  # fmt: skip
    values: dict[str, Any] = dict(zip(names, args))
    explicit: dict[str, Any] = {}
    for k, v in kwargs.items():
        if k in ir.dims:
            explicit[k] = v
        elif k in names:
            if k in values:
                raise ArgumentError(f"{where}: {k} was given twice", param=k, expected="once", got="twice")
            values[k] = v
        else:
            raise ArgumentError(f"{where}: unknown argument {k}", param=k, expected=", ".join(names), got=k)
    arrays: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for p in ir.params:
        v = values.get(p.name)
        if isinstance(p, ScalarParam):
            if v is None or isinstance(v, (str, bytes)) or not isinstance(v, (numbers.Number, np.generic)):
                raise ArgumentError(
                    f"{where}: {p.name} must be a number ({p.dtype.name}), got {type(v).__name__}",
                    param=p.name,
                    expected=p.dtype.name,
                    got=v,
                )
            scalars[p.name] = v.item() if isinstance(v, np.generic) else v
            continue
        if p.role != "in" and v is None:
            continue
        if v is None or not (_is_array(v) or hasattr(v, "__array__")):
            raise ArgumentError(
                f"{where}: {p.name} must be an array, got {type(v).__name__}",
                param=p.name,
                expected="a dask or NumPy array",
                got=type(v).__name__,
            )
        if not _is_array(v):
            v = np.asarray(v)
        _check_dtype(where, p.name, v, p.dtype)
        shapes[p.name] = tuple(int(n) for n in v.shape)
        if p.role != "in":
            outputs[p.name] = v
        if p.role != "out":
            arrays[p.name] = v
    contract = kernel.contract()
    dims = _solve_dims(contract, shapes, explicit)
    for p in ir.tensor_params:
        if p.name not in shapes:
            try:
                shapes[p.name] = tuple(e.evaluate(dims) for e in p.shape)
            except KeyError:
                d = sorted(set().union(*(e.dim_set() for e in p.shape)) - dims.keys())[0]
                raise ShapeError(
                    f"{where}: cannot size output {p.name}: dim {d} is not set by any input",
                    param=p.name,
                    expected=f"{d} from an array or {d}=...",
                    got="no value",
                    fix=f"pass {p.name} (a dask array of the right shape) or {d}=...",
                ) from None
    dims = contract.bind_dims(shapes, explicit)
    contract.check(dims)
    planner = _Planner(ir, arrays, scalars, dims, _extents(kernel, dims), kernel.executor, kernel.options.fastmath)
    planner.run()
    return planner, outputs


def _extents(kernel: Any, dims: dict[str, int]) -> dict[int, int]:
    """Every axis's extent at these dims (from the kernel's shape inference)."""
    shaped = kernel.compilation().stages["infer_shapes"]
    return {a.index: a.extent.evaluate(dims) for a in shaped.axes if a.extent is not None}


def _solve_dims(contract: Any, shapes: dict[str, tuple[int, ...]], explicit: dict[str, Any]) -> dict[str, int]:
    dims = {d: int(v) for d, v in explicit.items()}
    for s in contract.dim_sources:
        if s.dim in dims or s.param not in shapes:
            continue
        val, rem = divmod(shapes[s.param][s.pos] - s.const, s.coeff)
        if not rem and val >= 0:
            dims[s.dim] = val
    return dims


def call_kernel(kernel: Any, args: tuple, kwargs: dict) -> Any:
    """``kernel(*args, **kwargs)`` with dask arrays among the arguments: the outputs as dask arrays.

    Outputs may be left out (or passed as None): they are new dask arrays. A dask array passed as an
    output gives its shape (and, for an in-place parameter, its values); a NumPy array passed as an
    output is computed into now and returned, as a NumPy call would.
    """
    planner, given = _kernel_plan(kernel, args, kwargs)
    ir = planner.ir
    results = []
    for p in ir.outputs:
        if p.name not in {s.tensor for s in ir.stores}:
            raise ArgumentError(f"{ir.name}(): output {p.name} is never stored", param=p.name,
                                expected="a stored output", got="no store")  # fmt: skip
        results.append(planner.env[p.name])
    numpy_out = [(r, given[p.name]) for r, p in zip(results, ir.outputs) if isinstance(given.get(p.name), np.ndarray)]
    if numpy_out:
        planner.da.store([r for r, _ in numpy_out], [o for _, o in numpy_out], lock=False)
        results = [given[p.name] if isinstance(given.get(p.name), np.ndarray) else r
                   for r, p in zip(results, ir.outputs)]  # fmt: skip
    return results[0] if len(results) == 1 else tuple(results)


def _standin(a: Any) -> Any:
    if is_dask_array(a):
        return np.broadcast_to(np.zeros((), a.dtype), a.shape)  # shape and dtype only: no memory
    return a


def _jit_plan(fn: Any, args: tuple) -> tuple[_Planner, list[tuple[str, tuple[int, ...]]], bool]:
    stand = tuple(_standin(a) for a in args)
    c, sizes = fn._lookup(stand)
    plan = c.plan
    ir = plan.kernel
    arrays: dict[str, Any] = {}
    for k, src, shape in c.feeds:
        a = args[src]
        if not is_dask_array(a):
            a = np.asarray(a)
        arrays[plan.buffers[k].name] = a if shape is None or tuple(a.shape) == tuple(shape) else a.reshape(shape)
    for k, s, shape in c.views:
        if sizes is not None:
            from pypto.array.function import _resolve

            shape = _resolve(c.specs[k][0], sizes)
        arrays[plan.buffers[k].name] = arrays[plan.buffers[s].name].reshape(shape)
    dims: dict[str, int] = {}
    for name, a in arrays.items():
        for e, n in zip(ir.buffer(name).shape, a.shape):
            d = e.plain_dim()
            if d is not None:
                dims[d] = int(n)
    for p in ir.tensor_params:  # sizes no input gives (a static program's dims are its sizes)
        for e, n in zip(p.shape, plan.buffers[[b.name for b in plan.buffers].index(p.name)].shape):
            d = e.plain_dim()
            if d is not None and d not in dims:
                dims[d] = int(n)
    opts = fn.options
    planner = _Planner(ir, arrays, {}, dims, _extents(c.kernel, dims), opts.get("executor"), bool(opts.get("fastmath")))
    planner.run()
    results = [(plan.buffers[pos].name, c.shape_of(pos, sizes)) for pos in plan.outputs]
    return planner, results, c.single


def call_jit(fn: Any, args: tuple, out: Any = None) -> Any:
    """A ``@pt.jit`` function called with dask arrays: its results as dask arrays (``out=``: NumPy arrays
    computed into now, as a NumPy call would)."""
    planner, results, single = _jit_plan(fn, args)
    arrays = [planner.env[name].reshape(shape) if tuple(planner.env[name].shape) != shape else planner.env[name]
              for name, shape in results]  # fmt: skip
    if out is not None:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(arrays) or not all(isinstance(o, np.ndarray) for o in outs):
            raise ArgumentError(f"{fn.__name__}: out= must be {len(arrays)} NumPy array(s) for dask inputs",
                                param="out", expected=f"{len(arrays)} NumPy array(s)", got=out)  # fmt: skip
        for a, o in zip(arrays, outs):
            if o.shape != a.shape or o.dtype != a.dtype:
                raise ShapeError(f"{fn.__name__}: out has shape {o.shape} {o.dtype}, the result {a.shape} {a.dtype}",
                                 param="out", expected=f"{a.shape} {a.dtype}", got=f"{o.shape} {o.dtype}")  # fmt: skip
        planner.da.store(arrays, outs, lock=False)
        return out
    return arrays[0] if single else tuple(arrays)


def explain(fn: Any, *args: Any, **kwargs: Any) -> str:
    """The dask plan of ``fn`` (a kernel or a jit function) on these arguments: its layers (blockwise maps,
    per-chunk partials, tree reductions), any rechunking, and the IR of every generated kernel."""
    from pypto.array.function import JitFunction

    if isinstance(fn, JitFunction):
        planner, *_ = _jit_plan(fn, args)
    else:
        planner, _ = _kernel_plan(fn, args, kwargs)
    return planner.plan.text()
