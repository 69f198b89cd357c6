"""Binding call arguments to a kernel's parameters, with the checks that keep generated code safe.

Each problem raises a typed error naming the parameter, what was expected, what was given and the
fix. Nothing is launched (and no output touched) until every check has passed.
"""

from __future__ import annotations

import numbers
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import AliasingError, ArgumentError, DTypeError, PerformanceWarning, ShapeError
from pypto.ir.contract import CallContract
from pypto.ir.kernel import TensorParam


def _ptype(p: TensorParam) -> str:
    return f"pt.Tensor[{p.dtype.name}, ({', '.join(str(s) for s in p.shape)}{',' if p.ndim == 1 else ''})]"


def _to_array(kernel: str, p: TensorParam, value: Any) -> np.ndarray:
    """The NumPy view of an argument (no copy for arrays, __array_interface__ and DLPack objects)."""
    ma = sys.modules.get("numpy.ma")  # a masked array exists only once numpy.ma is imported (20 ms: not here)
    if ma is not None and isinstance(value, ma.MaskedArray):
        raise ArgumentError(
            f"{kernel}(): argument '{p.name}' is a masked array; kernels read and write every element, so its "
            "mask would be ignored",
            param=p.name,
            expected="a plain NumPy array",
            got="numpy.ma.MaskedArray",
            fix=f"pass {p.name}.filled(value) (masked elements replaced), or {p.name}.data to ignore the mask",
        )
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
    if isinstance(value, memoryview):  # (the buffer protocol: read in place)
        a = np.asarray(value)
        if is_output and not a.flags.writeable:
            raise ArgumentError(f"{kernel}(): argument '{p.name}' is a read-only memoryview, and outputs are "
                                "written in place", param=p.name, expected="a writable buffer", got="memoryview",
                                fix="pass a writable array (a memoryview of a bytearray or of a writable array)")  # fmt: skip
        return a
    if isinstance(value, (list, tuple)) and not is_output:
        converted = dtypes.list_to(value, p.dtype)  # Python numbers: converted as in arithmetic (they are weak)
        if converted is None:
            a = np.asarray(value)
            raise DTypeError(
                f"{kernel}(): argument '{p.name}' is a {type(value).__name__} of {a.dtype} values, which do not "
                f"convert to {p.dtype} without loss",
                param=p.name,
                expected=f"numbers that are {p.dtype} values",
                got=str(a.dtype),
                fix=f"pass np.asarray(..., dtype=np.{p.dtype.numpy.name}) if you mean the conversion",
            )
        return converted
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
        fix="pass a writable NumPy array (outputs are written in place)"
        if is_output
        else "convert it with np.asarray(...)",
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


class Binder:
    """Checks and converts the arguments of one kernel (host arrays) against its :class:`CallContract`."""

    def __init__(self, contract: CallContract):
        self.contract = contract
        self.name = contract.name
        self.params = contract.params
        self.param_names = [p.name for p in contract.params]
        self.dims = contract.dims
        self.alias_ok = contract.alias_ok
        self.unread = contract.unread
        self.tensor_params = contract.tensor_params
        self.scalar_params = contract.scalar_params
        self.warned_copies = False  # one PerformanceWarning per kernel for arguments copied on every call

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
        dims = self.contract.bind_dims({n: a.shape for n, a in arrays.items()}, explicit)
        self.contract.check(dims)
        scalars = [self.contract.scalar(p, values[p.name]) for p in self.scalar_params]
        if self.contract.index_check is not None:  # gathered indices, before anything is written
            self.contract.index_check(
                *(arrays[p.name] for p in self.tensor_params), *scalars, *(dims[d] for d in self.dims)
            )
        noalias = self._check_aliasing(arrays)
        copyback = []
        ready = []
        copied = []
        by_name: dict[str, Any] = {}
        for p in self.tensor_params:
            a = arrays[p.name]
            if not (a.flags.c_contiguous and a.flags.aligned):
                work = np.ascontiguousarray(a)
                if p.role != "in":
                    copyback.append((a, work))
                if a.size > 1:
                    copied.append((p, a))
                a = work
            by_name[p.name] = a
            if p.dtype.is_complex:  # the kernel reads the parts (pypto.passes.complex): the same memory as floats
                a = a[..., np.newaxis].view(p.dtype.part.numpy)
            ready.append(a)
        if copied and not self.warned_copies:
            self._warn_copies(copied)
        outputs = [user[p.name] for p in self.tensor_params if p.role != "in"]
        by_name.update({p.name: s.item() for p, s in zip(self.scalar_params, scalars)})
        in_order = tuple(by_name[p.name] for p in self.params)
        if any(p.dtype.is_complex for p in self.scalar_params):  # a complex scalar: its two parts
            scalars = [x for s in scalars for x in ((s.real, s.imag) if np.iscomplexobj(s) else (s,))]
        return BoundCall(ready, scalars, [dims[d] for d in self.dims], noalias, outputs, copyback, in_order)

    def _warn_copies(self, copied: list[tuple[Any, np.ndarray]]) -> None:
        """Say once per kernel which arguments are copied on every call, and why."""
        self.warned_copies = True
        parts = []
        for p, a in copied:
            why = ("Fortran-ordered" if a.ndim > 1 and a.flags.f_contiguous else
                   "unaligned" if not a.flags.aligned else "strided (a view that skips elements)")  # fmt: skip
            back = " and copied back after the call" if p.role != "in" else ""
            parts.append(f"'{p.name}' ({why}, shape {a.shape}, {a.nbytes / 2**20:.2f} MiB) is copied to a "
                         f"C-ordered array on every call{back}")  # fmt: skip
        warnings.warn(
            f"{self.name}(): " + "; ".join(parts) + ". Kernels read C-ordered memory: pass np.ascontiguousarray(...) "
            "once and reuse it, or make the array C-ordered where it is created",
            PerformanceWarning,
            stacklevel=_caller_stacklevel(),
        )

    def _check_aliasing(self, arrays: dict[str, np.ndarray]) -> bool:
        noalias = True
        outs = [p for p in self.tensor_params if p.role != "in" and p.name not in self.unread]
        for q in outs:
            qa = arrays[q.name]
            for p in self.tensor_params:
                if p.name == q.name or p.name in self.unread:  # (a parameter the code never touches)
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


def _caller_stacklevel() -> int:
    """The stack level of the first frame outside pypto (where a warning should point)."""
    level, f = 1, sys._getframe(1)
    while f is not None and f.f_globals.get("__name__", "").split(".")[0] == "pypto":
        f = f.f_back
        level += 1
    return level
