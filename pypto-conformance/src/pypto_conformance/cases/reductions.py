"""Reductions: sum, prod, max, min and mean over each axis of 1-D, 2-D and 3-D inputs, and in full.

Full reductions store into a ``(1,)`` output. Empty reductions give the identity (sum 0, prod 1,
max -inf or the smallest integer, min +inf or the largest integer, mean NaN); max and min
propagate NaN. Kernel annotations are evaluated when the factory runs: no
``from __future__ import annotations`` here.
"""

import numpy as np

import pypto as pt

from .spec import INTS, NUMERIC, SIZES_1D, SIZES_2D, SIZES_3D, SMALL_INTS, K, M, N, case
from .values import by_kind, choice, floating, normal, span, sparse, with_specials

REDUCERS = {
    "sum": pt.reduce_sum,
    "prod": pt.reduce_prod,
    "max": pt.reduce_max,
    "min": pt.reduce_min,
    "mean": pt.reduce_mean,
}

VALUES = {
    # sums: mostly positive, so rounding in any summation order stays within a relative bound
    "sum": by_kind(span(-0.5, 1.5), span(-100, 100)),
    "mean": by_kind(span(-0.5, 1.5), span(-100, 100)),
    # products: near 1 for floats; ±1 with at most 20 twos for integers (no overflow at any size)
    "prod": by_kind(span(0.97, 1.03), sparse(choice([-1, 1]), 2, 20)),
    "max": by_kind(normal(), normal(int_range=10**6)),
    "min": by_kind(normal(), normal(int_range=10**6)),
}

# Long float32 reductions accumulate rounding differently in every backend (pairwise, blocked,
# per-thread partials); these bounds hold for any summation order at the sizes used here.
LONG_REDUCTION = {"float32": (1e-4, 1e-5), "float64": (1e-11, 1e-13)}


def reduce_ref(op: str, x: np.ndarray, axis) -> np.ndarray:
    """The reduction computed with NumPy in float64 / int64 (uint64), with the language's empty identities."""
    if floating(x.dtype):
        v = x.astype(np.float64)
        lo, hi = -np.inf, np.inf
    else:
        v = x.astype(np.uint64 if x.dtype.kind == "u" else np.int64)  # wrapping around as the narrow types do
        info = np.iinfo(x.dtype)
        lo, hi = info.min, info.max
    with np.errstate(all="ignore"):
        if op == "sum":
            return np.sum(v, axis=axis)
        if op == "prod":
            return np.prod(v, axis=axis)
        if op == "max":
            return np.max(v, axis=axis, initial=lo)
        if op == "min":
            return np.min(v, axis=axis, initial=hi)
        count = v.size if axis is None else int(np.prod([v.shape[a] for a in np.atleast_1d(axis)]))
        total = np.sum(v, axis=axis)
        if x.dtype.kind != "f":  # the integer sum meets the count as float32
            total = np.asarray(total).astype(np.float32).astype(np.float64)
        return np.asarray(total, dtype=np.float64) / np.float64(count)


def _out_dtype(op: str, dt):
    return pt.float32 if op == "mean" and not dt.is_float else dt


def _factory(op: str, rank: int):
    red = REDUCERS[op]

    def factory(dt):
        out = _out_dtype(op, dt)
        if rank == 1:

            def reduce_1d(x: pt.Tensor[dt, (N,)], full: pt.Tensor[out, (1,)]):
                i = pt.axis(0)
                full[0] = red(x[i], axis=i)

            return reduce_1d
        if rank == 2:

            def reduce_2d(
                x: pt.Tensor[dt, (M, N)], a0: pt.Tensor[out, (N,)], a1: pt.Tensor[out, (M,)], full: pt.Tensor[out, (1,)]
            ):
                r, c = pt.axis(0), pt.axis(1)
                a0[c] = red(x[r, c], axis=r)
                a1[r] = red(x[r, c], axis=c)
                full[0] = red(x[r, c], axis=(r, c))

            return reduce_2d

        def reduce_3d(
            x: pt.Tensor[dt, (M, N, K)],
            a0: pt.Tensor[out, (N, K)],
            a1: pt.Tensor[out, (M, K)],
            a2: pt.Tensor[out, (M, N)],
            a12: pt.Tensor[out, (M,)],
            a02: pt.Tensor[out, (N,)],
            full: pt.Tensor[out, (1,)],
        ):
            i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
            a0[j, k] = red(x[i, j, k], axis=i)
            a1[i, k] = red(x[i, j, k], axis=j)
            a2[i, j] = red(x[i, j, k], axis=k)
            a12[i] = red(x[i, j, k], axis=(j, k))
            a02[j] = red(x[i, j, k], axis=(i, k))
            full[0] = red(x[i, j, k], axis=(i, j, k))

        return reduce_3d

    return factory


