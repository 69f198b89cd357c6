"""Special values: NaN and infinities through reductions, empty reductions, an all ``-inf`` softmax row.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import math

import numpy as np

import pypto as pt

from .reductions import LONG_REDUCTION, reduce_ref
from .spec import FLOATS, NUMERIC, M, N, case
from .values import normal, rows, span, with_specials

inf, nan = math.inf, math.nan

SPECIAL_ROWS = [
    [1.0, nan, 3.0],
    [1.0, inf, -inf],
    [-inf, -inf, 2.0],
    [inf, 1.0, 2.0],
    [nan, -inf, inf],
    [-inf, -inf, -inf],
    [inf, inf, inf],
    [nan, nan, nan],
    [-0.0, 0.0, -0.0],
]


@case(
    dtypes=FLOATS,
    sizes=({"M": 9, "N": 3}, {"M": 12, "N": 127}, {"M": 10, "N": 1031}),
    values={"x": rows(SPECIAL_ROWS, with_specials(span(-0.5, 1.5), 0.02))},
    tolerances=LONG_REDUCTION,
    reference=lambda x: {
        "mx": reduce_ref("max", x, 1),
        "mn": reduce_ref("min", x, 1),
        "s": reduce_ref("sum", x, 1),
        "p": reduce_ref("prod", 1.0 + 0.01 * np.clip(x.astype(np.float64), -2, 2), 1),
        "mx_all": reduce_ref("max", x, None),
        "s_all": reduce_ref("sum", x, None),
    },
)
def nan_inf_reductions(dt):
    """max and min propagate NaN; sums and products follow IEEE (inf + -inf is NaN)."""

    def nan_inf_reductions(
        x: pt.Tensor[dt, (M, N)],
        mx: pt.Tensor[dt, (M,)],
        mn: pt.Tensor[dt, (M,)],
        s: pt.Tensor[dt, (M,)],
        p: pt.Tensor[dt, (M,)],
        mx_all: pt.Tensor[dt, (1,)],
        s_all: pt.Tensor[dt, (1,)],
    ):
        r, c = pt.axis(0), pt.axis(1)
        mx[r] = pt.reduce_max(x[r, c], axis=c)
        mn[r] = pt.reduce_min(x[r, c], axis=c)
        s[r] = pt.reduce_sum(x[r, c], axis=c)
        p[r] = pt.reduce_prod(1.0 + 0.01 * pt.minimum(pt.maximum(x[r, c], -2.0), 2.0), axis=c)
        mx_all[0] = pt.reduce_max(x[r, c], axis=(r, c))
        s_all[0] = pt.reduce_sum(x[r, c], axis=(r, c))

    return nan_inf_reductions


@case(
    dtypes=FLOATS,
    sizes=({"M": 3, "N": 9}, {"M": 127, "N": 12}, {"M": 1031, "N": 10}, {"M": 40, "N": 100}),
    values={"x": with_specials(span(-0.5, 1.5), 0.01)},
    tolerances=LONG_REDUCTION,
    reference=lambda x: {
        "mx": reduce_ref("max", x, 0),
        "mn": reduce_ref("min", x, 0),
        "s": reduce_ref("sum", x, 0),
        "p": reduce_ref("prod", 1.0 + 0.01 * np.clip(x.astype(np.float64), -2, 2), 0),
    },
)
def nan_inf_column_reductions(dt):
    """The same down the columns (blocks of rows reduced apart and combined, on every backend): max and min
    propagate NaN wherever it sits in the column, sums and products follow IEEE."""

    def nan_inf_column_reductions(
        x: pt.Tensor[dt, (M, N)],
        mx: pt.Tensor[dt, (N,)],
        mn: pt.Tensor[dt, (N,)],
        s: pt.Tensor[dt, (N,)],
        p: pt.Tensor[dt, (N,)],
    ):
        r, c = pt.axis(0), pt.axis(1)
        mx[c] = pt.reduce_max(x[r, c], axis=r)
        mn[c] = pt.reduce_min(x[r, c], axis=r)
        s[c] = pt.reduce_sum(x[r, c], axis=r)
        p[c] = pt.reduce_prod(1.0 + 0.01 * pt.minimum(pt.maximum(x[r, c], -2.0), 2.0), axis=r)

    return nan_inf_column_reductions


def _softmax_ref(x):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


@case(
    dtypes=FLOATS,
    sizes=({"M": 4, "N": 1}, {"M": 5, "N": 7}, {"M": 6, "N": 127}, {"M": 4, "N": 1031}),
    values={
        "x": rows(
            [[-inf], [-inf, 0.0, 1.0, -inf], [inf, 0.0, -1.0], [1e30, -1e30, 0.0], [nan, 0.0]],
            normal(3.0),
        )
    },
    functions=("exp",),
    reference=_softmax_ref,
)
def softmax_all_neginf(dt):
    """Softmax of special rows. An all ``-inf`` row gives NaN (``-inf - -inf`` is NaN), as the same formula
    does in NumPy; ``-inf`` entries among finite ones give 0; a ``+inf`` or NaN entry makes the row NaN."""

    def softmax_all_neginf(x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)]):
        row, col = pt.axis(0), pt.axis(1)
        max_val = pt.reduce_max(x[row, col], axis=col)
        exp_val = pt.exp(x[row, col] - max_val)
        y[row, col] = exp_val / pt.reduce_sum(exp_val, axis=col)

    return softmax_all_neginf


_SHORT = {"sum": "s", "prod": "p", "max": "mx", "min": "mn", "mean": "me"}


def _empty_ref(x):
    out = {}
    for op, short in _SHORT.items():
        out[short] = reduce_ref(op, x, 1)
        out[f"{short}_all"] = reduce_ref(op, x, None)
    return out


@case(
    dtypes=NUMERIC,
    sizes=({"M": 3, "N": 0}, {"M": 1, "N": 0}, {"M": 0, "N": 0}, {"M": 0, "N": 4}),
    reference=_empty_ref,
)
def empty_reduction_identities(dt):
    """Reductions over nothing give the identity: sum 0, prod 1, max -inf (or the smallest integer),
    min +inf (or the largest integer), mean NaN."""
    out = dt if dt.is_float else pt.float32

    def empty_reduction_identities(
        x: pt.Tensor[dt, (M, N)],
        s: pt.Tensor[dt, (M,)],
        p: pt.Tensor[dt, (M,)],
        mx: pt.Tensor[dt, (M,)],
        mn: pt.Tensor[dt, (M,)],
        me: pt.Tensor[out, (M,)],
        s_all: pt.Tensor[dt, (1,)],
        p_all: pt.Tensor[dt, (1,)],
        mx_all: pt.Tensor[dt, (1,)],
        mn_all: pt.Tensor[dt, (1,)],
        me_all: pt.Tensor[out, (1,)],
    ):
        r, c = pt.axis(0), pt.axis(1)
        s[r] = pt.reduce_sum(x[r, c], axis=c)
        p[r] = pt.reduce_prod(x[r, c], axis=c)
        mx[r] = pt.reduce_max(x[r, c], axis=c)
        mn[r] = pt.reduce_min(x[r, c], axis=c)
        me[r] = pt.reduce_mean(x[r, c], axis=c)
        s_all[0] = pt.reduce_sum(x[r, c], axis=(r, c))
        p_all[0] = pt.reduce_prod(x[r, c], axis=(r, c))
        mx_all[0] = pt.reduce_max(x[r, c], axis=(r, c))
        mn_all[0] = pt.reduce_min(x[r, c], axis=(r, c))
        me_all[0] = pt.reduce_mean(x[r, c], axis=(r, c))

    return empty_reduction_identities
