"""What a catalogue case is, and the registry every case module adds itself to.

A case is a kernel written in the public kernel language, built per dtype by a factory (kernel
dtypes are fixed by annotations), a NumPy reference written independently of pypto, the sizes to
run it at, and how to fill its inputs. Parameters are read from the kernel's annotations: tensors
named by the reference's result are outputs, every other tensor an input, scalars come from
``values``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes  # noqa: F401 - registers NumPy's name 'bfloat16' (pt.bfloat16 is ml_dtypes.bfloat16)
import numpy as np

import pypto as pt

from .values import ValueGen, default_for

# The dims case kernels declare their shapes with; sizes are given by these names.
N, M, K, B = pt.dims("N M K B")

HALVES = ("float16", "bfloat16")  # stored in 16 bits, computed in float32 (the half_compute pass)
FLOATS = ("float32", "float64", *HALVES)
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
# the other integer types (arithmetic wraps around in each): the cases of the operations that treat them
# differently (narrow types computed in int and converted back, unsigned division and comparisons)
SMALL_INTS = ("int8", "int16", "uint8", "uint16", "uint32", "uint64")
COMPLEX = ("complex64", "complex128")  # pairs of floats after the complex_pairs pass

SIZES_1D: tuple[dict[str, int], ...] = ({"N": 0}, {"N": 1}, {"N": 7}, {"N": 24}, {"N": 127}, {"N": 1031})
SIZES_2D: tuple[dict[str, int], ...] = (
    {"M": 1, "N": 1},
    {"M": 7, "N": 127},
    {"M": 24, "N": 33},
    {"M": 3, "N": 1031},
    {"M": 0, "N": 5},
    {"M": 4, "N": 0},
)
SIZES_3D: tuple[dict[str, int], ...] = (
    {"M": 1, "N": 1, "K": 1},
    {"M": 3, "N": 7, "K": 5},
    {"M": 2, "N": 24, "K": 127},
    {"M": 7, "N": 0, "K": 3},
)

KernelFactory = Callable[[Any], Callable[..., None]]
Reference = Callable[..., Mapping[str, Any]]


@dataclass(frozen=True)
class Param:
    """One kernel parameter as read from its annotation."""

    name: str
    dtype: np.dtype
    shape: tuple[Any, ...] | None  # affine shape entries for tensors, None for scalars

    def concrete_shape(self, dims: Mapping[str, int]) -> tuple[int, ...]:
        assert self.shape is not None
        return tuple(int(s.evaluate(dims)) for s in self.shape)


def kernel_params(fn: Callable[..., None]) -> list[Param]:
    """The parameters of a kernel function, in order, with dtypes and (affine) shapes."""
    out = []
    for name, ann in inspect.get_annotations(fn).items():
        if name == "return":
            continue
        if hasattr(ann, "shape") and hasattr(ann, "dtype"):  # pt.Tensor[dtype, shape]
            out.append(Param(name, np.dtype(ann.dtype.numpy), tuple(ann.shape)))
        else:
            scalar = ann if isinstance(ann, pt.DType) else {float: pt.float32, int: pt.int32, bool: pt.bool_}[ann]
            out.append(Param(name, np.dtype(scalar.numpy), None))
    return out


@dataclass(frozen=True)
class Case:
    """One kernel of the catalogue, runnable on any backend for each of its dtypes."""

    name: str
    factory: KernelFactory
    reference: Reference
    dtypes: tuple[str, ...]
    sizes: tuple[Mapping[str, int], ...]
    values: Mapping[str, ValueGen] = field(default_factory=dict)
    functions: frozenset[str] = frozenset()
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    inplace: tuple[str, ...] = ()
    slow: bool = False
    doc: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)  # keyword options of pt.kernel (deterministic=...)

    def build(self, dtype: str) -> Callable[..., None]:
        """The kernel function for ``dtype`` (a plain function: compile it with ``pt.kernel``)."""
        return self.factory(pt_dtype(dtype))

    def required_dtypes(self, dtype: str) -> frozenset[str]:
        """Every dtype the kernel's parameters use (what a backend must support to run it)."""
        return frozenset(p.dtype.name for p in kernel_params(self.build(dtype)))


_DTYPES = {
    "float32": pt.float32,
    "float64": pt.float64,
    "float16": pt.float16,
    "bfloat16": pt.bfloat16,
    "int32": pt.int32,
    "int64": pt.int64,
    **{name: getattr(pt, name) for name in SMALL_INTS + COMPLEX},
    "bool": pt.bool_,
}


def pt_dtype(name: str) -> Any:
    """The pypto dtype object for a name (``"mixed"`` cases get float32 and ignore it)."""
    return _DTYPES.get(name, pt.float32)


def generate_inputs(
    case: Case, fn: Callable[..., None], dims: Mapping[str, int], rng: np.random.Generator
) -> dict[str, Any]:
    """Input values for every parameter that is not a pure output of ``case``."""
    values: dict[str, Any] = {}
    for p in kernel_params(fn):
        gen = case.values.get(p.name)
        if p.shape is None:
            if gen is None:
                raise ValueError(f"case '{case.name}': scalar parameter '{p.name}' needs a value in 'values'")
            values[p.name] = gen(rng, (), p.dtype)[()]  # a NumPy scalar of the declared type
            continue
        values[p.name] = (gen or default_for(p.dtype))(rng, p.concrete_shape(dims), p.dtype)
    return values


REGISTRY: dict[str, Case] = {}


def case(
    *,
    dtypes: Sequence[str],
    sizes: Sequence[Mapping[str, int]],
    reference: Reference,
    values: Mapping[str, ValueGen] | None = None,
    functions: Sequence[str] = (),
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    inplace: Sequence[str] = (),
    slow: bool = False,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Callable[[KernelFactory], KernelFactory]:
    """Register the decorated kernel factory as a catalogue case (named after it by default).

    ``reference(**inputs)`` returns the expected outputs by parameter name; it must be written
    with NumPy alone. ``tolerances`` maps a result dtype to ``(rtol, atol)`` when the case needs
    more room than the defaults (long reductions, for example). ``options`` are keyword options the kernel is
    compiled with (``pt.kernel(executor=..., **options)``).
    """

    def register(factory: KernelFactory) -> KernelFactory:
        key = name or factory.__name__
        if key in REGISTRY:
            raise ValueError(f"conformance case '{key}' is defined twice")
        REGISTRY[key] = Case(
            name=key,
            factory=factory,
            reference=reference,
            dtypes=tuple(dtypes),
            sizes=tuple(dict(s) for s in sizes),
            values=dict(values or {}),
            functions=frozenset(functions),
            tolerances=dict(tolerances or {}),
            inplace=tuple(inplace),
            slow=slow,
            doc=inspect.cleandoc(factory.__doc__ or ""),
            options=dict(options or {}),
        )
        return factory

    return register
