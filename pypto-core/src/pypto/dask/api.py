"""The entry points: kernels and ``pt.jit`` functions called on dask arrays, and :func:`explain`."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from pypto.dask.graph import WholeRun, dask_array
from pypto.dask.plan import Planner
from pypto.errors import ArgumentError, DTypeError, ShapeError
from pypto.ir.kernel import ScalarParam
from pypto.runtime.foreign import is_dask_array
from pypto.runtime.kernel import Kernel

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


def _kernel_plan(kernel: Any, args: tuple, kwargs: dict) -> tuple[Planner, dict[str, Any]]:
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
    if _indirect(ir):
        return _WholeCall(ir, kernel.executor, kernel.options.fastmath, arrays, scalars, shapes), outputs
    planner = Planner(ir, arrays, scalars, dims, _extents(kernel, dims), kernel.executor, kernel.options.fastmath)
    planner.run()
    return planner, outputs  # type: ignore[return-value]


def _indirect(ir: Any) -> bool:
    """Whether a kernel stores through indices declared unique (``pt.scatter(..., unique=True)``): then it runs as
    one task on whole arrays. Gathers are planned blockwise (the gathered tensors passed whole to each block),
    accumulating scatters as partials per block combined by a tree."""
    return any(c.op == "set" for c in ir.scatters)


class _WholePlan:
    def text(self) -> str:
        return "one task on whole arrays: the kernel stores through indices declared unique (they may point anywhere)"


class _WholeCall:
    """A kernel that gathers or scatters (reads and writes at indices taken from data, anywhere in its arrays)
    as one task on whole arrays: what a planner gives the caller (``ir``, ``env``, ``da``, ``plan``)."""

    def __init__(self, ir: Any, executor: str | None, fastmath: bool, arrays: dict[str, Any], scalars: dict[str, Any],
                 shapes: dict[str, tuple[int, ...]]):  # fmt: skip
        import dask

        self.da = dask_array()
        self.ir = ir
        self.plan = _WholePlan()
        outs = ir.outputs
        run = WholeRun(ir, executor, fastmath, tuple(arrays), tuple(shapes.items()), tuple(scalars.items()))
        task = dask.delayed(run, nout=len(outs), pure=True)(*arrays.values())
        self.env = {
            p.name: self.da.from_delayed(task[k], shapes[p.name], dtype=p.dtype.numpy) for k, p in enumerate(outs)
        }


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
        if p.name not in {s.tensor for s in (*ir.stores, *ir.scatters)}:
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


def _jit_plan(fn: Any, args: tuple) -> tuple[Planner, list[tuple[str, tuple[int, ...]]], bool, list[Any]]:
    """The dask plan of a jit function's program on ``args``: the planner of its (last) kernel, its results' names
    and shapes, whether it returns one array, and the planners of the steps run before it (a program that reads
    a scatter's result: each step's results are dask arrays the later steps take as arguments)."""
    stand = tuple(_standin(a) for a in args)
    c, sizes = fn.lookup(stand)
    args = (*args, *c.captured)  # the NumPy arrays the function read from outside it (passed after the call's)
    before = []
    for step in c.steps:
        planner, results, _ = _part_plan(fn, step, args, sizes)
        before.append(planner)
        args = (*args, *_results(planner, results))
    return (*_part_plan(fn, c, args, sizes), before)


def _results(planner: Any, results: list[tuple[str, tuple[int, ...]]]) -> list[Any]:
    return [planner.env[name].reshape(shape) if tuple(planner.env[name].shape) != shape else planner.env[name]
            for name, shape in results]  # fmt: skip


def _part_plan(fn: Any, c: Any, args: tuple, sizes: Any) -> tuple[Planner, list[tuple[str, tuple[int, ...]]], bool]:
    plan = c.plan
    ir = plan.kernel
    arrays: dict[str, Any] = {}
    for k, src, shape in c.feeds:
        a = args[src]
        if not is_dask_array(a):  # (a runtime number: in the type the program reads it in)
            a = np.asarray(a, dtype=c.numbers.get(k))
        arrays[plan.buffers[k].name] = a if shape is None or tuple(a.shape) == tuple(shape) else a.reshape(shape)
    for k, s, shape in c.views:
        if sizes is not None:
            shape = c.declared_shape(k, sizes)
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
    results = [(plan.buffers[pos].name, c.shape_of(pos, sizes)) for pos in plan.outputs]
    if _indirect(ir):
        shapes = {p.name: tuple(e.evaluate(dims) for e in p.shape) for p in ir.tensor_params}
        whole = _WholeCall(ir, opts.get("executor"), bool(opts.get("fastmath")), arrays, {}, shapes)
        return whole, results, c.single  # type: ignore[return-value]
    planner = Planner(ir, arrays, {}, dims, _extents(c.kernel, dims), opts.get("executor"), bool(opts.get("fastmath")))
    planner.run()
    return planner, results, c.single


def call_jit(fn: Any, args: tuple, out: Any = None) -> Any:
    """A ``@pt.jit`` function called with dask arrays: its results as dask arrays (``out=``: NumPy arrays
    computed into now, as a NumPy call would)."""
    planner, results, single, _ = _jit_plan(fn, args)
    arrays = _results(planner, results)
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
    if isinstance(fn, Kernel):
        planner, _ = _kernel_plan(fn, args, kwargs)
        return planner.plan.text()
    planner, _, _, before = _jit_plan(fn, args)  # a pt.jit function
    if not before:
        return planner.plan.text()
    parts = [*before, planner]
    return "\n\n".join(f"step {k + 1} of {len(parts)}:\n{p.plan.text()}" for k, p in enumerate(parts))
