"""The array-API section of the catalogue: ``@pt.jit`` programs of whole arrays, against NumPy.

An array case is a function of arrays written with the public array API (``x @ w``, ``pt.einsum``,
``pt.softmax`` ...), the shapes of its inputs at each size, and a NumPy reference computed in
float64 from the same inputs. It runs compiled for every backend, as ``pt.jit(fn, executor=...)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pypto as pt

from .spec import FLOATS


@dataclass(frozen=True)
class ArrayCase:
    """One array program of the catalogue."""

    name: str
    fn: Callable[..., Any]
    reference: Callable[..., Any]  # NumPy, on float64 copies of the inputs; an array or a tuple of them
    shapes: tuple[Mapping[str, tuple[int, ...]], ...]  # per size: input name -> shape (argument order)
    dtypes: tuple[str, ...] = FLOATS
    functions: frozenset[str] = frozenset()  # transcendental functions used (for their tolerances)
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    positive: frozenset[str] = frozenset()  # inputs drawn from (0.1, 2) instead of a normal distribution
    doc: str = ""
    slow: bool = False
    dims: Any = None  # pt.jit(dims=...): one program for every size (the sizes in ``shapes`` then vary)
    # int64 index inputs: name -> (input, axis) whose size n they index, values drawn from [-n, n)
    indices: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def required_dtypes(self, dtype: str) -> frozenset[str]:
        return frozenset({dtype})


ARRAY_REGISTRY: dict[str, ArrayCase] = {}

DOT = {"float32": (2e-4, 2e-5), "float64": (1e-10, 1e-12)}


def array_case(
    *,
    shapes: Sequence[Mapping[str, tuple[int, ...]]],
    reference: Callable[..., Any],
    functions: Sequence[str] = (),
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    positive: Sequence[str] = (),
    dtypes: Sequence[str] = FLOATS,
    dims: Any = None,
    indices: Mapping[str, tuple[str, int]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function of arrays as an array case named after it."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = f"array_{fn.__name__}"
        if name in ARRAY_REGISTRY:
            raise ValueError(f"array case '{name}' is defined twice")
        ARRAY_REGISTRY[name] = ArrayCase(
            name, fn, reference, tuple(dict(s) for s in shapes), tuple(dtypes), frozenset(functions),
            dict(tolerances or {}), frozenset(positive), (fn.__doc__ or "").strip(), dims=dims,
            indices=dict(indices or {}),
        )  # fmt: skip
        return fn

    return register


def all_array_cases() -> list[ArrayCase]:
    return list(ARRAY_REGISTRY.values())


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# -- elementwise, broadcasting, reductions, views --------------------------------------------------------


@array_case(
    shapes=({"x": (1,), "y": (1,), "z": (1,)}, {"x": (2, 3, 130), "y": (1, 3, 1), "z": (130,)}),
    reference=lambda x, y, z: (x * y - z / 2 + 1.5, np.maximum(x, y) * (x > z)),
)
def broadcast(x, y, z):
    """Elementwise arithmetic, a comparison and a maximum between operands of three shapes that broadcast."""
    return x * y - z / 2 + 1.5, pt.maximum(x, y) * pt.where(x > z, 1.0, 0.0)


@array_case(
    shapes=({"x": (3, 1031)},),
    reference=lambda x: np.where(x > 1, np.log(x) + np.sqrt(x), np.tanh(x) * np.exp(-x)),
    functions=("log", "sqrt", "tanh", "exp"),
    positive=("x",),
)
def functions(x):
    """Math functions of arrays under pt.where."""
    return pt.where(x > 1, pt.log(x) + pt.sqrt(x), pt.tanh(x) * pt.exp(-x))


@array_case(
    shapes=({"a": (1, 1, 1)}, {"a": (2, 37, 9)}),
    reference=lambda a: (a.sum(), a.max(0), a.min(-1, keepdims=True), a.mean((0, 2)), a.prod(1)),
    tolerances=DOT,
    positive=("a",),
)
def reductions(a):
    """sum, max, min, mean and prod over every axis, one axis, a negative axis with keepdims, and two axes."""
    return a.sum(), a.max(0), a.min(-1, keepdims=True), a.mean((0, 2)), a.prod(1)


@array_case(
    shapes=({"a": (6, 2, 7)},),
    reference=lambda a: (
        a.transpose(2, 0, 1) * 2,
        a[1:, ::-2, 3],
        a.reshape(a.shape[0], -1).T[::2] + 1,
        a[..., None, 0],
    ),  # fmt: skip
)
def views(a):
    """A transpose, slices with steps (negative too), a merging reshape of a transpose, and a new axis."""
    return a.transpose(2, 0, 1) * 2, a[1:, ::-2, 3], a.reshape(a.shape[0], -1).T[::2] + 1, a[..., None, 0]


@array_case(
    shapes=({"a": (2, 3), "b": (4, 3)}, {"a": (1, 1), "b": (1, 1)}),
    reference=lambda a, b: (
        np.concatenate([a * 2, b], 0),
        np.concatenate([a.T, b.T], -1).sum(0),
        np.stack([a, np.abs(a)], 1),
    ),  # fmt: skip
)
def concat(a, b):
    """pt.concat along the first and the last axis, pt.stack along a new middle axis."""
    return pt.concat([a * 2, b], axis=0), pt.concat([a.T, b.T], axis=-1).sum(0), pt.stack([a, abs(a)], axis=1)


# -- contractions --------------------------------------------------------------------------------------------


@array_case(
    shapes=(
        {"a": (1, 1), "b": (1, 1)},
        {"a": (19, 40), "b": (40, 70)},
        {"a": (8,), "b": (8, 3)},
        {"a": (4, 5, 8), "b": (1, 8, 3)},
        {"a": (3, 130), "b": (130,)},
    ),  # fmt: skip
    reference=lambda a, b: a @ b,
    tolerances=DOT,
)
def matmul(a, b):
    """``a @ b`` with NumPy's rules: matrices, vectors on either side, batches that broadcast."""
    return a @ b