AXES = {
    1: {"full": None},
    2: {"a0": 0, "a1": 1, "full": None},
    3: {"a0": 0, "a1": 1, "a2": 2, "a12": (1, 2), "a02": (0, 2), "full": None},
}
SIZES = {1: SIZES_1D, 2: SIZES_2D, 3: SIZES_3D}


def _reduction_case(op: str, rank: int) -> None:
    def reference(x):
        return {name: reduce_ref(op, x, axis) for name, axis in AXES[rank].items()}

    factory = _factory(op, rank)
    what = "every axis, pairs of axes and the whole input" if rank == 3 else "every axis and the whole input"
    factory.__doc__ = f"``pt.reduce_{op}`` of a {rank}-D input over {what} (empty sizes give the identity)."
    case(
        name=f"reduce_{op}_{rank}d",
        dtypes=NUMERIC + SMALL_INTS if rank == 2 else NUMERIC,
        sizes=SIZES[rank],
        values={"x": VALUES[op]},
        tolerances=LONG_REDUCTION if op in ("sum", "prod", "mean") else None,
        reference=reference,
    )(factory)


for _op in REDUCERS:
    for _rank in (1, 2, 3):
        _reduction_case(_op, _rank)


def _folded_ref(x):
    return {"s": np.zeros(x.shape[0], x.dtype), "p": np.ones(x.shape[0], x.dtype)}


@case(dtypes=INTS, sizes=SIZES_2D, values={"x": span(1, 9)}, reference=_folded_ref)
def folded_row_reductions(dt):
    """Row reductions whose bodies a C compiler folds to a constant (``x * 0``; ``((-1 & ~(x % x)) ** 3) % 3 - 1``
    is 1): the loops vanish and the work-group reduction's barriers remain (PoCL once aborted compiling them)."""

    def folded_row_reductions(x: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M,)], p: pt.Tensor[dt, (M,)]):
        j, i = pt.axis(0), pt.axis(1)
        s[j] = pt.reduce_sum(x[j, i] * 0, axis=i)
        p[j] = pt.reduce_prod(((((-1) & (~(x[j, i] % x[j, i]))) ** 3) % 3) - 1, axis=i)

    return folded_row_reductions


