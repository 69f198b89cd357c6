"""The call contract of a kernel: what a call must satisfy, derived once from the IR.

Every way of calling a kernel checks the same rules: the Python binder
(:mod:`pypto.runtime.binding`), the C fast entry compiled into CPU kernels
(:mod:`pypto.targets.cpu.pyentry`) and the device binder of GPU backends
(:mod:`pypto.targets.simt.args`). The contract holds those rules as data: the parameters (dtype,
rank, declared shape, role), how each dim is read from an array's shape, the size and bounds checks,
and which input may be passed as the very same array as an output. Its methods raise the typed,
explained errors; the C entry renders the same rules and falls back to them on any doubt.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto.errors import ArgumentError, DTypeError, ShapeError
from pypto.ir.affine import Affine
from pypto.ir.kernel import (
    AxisNotEmpty,
    Check,
    DimAtMost,
    DimEqual,
    GatherInBounds,
    IndexInBounds,
    KernelIR,
    Param,
    ParamViews,
    ScalarParam,
)
from pypto.ir.nodes import Gather, Load, load_accesses, postorder


@dataclass(frozen=True)
class DimSource:
    """``dim = (param.shape[pos] - const) / coeff``, used when it divides evenly and is not negative."""

    dim: str
    param: str
    pos: int
    const: int
    coeff: int

    @property
    def plain(self) -> bool:
        return self.const == 0 and self.coeff == 1


@dataclass(frozen=True)
class CallContract(ParamViews):
    """The rules every call of one kernel must satisfy (see the module docstring)."""

    name: str
    params: tuple[Param, ...]
    dims: tuple[str, ...]
    dim_sources: tuple[DimSource, ...]  # in order: plain sizes first, then entries like N + 1 or 2 * N
    checks: tuple[Check, ...]
    extents: tuple[tuple[int, Affine], ...]  # axis -> extent, for the bounds checks
    axis_names: tuple[tuple[int, str], ...]
    alias_ok: frozenset[tuple[str, str]]  # (input, output) pairs that may be the very same array
    # the check of the gathered indices (GatherInBounds), called with the kernel's arguments (tensors, scalars,
    # dims) before anything is written: raises pypto.IndexError. None without gathers or with boundscheck=False
    index_check: Callable[..., None] | None = field(default=None, compare=False, repr=False)
    index_inputs: frozenset[str] = frozenset()  # the tensors the gathered indices are computed from
    # scratch outputs the compiled code never touches (kept in another's memory by the plan_memory pass): the
    # caller passes that other array for them, so they are left out of the overlap checks
    unread: frozenset[str] = frozenset()

    @staticmethod
    def of(
        k: KernelIR,
        alias_ok: frozenset[tuple[str, str]] = frozenset(),
        index_check: Callable[..., None] | None = None,
        unread: frozenset[str] = frozenset(),
    ) -> CallContract:
        """The contract of a kernel after shape inference (``k`` carries the checks)."""
        sources: list[DimSource] = []
        for plain in (True, False):
            for p in k.tensor_params:
                for pos, e in enumerate(p.shape):
                    if len(e.dims) == 1 and (e.plain_dim() is not None) == plain:
                        (d, c) = e.dims[0]
                        sources.append(DimSource(d, p.name, pos, e.const, c))
        return CallContract(
            name=k.name,
            params=k.params,
            dims=k.dims,
            dim_sources=tuple(sources),
            checks=k.checks,
            extents=tuple((a.index, a.extent) for a in k.axes if a.extent is not None),
            axis_names=tuple((a.index, a.name) for a in k.axes),
            alias_ok=alias_ok,
            index_check=index_check,
            unread=unread,
            index_inputs=frozenset(
                n.tensor
                for c in k.checks
                if isinstance(c, GatherInBounds)
                for n in postorder(c.index)
                if isinstance(n, (Load, Gather))
            ),
        )

    @property
    def gathers(self) -> bool:
        """Whether the kernel reads at computed indices (its calls check them unless ``boundscheck=False``)."""
        return any(isinstance(c, GatherInBounds) for c in self.checks)

    def axis_name(self, index: int) -> str:
        return dict(self.axis_names).get(index, f"axis{index}")

    def bind_dims(self, shapes: Mapping[str, tuple[int, ...]], explicit: Mapping[str, Any]) -> dict[str, int]:
        """The dims of a call from its arrays' shapes (and ``N=...`` keywords); every declared size is
        checked. Raises :class:`~pypto.ShapeError` / :class:`~pypto.ArgumentError` naming the array."""
        dims: dict[str, int] = {}
        source: dict[str, str] = {}
        for d, v in explicit.items():
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ArgumentError(
                    f"{self.name}(): dim {d}={v!r} must be a non-negative int", param=d, expected="int >= 0", got=v
                )
            dims[d] = int(v)
            source[d] = f"{d}={int(v)} (keyword)"
        for s in self.dim_sources:
            if s.dim in dims:
                continue
            size = shapes[s.param][s.pos]
            val, rem = divmod(size - s.const, s.coeff)
            if rem or val < 0:
                continue  # reported by the verification below
            dims[s.dim] = val
            source[s.dim] = f"{s.param}.shape[{s.pos}] = {size}"
        for p in self.tensor_params:
            shape = shapes[p.name]
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

    def check(self, dims: Mapping[str, int]) -> None:
        """Run the kernel's size and bounds checks for these dims (raises :class:`~pypto.ShapeError`)."""
        extents = {ax: e.evaluate(dims) for ax, e in self.extents}
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
            elif isinstance(c, DimAtMost):
                va, vb = c.a.evaluate(dims), c.b.evaluate(dims)
                if va > vb:
                    where = f"{c.loc}: " if c.loc else ""
                    raise ShapeError(
                        f"{where}{self.name}(): {c.what} keeps {c.a_source} = {va} values of rows of "
                        f"{c.b_source} = {vb}",
                        param=c.a_source.split(".")[0],
                        expected=f"at most {vb}",
                        got=va,
                        fix="keep at most as many values as a row has",
                    )
            elif isinstance(c, AxisNotEmpty):
                if extents[c.axis] == 0:
                    where = f"{c.loc}: " if c.loc else ""
                    raise ShapeError(
                        f"{where}{self.name}(): {c.what} over axis '{self.axis_name(c.axis)}', which is empty",
                        param="axis",
                        expected="an axis of at least one point",
                        got=0,
                        fix="pass arrays that are not empty along that axis (NumPy's argmax raises there too)",
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
                    ranges = ", ".join(f"{self.axis_name(a)} in [0, {extents[a]})" for a, _ in c.index.axes)
                    where = f"{c.loc}: " if c.loc else ""
                    raise ShapeError(
                        f"{where}{self.name}(): index {c.index.format(self.axis_name)} of '{c.tensor}' reaches "
                        f"{bad}, outside {c.tensor}.shape[{c.position}] = {size}" + (f" ({ranges})" if ranges else ""),
                        param=c.tensor,
                        expected=f"indices in [0, {size})",
                        got=bad,
                        fix="make the array larger (or the iteration smaller) so every index stays in bounds",
                    )

    def scalar(self, p: ScalarParam, v: Any) -> Any:
        """``v`` as a NumPy scalar of ``p``'s type (raises :class:`~pypto.DTypeError` naming ``p``)."""
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
        elif p.dtype.is_complex:
            if isinstance(v, (numbers.Number, np.number)) and not isinstance(v, (bool, np.bool_)):
                with np.errstate(over="ignore"):
                    r = npt(v)
                if np.isinf(r.real) + np.isinf(r.imag) and math.isfinite(abs(complex(v))):
                    raise self._overflow(p, repr(v), v, "parts", "pt.complex128")
                return r
        elif (
            isinstance(v, (numbers.Real, np.floating, np.integer)) or type(v) is npt  # a bfloat16 scalar
        ) and not isinstance(v, (bool, np.bool_)):
            with np.errstate(over="ignore"):
                r = npt(v)
            if np.isinf(r) and math.isfinite(float(v)):  # 1e300 for a float32: it would become inf
                shown = repr(v) if len(repr(v)) <= 24 else f"{float(v):.6g}"
                raise self._overflow(p, shown, v, "a finite value", "pt.float64")
            return r
        raise DTypeError(
            f"{self.name}(): scalar '{p.name}' must be a {p.dtype} value, got {type(v).__name__} {v!r}",
            param=p.name,
            expected=str(p.dtype),
            got=type(v).__name__,
            fix=f"pass a Python {'bool' if p.dtype.is_bool else 'int' if p.dtype.is_int else 'complex' if p.dtype.is_complex else 'number'}",
        )

    def _overflow(self, p: ScalarParam, shown: str, v: Any, what: str, wider: str) -> DTypeError:
        """The error for a finite scalar that would become infinite in ``p``'s type."""
        return DTypeError(
            f"{self.name}(): scalar '{p.name}' = {shown} does not fit in {p.dtype} (it would become inf)",
            param=p.name,
            expected=f"{what} within ±{float(np.finfo(p.dtype.part.numpy).max):.6g}",
            got=v,
            fix=f"scale the value, or declare the parameter as {wider}",
        )


def alias_safe_pairs(k: KernelIR) -> frozenset[tuple[str, str]]:
    """(input, output) pairs that may be the very same array: each point only reads what it writes.

    That holds when the output is written in a single nest, every read of the input in that nest is at the
    output's index and outside reductions, and every other read of the input is in a nest that runs before it
    (nests run one after the other: a temporary computed from the input is complete before the output is
    written; an optimizer's moment, then the parameter it updates).
    """
    assert k.groups is not None
    ok = set()
    inputs = {p.name for p in k.tensor_params}
    reads: dict[str, list[tuple[int, tuple, bool]]] = {}  # input -> (group, index, inside a reduction) of each read
    for gi, g in enumerate(k.groups):
        for s in g.stores:
            for t, ix, red in load_accesses(s.value):
                if t in inputs:
                    reads.setdefault(t, []).append((gi, ix, red))
            for n in postorder(s.value):  # a gather reads anywhere: never the same point
                if isinstance(n, Gather):
                    reads.setdefault(n.tensor, []).append((-1, (), True))
    for q in (p.name for p in k.outputs):
        where = {gi for gi, g in enumerate(k.groups) for s in g.stores if s.tensor == q}
        idxs = {s.index for g in k.groups for s in g.stores if s.tensor == q}
        if len(where) != 1 or len(idxs) != 1:
            continue
        ((group,), (idx,)) = (where, idxs)
        for p in inputs - {q}:
            if all((gi == group and ix == idx and not red) or 0 <= gi < group for gi, ix, red in reads.get(p, ())):
                ok.add((p, q))
    return frozenset(ok)
