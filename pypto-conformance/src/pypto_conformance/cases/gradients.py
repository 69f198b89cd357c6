"""The gradient section of the catalogue: ``pt.grad`` of array programs, against finite differences.

A gradient case is a scalar-valued function of arrays written with the public array API, the shapes of
its inputs, and a NumPy version of the same function. On every backend the gradient with respect to
every input (``pt.grad(pt.jit(fn, executor=...), argnums=...)``, one compiled kernel) is compared with
central differences of the NumPy function in float64 (step 1e-6): within 1e-6 of the gradient's
largest element (at least 1) in float64, 1e-4 in float32. Complex inputs follow JAX's convention: the
gradient is ``dL/dx - i dL/dy`` for ``z = x + iy``, both parts by central differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pypto as pt

from .spec import FLOATS

RELATIVE = {"float64": 1e-6, "float32": 1e-4, "float16": 1.6e-2, "bfloat16": 1.2e-1, "complex128": 1e-6,
            "complex64": 1e-4}  # fmt: skip


@dataclass(frozen=True)
class GradientCase:
    """One scalar-valued array program whose gradient the catalogue checks."""

    name: str
    fn: Callable[..., Any]
    reference: Callable[..., float]  # the same function in NumPy (float64)
    shapes: tuple[Mapping[str, tuple[int, ...]], ...]  # one size: input name -> shape (argument order)
    dtypes: tuple[str, ...] = FLOATS
    positive: frozenset[str] = frozenset()  # inputs drawn from (0.1, 2) instead of a normal distribution
    functions: frozenset[str] = frozenset()
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    doc: str = ""
    slow: bool = False

    def required_dtypes(self, dtype: str) -> frozenset[str]:
        return frozenset({dtype})


GRADIENT_REGISTRY: dict[str, GradientCase] = {}


def gradient_case(
    *,
    shape: Mapping[str, tuple[int, ...]],
    reference: Callable[..., float],
    positive: Sequence[str] = (),
    dtypes: Sequence[str] = FLOATS,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated scalar-valued function of arrays as a gradient case named after it."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = f"grad_{fn.__name__}"
        if name in GRADIENT_REGISTRY:
            raise ValueError(f"gradient case '{name}' is defined twice")
        GRADIENT_REGISTRY[name] = GradientCase(
            name, fn, reference, (dict(shape),), tuple(dtypes), positive=frozenset(positive),
            doc=(fn.__doc__ or "").strip(),
        )  # fmt: skip
        return fn

    return register


def all_gradient_cases() -> list[GradientCase]:
    return list(GRADIENT_REGISTRY.values())


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


@gradient_case(
    shape={"x": (3, 7), "y": (7,)},
    reference=lambda x, y: float((np.tanh(x) * np.exp(y) + np.sin(x) / (y * y + 1) - np.sqrt(x * x + 1)).sum()),
)
def elementwise(x, y):
    """tanh, exp, sin, sqrt and arithmetic between broadcast operands."""
    return (pt.tanh(x) * pt.exp(y) + pt.sin(x) / (y * y + 1) - pt.sqrt(x * x + 1)).sum()


@gradient_case(
    shape={"x": (4, 6)},
    reference=lambda x: float((x.sum(0) * x.mean(1).sum()).sum() + x.max(1).sum() - x.min(0).sum() + x.prod(1).sum()),
    positive=("x",),
)
def reductions(x):
    """sum, mean, max, min and prod (distinct values: no ties)."""
    return (x.sum(0) * x.mean(1).sum()).sum() + x.max(1).sum() - x.min(0).sum() + x.prod(1).sum()


@gradient_case(
    shape={"a": (5, 6), "b": (6, 4), "c": (2, 5, 3)},
    reference=lambda a, b, c: float(np.tanh(a @ b).sum() + np.einsum("bij,ik->bjk", c, a).max()),
)
def contractions(a, b, c):
    """A matrix product and an einsum with a batch index: each operand's cotangent is a contraction."""
    return pt.tanh(a @ b).sum() + pt.einsum("bij,ik->bjk", c, a).max()


def _batched_layers(x, w1, w2, gelu):
    h = gelu(x @ w1)  # (batch, tokens, hidden): its weight's gradient merges batch and tokens
    return ((h @ w2.T) ** 2).sum()  # x @ w.T over several batches: w.T stored once


def _np_gelu(x):
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


