"""Gathers and scatters: reads at indices taken from integer tensors (embedding rows, ``take_along_axis``,
nested lookups, an embedding bag) and accumulating writes at such indices (histograms, an embedding's
gradient, scatter max/min, a permutation declared unique), in every dtype, with negative indices counting from
the end as in NumPy. References are NumPy's integer-array indexing and ``ufunc.at``.

The gathered dimension is a fixed size (``ROWS``) so that index values can be drawn in range without
knowing the case's sizes. Kernel annotations are evaluated when the factory runs: no
``from __future__ import annotations``.
"""

import numpy as np

import pypto as pt

from .arrays import array_case
from .spec import COMPLEX, NUMERIC, SIZES_1D, SIZES_2D, SIZES_3D, SMALL_INTS, K, M, N, case

ROWS = 13  # the gathered dimension: indices in [-ROWS, ROWS)
GATHERED = NUMERIC + SMALL_INTS + COMPLEX


def indices(lo: int, hi: int):
    """Index values drawn from ``[lo, hi)`` in the parameter's integer type."""

    def gen(rng, shape, dt):
        return rng.integers(lo, hi, shape).astype(dt)

    return gen


@case(dtypes=GATHERED, sizes=SIZES_2D, values={"idx": indices(-ROWS, ROWS)},
      reference=lambda table, idx: {"out": table[idx]})  # fmt: skip
def gather_rows(dt):
    """``out[i, d] = table[idx[i], d]``: an embedding lookup (int32 indices, negative ones from the end)."""

    def gather_rows(table: pt.Tensor[dt, (ROWS, N)], idx: pt.Tensor[pt.int32, (M,)], out: pt.Tensor[dt, (M, N)]):
        i, d = pt.axis(0), pt.axis(1)
        out[i, d] = table[idx[i], d]

    return gather_rows


@case(dtypes=GATHERED, sizes=SIZES_2D, values={"pos": indices(0, ROWS)},
      reference=lambda x, pos: {"out": np.take_along_axis(x, pos, axis=1)})  # fmt: skip
def gather_along_axis(dt):
    """``out[i, j] = x[i, pos[i, j]]``: NumPy's ``take_along_axis`` on the last axis (int64 indices)."""

    def gather_along_axis(x: pt.Tensor[dt, (M, ROWS)], pos: pt.Tensor[pt.int64, (M, N)], out: pt.Tensor[dt, (M, N)]):
        i, j = pt.axis(0), pt.axis(1)
        out[i, j] = x[i, pos[i, j]]

    return gather_along_axis


@case(dtypes=GATHERED, sizes=SIZES_1D, values={"p": indices(-ROWS, ROWS), "q": indices(0, ROWS)},
      reference=lambda x, p, q: {"out": x[p[q]], "both": x[p[q]] == x[q]})  # fmt: skip
def gather_nested(dt):
    """``x[p[q[i]]]``: an index read through another gathered index (uint8, then int64), and a comparison."""

    def gather_nested(x: pt.Tensor[dt, (ROWS,)], p: pt.Tensor[pt.int64, (ROWS,)], q: pt.Tensor[pt.uint8, (N,)],
                      out: pt.Tensor[dt, (N,)], both: pt.Tensor[pt.bool_, (N,)]):  # fmt: skip
        i = pt.axis(0)
        out[i] = x[p[q[i]]]
        both[i] = x[p[q[i]]] == x[q[i]]

    return gather_nested


def _bag_ref(table, ids, w):
    wide = np.complex128 if np.iscomplexobj(table) else np.float64
    return {"out": (table[ids].astype(wide) * w.astype(np.float64)[:, :, None]).sum(axis=1)}


@case(dtypes=("float32", "float64", "float16", "bfloat16", *COMPLEX), sizes=SIZES_3D,
      values={"ids": indices(-ROWS, ROWS)}, reference=_bag_ref)  # fmt: skip
def gather_bag(dt):
    """An embedding bag: ``out[b, d] = sum_k w[b, k] * table[ids[b, k], d]``, a reduction over gathered rows."""
    weight = dt.part if dt.is_complex else dt

    def gather_bag(table: pt.Tensor[dt, (ROWS, N)], ids: pt.Tensor[pt.int64, (M, K)], w: pt.Tensor[weight, (M, K)],
                   out: pt.Tensor[dt, (M, N)]):  # fmt: skip
        b, d, k = pt.axis(0), pt.axis(1), pt.axis(2)
        out[b, d] = pt.reduce_sum(w[b, k] * table[ids[b, k], d], axis=k)

    return gather_bag