def _arg_ref(x):
    v = x.astype(np.float64) if floating(x.dtype) else x  # positions only: the same order, NaN stays NaN
    return {"hi": np.argmax(v, axis=1), "lo": np.argmin(v, axis=1), "top": np.argmax(v, axis=0)}


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=tuple(s for s in SIZES_2D if s["M"] and s["N"]),  # (NumPy refuses an empty axis)
    values={"x": with_specials(choice([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0]), 0.03)},
    reference=_arg_ref,
)
def argmax_argmin(dt):
    """``pt.argmax`` / ``pt.argmin`` along rows and columns: the first of tied extremes (few distinct values, so
    ties are common; -0.0 equals 0.0), and the first NaN's position where there is one, as NumPy."""

    def argmax_argmin(x: pt.Tensor[dt, (M, N)], hi: pt.Tensor[pt.int64, (M,)], lo: pt.Tensor[pt.int64, (M,)],
                      top: pt.Tensor[pt.int64, (N,)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        hi[r] = pt.argmax(x[r, c], axis=c)
        lo[r] = pt.argmin(x[r, c], axis=c)
        top[c] = pt.argmax(x[r, c], axis=r)

    return argmax_argmin


def _accumulate(op: str, x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """A running reduction computed with NumPy in float64 / int64 (uint64), wrapping around as narrow types do."""
    v = x.astype(np.float64) if floating(x.dtype) else x.astype(np.uint64 if x.dtype.kind == "u" else np.int64)
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    flip = tuple(slice(None, None, -1) if d == axis and reverse else slice(None) for d in range(v.ndim))
    with np.errstate(all="ignore"):
        return ufunc.accumulate(v[flip], axis=axis)[flip]


def _scan_ref(x, p):
    return {
        "s": _accumulate("sum", x, 1, False),
        "sr": _accumulate("sum", x, 0, True),
        "pr": _accumulate("prod", p, 0, True),
        "hi": _accumulate("max", x, 1, True),
        "lo": _accumulate("min", x, 0, False),
    }


@case(
    dtypes=NUMERIC + SMALL_INTS,
    sizes=SIZES_2D,
    values={"x": by_kind(with_specials(span(-0.5, 1.5), 0.02), span(-100, 100)), "p": VALUES["prod"]},
    tolerances=LONG_REDUCTION,
    reference=_scan_ref,
)
def scans(dt):
    """``pt.cumsum``, ``pt.cumprod``, ``pt.cummax``, ``pt.cummin`` along rows and columns, forward and reversed:
    NaN spreads from its position on; empty axes write nothing."""

    def scans(x: pt.Tensor[dt, (M, N)], p: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M, N)], sr: pt.Tensor[dt, (M, N)],
              pr: pt.Tensor[dt, (M, N)], hi: pt.Tensor[dt, (M, N)], lo: pt.Tensor[dt, (M, N)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        s[r, c] = pt.cumsum(x[r, c], axis=c)
        sr[r, c] = pt.cumsum(x[r, c], axis=r, reverse=True)
        pr[r, c] = pt.cumprod(p[r, c], axis=r, reverse=True)
        hi[r, c] = pt.cummax(x[r, c], axis=c, reverse=True)
        lo[r, c] = pt.cummin(x[r, c], axis=r)

    return scans


def _user_scan_ref(x):
    v = x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)
    first = np.zeros(v.shape, np.int64)  # the position of the first largest value so far along each row
    for t in range(1, v.shape[1]):
        first[:, t] = np.where(v[:, t] > v[np.arange(v.shape[0]), first[:, t - 1]], t, first[:, t - 1])
    return {"top": np.maximum.accumulate(v[:, ::-1], axis=1)[:, ::-1], "lo": np.minimum.accumulate(v, axis=0),
            "at": first}  # fmt: skip


def _first_max(p, q):
    better = q[0] > p[0]
    return pt.where(better, q[0], p[0]), pt.where(better, q[1], p[1])


@case(
    dtypes=NUMERIC,
    sizes=SIZES_2D,
    values={"x": by_kind(normal(), normal(int_range=10**6))},
    reference=_user_scan_ref,
)
def associative_scan(dt):
    """``pt.associative_scan`` with the user's combine functions (a running maximum written with ``pt.where``,
    reversed along rows; a running minimum with ``pt.minimum`` down columns; the position of the first largest
    value so far, a scan of (value, position) pairs): the first point is the element."""

    def associative_scan(x: pt.Tensor[dt, (M, N)], top: pt.Tensor[dt, (M, N)], lo: pt.Tensor[dt, (M, N)],
                         at: pt.Tensor[pt.int64, (M, N)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        top[r, c] = pt.associative_scan(lambda a, b: pt.where(b > a, b, a), x[r, c], axis=c, reverse=True)
        lo[r, c] = pt.associative_scan(lambda a, b: pt.minimum(a, b), x[r, c], axis=r)
        _, at[r, c] = pt.associative_scan(_first_max, (x[r, c], pt.cast(c, pt.int64)), axis=c)

    return associative_scan


def _long_scan_ref(x):
    v = x.astype(np.float64) if floating(x.dtype) else x.astype(np.int64)
    return {"s": np.cumsum(v), "lo": np.minimum.accumulate(v[::-1])[::-1], "top": np.maximum.accumulate(v)}


@case(
    dtypes=("float32", "float64", "int32", "int64"),
    sizes=({"N": 0}, {"N": 1}, {"N": 65537}, {"N": 200003}),
    values={"x": by_kind(span(-0.5, 1.5), span(-100, 100))},
    tolerances={"float32": (2e-4, 1e-3), "float64": (1e-11, 1e-11)},
    reference=_long_scan_ref,
)
def long_scans(dt):
    """Scans of a long vector (more than one block of 65,536 steps: block totals in parallel, the blocks' starting
    values in order, each block again from its start): a cumsum, a reversed cummin and ``pt.associative_scan``."""

    def long_scans(x: pt.Tensor[dt, (N,)], s: pt.Tensor[dt, (N,)], lo: pt.Tensor[dt, (N,)], top: pt.Tensor[dt, (N,)]):
        i = pt.axis(0)
        s[i] = pt.cumsum(x[i], axis=i)
        lo[i] = pt.cummin(x[i], axis=i, reverse=True)
        top[i] = pt.associative_scan(lambda a, b: pt.maximum(a, b), x[i], axis=i)

    return long_scans
