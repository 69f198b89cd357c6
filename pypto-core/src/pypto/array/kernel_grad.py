"""Gradients of destination-passing kernels: ``kernel.vjp(*args)`` (also ``pt.vjp(kernel, *args)``).

    @pt.kernel
    def softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]): ...

    y, pullback = softmax.vjp(x, y)      # runs the kernel (y is filled), and
    (dx,) = pullback(dy)                # dx from dy: one compiled kernel

The kernel's IR (after ``infer_shapes``, with the call's sizes) is read back as an array program: each
store is an expression of whole arrays indexed by the kernel's axes (a load at plain axes is a view, a
reduction a reduction over its axes), and :func:`pypto.array.autodiff.backward` differentiates that. The
pullback is compiled like any gradient: one kernel, fused and scheduled.

Supported: stores that write a whole output at distinct plain axes (``y[i, j] = ...``), each output written
once; loads at plain axes, constants, or ``k*axis + c`` (slices); the kernel language's elementwise
operations, ``where``, casts and reductions; gathers (their adjoint a scatter-add into the table) and
scatter-adds after the stores (``y[idx[i]] += v``: the array layer's ``y.at[idx].add(v)``, whose adjoint
gathers the cotangent); scans (``pt.cumsum`` & co, ``pt.associative_scan``) and sequential loops (``for t in
pt.range(n)``, ``while`` on a traced value: the array layer's loop scan, each variable one node, whose adjoint
is a scan the other way over the recomputed states, see :func:`pypto.array.autodiff._sequential_adjoints`);
orderings (``pt.sort``, ``pt.topk``'s values: the array layer's, whose adjoint sends each value's cotangent back
to its position); scalar parameters (constants of the pullback). A kernel beyond that gets a
:class:`~pypto.errors.TracingError` naming the store.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from pypto._lru import LRUCache
from pypto.array import views
from pypto.array.graph import Array, binary, cast, reduce, unary, where
from pypto.errors import TracingError
from pypto.ir.nodes import (
    Binary,
    Cast,
    Combine,
    Const,
    Expr,
    Extent,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Sort,
    Unary,
    Where,
    scan_bodies,
    scan_key,
    transform,
)
from pypto.ir.ops import LAST, LOOP

Named = tuple[Any, tuple[int, ...]]  # an array (or a Python number) and the kernel axis of each of its dims


class _Reader:
    """Reads one kernel's stores back as array operations, for given dims and scalar values."""

    def __init__(self, ir: Any, dims: dict[str, int], scalars: dict[str, Any]):
        self.ir = ir
        self.dims = dims
        self.scalars = scalars
        self.extent = {a.index: a.extent.evaluate(dims) for a in ir.axes if a.extent is not None}
        self.loops: dict[tuple, tuple[list[Array], tuple[int, ...]]] = {}  # per traced program (see reset)
        self.starts: dict[tuple, list[Array]] = {}

    def reset(self) -> None:
        """Forget the arrays of the last traced program."""
        self.loops.clear()
        self.starts.clear()

    def fail(self, store: Any, why: str) -> TracingError:
        return TracingError(f"kernel.vjp of '{self.ir.name}': {why}", store.loc,
                            "kernel.vjp reads kernels whose stores write whole outputs at plain axes; "
                            "write the computation as a @pt.jit function and use pt.grad or pt.vjp")  # fmt: skip

    # -- values over named axes -----------------------------------------------------------------------------
    def align(self, value: Named, axes: tuple[int, ...]) -> Any:
        """``value`` as an array over ``axes`` (size 1 where it does not vary), ready to broadcast."""
        arr, have = value
        if not isinstance(arr, Array) or not have:
            if isinstance(arr, Array) and axes:
                return views.reshape(arr, (1,) * len(axes))
            return arr
        present = [a for a in axes if a in have]
        perm = tuple(have.index(a) for a in present)
        if perm != tuple(range(len(have))):
            arr = views.transpose(arr, perm)
        shape = tuple(self.extent[a] if a in have else 1 for a in axes)
        return views.reshape(arr, shape) if shape != arr.shape else arr

    def union(self, *values: Named) -> tuple[int, ...]:
        out: list[int] = []
        for _, axes in values:
            out += [a for a in axes if a not in out]
        return tuple(out)

    def value(self, e: Expr, env: dict[str, Array], store: Any) -> Named:
        if isinstance(e, Const):
            return (e.value, ())
        if isinstance(e, Scalar):
            return (self.scalars[e.name], ())
        if isinstance(e, Extent):
            return (self.extent[e.axis], ())
        if isinstance(e, Index):
            if e.affine.axes:
                raise self.fail(store, "an axis used as a value (pt.axis(k) in arithmetic) has no gradient here")
            return (e.affine.evaluate(self.dims), ())
        if isinstance(e, Load):
            return self.load(e, env, store)
        if isinstance(e, Unary):
            arr, axes = self.value(e.x, env, store)
            if not isinstance(arr, Array):
                raise self.fail(store, f"{e.op} of a constant")
            return (unary(e.op, arr), axes)
        if isinstance(e, Binary):
            a, b = self.value(e.a, env, store), self.value(e.b, env, store)
            axes = self.union(a, b)
            return (binary(e.op, self.align(a, axes), self.align(b, axes)), axes)
        if isinstance(e, Where):
            parts = [self.value(x, env, store) for x in (e.cond, e.a, e.b)]
            axes = self.union(*parts)
            c, a, b = (self.align(p, axes) for p in parts)
            return (where(c, a, b), axes)
        if isinstance(e, Cast):
            arr, axes = self.value(e.x, env, store)
            return (cast(arr, e.dtype) if isinstance(arr, Array) else arr, axes)
        if isinstance(e, Reduce) and e.op != LAST:
            arr, axes = self.value(e.body, env, store)
            if not isinstance(arr, Array):
                raise self.fail(store, "a reduction of a constant")
            over = tuple(axes.index(a) for a in e.axes if a in axes)
            missing = [a for a in e.axes if a not in axes]
            if missing and e.op in ("sum", "prod"):  # the body does not vary along it: n copies
                raise self.fail(store, "a sum or product over an axis its body does not read")
            rest = tuple(a for a in axes if a not in e.axes)
            return (reduce(e.op, arr, over, False) if over else arr, rest)
        if isinstance(e, Gather):
            return self.gather(e, env, store)
        if isinstance(e, Scan) and e.op == LOOP:
            arrays, axes = self.loop(e, env, store)
            return (arrays[e.which], axes)
        if isinstance(e, Scan):  # pt.cumsum & co, pt.associative_scan: the array layer's scan along the axis
            values = [self.value(v, env, store) for v in scan_bodies(e)]
            axes = self.union(*values)
            axes += () if e.axis in axes else (e.axis,)
            shape = tuple(self.extent[a] for a in axes)
            arrays = []
            for value in values:
                if not isinstance(value[0], Array):
                    raise self.fail(store, "a scan of a constant")
                arr = self.align(value, axes)
                arrays.append(views.broadcast_to(arr, shape) if arr.shape != shape else arr)
            combine = None if e.combine is None else Combine(tuple(self.constants(x, store) for x in e.combine.exprs))
            assert e.dtype is not None
            return (Array("scan", tuple(arrays), (e.op, axes.index(e.axis), e.reverse, combine, e.which), shape,
                          e.dtype, loc=e.loc), axes)  # fmt: skip
        if isinstance(e, Sort):  # pt.sort & co: the array layer's ordering, numbered along the sort's own axis
            arr, axes = self.value(e.body, env, store)
            if not isinstance(arr, Array):
                raise self.fail(store, "a sort of a constant")
            if e.axis not in axes:  # (a row of copies: each element its own position)
                axes += (e.axis,)
                arr = views.broadcast_to(self.align((arr, axes[:-1]), axes), tuple(self.extent[a] for a in axes))
            at = axes.index(e.axis)
            shape = tuple(self.extent[e.out] if a == e.axis else self.extent[a] for a in axes)
            assert e.dtype is not None
            node = Array("sort", (arr,), (at, e.which, e.descending, e.top), shape, e.dtype, loc=e.loc)
            return (node, tuple(e.out if a == e.axis else a for a in axes))
        if isinstance(e, Reduce) and e.op == LAST:  # the variable after the loop's last step
            assert isinstance(e.body, Scan)
            arrays, axes = self.loop(e.body, env, store)
            (t,) = e.axes
            rest = tuple(a for a in axes if a != t)
            if self.extent[t] == 0:  # no step: the value before the loop
                start = views.getitem(self.starts[scan_key(e.body)][e.body.which], (*(slice(None),) * axes.index(t), 0))
                return (start, rest)
            return (views.getitem(arrays[e.body.which], (*(slice(None),) * axes.index(t), -1)), rest)
        raise self.fail(store, f"{type(e).__name__} is not supported")

    def loop(self, e: Scan, env: dict[str, Array], store: Any) -> tuple[list[Array], tuple[int, ...]]:
        """A sequential loop's variables after each step, as array-layer loop scans over the axes its values
        and starts vary along (and its own): one node per variable, shared by the loop's readers."""
        key = scan_key(e)
        hit = self.loops.get(key)
        if hit is not None:
            return hit
        assert e.combine is not None
        k = len(e.combine.exprs)
        steps = [self.value(v, env, store) for v in scan_bodies(e)]
        starts = [self.value(v, env, store) for v in e.init]
        axes = self.union(*steps, *starts)
        if e.axis not in axes:
            axes += (e.axis,)
        shape = tuple(self.extent[a] for a in axes)
        where_t = axes.index(e.axis)

        from pypto.array.autodiff import full

        def whole(value: Named, expr: Expr, shape: tuple[int, ...]) -> Array:
            arr = self.align(value, axes)
            assert expr.dtype is not None
            if not isinstance(arr, Array):
                return full(shape, arr, expr.dtype)
            return views.broadcast_to(arr, shape) if arr.shape != shape else arr

        once = shape[:where_t] + (1,) + shape[where_t + 1 :]  # (the values before the loop: none along it)
        before = [cast(whole(v, x, once), x.dtype) for v, x in zip(starts, e.init)]  # type: ignore[arg-type]
        step_arrays = [whole(v, x, shape) for v, x in zip(steps, scan_bodies(e))]
        start_arrays = [views.broadcast_to(b, shape) for b in before]
        combine = Combine(tuple(self.constants(x, store) for x in e.combine.exprs))
        arrays = [
            Array(
                "scan",
                (*step_arrays, *start_arrays),
                (LOOP, where_t, False, combine, j),
                shape,
                start_arrays[j].dtype,
                loc=e.loc,
            )  # fmt: skip
            for j in range(k)
        ]
        self.starts[key] = before
        self.loops[key] = (arrays, axes)
        return arrays, axes

    def constants(self, e: Expr, store: Any) -> Expr:
        """A loop's step with its scalar parameters and sizes as the call's numbers."""

        def leaf(n: Any) -> Any:
            if isinstance(n, Scalar):
                return Const(self.scalars[n.name], dtype=n.dtype, loc=n.loc)
            if isinstance(n, Extent):
                return Const(self.extent[n.axis], dtype=n.dtype, loc=n.loc)
            if isinstance(n, (Load, Gather, Index, Reduce, Scan)):
                raise self.fail(store, f"a loop step reads {type(n).__name__} inside its carried computation")
            return None

        return transform(e, leaf)

    def gather(self, e: Gather, env: dict[str, Array], store: Any) -> Named:
        """A gather as the array layer's integer-array indexing: every position an index array over the axes
        the gather varies along (a plain axis as the positions along it), so the result has those axes in
        order; its adjoint is the array layer's (a scatter-add into the table)."""
        table = env.get(e.tensor)
        if table is None:
            raise self.fail(store, f"'{e.tensor}' is read before it is written")
        parts = self.positions(e.index, e.tensor, env, store)
        plain = [isinstance(p[0], str) for p in parts]  # ("axis", a) (never compare an Array with ==)
        axes = self.union(*[(None, (p[1],)) if is_axis else p for p, is_axis in zip(parts, plain)])
        items = self.items(parts, plain, axes)
        return (views._advanced(table, items), axes)

    def scatter(self, c: Any, base: Array, env: dict[str, Array]) -> Array:
        """A scatter-add as the array layer's ``base.at[items].add(value)``: every position of the target an
        index array over the scatter's points (all the axes its indices and value vary along)."""
        if c.op != "add":
            what = "pt.scatter(..., unique=True)" if c.op == "set" else f"pt.scatter_{c.op}"
            raise self.fail(c, f"the scatter into '{c.tensor}' is {what}; kernel.vjp differentiates scatter-adds")
        parts = self.positions(c.index, c.tensor, env, c)
        value = self.value(c.value, env, c)
        plain = [isinstance(p[0], str) for p in parts]
        axes = self.union(*[(None, (p[1],)) if is_axis else p for p, is_axis in zip(parts, plain)], value)
        items = self.items(parts, plain, axes)
        shape = tuple(self.extent[a] for a in axes)
        first = next((k for k, x in enumerate(items) if isinstance(x, Array)), None)
        if first is None:
            raise self.fail(c, f"the scatter into '{c.tensor}' reads no index from data")
        items[first] = views.broadcast_to(items[first], shape)  # one update per point, the value's axes too
        v = self.align(value, axes)
        return views._scatter_of(base, items, v, f"kernel.vjp of '{self.ir.name}'")

    def positions(self, index: tuple[Expr, ...], tensor: str, env: dict[str, Array], store: Any) -> list[Any]:
        """Each position of a gather or scatter: a value over axes, a constant, or ``("axis", a)``."""
        parts: list[Any] = []
        for ix in index:
            if not isinstance(ix, Index):
                parts.append(self.value(ix, env, store))
            elif not ix.affine.axes:
                parts.append((ix.affine.evaluate(self.dims), ()))
            elif ix.affine.plain_axis() is not None:
                parts.append(("axis", ix.affine.plain_axis()))
            else:
                raise self.fail(store, f"an index of '{tensor}' is an affine expression other than a plain axis")
        return parts

    def items(self, parts: list[Any], plain: list[bool], axes: tuple[int, ...]) -> list[Any]:
        """The index arrays of ``parts`` over ``axes`` (a plain axis: the positions along it)."""
        items: list[Any] = []
        for p, is_axis in zip(parts, plain):
            if is_axis:
                items.append(views._iota(self.extent[p[1]], axes.index(p[1]), len(axes)))
            else:
                items.append(self.align(p, axes))
        return items

    def load(self, e: Load, env: dict[str, Array], store: Any) -> Named:
        arr = env.get(e.tensor)
        if arr is None:
            raise self.fail(store, f"'{e.tensor}' is read before it is written")
        key: list[Any] = []
        axes: list[int] = []
        for ix in e.index:
            if not ix.axes:
                key.append(ix.evaluate(self.dims))
                continue
            if len(ix.axes) != 1:
                raise self.fail(store, f"the index {ix} of '{e.tensor}' mixes axes")
            (a, k), c = ix.axes[0], ix.without_axes().evaluate(self.dims)
            if a in axes:
                raise self.fail(store, f"axis {a} indexes two dimensions of '{e.tensor}' (a diagonal)")
            n = self.extent[a]
            if k > 0:
                key.append(slice(c, c + k * (n - 1) + 1, k))
            else:
                stop = c + k * (n - 1) - 1
                key.append(slice(c, stop if stop >= 0 else None, k))
            axes.append(a)
        out = views.getitem(arr, tuple(key)) if key else arr
        return (out, tuple(axes))