@array_case(
    shapes=({"a": (2, 3, 4), "b": (2, 4, 5), "c": (5, 6)},),
    reference=lambda a, b, c: (
        np.einsum("bij,bjk->bik", a, b),
        np.einsum("bij,bjk,kl->bil", a, b, c),
        np.einsum(
            "bii->b", np.einsum("bij,bjk->bik", a, b)[:, : min(a.shape[1], b.shape[2]), : min(a.shape[1], b.shape[2])]
        ),
        np.einsum("bij->j", a),
    ),  # fmt: skip
    tolerances=DOT,
)
def einsum(a, b, c):
    """Batched products, a three-operand chain, a trace of a square slice and a sum to one index."""
    ab = pt.einsum("bij,bjk->bik", a, b)
    n = min(a.shape[1], b.shape[2])
    return ab, pt.einsum("bij,bjk,kl->bil", a, b, c), pt.einsum("bii->b", ab[:, :n, :n]), pt.einsum("bij->j", a)


# -- layers --------------------------------------------------------------------------------------------------


@array_case(
    shapes=({"x": (1, 1)}, {"x": (3, 1031)}),
    reference=lambda x: (
        _softmax(x),
        x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
        _softmax(x, 0),
    ),  # fmt: skip
    functions=("exp", "log"),
)
def softmax(x):
    """pt.softmax along the last and the first axis, and pt.log_softmax."""
    return pt.softmax(x, dim=-1), pt.log_softmax(x, dim=-1), pt.softmax(x, dim=0)


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


@array_case(
    shapes=({"x": (2, 3, 130), "g": (130,), "b": (130,)},),
    reference=lambda x, g, b: (_layer_norm(x, g, b), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g),
    functions=("rsqrt",),
    tolerances={"float32": (1e-4, 1e-4)},
)
def norms(x, g, b):
    """pt.layer_norm with weight and bias, pt.rms_norm with weight."""
    return pt.layer_norm(x, g, b, eps=1e-5), pt.rms_norm(x, g)


@array_case(
    shapes=({"x": (4, 259)},),
    reference=lambda x: (
        0.5 * x * (1 + _erf(x / math.sqrt(2))),
        0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        x / (1 + np.exp(-x)),
        np.maximum(x, 0),
    ),  # fmt: skip
    functions=("erf", "tanh", "exp", "sigmoid"),
)
def activations(x):
    """pt.gelu (erf and tanh forms), pt.silu and pt.relu."""
    return pt.gelu(x), pt.gelu(x, approximate="tanh"), pt.silu(x), pt.relu(x)


@pt.custom_op
def _gelu_tanh(x):
    return 0.5 * x * (1 + pt.tanh(pt.sqrt(2 / pt.pi) * (x + 0.044715 * x**3)))


@array_case(
    shapes=({"x": (19, 32), "w1": (32, 70), "b1": (70,), "w2": (70, 8)},),
    reference=lambda x, w1, b1, w2: (
        (0.5 * (x @ w1 + b1) * (1 + np.tanh(math.sqrt(2 / math.pi) * ((x @ w1 + b1) + 0.044715 * (x @ w1 + b1) ** 3))))
        @ w2
    ),
    functions=("tanh",),
    tolerances={"float32": (5e-4, 5e-4)},
)
def mlp(x, w1, b1, w2):
    """An MLP block with a custom-op activation: two contractions, the hidden layer stored once."""
    return _gelu_tanh(x @ w1 + b1) @ w2


