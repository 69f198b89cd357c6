"""Device arrays as kernel arguments: checked with the core's rules, used in place by SIMT launchers.

The core's binder reads arguments as NumPy arrays in host memory. Arrays that live on a GPU
(objects with ``__cuda_array_interface__``, ``pyopencl.array.Array``) reach a launcher through its
``fast_entry`` instead; :class:`DeviceBinder` gives that entry the same checks (dtypes, shapes and
dims, index bounds, overlapping outputs) and the same typed errors, from the kernel's own
parameter list. The backend only says how to look at one of its arrays (:class:`DeviceArray`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto.backend_api import Program
from pypto.errors import AliasingError, ArgumentError, DTypeError, ShapeError
from pypto.ir.kernel import TensorParam
from pypto.ir.names import complex_part_names


@dataclass(frozen=True)
class DeviceArray:
    """One device array argument: what the launcher passes (``handle``) and what is checked.

    ``memory`` identifies the allocation (a pointer's device, a buffer object) and ``start`` /
    ``nbytes`` the bytes the array covers in it, for the overlap check between outputs and inputs.
    """

    handle: Any
    array: Any  # the user's object, returned as the call's result
    dtype: np.dtype
    shape: tuple[int, ...]
    contiguous: bool
    memory: Any
    start: int
    nbytes: int


View = Callable[[Any], "DeviceArray | None"]


class DeviceBinder:
    """Binds calls whose array arguments are all device arrays (see the module docstring)."""

    def __init__(self, program: Program):
        assert program.contract is not None, "programs made by Kernel.program carry their call contract"
        self.core = program.contract
        self.params = self.core.params
        self.order = [a.name for a in program.loops.args]
        self.kinds = {a.name: a.kind for a in program.loops.args}
        self.parts = complex_part_names(self.params, self.core.dims)

    def bind(self, args: Sequence[Any], view: View) -> tuple[list[Any], list[Any]] | None:
        """Launcher arguments (loop-IR order) and the outputs for ``args`` (in parameter order).

        None when the call is not one for device arrays (a host array, keyword arguments, a wrong
        count): the caller declines and the core's own path handles it.
        """
        if len(args) != len(self.params):
            return None
        arrays: dict[str, DeviceArray] = {}
        values: dict[str, Any] = {}
        for p, v in zip(self.params, args):
            if isinstance(p, TensorParam):
                d = view(v)
                if d is None:
                    return None
                self.check(p, d)
                arrays[p.name] = d
            elif p.dtype.is_complex:  # its two parts (pypto.passes.complex)
                z = self.core.scalar(p, v)
                re, im = self.parts[p.name]
                values[re], values[im] = z.real.item(), z.imag.item()
            else:
                values[p.name] = self.core.scalar(p, v).item()
        dims = self.core.bind_dims({n: tuple(a.shape) for n, a in arrays.items()}, {})
        self.core.check(dims)
        if self.core.index_check is not None:  # gathered indices: their arrays copied to the host, then checked
            from pypto.runtime.device_arrays import to_host

            tensors = [p for p in self.params if isinstance(p, TensorParam)]
            host = [to_host(arrays[p.name].array) if p.name in self.core.index_inputs else None for p in tensors]
            scalars = [self.core.scalar(p, v) for p, v in zip(self.params, args) if not isinstance(p, TensorParam)]
            self.core.index_check(*host, *scalars, *(dims[d] for d in self.core.dims))
        self.check_overlaps(arrays)
        values.update(arrays)
        values.update(dims)
        outputs = [arrays[p.name].array for p in self.params if isinstance(p, TensorParam) and p.role != "in"]
        return [values[n] for n in self.order], outputs

    def check(self, p: TensorParam, d: DeviceArray) -> None:
        name = self.core.name
        if d.dtype != p.dtype.numpy:
            raise DTypeError(
                f"{name}(): argument '{p.name}' has dtype {d.dtype}, expected {p.dtype}",
                param=p.name,
                expected=str(p.dtype),
                got=str(d.dtype),
                fix=f"pass an array of dtype {p.dtype.numpy.name}",
            )
        if len(d.shape) != p.ndim:
            raise ShapeError(
                f"{name}(): argument '{p.name}' has {len(d.shape)} dimension(s) (shape {d.shape}), expected {p.ndim}",
                param=p.name,
                expected=p.ndim,
                got=d.shape,
                fix="reshape the array, or change the declared shape",
            )
        if not d.contiguous:
            raise ArgumentError(
                f"{name}(): device array '{p.name}' is not C-contiguous",
                param=p.name,
                expected="a C-contiguous device array",
                got="strided device array",
                fix="pass a contiguous copy (e.g. cupy.ascontiguousarray(...))",
            )

    def check_overlaps(self, arrays: dict[str, DeviceArray]) -> None:
        """Outputs may not share memory with any other argument (device arrays are never copied)."""
        unread = self.core.unread  # (parameters the code never touches: passed another's array on purpose)
        outs = [p for p in self.params if isinstance(p, TensorParam) and p.role != "in" and p.name not in unread]
        for q in outs:
            dq = arrays[q.name]
            for p in self.params:
                if not isinstance(p, TensorParam) or p.name == q.name or p.name in unread:
                    continue
                dp = arrays[p.name]
                if dq.nbytes and dp.nbytes and dq.memory == dp.memory and _overlap(dq, dp):
                    raise AliasingError(
                        f"{self.core.name}(): output '{q.name}' overlaps argument '{p.name}' in device memory",
                        param=q.name,
                        expected=f"'{q.name}' not overlapping '{p.name}'",
                        got="overlapping memory",
                        fix=f"pass a separate array for '{q.name}'",
                    )


def _overlap(a: DeviceArray, b: DeviceArray) -> bool:
    return a.start < b.start + b.nbytes and b.start < a.start + a.nbytes
