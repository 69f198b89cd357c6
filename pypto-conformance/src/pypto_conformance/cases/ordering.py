"""Orderings: ``pt.sort``, ``pt.argsort`` and ``pt.topk`` along rows and columns, ascending and descending.

The references order with ``np.lexsort`` by explicit keys (the value, NaN last or first, then the position),
independently of pypto's own NumPy meaning: ascending is ``np.sort``'s order (NaN last), descending its exact
reverse (NaN first, as ``torch.sort(descending=True)`` and ``torch.topk``), and equal values (-0.0 and 0.0 too)
keep the order of their positions either way. Few distinct values, so ties are common. Kernel annotations are
evaluated when the factory runs: no ``from __future__ import annotations`` here.
"""

import numpy as np

import pypto as pt

from .spec import NUMERIC, SIZES_2D, SMALL_INTS, K, M, N, case
from .values import by_kind, choice, with_specials

TIES = by_kind(with_specials(choice([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0]), 0.05), choice([0, 1, 2, 7, 100]))


def order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The positions that put ``x`` in order along ``axis`` (see the module docstring), by ``np.lexsort``."""
    v = np.moveaxis(x, axis, -1)
    out = np.empty(v.shape, np.int64)
    pos = np.arange(v.shape[-1])
    for row in np.ndindex(v.shape[:-1]):
        r = v[row]
        if r.dtype.kind == "f" or r.dtype.name == "bfloat16":
            f = r.astype(np.float64)
            nan = np.isnan(f)
            key = np.where(nan, 0.0, -f if descending else f)
            out[row] = np.lexsort((pos, key, ~nan if descending else nan))
        else:
            key = r.astype(np.int64) if r.dtype.kind == "b" else r
            out[row] = np.lexsort((pos, ~key if descending else key))  # ~ reverses every integer order
    return np.moveaxis(out, -1, axis)


def _sorting_ref(x):
    up, down = order(x, 1, False), order(x, 0, True)
    return {"s": np.take_along_axis(x, up, 1), "si": up, "d": np.take_along_axis(x, down, 0), "di": down}


@case(dtypes=NUMERIC + SMALL_INTS, sizes=SIZES_2D, values={"x": TIES}, reference=_sorting_ref)
def sorting(dt):
    """``pt.sort`` and ``pt.argsort`` along rows (ascending: NaN last) and columns (descending: NaN first):
    stable, so tied values keep the order of their positions; empty axes write nothing."""

    def sorting(x: pt.Tensor[dt, (M, N)], s: pt.Tensor[dt, (M, N)], si: pt.Tensor[pt.int64, (M, N)],
                d: pt.Tensor[dt, (M, N)], di: pt.Tensor[pt.int64, (M, N)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        s[r, c] = pt.sort(x[r, c], axis=c)
        si[r, c] = pt.argsort(x[r, c], axis=c)
        d[r, c] = pt.sort(x[r, c], axis=r, descending=True)
        di[r, c] = pt.argsort(x[r, c], axis=r, descending=True)

    return sorting


def _topk_ref(x, v):
    k = v.shape[1]  # (an output: the reference reads only its size)
    top, bottom = order(x, 1, True)[:, :k], order(x, 1, False)[:, :k]
    return {"v": np.take_along_axis(x, top, 1), "i": top, "lo": np.take_along_axis(x, bottom, 1), "li": bottom}


@case(
    dtypes=NUMERIC,
    sizes=(
        {"M": 1, "N": 1, "K": 1},
        {"M": 7, "N": 127, "K": 10},
        {"M": 2, "N": 64, "K": 64},
        {"M": 3, "N": 1031, "K": 100},
        {"M": 4, "N": 5, "K": 0},
        {"M": 0, "N": 5, "K": 2},
    ),
    values={"x": TIES},
    reference=_topk_ref,
)
def topk(dt):
    """``pt.topk``: the k largest values of each row, largest first (NaN counts as the largest), and the k
    smallest (``largest=False``), with their positions; tied values in the order of their positions. Up to 64
    kept values are selected in one read of the row, more by a merge sort (k = 100)."""

    def topk(x: pt.Tensor[dt, (M, N)], v: pt.Tensor[dt, (M, K)], i: pt.Tensor[pt.int64, (M, K)],
             lo: pt.Tensor[dt, (M, K)], li: pt.Tensor[pt.int64, (M, K)]):  # fmt: skip
        r, c, j = pt.axis(0), pt.axis(1), pt.axis(2)
        v[r, j], i[r, j] = pt.topk(x[r, c], j, axis=c)
        lo[r, j], li[r, j] = pt.topk(x[r, c], j, axis=c, largest=False)

    return topk