def _attention_ref(q, k, v):
    s = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
    return np.einsum("bhij,bhjd->bhid", _softmax(s), v)


@array_case(
    shapes=({"q": (2, 3, 9, 16), "k": (2, 3, 7, 16), "v": (2, 3, 7, 5)},),
    reference=_attention_ref,
    functions=("exp",),
    tolerances={"float32": (5e-4, 5e-5)},
)
def attention(q, k, v):
    """Scaled dot-product attention: einsum, softmax, einsum."""
    s = pt.einsum("bhid,bhjd->bhij", q, k) * (1 / math.sqrt(q.shape[-1]))
    return pt.einsum("bhij,bhjd->bhid", pt.softmax(s, dim=-1), v)


@array_case(
    shapes=(
        {"x": (3, 40), "w": (40, 5)},
        {"x": (17, 40), "w": (40, 5)},
        {"x": (9, 70), "w": (70, 12)},
        {"x": (1, 70), "w": (70, 12)},
    ),
    reference=lambda x, w: (_softmax(x @ w), (x - x.mean(-1, keepdims=True)).sum(0)),
    functions=("exp",),
    tolerances=DOT,
    dims="symbolic",
)
def symbolic_sizes(x, w):
    """pt.jit(dims="symbolic"): one program for every size of a matmul, softmax and centred column sums."""
    return pt.softmax(x @ w, dim=-1), (x - x.mean(-1, keepdims=True)).sum(0)


@array_case(
    shapes=({"a": (9, 20), "b": (9, 11)}, {"a": (1, 3), "b": (1, 2)}),
    reference=lambda a, b: (np.einsum("kj,ki->ij", a, b), np.einsum("kj,ki->ji", a, b) * 2),
    tolerances=DOT,
)
def einsum_factor_order(a, b):
    """Contractions whose first factor is the one without the result's row index (a.T @ b as einsum)."""
    return pt.einsum("kj,ki->ij", a, b), pt.einsum("kj,ki->ji", a, b) * 2


# -- updates ------------------------------------------------------------------------------------------------


def stencil_updates(u, f):
    """NumPy's in-place updates as written (x[1:-1, 1:-1] = ..., x[0] = 0, x[1::2, ::3] *= 0.5, reversed
    strided +=): a Jacobi step with boundaries, rewritten into functional updates; the reference is the same
    function run by NumPy."""
    v = u * 1
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) + f[1:-1, 1:-1]
    v[0] = 0
    v[:, -1] = v[:, -2]
    v[1::2, ::3] *= 0.5
    v[::-2, 1] += f[::-2, 0]
    return v


array_case(
    shapes=({"u": (7, 9), "f": (7, 9)}, {"u": (3, 3), "f": (3, 3)}, {"u": (33, 70), "f": (33, 70)}),
    reference=stencil_updates,
)(stencil_updates)


def _set_boundaries(v, left, right):
    v[:, 0] = left
    v[:, -1] = right


def _relax(v, u, weight):
    v[:, 1:-1] = (1 - weight) * u[:, 1:-1] + weight * 0.5 * (u[:, :-2] + u[:, 2:])
    _set_boundaries(v, u[:, 1], 0.0)
    v *= 0.5


def helper_updates(u):
    """NumPy helpers that update the arrays they are given (a boundary function, a relaxation step calling it,
    ``v *= 0.5``), called in a time loop: the caller's variable sees the updates, as in NumPy; the reference is
    the same function run by NumPy."""
    v = u * 1
    for _ in range(3):
        _relax(v, v * 1, 0.25)
    return v


array_case(shapes=({"u": (5, 9)}, {"u": (2, 3)}, {"u": (33, 70)}), reference=helper_updates)(helper_updates)


def _small_linalg(a, b):
    m = a * 0.25 + 2 * np.eye(a.shape[-1])
    s = m @ np.swapaxes(m, -1, -2)
    return np.linalg.solve(m, b), np.linalg.inv(m), np.linalg.det(m), np.linalg.cholesky(s)