# Scatters accumulate in order, in the target's type (16-bit floats: each sum computed in float32 and rounded
# once, which is what NumPy's float16 and ml_dtypes' bfloat16 additions do): ``ufunc.at`` in the same type and
# order is the exact reference.


def _hist_ref(bins, w, counts, mass):
    counts, mass = counts.copy(), mass.copy()
    np.add.at(counts, bins, 1)
    np.add.at(mass, bins, w)
    return {"counts": counts, "mass": mass}


@case(dtypes=("float32", "float64", "float16", "bfloat16", "int32", "int64", *SMALL_INTS, *COMPLEX), sizes=SIZES_1D,
      values={"bins": indices(-ROWS, ROWS)}, inplace=("counts", "mass"), reference=_hist_ref)  # fmt: skip
def scatter_histogram(dt):
    """``counts[bins[i]] += 1`` and ``mass[bins[i]] += w[i]``: a histogram and the weights per bin (scatter-add;
    many points land on one bin, accumulated in order)."""

    def scatter_histogram(bins: pt.Tensor[pt.int32, (N,)], w: pt.Tensor[dt, (N,)], counts: pt.Tensor[pt.int64, (ROWS,)],
                          mass: pt.Tensor[dt, (ROWS,)]):  # fmt: skip
        i = pt.axis(0)
        counts[bins[i]] += 1
        mass[bins[i]] += w[i]

    return scatter_histogram


def _extrema_ref(idx, x, hi, lo):
    hi, lo = hi.copy(), lo.copy()
    np.maximum.at(hi, (idx, slice(None)), x)
    np.minimum.at(lo, (idx, slice(None)), x)
    return {"hi": hi, "lo": lo}


@case(dtypes=("float32", "float64", "float16", "bfloat16", "int32", "int64", *SMALL_INTS), sizes=SIZES_2D,
      values={"idx": indices(0, ROWS)}, inplace=("hi", "lo"), reference=_extrema_ref)  # fmt: skip
