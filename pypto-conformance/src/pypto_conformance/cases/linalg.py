"""Matrix products written as reductions: ``C[i, j] = pt.reduce_sum(A[i, k] * B[k, j], axis=k)``.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .spec import NUMERIC, B, K, M, N, case
from .values import span

# Mostly positive operands keep every summation order within a relative bound of the exact dot product.
VALUES = {"a": span(-0.25, 1.0), "w": span(-0.25, 1.0)}
DOT = {"float32": (1e-4, 1e-5), "float64": (1e-11, 1e-13)}


def _wide(x):
    return x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)


@case(
    dtypes=NUMERIC,
    sizes=(
        {"M": 1, "K": 1, "N": 1},
        {"M": 7, "K": 127, "N": 5},
        {"M": 24, "K": 33, "N": 17},
        {"M": 3, "K": 1031, "N": 4},
        {"M": 3, "K": 0, "N": 4},
        {"M": 0, "K": 3, "N": 2},
    ),
    values=VALUES,
    tolerances=DOT,
    reference=lambda a, w: {"c": _wide(a) @ _wide(w)},
)
def matmul(dt):
    """Matrix product; an empty inner dimension gives zeros (the empty sum)."""

    def matmul(a: pt.Tensor[dt, (M, K)], w: pt.Tensor[dt, (K, N)], c: pt.Tensor[dt, (M, N)]):
        i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
        c[i, j] = pt.reduce_sum(a[i, k] * w[k, j], axis=k)

    return matmul


@case(
    dtypes=NUMERIC,
    sizes=(
        {"B": 1, "M": 1, "K": 1, "N": 1},
        {"B": 3, "M": 7, "K": 33, "N": 5},
        {"B": 2, "M": 24, "K": 127, "N": 9},
        {"B": 0, "M": 2, "K": 3, "N": 2},
        {"B": 2, "M": 3, "K": 0, "N": 4},
    ),
    values=VALUES,
    tolerances=DOT,
    reference=lambda a, w: {"c": np.matmul(_wide(a), _wide(w))},
)
def batched_matmul(dt):
    """A batch of matrix products over a leading batch axis."""

    def batched_matmul(a: pt.Tensor[dt, (B, M, K)], w: pt.Tensor[dt, (B, K, N)], c: pt.Tensor[dt, (B, M, N)]):
        n, i, j, k = pt.axis(0), pt.axis(1), pt.axis(2), pt.axis(3)
        c[n, i, j] = pt.reduce_sum(a[n, i, k] * w[n, k, j], axis=k)

    return batched_matmul