@array_case(
    shapes=({"a": (6, 4, 4), "b": (6, 4, 2)}, {"a": (1, 1), "b": (1, 3)}, {"a": (2, 3, 5, 5), "b": (5, 1)}),
    reference=_small_linalg,
    dtypes=("float32", "float64"),
)
def small_linalg(a, b):
    """np.linalg.solve, inv, det and cholesky on stacks of small well-conditioned matrices (Gauss-Jordan
    elimination with partial pivoting and Cholesky, unrolled over the columns; b broadcast over the stack)."""
    m = a * 0.25 + 2 * pt.eye(a.shape[-1], dtype=a.dtype)
    s = m @ m.swapaxes(-1, -2)
    return np.linalg.solve(m, b), np.linalg.inv(m), np.linalg.det(m), np.linalg.cholesky(s)


def _at_updates(x, y):
    a = x.copy()
    a[2:5] += y[:3, None]
    b = a.copy()
    b[::2] = np.maximum(b[::2], 0.25)
    b[1] = -1
    c = x.copy()
    c[:, ::3] *= y[: x.shape[1] : 3]
    return b * 2, c


@array_case(
    shapes=({"x": (6, 8), "y": (8,)}, {"x": (5, 5), "y": (5,)}),
    reference=_at_updates,
)
def at_updates(x, y):
    """JAX's functional updates: x.at[2:5].add(v), .max on a strided slice, .set at an int, .multiply along
    a strided column slice with broadcast values."""
    b = x.at[2:5].add(y[:3, None]).at[::2].max(0.25).at[1].set(-1)
    return b * 2, x.at[:, ::3].multiply(y[: x.shape[1] : 3])


def _search_repeat(a, v, x):
    s, w = np.sort(np.round(a * 3)), np.round(v * 3)  # ties between the values and the sorted array
    return (np.searchsorted(s, w), np.searchsorted(s, w, side="right"), np.searchsorted(s, 0.5),
            np.repeat(x, 3, axis=1), np.repeat(x, [2, 0, 1][: x.shape[0]] if x.shape[0] == 3 else 2, axis=0),
            np.tile(x, (2, 1, 2)), np.logaddexp(x, 2 * x), np.copysign(x, x - 0.5), np.signbit(x - 0.5))  # fmt: skip


@array_case(
    shapes=({"a": (7,), "v": (2, 5), "x": (3, 4)}, {"a": (3001,), "v": (700,), "x": (1, 1)}),
    reference=_search_repeat,
    functions=("copysign", "log1p", "exp"),
    dtypes=("float32", "float64"),  # (halves: a * 3 rounds differently in NumPy's half arithmetic: other ties)
)
def search_repeat(a, v, x):
    """np.searchsorted (both sides, ties, a NumPy scalar value; a sorted array longer than one row of
    comparisons: the search by blocks), np.repeat (one count, a count per element), np.tile, np.logaddexp,
    np.copysign and np.signbit, as NumPy code."""
    return _search_repeat(a, v, x)


def _shifts(a, b):
    counts = b % 70 - 3  # negative counts and counts of the type's width or more (0, or -1 right of a negative)
    return a << counts, a >> counts, a << 3, a >> 5, np.left_shift(7, counts[:2])


@array_case(
    shapes=({"a": (9,), "b": (9,)}, {"a": (3, 65), "b": (65,)}),
    reference=_shifts,
    dtypes=("int32", "int64"),
)
def shifts(a, b):
    """``<<`` and ``>>`` (np.left_shift, np.right_shift) as NumPy's: the left shift wrapping around, a count below
    zero or not below the type's width giving 0, or -1 for a negative value shifted right."""
    return _shifts(a, b)


def _numpy_library(a, v):
    w = a.copy() if isinstance(a, np.ndarray) else a
    taps = np.array([0.5, -1.0, 0.25])
    return (
        np.nanmean(np.where(w > 1.5, np.nan, w), axis=-1), np.nanmax(np.where(w > 1.5, np.nan, w), axis=0),
        np.median(w, axis=-1), np.quantile(w, [0.1, 0.75], axis=0), np.percentile(v, 40),
        np.interp(v, np.array([-1.0, 0.0, 2.0]), np.array([1.0, -1.0, 3.0])), np.convolve(v, taps, "same"),
        np.vstack([v, v * 2]), np.diag(v), np.fmax(w, 0.25), np.cbrt(w), np.fmod(w, 0.75), np.sinc(v),
    )  # fmt: skip


@array_case(
    shapes=({"a": (3, 5), "v": (4,)}, {"a": (9, 130), "v": (77,)}),
    reference=_numpy_library,
    functions=("cbrt", "fmod", "sin"),
    dtypes=("float32", "float64"),
)
def numpy_library(a, v):
    """More of NumPy as NumPy code: NaN-skipping statistics, median and quantiles, interpolation, convolution,
    stacking, a diagonal matrix, and the ufuncs np.fmax, np.cbrt, np.fmod and np.sinc."""
    return _numpy_library(a, v)
