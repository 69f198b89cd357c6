"""Renders the tensor IR as a NumPy function: the reference backend's "generated code".

Every value is an array with one dimension per kernel axis (size 1 where it does not depend on
that axis), so broadcasting does the work of the loops: whole axes are computed at a time, never
one element per Python iteration. Plain indices become views; affine indices become fancy
indexing with ``arange`` grids; reductions are NumPy reductions with ``keepdims``.
"""

from __future__ import annotations

import math

from pypto.dtypes import DType
from pypto.ir.affine import Affine
from pypto.ir.kernel import KernelIR
from pypto.ir.nodes import (
    Binary,
    Carry,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    Sort,
    Store,
    Unary,
    Where,
    postorder,
    scan_bodies,
    scan_key,
)
from pypto.ir.ops import BINARY_TABLE, FUNCTIONS, LAST, LOOP, MATH, REDUCERS, numpy_spelling
from pypto.ir.reducers import identity

_NP_DTYPE = {
    "bool": "_np.bool_",
    **{n: f"_np.{n}" for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    "float32": "_np.float32",
    "float64": "_np.float64",
    "float16": "_np.float16",
    "bfloat16": "_bfloat16",  # ml_dtypes' NumPy type (pypto.backends.numpy_support.namespace)
}
_UNARY = {
    "neg": "_np.negative",
    "abs": "_np.abs",
    "invert": "_np.invert",
    **{f.name: numpy_spelling(f) for f in FUNCTIONS if f.c_name},  # the op table's native functions
}
_BINARY = {o.name: f"_np.{o.numpy.__name__}" for o in BINARY_TABLE}  # NumPy's ufunc of each operator
_REDUCE = {r.name: f"_np.{r.numpy.__name__}" for r in REDUCERS.values()}  # NumPy's reduction of each reducer
_ACCUMULATE = {r.name: _BINARY[r.combine] for r in REDUCERS.values()}  # the ufunc a scan accumulates


def np_literal(value: object, dt: DType) -> str:
    """A NumPy scalar literal of type ``dt`` (``_np.float32(2.0)``, ``_np.float32('inf')``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_NP_DTYPE[dt.name]}({str(value)!r})"
    return f"{_NP_DTYPE[dt.name]}({value!r})"


_MAX_DIMS = 32  # NumPy's limit on an array's dimensions


class NumpyRenderer:
    """Turns one kernel's tensor IR into the source of a Python function using NumPy."""

    def __init__(self, k: KernelIR):
        self.k = k
        self.pos = {a.index: p for p, a in enumerate(sorted(k.axes, key=lambda a: a.index))}
        self.n = len(self.pos)
        self.lines: list[str] = []
        self.names: dict[int, tuple[Expr, str]] = {}
        self.grids: dict[int, str] = {}
        self.outputs = {p.name for p in k.outputs}
        self.prefix = "_v"  # of the names of computed values
        self.carry: dict[int, str] = {}  # while rendering a combine function: its arguments
        self.scan_arrays: dict[tuple, list[str]] = {}  # each user scan's arrays (by scan_key), once computed

    # -- helpers ----------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("        " + line)

    def dim(self, a: Affine) -> str:
        return self.affine_scalar(a)

    def affine_scalar(self, a: Affine) -> str:
        parts = [f"{c} * {d}" if c != 1 else d for d, c in a.dims]
        if a.const or not parts:
            parts.append(str(a.const))
        return " + ".join(parts)

    def extent(self, axis: int) -> str:
        e = self.k.axis(axis).extent
        assert e is not None
        return self.affine_scalar(e)

    def grid(self, axis: int) -> str:
        """``arange(extent)`` shaped to broadcast along the axis's position."""
        if axis not in self.grids:
            name = f"_ax{self.pos[axis]}"
            shape = ["1"] * self.n
            shape[self.pos[axis]] = "-1"
            self.emit(f"{name} = _np.arange({self.extent(axis)}, dtype=_np.int64).reshape({', '.join(shape)},)")
            self.grids[axis] = name
        return self.grids[axis]

    def affine_array(self, a: Affine) -> str:
        parts = []
        for ax, c in a.axes:
            g = self.grid(ax)
            parts.append(g if c == 1 else f"{c} * {g}")
        rest = a.without_axes()
        if not rest.is_const or rest.const or not parts:
            parts.append(self.affine_scalar(rest))
        return " + ".join(parts)

    def buffer(self, name: str) -> str:
        return f"_w_{name}" if name in self.outputs else name

    def plain_view(self, tensor: str, index: tuple[Affine, ...]) -> str | None:
        """A view of ``tensor`` in canonical axis order when every index is a distinct plain axis."""
        axes = [ix.plain_axis() for ix in index]
        if any(a is None for a in axes) or len(set(axes)) != len(axes):
            return None
        shape = self.k.buffer(tensor).shape
        slices = []
        for a, size in zip(axes, shape):
            ext = self.k.axis(a).extent  # type: ignore[arg-type]
            slices.append(":" if ext == size else f":{self.extent(a)}")  # type: ignore[arg-type]
        view = self.buffer(tensor)
        if any(s != ":" for s in slices):
            view += f"[{', '.join(slices)}]"
        order = sorted(range(len(axes)), key=lambda i: self.pos[axes[i]])  # type: ignore[index]
        if order != list(range(len(axes))):
            view += f".transpose({', '.join(map(str, order))})"
        missing = [p for p in range(self.n) if p not in {self.pos[a] for a in axes}]  # type: ignore[index]
        if missing:
            view = f"_np.expand_dims({view}, {tuple(missing)!r})"
        return view

    def gather_index(self, index: tuple[Affine, ...]) -> str:
        return ", ".join(self.affine_array(ix) for ix in index)

    # -- expressions -------------------------------------------------------------------------------
    def value(self, e: Expr) -> str:
        hit = self.names.get(id(e))
        if hit is not None:
            return hit[1]
        code = self.compute(e)
        if isinstance(e, Const):
            return code
        name = f"{self.prefix}{len(self.names)}"
        self.emit(f"{name} = {code}")
        self.names[id(e)] = (e, name)
        return name

    def forget(self, tensor: str) -> None:
        """Drop the values computed from ``tensor`` (just stored into): a later store reading it sees the new
        values, as in the compiled kernels (a value computed before would be stale)."""
        self.names = {
            key: (e, name) for key, (e, name) in self.names.items()
            if not any(isinstance(n, (Load, Gather)) and n.tensor == tensor for n in postorder(e))
        }  # fmt: skip

    def compute(self, e: Expr) -> str:
        dt = e.dtype
        assert dt is not None
        if isinstance(e, Const):
            return np_literal(e.value, dt)
        if isinstance(e, Load):
            view = self.plain_view(e.tensor, e.index)
            if view is not None:
                return view
            return f"{self.buffer(e.tensor)}[{self.gather_index(e.index)}]"
        if isinstance(e, Gather):  # NumPy's integer-array indexing (negative indices count from the end)
            index = [self.affine_array(ix.affine) if isinstance(ix, Index) else self.value(ix) for ix in e.index]
            return f"{self.buffer(e.tensor)}[{', '.join(index)}]"
        if isinstance(e, Index):
            return f"_np.asarray({self.affine_array(e.affine)}, dtype=_np.int64)"
        if isinstance(e, Scalar):
            return e.name
        if isinstance(e, Cast):
            src = e.x.dtype
            assert src is not None
            if src.is_float and dt.is_int:  # pt.cast's rule: out of range saturates, NaN gives 0
                return f"_saturate({self.value(e.x)}, {_NP_DTYPE[dt.name]})"
            return f"_np.asarray({self.value(e.x)}).astype({_NP_DTYPE[dt.name]})"
        if isinstance(e, Unary):
            x = self.value(e.x)
            f = MATH.get(e.op)
            if f is not None and f.formula is not None:  # a function defined over others (rsqrt, sigmoid)
                return f.formula(x, x, lambda name, arg: f"{_UNARY[name]}({arg})", np_literal(1.0, dt))
            return f"{_UNARY[e.op]}({x})"
        if isinstance(e, Binary):
            return f"{_BINARY[e.op]}({self.value(e.a)}, {self.value(e.b)})"
        if isinstance(e, Where):
            return f"_np.where({self.value(e.cond)}, {self.value(e.a)}, {self.value(e.b)})"
        if isinstance(e, Reduce) and e.op == LAST:  # a loop's variable after its last step
            assert isinstance(e.body, Scan)
            return self.loop(e.body)[1]
        if isinstance(e, Scan) and e.op == LOOP:
            return self.loop(e)[0]
        if isinstance(e, Reduce):
            body = self.value(e.body)
            shape = ["1"] * self.n
            for a in e.axes:
                shape[self.pos[a]] = self.extent(a)
            positions = tuple(sorted(self.pos[a] for a in e.axes))
            full = f"_full({body}, ({', '.join(shape)},))"
            extra = ""
            if e.op in ("max", "min"):
                extra = f", initial={np_literal(identity(e.op, dt).value, dt)}"
            return f"{_REDUCE[e.op]}({full}, axis={positions!r}, keepdims=True{extra}).astype({_NP_DTYPE[dt.name]})"
        if isinstance(e, Scan) and e.combine is not None:
            return self.user_scan(e)
        if isinstance(e, Carry):  # an argument of the combine function being rendered (see user_scan)
            return self.carry[e.slot]
        if isinstance(e, Scan):  # the combine's ufunc accumulated along the axis (in order, as the loops do)
            body = self.value(e.body)
            shape = ["1"] * self.n
            pos = self.pos[e.axis]
            shape[pos] = self.extent(e.axis)
            full = f"_full({body}, ({', '.join(shape)},))"
            flip = f"[{', '.join(':' if p != pos else '::-1' for p in range(self.n))}]"
            if e.reverse:
                full = f"{full}{flip}"
            out = f"{_ACCUMULATE[e.op]}.accumulate({full}, axis={pos}, dtype={_NP_DTYPE[dt.name]})"
            return f"{out}{flip}" if e.reverse else out
        if isinstance(e, Sort):  # NumPy's stable argsort along the row's position, moved to the positions'
            body = self.value(e.body)
            shape = ["1"] * self.n
            shape[self.pos[e.axis]] = self.extent(e.axis)
            full = f"_full({body}, ({', '.join(shape)},))"
            k = self.extent(e.out) if e.top else None
            which = 0 if e.which == "values" else 1
            return f"_sort({full}, {self.pos[e.axis]}, {self.pos[e.out]}, {e.descending}, {k}, {which})"
        raise TypeError(f"numpy renderer: unexpected {type(e).__name__}")

    def user_scan(self, e: Scan) -> str:
        """``pt.associative_scan``: each scanned value along the axis (moved first) copied, then a Python loop over
        the axis combining them with the previous results, every other axis at once (once per scan: its other
        components reuse the arrays)."""
        assert e.combine is not None and e.dtype is not None
        key = scan_key(e)
        arrays = self.scan_arrays.get(key)
        pos = self.pos[e.axis]
        if arrays is None:
            shape = ["1"] * self.n
            shape[pos] = self.extent(e.axis)
            base = f"_s{len(self.names)}_{len(self.scan_arrays)}"
            arrays = self.scan_arrays[key] = [f"{base}_{j}" for j in range(1 + len(e.others))]
            values = [self.value(body) for body in scan_bodies(e)]  # over the union of the values' axes
            self.emit(f"{base}_shape = _np.broadcast_shapes({''.join(f'_np.shape({v}), ' for v in values)}"
                      f"({', '.join(shape)},))")  # fmt: skip
            for name, body, v in zip(arrays, scan_bodies(e), values):
                dt = body.dtype
                assert dt is not None
                self.emit(f"{name} = _np.array(_np.moveaxis(_np.broadcast_to({v}, {base}_shape), {pos}, 0)"
                          f"{'[::-1]' if e.reverse else ''}, dtype={_NP_DTYPE[dt.name]})")  # fmt: skip
            self.emit(f"for _t in range(1, {arrays[0]}.shape[0]):")
            inner = NumpyRenderer(self.k)
            inner.prefix = f"{base}_v"
            inner.carry = {j: f"{a}[_t - 1]" for j, a in enumerate(arrays)}
            inner.carry.update({len(arrays) + j: f"{a}[_t]" for j, a in enumerate(arrays)})
            results = [inner.value(x) for x in e.combine.exprs]
            self.lines += ["    " + line for line in inner.lines]
            copies = ", ".join(f"_np.array({r})" for r in results)  # (a result may be a view of an argument)
            self.emit(f"    {', '.join(f'{a}[_t]' for a in arrays)} = {copies}")
        return f"_np.moveaxis({arrays[e.which]}{'[::-1]' if e.reverse else ''}, 0, {pos})"

    def loop(self, e: Scan) -> tuple[str, str]:
        """A sequential loop: a Python loop over its steps, every other axis at once, each variable starting from its value before the loop. The value at each step and
        after the last (once per loop: its other variables reuse the arrays)."""
        assert e.combine is not None and e.dtype is not None
        key = scan_key(e)
        pos = self.pos[e.axis]
        arrays = self.scan_arrays.get(key)
        if arrays is None:
            shape = ["1"] * self.n
            shape[pos] = self.extent(e.axis)
            base = f"_s{len(self.names)}_{len(self.scan_arrays)}"
            k = len(e.init)
            arrays = self.scan_arrays[key] = [f"{base}_{j}" for j in range(k)]
            values = [self.value(body) for body in scan_bodies(e)]
            inits = [self.value(v) for v in e.init]
            every = "".join(f"_np.shape({v}), " for v in (*values, *inits))
            self.emit(f"{base}_shape = _np.broadcast_shapes({every}({', '.join(shape)},))")
            elems = [f"{base}_e{j}" for j in range(len(values))]
            for name, v in zip(elems, values):
                self.emit(f"{name} = _np.broadcast_to({v}, {base}_shape)")
            rest = f"{base}_shape[:{pos}] + (1,) + {base}_shape[{pos + 1}:]"
            for name, v in zip(arrays, e.init):
                dt = _NP_DTYPE[v.dtype.name]  # type: ignore[union-attr]
                self.emit(f"{name} = _np.empty(({base}_shape[{pos}],) + {rest}, {dt})")
                self.emit(f"{name}_at = _np.array(_np.broadcast_to({self.value(v)}, {rest}), {dt})")
            self.emit(f"for _t in range({base}_shape[{pos}]):")
            inner = NumpyRenderer(self.k)
            inner.prefix = f"{base}_v"
            inner.carry = {j: f"{a}_at" for j, a in enumerate(arrays)}
            inner.carry.update({k + j: f"{el}[{':, ' * pos}_t:_t + 1]" for j, el in enumerate(elems)})
            results = [inner.value(x) for x in e.combine.exprs]
            self.lines += ["    " + line for line in inner.lines]
            copies = ", ".join(f"_np.array(_np.broadcast_to({r}, {rest}), {_NP_DTYPE[x.dtype.name]})"  # type: ignore[union-attr]
                               for r, x in zip(results, e.combine.exprs))  # fmt: skip
            self.emit(f"    {', '.join(f'{a}_at' for a in arrays)} = {copies}")
            self.emit(f"    {', '.join(f'{a}[_t]' for a in arrays)} = {', '.join(f'{a}_at' for a in arrays)}")
        name = arrays[e.which]
        return f"_np.swapaxes({name}, 0, {pos + 1})[0]", f"{name}_at"  # (steps back at the axis's position)

    def store_axes(self, s: Store) -> None:
        """Array dimensions for the axes of store ``s`` only (a kernel of more axes than NumPy's 32 dimensions:
        a long unrolled program); values computed for earlier stores are computed again."""
        axes: set[int] = set()
        for e in (*postorder(s), s):
            for f in ("index", "axes"):
                for ix in getattr(e, f, None) or ():
                    if isinstance(ix, Affine):
                        axes |= ix.axis_set()
                    elif isinstance(ix, Index):
                        axes |= ix.affine.axis_set()
                    elif isinstance(ix, int):
                        axes.add(ix)
            for f in ("axis", "out"):
                a = getattr(e, f, None)
                if isinstance(a, int) and not isinstance(a, bool):
                    axes.add(a)
        if len(axes) > _MAX_DIMS:
            raise NotImplementedError(f"a store over {len(axes)} axes (NumPy arrays have at most {_MAX_DIMS})")
        self.pos = {a: p for p, a in enumerate(sorted(axes))}
        self.n = len(self.pos)
        self.grids, self.names, self.scan_arrays = {}, {}, {}

    # -- kernel ---------------------------------------------------------------------------------------
    def render(self) -> str:
        k = self.k
        args = ", ".join(k.argument_names())
        for a in sorted(k.axes, key=lambda a: a.index):
            self.emit(f"# axis {a.name} -> array dimension {self.pos[a.index]}, extent {self.extent(a.index)}")
        for p in k.outputs:
            self.emit(f"_w_{p.name} = {p.name}.copy()")
        for t in k.temps:  # a pass's temporaries (complex_pairs: the real part of an in-place update)
            shape = ", ".join(self.affine_scalar(d) for d in t.shape)
            self.emit(f"{t.name} = _np.empty(({shape},), {_NP_DTYPE[t.dtype.name]})")
        compact = self.n > _MAX_DIMS  # more axes than a NumPy array has dimensions: each store its own
        for s in k.stores:
            if s.loc:
                self.emit(f"# {s.loc.filename.rsplit('/', 1)[-1]}:{s.loc.lineno}: {s.loc.text.strip()}")
            if compact:
                self.store_axes(s)
            v = self.value(s.value)
            target = self.plain_view(s.tensor, s.index)
            if target is not None:
                self.emit(f"{target}[...] = {v}")
            elif not any(ix.has_axes for ix in s.index):
                self.emit(f"{self.buffer(s.tensor)}[{self.gather_index(s.index)}] = _np.reshape({v}, ())")
            else:
                self.emit(f"{self.buffer(s.tensor)}[{self.gather_index(s.index)}] = {v}")
            self.forget(s.tensor)
        for c in k.scatters:
            if c.loc:
                self.emit(f"# {c.loc.filename.rsplit('/', 1)[-1]}:{c.loc.lineno}: {c.loc.text.strip()}")
            index = [self.affine_array(ix.affine) if isinstance(ix, Index) else self.value(ix) for ix in c.index]
            self.emit(f"_scatter({self.buffer(c.tensor)}, ({', '.join(index)},), {self.value(c.value)}, {c.op!r})")
        for p in k.outputs:
            self.emit(f"_np.copyto({p.name}, _w_{p.name})")
        header = [
            f"def {k.name}({args}):",
            f'    """NumPy reference for kernel {k.name!r} (generated by pypto)."""',
            "    with _np.errstate(all='ignore'):",
        ]
        return "\n".join(header + self.lines) + "\n"


class IndexCheckRenderer(NumpyRenderer):
    """Renders the check of a kernel's gathered indices (its ``GatherInBounds`` checks) as a NumPy function
    with the kernel's arguments: every computed index, inner gathers first, is compared with its dimension
    (``_bounds`` raises :class:`pypto.IndexError`); nothing is written."""

    def render(self) -> str:
        k = self.k
        for p in k.outputs:  # an index may read an output's current values (never one the kernel writes)
            self.emit(f"_w_{p.name} = {p.name}")
        axis_names = {self.pos[a.index]: a.name for a in k.axes}
        for s in (*k.stores, *k.scatters):
            for e in (*postorder(s), s):
                if not isinstance(e, (Gather, Scatter)):
                    continue
                for pos, ix in enumerate(e.index):
                    if isinstance(ix, Index):
                        continue
                    size = self.affine_scalar(k.buffer(e.tensor).shape[pos])
                    where = f"{e.loc.filename.rsplit('/', 1)[-1]}:{e.loc.lineno}" if e.loc else ""
                    source = "a computed index"
                    if isinstance(ix, Load):
                        source = f"{ix.tensor}[{', '.join(a.format(k.axis_name) for a in ix.index)}]"
                    args = f"{size}, {k.name!r}, {e.tensor!r}, {pos}, {source!r}, {axis_names!r}, {where!r}"
                    self.emit(f"_bounds({self.value(ix)}, {args})")
        header = [
            f"def {k.name}_check_indices({', '.join(k.argument_names())}):",
            "    with _np.errstate(all='ignore'):",
        ]
        return "\n".join(header + (self.lines or ["        pass"])) + "\n"


def compile_index_check(k: KernelIR):
    """The function checking ``k``'s gathered indices (see :class:`IndexCheckRenderer`)."""
    from pypto.backends.numpy_support import namespace

    source = IndexCheckRenderer(k).render()
    ns = namespace(source)
    exec(compile(source, f"<pypto index check of {k.name}>", "exec"), ns)
    return ns[f"{k.name}_check_indices"]


def render_numpy(k: KernelIR) -> str:
    """The NumPy source of a kernel (needs ``_np``, ``_erf`` and ``_full`` in its namespace)."""
    return NumpyRenderer(k).render()
