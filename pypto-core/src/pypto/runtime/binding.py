"""Binding call arguments to a kernel's parameters, with the checks that keep generated code safe.

Each problem raises a typed error naming the parameter, what was expected, what was given and the
fix. Nothing is launched (and no output touched) until every check has passed.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import AliasingError, ArgumentError, DTypeError, ShapeError
from pypto.ir.affine import Affine
from pypto.ir.kernel import DimEqual, IndexInBounds, KernelIR, ScalarParam, TensorParam
from pypto.ir.nodes import Load, Reduce, children


def _ptype(p: TensorParam) -> str:
    return f"pt.Tensor[{p.dtype.name}, ({', '.join(str(s) for s in p.shape)}{',' if p.ndim == 1 else ''})]"


def _to_array(kernel: str, p: TensorParam, value: Any) -> np.ndarray:
    """The NumPy view of an argument (no copy for arrays, __array_interface__ and DLPack objects)."""
    if isinstance(value, np.ndarray):
        return value
    is_output = p.role != "in"
    if hasattr(value, "__array_interface__") or hasattr(value, "__array_struct__"):
        return np.asarray(value)
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError) as e:
            raise ArgumentError(
                f"{kernel}(): argument '{p.name}' could not be read through DLPack ({e})",
                param=p.name,
                expected="a host (CPU) array",
                got=type(value).__name__,
                fix="pass a NumPy array, or move the data to host memory first",
            ) from None
    if isinstance(value, (list, tuple)) and not is_output:
        a = np.asarray(value)
        if a.dtype == object or not np.can_cast(a.dtype, p.dtype.numpy, "same_kind"):
            raise DTypeError(
                f"{kernel}(): argument '{p.name}' is a {type(value).__name__} that converts to {a.dtype}, "
                f"expected {p.dtype}",
                param=p.name,
                expected=str(p.dtype),
                got=str(a.dtype),
                fix=f"pass np.asarray(..., dtype=np.{p.dtype.numpy.name})",
            )
        return a.astype(p.dtype.numpy)
    if isinstance(value, (numbers.Number, np.generic)):
        raise ArgumentError(
            f"{kernel}(): argument '{p.name}' is a scalar ({value!r}) but the parameter is {_ptype(p)}",
            param=p.name,
            expected=_ptype(p),
            got=value,
            fix=f"pass an array, e.g. np.full(shape, {value!r}, dtype=np.{p.dtype.numpy.name})",
        )
    what = "an output" if is_output else "an input"
    raise ArgumentError(
        f"{kernel}(): argument '{p.name}' ({type(value).__name__}) cannot be used as {what} array",
        param=p.name,
        expected="a NumPy array, or an object with __array_interface__ or __dlpack__",
        got=type(value).__name__,
        fix="convert it with np.asarray(...) (outputs must be writable arrays)",
    )


@dataclass
class BoundCall:
    """Validated arguments, ready for a launcher, plus what to do after the launch."""

    arrays: list[np.ndarray]
    scalars: list[Any]
    dims: list[int]
    noalias: bool
    outputs: list[Any]
    copyback: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    in_param_order: tuple = ()  # arrays and (Python) scalars in the kernel's parameter order

    def args(self) -> tuple:
        """Launcher arguments: arrays, then scalars, then dims (the loop IR's order)."""
        return (*self.arrays, *self.scalars, *self.dims)

    def finish(self) -> Any:
        for user, work in self.copyback:
            np.copyto(user, work)
        if len(self.outputs) == 1:
            return self.outputs[0]
        return tuple(self.outputs)


def alias_safe_pairs(k: KernelIR) -> frozenset[tuple[str, str]]:
    """(input, output) pairs that may be the very same array: each point only reads what it writes.

    That holds when the output is written in a single nest that also holds every read of the input,
    all at the output's index and outside reductions.
    """
    assert k.groups is not None
    ok = set()
    outputs = [p.name for p in k.outputs]
    inputs = [p.name for p in k.tensor_params]
    for q in outputs:
        for p in inputs:
            if p == q:
                continue
            where = [gi for gi, g in enumerate(k.groups) for s in g.stores if s.tensor == q]
            idxs = {s.index for g in k.groups for s in g.stores if s.tensor == q}
            reads = []
            for gi, g in enumerate(k.groups):
                for s in g.stores:
                    reads += [(gi, ix, red) for ix, red in _loads_of(s.value, p)]
            if len(set(where)) != 1 or len(idxs) != 1:
                continue
            (idx,) = idxs
            if all(gi == where[0] and ix == idx and not red for gi, ix, red in reads):
                ok.add((p, q))
    return frozenset(ok)


def _loads_of(e, tensor: str) -> list[tuple[tuple[Affine, ...], bool]]:
    out = []

    def visit(n, red: bool, seen: set) -> None:
        if (id(n), red) in seen:
            return
        seen.add((id(n), red))
        if isinstance(n, Load):
            if n.tensor == tensor:
                out.append((n.index, red))
            return
        if isinstance(n, Reduce):
            visit(n.body, True, seen)
            return
        for c in children(n):
            visit(c, red, seen)

    visit(e, False, set())
    return out


class Binder:
    """Checks and converts the arguments of one kernel."""

    def __init__(self, k: KernelIR, alias_ok: frozenset[tuple[str, str]]):
        self.k = k
        self.name = k.name
        self.params = k.params
        self.param_names = [p.name for p in k.params]
        self.dims = k.dims
        self.alias_ok = alias_ok
        self.tensor_params = k.tensor_params
        self.scalar_params = k.scalar_params
        self.checks = k.checks

    # -- argument mapping ----------------------------------------------------------------------
    def _collect(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        n = len(self.params)
        if len(args) > n:
            raise ArgumentError(
                f"{self.name}() takes {n} argument(s) ({', '.join(self.param_names)}) but {len(args)} were given",
                expected=n,
                got=len(args),
                fix="pass one array or scalar per kernel parameter",
            )
        values = dict(zip(self.param_names, args))
        explicit_dims: dict[str, Any] = {}
        for key, v in kwargs.items():
            if key in self.param_names:
                if key in values:
                    raise ArgumentError(
                        f"{self.name}() got argument '{key}' twice (by position and by name)", param=key
                    )
                values[key] = v
            elif key in self.dims:
                explicit_dims[key] = v
            else:
                raise ArgumentError(
                    f"{self.name}() got an unexpected keyword argument '{key}'",
                    param=key,
                    expected=f"one of the parameters ({', '.join(self.param_names)}) or dims ({', '.join(self.dims) or 'none'})",
                    got=key,
                )
        missing = [p for p in self.param_names if p not in values]
        if missing:
            raise ArgumentError(
                f"{self.name}() is missing argument(s): {', '.join(missing)}",
                param=missing[0],
                fix="outputs are passed too: allocate them with pt.empty(...)",
            )
        return values, explicit_dims

    # -- the whole binding -------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> BoundCall:
        values, explicit = self._collect(args, kwargs)
        arrays: dict[str, np.ndarray] = {}
        user: dict[str, Any] = {}
        for p in self.tensor_params:
            v = values[p.name]
            a = _to_array(self.name, p, v)
            dt = dtypes.from_numpy(a.dtype)
            if dt != p.dtype:
                fix = f"pass {p.name}.astype(np.{p.dtype.numpy.name})"
                if dt is not None and p.role == "in":
                    fix += f", or declare the parameter as pt.Tensor[pt.{dt.name.rstrip('_')}, ...]"
                raise DTypeError(
                    f"{self.name}(): argument '{p.name}' has dtype {a.dtype}, expected {p.dtype} (declared as {_ptype(p)})",
                    param=p.name,
                    expected=str(p.dtype),
                    got=str(a.dtype),
                    fix=fix,
                )
            if a.ndim != p.ndim:
                raise ShapeError(
                    f"{self.name}(): argument '{p.name}' has {a.ndim} dimension(s) (shape {a.shape}), expected "
                    f"{p.ndim} (declared as {_ptype(p)})",
                    param=p.name,
                    expected=p.ndim,
                    got=a.shape,
                    fix="reshape the array, or change the declared shape",
                )
            if p.role != "in" and not a.flags.writeable:
                raise ArgumentError(
                    f"{self.name}(): output '{p.name}' is read-only",
                    param=p.name,
                    expected="a writable array",
                    got="read-only array",
                    fix="pass a writable array, e.g. pt.empty_like(...)",
                )
            arrays[p.name] = a
            user[p.name] = v if isinstance(v, np.ndarray) else a
        dims = self._bind_dims(arrays, explicit)
        self._run_checks(dims)
        scalars = [self._scalar(p, values[p.name]) for p in self.scalar_params]
        noalias = self._check_aliasing(arrays)
        copyback = []
        ready = []
        for p in self.tensor_params:
            a = arrays[p.name]
            if not (a.flags.c_contiguous and a.flags.aligned):
                work = np.ascontiguousarray(a)
                if p.role != "in":
                    copyback.append((a, work))
                a = work
            ready.append(a)
        outputs = [user[p.name] for p in self.tensor_params if p.role != "in"]
        by_name = dict(zip([p.name for p in self.tensor_params], ready))
        by_name.update({p.name: s.item() for p, s in zip(self.scalar_params, scalars)})
        in_order = tuple(by_name[p.name] for p in self.params)
        return BoundCall(ready, scalars, [dims[d] for d in self.dims], noalias, outputs, copyback, in_order)

    def _bind_dims(self, arrays: dict[str, np.ndarray], explicit: dict[str, Any]) -> dict[str, int]:
        dims: dict[str, int] = {}
        source: dict[str, str] = {}
        for d, v in explicit.items():
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ArgumentError(
                    f"{self.name}(): dim {d}={v!r} must be a non-negative int", param=d, expected="int >= 0", got=v
                )
            dims[d] = int(v)
            source[d] = f"{d}={int(v)} (keyword)"
        # plain dims first, then solve entries like N + 1 for dims that only appear that way
        for solve in (False, True):
            for p in self.tensor_params:
                shape = arrays[p.name].shape
                for pos, entry in enumerate(p.shape):
                    if len(entry.dims) != 1 or entry.dims[0][0] in dims:
                        continue
                    (d, c) = entry.dims[0]
                    if entry.plain_dim() is None and not solve:
                        continue
                    val, rem = divmod(shape[pos] - entry.const, c)
                    if rem or val < 0:
                        continue  # reported by the verification below
                    dims[d] = val
                    source[d] = f"{p.name}.shape[{pos}] = {shape[pos]}"
        for p in self.tensor_params:
            shape = arrays[p.name].shape
            for pos, entry in enumerate(p.shape):
                if not entry.dim_set() <= dims.keys():
                    d = sorted(entry.dim_set() - dims.keys())[0]
                    raise ShapeError(
                        f"{self.name}(): cannot determine dim {d} from {p.name}.shape[{pos}] = {shape[pos]} "
                        f"(declared {entry})",
                        param=p.name,
                        expected=str(entry),
                        got=shape[pos],
                        fix=f"pass {d}=... explicitly or fix the array's shape",
                    )
                want = entry.evaluate(dims)
                if want != shape[pos]:
                    origin = ", ".join(f"{d} = {dims[d]} from {source[d]}" for d in sorted(entry.dim_set()))
                    decl = f"{entry} = {want}" + (f" ({origin})" if origin else "")
                    raise ShapeError(
                        f"{self.name}(): {p.name}.shape[{pos}] is {shape[pos]}, but the kernel declares {decl}",
                        param=p.name,
                        expected=want,
                        got=shape[pos],
                        fix="pass arrays whose sizes agree (same dim name = same size)",
                    )
        return dims

    def _run_checks(self, dims: dict[str, int]) -> None:
        extents = {a.index: a.extent.evaluate(dims) for a in self.k.axes if a.extent is not None}
        for c in self.checks:
            if isinstance(c, DimEqual):
                va, vb = c.a.evaluate(dims), c.b.evaluate(dims)
                if va != vb:
                    raise ShapeError(
                        f"{self.name}(): axis '{c.axis}' runs over {c.a_source} = {va} and also indexes "
                        f"{c.b_source} = {vb}; these sizes must be equal",
                        param=c.b_source.split(".")[0],
                        expected=va,
                        got=vb,
                        fix="pass arrays whose sizes agree along that axis",
                    )
            elif isinstance(c, IndexInBounds):
                lo = hi = c.index.without_axes().evaluate(dims)
                empty = False
                for ax, coeff in c.index.axes:
                    e = extents[ax]
                    if e == 0:
                        empty = True
                        break
                    span = coeff * (e - 1)
                    lo += min(0, span)
                    hi += max(0, span)
                if empty:
                    continue
                size = c.size.evaluate(dims)
                if lo < 0 or hi >= size:
                    bad = lo if lo < 0 else hi
                    ranges = ", ".join(f"{self.k.axis_name(a)} in [0, {extents[a]})" for a, _ in c.index.axes)
                    where = f"{c.loc}: " if c.loc else ""
                    raise ShapeError(
                        f"{where}{self.name}(): index {c.index.format(self.k.axis_name)} of '{c.tensor}' reaches "
                        f"{bad}, outside {c.tensor}.shape[{c.position}] = {size}" + (f" ({ranges})" if ranges else ""),
                        param=c.tensor,
                        expected=f"indices in [0, {size})",
                        got=bad,
                        fix="make the array larger (or the iteration smaller) so every index stays in bounds",
                    )

    def _scalar(self, p: ScalarParam, v: Any) -> Any:
        npt = p.dtype.numpy.type
        if p.dtype.is_bool:
            if isinstance(v, (bool, np.bool_)):
                return np.bool_(v)
        elif p.dtype.is_int:
            if isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool):
                lim = 2 ** (p.dtype.bits - 1)
                if not -lim <= int(v) < lim:
                    raise DTypeError(
                        f"{self.name}(): scalar '{p.name}' = {v} does not fit in {p.dtype}",
                        param=p.name,
                        expected=f"an int in [{-lim}, {lim})",
                        got=v,
                        fix="declare the parameter as pt.int64",
                    )
                return npt(int(v))
        elif isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_)):
            return npt(v)
        raise DTypeError(
            f"{self.name}(): scalar '{p.name}' must be a {p.dtype} value, got {type(v).__name__} {v!r}",
            param=p.name,
            expected=str(p.dtype),
            got=type(v).__name__,
            fix=f"pass a Python {'bool' if p.dtype.is_bool else 'int' if p.dtype.is_int else 'number'}",
        )

    def _check_aliasing(self, arrays: dict[str, np.ndarray]) -> bool:
        noalias = True
        outs = [p for p in self.tensor_params if p.role != "in"]
        for q in outs:
            qa = arrays[q.name]
            for p in self.tensor_params:
                if p.name == q.name:
                    continue
                pa = arrays[p.name]
                if pa.size == 0 or qa.size == 0 or not np.may_share_memory(pa, qa):
                    continue
                same = (
                    pa.__array_interface__["data"][0] == qa.__array_interface__["data"][0]
                    and pa.shape == qa.shape
                    and pa.strides == qa.strides
                )
                if p.role == "in" and same and (p.name, q.name) in self.alias_ok:
                    noalias = False
                    continue
                if not np.shares_memory(pa, qa):
                    continue
                both_out = p.role != "in"
                reason = (
                    "both are outputs"
                    if both_out
                    else "they are the same array, but the kernel reads it at other points, or inside a reduction, "
                    "than the one it writes"
                    if same
                    else "they overlap without being the same array"
                )
                raise AliasingError(
                    f"{self.name}(): output '{q.name}' overlaps {'output' if both_out else 'input'} '{p.name}' "
                    f"({reason}); the result would depend on the order of the computation",
                    param=q.name,
                    expected=f"'{q.name}' not overlapping '{p.name}'",
                    got="overlapping memory",
                    fix=f"pass a separate array for '{q.name}' (e.g. pt.empty_like({p.name}))",
                )
        return noalias