@gradient_case(
    shape={"x": (3, 4, 6), "w1": (6, 5), "w2": (7, 5)},
    reference=lambda x, w1, w2: float(_batched_layers(x, w1, w2, _np_gelu)),
)
def batched_layers(x, w1, w2):
    """Two linear layers on (batch, token, feature) arrays, a gelu between: ``x @ w1`` and ``h @ w2.T``, whose
    weight gradients sum over batch and token axes together and whose ``w2.T`` is stored once for every batch."""
    return _batched_layers(x, w1, w2, pt.gelu)


@gradient_case(
    shape={"x": (7, 5)},
    reference=lambda x: float(
        (x.T[1:, ::2] * 3).sum() + (x[2, ::-1] * x[1]).sum() + (x.reshape(5, 7)[:, 3] ** 2).sum()
    ),
)
def views(x):
    """A transpose with slices (steps, a reversed row), integer indices and a reshape."""
    return (x.T[1:, ::2] * 3).sum() + (x[2, ::-1] * x[1]).sum() + (x.reshape(5, 7)[:, 3] ** 2).sum()


@gradient_case(
    shape={"x": (4, 33), "w": (33,)},
    reference=lambda x, w: float((_softmax(x) * w).sum() + (np.log(_softmax(x, 0)) ** 2).sum()),
)
def softmax(x, w):
    """softmax and log_softmax over either axis."""
    return (pt.softmax(x, dim=-1) * w).sum() + (pt.log_softmax(x, dim=0) ** 2).sum()


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


@gradient_case(
    shape={"x": (3, 16), "g": (16,), "b": (16,)},
    reference=lambda x, g, b: float((_layer_norm(x, g, b) ** 3).sum()),
)
def layer_norm(x, g, b):
    """layer_norm with weight and bias, through a cubic."""
    return (pt.layer_norm(x, g, b, 1e-5) ** 3).sum()


@gradient_case(
    shape={"x": (6, 8), "w1": (8, 12), "b1": (12,), "w2": (12, 3)},
    reference=lambda x, w1, b1, w2: float(
        ((0.5 * (x @ w1 + b1) * (1 + _erf((x @ w1 + b1) / math.sqrt(2)))) @ w2).max(-1).sum()
    ),
)
def mlp(x, w1, b1, w2):
    """gelu(x @ w1 + b1) @ w2, then a row maximum."""
    return (pt.gelu(x @ w1 + b1) @ w2).max(-1).sum()


def _recurrence(a, b, axis, reverse):
    """``h = a * h + b`` along ``axis`` from the first element (the end with ``reverse``), in NumPy."""
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    h = np.empty_like(b)
    order = range(len(b) - 1, -1, -1) if reverse else range(len(b))
    prev = None
    for t in order:
        prev = h[t] = b[t] if prev is None else a[t] * prev + b[t]
    return np.moveaxis(h, 0, axis)


@gradient_case(
    shape={"x": (5, 9), "a": (5, 9)},
    reference=lambda x, a: float(
        (np.sin(np.cumsum(x, 1)) * np.cumprod(a, 0)).sum() + (np.tanh(_recurrence(np.tanh(a), x, 1, True)) ** 2).sum()
    ),
)
def scans(x, a):
    """cumsum, cumprod and a user's scan (a linear recurrence of (a, b) pairs, run from the end): the gradient of
    a scan is a scan in the other direction."""
    _, h = pt.associative_scan(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), (pt.tanh(a), x), 1, reverse=True)
    return (pt.sin(pt.cumsum(x, 1)) * pt.cumprod(a, 0)).sum() + (pt.tanh(h) ** 2).sum()


def _small_linalg(a, b, lib, eye):
    m = a * 0.25 + 2 * eye
    x = lib.linalg.solve(m, b[..., None])
    spd = m @ m.swapaxes(-1, -2)
    return (x**2).sum() + lib.linalg.det(m).sum() + (lib.linalg.inv(m) * a).sum() + lib.linalg.cholesky(spd).sum()


@gradient_case(
    shape={"a": (5, 3, 3), "b": (5, 3)},
    reference=lambda a, b: float(_small_linalg(a, b, np, np.eye(3))),
    dtypes=("float32", "float64"),
)
def small_linalg(a, b):
    """np.linalg.solve, det, inv and cholesky of small stacks: their analytic gradients (another factorisation
    each), not the unrolled elimination's."""
    return _small_linalg(a, b, np, pt.eye(3, dtype=a.dtype))