def scatter_extrema(dt):
    """``pt.scatter_max`` and ``y[k] = pt.minimum(y[k], v)``: per-segment maxima and minima of rows (exact)."""

    def scatter_extrema(idx: pt.Tensor[pt.int64, (M,)], x: pt.Tensor[dt, (M, N)], hi: pt.Tensor[dt, (ROWS, N)],
                        lo: pt.Tensor[dt, (ROWS, N)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        pt.scatter_max(hi[idx[r], c], x[r, c])
        lo[idx[r], c] = pt.minimum(lo[idx[r], c], x[r, c])

    return scatter_extrema


def _embedding_grad_ref(dout, tok, dtable):
    dtable = dtable.copy()
    np.add.at(dtable, tok, dout * dout.dtype.type(0.5))
    return {"dtable": dtable}


@case(dtypes=("float32", "float64", "float16", "bfloat16", *COMPLEX), sizes=SIZES_3D,
      values={"tok": indices(-ROWS, ROWS)}, inplace=("dtable",), reference=_embedding_grad_ref)  # fmt: skip
def scatter_embedding_grad(dt):
    """An embedding's gradient: ``pt.scatter_add(dtable[tok[b, s], d], 0.5 * dout[b, s, d])``."""

    def scatter_embedding_grad(dout: pt.Tensor[dt, (M, K, N)], tok: pt.Tensor[pt.int32, (M, K)],
                               dtable: pt.Tensor[dt, (ROWS, N)]):  # fmt: skip
        b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
        pt.scatter_add(dtable[tok[b, s], d], 0.5 * dout[b, s, d])

    return scatter_embedding_grad


def _atomic_ref(bins, w, counts, mass, top):
    counts, mass, top = counts.copy(), mass.copy(), top.copy()
    np.add.at(counts, bins, 1)
    np.add.at(mass, bins, w)
    np.maximum.at(top, bins, np.real(w).astype(np.float64))
    return {"counts": counts, "mass": mass, "top": top}


@case(dtypes=("float32", "float64", "int32", "int64", "uint32", "uint64", "complex64"), sizes=SIZES_1D,
      values={"bins": indices(-ROWS, ROWS)}, inplace=("counts", "mass", "top"), reference=_atomic_ref,
      options={"deterministic": False})  # fmt: skip
def scatter_atomic(dt):
    """A histogram, its weights and maxima with ``@pt.kernel(deterministic=False)``: atomic updates from every
    thread (integers and maxima exact, float sums within rounding of ``np.add.at``'s)."""

    def scatter_atomic(bins: pt.Tensor[pt.int64, (N,)], w: pt.Tensor[dt, (N,)], counts: pt.Tensor[pt.int32, (ROWS,)],
                       mass: pt.Tensor[dt, (ROWS,)], top: pt.Tensor[pt.float64, (ROWS,)]):  # fmt: skip
        i = pt.axis(0)
        counts[bins[i]] += 1
        mass[bins[i]] += w[i]
        pt.scatter_max(top[bins[i]], pt.real(w[i]) if dt.is_complex else pt.cast(w[i], pt.float64))

    return scatter_atomic


def _permute_ref(x, seed, out):
    out = out.copy()
    out[seed] = x
    return {"p": seed, "out": out}


def _distinct(rng, shape, dt):
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype(dt)


@case(dtypes=GATHERED, sizes=SIZES_1D, values={"seed": _distinct}, inplace=("out",), reference=_permute_ref)
def scatter_permutation(dt):
    """``pt.scatter(out[seed[i]], x[i], unique=True)`` with ``seed`` a permutation, after a store."""

    def scatter_permutation(x: pt.Tensor[dt, (N,)], seed: pt.Tensor[pt.int64, (N,)], p: pt.Tensor[pt.int64, (N,)],
                            out: pt.Tensor[dt, (N,)]):  # fmt: skip
        i = pt.axis(0)
        p[i] = seed[i]  # a store first: scatters run after the kernel's stores
        pt.scatter(out[seed[i]], x[i], unique=True)

    return scatter_permutation


# -- the array API ------------------------------------------------------------------------------------------------


def _ce_ref(logits, labels):
    z = logits - logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=-1))
    return (lse - np.take_along_axis(z, (labels % logits.shape[-1])[:, None], axis=1)[:, 0]).mean()


@array_case(
    shapes=({"x": (1, 1), "idx": (1,), "pos": (1, 1)}, {"x": (13, 9), "idx": (20,), "pos": (13, 4)}),
    indices={"idx": ("x", 0), "pos": ("x", 1)},
    reference=lambda x, idx, pos: (x[idx] * 2 + 1, x[:, idx % x.shape[1]].sum(0), np.take_along_axis(x, pos, 1)),
    dtypes=("float32", "float64", *COMPLEX),
)
def integer_indexing(x, idx, pos):
    """``x[idx]``, ``x[:, idx]`` (through ``pt.take``) and ``pt.take_along_axis`` of a program's input."""
    return x[idx] * 2 + 1, pt.take(x, idx % x.shape[1], axis=1).sum(0), pt.take_along_axis(x, pos, axis=1)


@array_case(
    shapes=({"logits": (1, 1), "labels": (1,)}, {"logits": (33, 10), "labels": (33,)}),
    indices={"labels": ("logits", 1)},
    reference=_ce_ref,
    functions=("exp", "log"),
    dtypes=("float32", "float64"),
)
def cross_entropy(logits, labels):
    """``pt.cross_entropy`` (a bounds-checked gather of the label's logit next to the row's logsumexp)."""
    return pt.cross_entropy(logits, labels)


@array_case(
    shapes=({"x": (1, 1), "idx": (1,), "v": (1, 1)}, {"x": (7, 5), "idx": (40,), "v": (40, 5)}),
    indices={"idx": ("x", 0)},
    reference=lambda x, idx, v: np.add.at(out := x.copy(), idx, v) or out,
    dtypes=("float32", "float64", *COMPLEX),
)
def scatter_rows(x, idx, v):
    """``pt.index_add`` (a scatter-add: repeated indices add up, as ``np.add.at``)."""
    return pt.index_add(x, idx, v)