_lock = threading.Lock()
VJP_CACHE_SIZE = 16  # pullback programs a kernel keeps (one per dims and scalars), least recently used dropped


def kernel_vjp(kernel: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Run ``kernel`` on ``args`` (filling its outputs) and return ``(outputs, pullback)``.

    ``pullback(*cotangents)`` takes one array per output (shaped like it) and returns the cotangents of
    the kernel's input arrays, in parameter order."""
    from pypto.array.autodiff import _clean, _require_grad, backward, cotangents_for, full
    from pypto.array.function import JitFunction

    bound = kernel.bind(*args, **kwargs)
    ir = kernel.compilation().stages["infer_shapes"]
    dims = dict(zip(ir.dims, bound.dims))
    values = dict(zip([p.name for p in ir.params], bound.in_param_order))
    outputs = kernel(*args, **kwargs)
    ins = [p for p in ir.tensor_params if p.role == "in"]
    outs = [p for p in ir.tensor_params if p.role != "in"]
    scalars = {p.name: values[p.name] for p in ir.scalar_params}
    scalars = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in scalars.items()}
    reader = _Reader(ir, dims, scalars)
    out_shapes = [tuple(int(s) for s in np.shape(values[p.name])) for p in outs]

    def program(*xs: Any) -> Any:
        _require_grad(f"{kernel.name}.vjp pullback")
        arrays, cts = xs[: len(ins)], xs[len(ins) :]
        reader.reset()
        env: dict[str, Array] = {p.name: a for p, a in zip(ins, arrays)}
        written: dict[str, Array] = {}
        for s in ir.stores:
            if s.tensor in written:
                raise reader.fail(s, f"'{s.tensor}' is written by more than one store")
            target = tuple(np.shape(values[s.tensor]))
            plain = [ix.plain_axis() for ix in s.index]
            axes = tuple(a for a in plain if a is not None)
            # every dimension at its own axis over its whole size, or a dimension of size 1 at index 0
            whole = all(
                (a is not None and reader.extent[a] == n) or (ix.is_const and ix.const == 0 and n == 1)
                for a, ix, n in zip(plain, s.index, target)
            )  # fmt: skip
            if not whole or len(set(axes)) != len(axes) or len(s.index) != len(target):
                raise reader.fail(s, f"the store to '{s.tensor}' does not write the whole array at plain axes")
            val = reader.value(s.value, env, s)
            arr = reader.align(val, axes)
            if not isinstance(arr, Array):
                raise reader.fail(s, f"'{s.tensor}' is a constant")
            arr = views.reshape(arr, tuple(target) if not axes else arr.shape)  # a scalar into its (1,) output
            arr = views.broadcast_to(arr, target) if arr.shape != target else arr
            dtype = next(p.dtype for p in outs if p.name == s.tensor)
            written[s.tensor] = env[s.tensor] = cast(arr, dtype)
        for c in ir.scatters:  # after the stores, in order: a scatter-add into what is there
            p = next(p for p in outs if p.name == c.tensor)
            # a target the kernel did not store holds its values from before the call: they add nothing to
            # the gradient of the inputs (an output's own cotangent is not returned), so zeros stand for them
            base = written.get(c.tensor)
            if base is None:
                base = full(tuple(np.shape(values[c.tensor])), 0.0, p.dtype)
            written[c.tensor] = env[c.tensor] = reader.scatter(c, base, env)
        ys = [written[p.name] for p in outs]
        wrt = [a for a in arrays if a.dtype.is_inexact]
        return tuple(backward(ys, list(cts), wrt))

    key = (tuple(sorted(dims.items())), tuple(sorted(scalars.items())))
    with _lock:
        cache = kernel.__dict__.setdefault("_pt_vjp", LRUCache(VJP_CACHE_SIZE))
        jit = cache.get(key)
        if jit is None:
            import inspect

            params = [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_ONLY) for p in ins]
            params += [inspect.Parameter(f"d_{p.name}", inspect.Parameter.POSITIONAL_ONLY) for p in outs]
            program.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
            program.__name__ = program.__qualname__ = f"vjp_{kernel.name}"
            jit = cache[key] = JitFunction(program, **_clean({"executor": kernel.executor}))
    in_arrays = [np.asarray(values[p.name]) for p in ins]

    def pullback(*cotangents: Any) -> tuple[Any, ...]:
        results = [(shape, p.dtype.numpy, f"output '{p.name}'") for shape, p in zip(out_shapes, outs)]
        fixed = cotangents_for(f"{kernel.name}.vjp pullback", cotangents, results)
        res = jit(*in_arrays, *fixed)
        return res if isinstance(res, tuple) else (res,)

    return outputs, pullback
