"""Array operations for ``@pt.jit`` functions: ``pt.matmul``, ``pt.einsum``, ``pt.softmax`` and the rest.

They build the traced program out of the graph's elementwise operations, reductions, contractions
and views (:mod:`pypto.array.graph`), so everything they do is fused by the kernel compiler like
hand-written code: ``pt.softmax`` is a maximum, an exponential, a sum and a division that become one
loop nest per row.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array import views
from pypto.array.graph import (
    STRUCTURAL,
    Array,
    _operand,
    binary,
    broadcast_shapes,
    cast,
    contract,
    laid_out,
    normalize_axes,
    reduce,
    stop_gradient,
    unary,
    where,
)
from pypto.array.precision import in_trace
from pypto.dtypes import promote as _promote
from pypto.errors import ShapeError, TracingError
from pypto.ir.ops import ORDERINGS, USER_SCAN
from pypto.lang.location import user_loc

pi = math.pi
e = math.e


def _array(x: Any, what: str) -> Array:
    x = _operand(x, what)
    if not isinstance(x, Array):
        raise TracingError(f"{what}: expected an array, got the number {x!r}", user_loc())
    return x


def matmul(a: Any, b: Any) -> Array:
    """NumPy's ``matmul``: 1-D operands are vectors, leading axes are batch axes and broadcast."""
    a, b = _array(a, "matmul"), _array(b, "matmul")
    if not a.ndim or not b.ndim:
        raise ShapeError(
            "matmul: an operand is 0-dimensional",
            param="operands",
            expected="arrays of 1 or more dimensions",
            got=(a.shape, b.shape),
            fix="use '*' to multiply by a scalar",
        )
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if ka != kb:
        raise ShapeError(
            f"matmul: the inner sizes differ: {a.shape} @ {b.shape} ({ka} != {kb})",
            param="operands",
            expected="a.shape[-1] == b.shape[-2]",
            got=(a.shape, b.shape),
        )
    batch_a = a.shape[:-2] if a.ndim > 2 else ()
    batch_b = b.shape[:-2] if b.ndim > 2 else ()
    nb = max(len(batch_a), len(batch_b))
    letters = string.ascii_letters[:nb]
    sa = letters[nb - len(batch_a) :] + ("ik" if a.ndim >= 2 else "k")
    sb = letters[nb - len(batch_b) :] + ("kj" if b.ndim >= 2 else "k")
    bshape = broadcast_shapes(batch_a, batch_b, what="the batch axes of matmul")
    out = "".join(c for c, n in zip(letters, bshape)) + ("i" if a.ndim >= 2 else "") + ("j" if b.ndim >= 2 else "")
    return _contract2(a, sa, b, sb, out)


BATCHED_LAYOUT_MIN = 2
"""Batches of a product ``x @ w.T`` (``w`` a matrix read along its rows' summed index, ``x`` with batch axes w does
not have) from which ``w.T`` is stored once, contiguous along the columns, before the product: the product packs
``w``'s columns for each batch and task (the schedule's register tiles read its rows), which from ``w[j, k]`` is a
gather of a column per point. Measured here (x 32 x 64 x 512, w 128 x 512, float32, 2 threads): 1.12 ms, 0.68 ms
with ``w.T`` stored first (``x @ w`` itself: 0.68 ms)."""


def _contract2(a: Array, sa: str, b: Array, sb: str, out: str) -> Array:
    """``contract([a, b], [sa, sb], out)``, a matrix read along its summed index by every batch of the other
    operand stored transposed first (see :data:`BATCHED_LAYOUT_MIN`)."""
    if len(out) >= 3:
        i, j, batch = out[-2], out[-1], out[:-2]
        sizes = dict(zip(sa, a.shape)) | dict(zip(sb, b.shape))
        batches = [sizes[c] for c in batch]  # (a symbolic size is at least 2, decided without its value)
        if any(not isinstance(n, int) for n in batches) or math.prod(batches) >= BATCHED_LAYOUT_MIN:
            for k, (x, sx) in enumerate(((a, sa), (b, sb))):
                if len(sx) != 2 or x.shape[0] == 1 or x.shape[1] == 1 or i in sx or j not in sx:
                    continue
                summed = sx[1 - sx.index(j)]
                if summed in out or summed not in (sb if k == 0 else sa):
                    continue
                transposed = x.op == "view" and x.args[0].ndim == 2 and x.attrs == ((0, ((1, 1),)), (0, ((0, 1),)))
                if sx[0] == j and x.op != "view":  # w[j, k]: stored as w.T
                    x, sx = laid_out(views.transpose(x, (1, 0))), sx[::-1]
                elif sx[1] == j and transposed:  # w.T[k, j] of a w[j, k]: stored
                    x = laid_out(x)
                else:
                    continue
                a, sa, b, sb = (x, sx, b, sb) if k == 0 else (a, sa, x, sx)
                break
    return contract((a, b), (sa, sb), out)


def _parse_einsum(subscripts: str, operands: Sequence[Array]) -> tuple[list[str], str]:
    if not isinstance(subscripts, str):
        raise TracingError(f"pt.einsum: subscripts must be a string, got {subscripts!r}", user_loc())
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ShapeError(
            f"pt.einsum: '{subscripts}' names {len(inputs)} operand(s), {len(operands)} were given",
            param="operands",
            expected=f"{len(inputs)} arrays",
            got=len(operands),
        )
    used = set(c for c in spec if c.isalpha())
    bad = set(spec) - set(string.ascii_letters) - set(",->.")
    if bad:
        raise TracingError(f"pt.einsum: '{subscripts}' has characters other than letters: {sorted(bad)}", user_loc())
    spare = [c for c in string.ascii_letters if c not in used]
    ell_rank = 0
    for sub, x in zip(inputs, operands):
        if "..." in sub:
            ell_rank = max(ell_rank, x.ndim - (len(sub) - 3))
    ell = "".join(spare[:ell_rank])
    subs = []
    for k, (sub, x) in enumerate(zip(inputs, operands)):
        if "..." in sub:
            n = x.ndim - (len(sub) - 3)
            if n < 0:
                raise ShapeError(f"pt.einsum: operand {k} has {x.ndim} axes, fewer than '{sub}' names",
                                 param=f"operands[{k}]", expected=f"at least {len(sub) - 3} axes", got=x.shape)  # fmt: skip
            sub = sub.replace("...", ell[ell_rank - n :] if n else "")
        if "." in sub or len(sub) != x.ndim:
            raise ShapeError(
                f"pt.einsum: operand {k} has {x.ndim} axes but its subscripts '{inputs[k]}' name {len(sub)}",
                param=f"operands[{k}]",
                expected=f"{len(sub)} axes",
                got=x.shape,
            )
        subs.append(sub)
    if arrow:
        out = rhs.replace("...", ell)
        if "." in out or len(set(out)) != len(out):
            raise TracingError(f"pt.einsum: the output '{rhs}' repeats an index or has a stray '.'", user_loc())
        missing = set(out) - set("".join(subs))
        if missing:
            raise TracingError(f"pt.einsum: output indices {sorted(missing)} appear in no operand", user_loc())
    else:  # implicit output: the ellipsis axes, then indices that appear once, in alphabetical order
        counts: dict[str, int] = {}
        for sub in subs:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return subs, out


def einsum(subscripts: str, *operands: Any) -> Array:
    """``np.einsum`` on arrays: any subscripts, implicit or explicit output, repeated indices, ``...``.

    It is computed the way the schedules run fastest: an index summed within one operand only is
    reduced there first; several operands are contracted two at a time, left to right, keeping the
    indices still needed; a pair summed over several indices is laid out (transposed, those indices
    merged into one) so that it is one contraction over one index, which the ``schedule`` stage tiles.
    """
    arrays = [_array(x, "pt.einsum") for x in operands]
    subs, out = _parse_einsum(subscripts, arrays)
    return _einsum(arrays, subs, out)


def _unique(letters: str) -> str:
    return "".join(dict.fromkeys(letters))


def _sizes(arrays: Sequence[Array], subs: Sequence[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for x, sub in zip(arrays, subs):
        for c, n in zip(sub, x.shape):
            sizes[c] = max(sizes.get(c, n), n)
    return sizes


def _as_letters(x: Array, sub: str, out: str, sizes: dict[str, int]) -> Array:
    """``x`` (indexed by ``sub``) as an array over ``out``'s letters: transposed, diagonals taken, size-1
    axes broadcast. Every letter of ``sub`` must be in ``out``."""
    index = tuple((0, ()) if n == 1 and sizes[c] != 1 else (0, ((out.index(c), 1),)) for c, n in zip(sub, x.shape))
    shape = tuple(sizes[c] for c in out)
    if index == tuple((0, ((k, 1),)) for k in range(len(out))) and shape == x.shape:
        return x
    return views.view(x, shape, index)


def _einsum(arrays: list[Array], subs: list[str], out: str) -> Array:
    contract(arrays, subs, out)  # checks that the sizes agree
    sizes = _sizes(arrays, subs)
    for k, (x, sub) in enumerate(zip(arrays, subs)):  # indices summed within one operand: reduce them there
        others = out + "".join(s for j, s in enumerate(subs) if j != k)
        keep = "".join(c for c in _unique(sub) if c in others)
        if keep != _unique(sub):
            arrays[k], subs[k] = contract([x], [sub], keep), keep
    while len(arrays) > 2:  # two at a time, left to right
        needed = out + "".join(subs[2:])
        inter = "".join(c for c in _unique(subs[0] + subs[1]) if c in needed)
        arrays[:2] = [_pair(arrays[0], subs[0], arrays[1], subs[1], inter, sizes)]
        subs[:2] = [inter]
    if len(arrays) == 1:
        (x,), (sub,) = arrays, subs
        if set(sub) <= set(out):
            return _as_letters(x, sub, out, sizes)
        return contract([x], [sub], out)
    return _pair(arrays[0], subs[0], arrays[1], subs[1], out, sizes)


def _pair(a: Array, sa: str, b: Array, sb: str, out: str, sizes: dict[str, int]) -> Array:
    summed = [c for c in _unique(sa + sb) if c not in out]
    if not summed:  # an outer or elementwise product
        return _as_letters(a, sa, out, sizes) * _as_letters(b, sb, out, sizes)
    if len(summed) == 1 and len(set(sa)) == len(sa) and len(set(sb)) == len(sb):
        return _contract2(a, sa, b, sb, out)
    # several summed indices: a as (its other indices, then the summed ones merged into one), b as (the
    # summed ones merged, then its other indices): one contraction over the merged index
    spare = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in sa + sb + out)
    fa = "".join(c for c in _unique(sa) if c not in summed)
    fb = "".join(c for c in _unique(sb) if c not in summed)
    if not set(fa) & set(fb) and out == fb + fa and out != fa + fb:  # the rows come from b: swap the factors
        a, sa, b, sb, fa, fb = b, sb, a, sa, fb, fa
    merged = math.prod(sizes[c] for c in summed)
    a2 = views.reshape(_as_letters(a, sa, fa + "".join(summed), sizes), tuple(sizes[c] for c in fa) + (merged,))
    if len(fb) > 1 and not set(fa) & set(fb) and out == fa + fb:
        # several columns (dw[d, h, e] = sum x[b, s, d] g[b, s, h, e]): merged into one too, so the contraction
        # is a matrix product the schedule tiles; its result is stored, then reshaped
        cols = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in sa + sb + out + spare)
        b2 = views.reshape(_as_letters(b, sb, "".join(summed) + fb, sizes), (merged, math.prod(sizes[c] for c in fb)))
        flat = contract([a2, b2], [fa + spare, spare + cols], fa + cols)
        return Array("reshape", (flat,), None, tuple(sizes[c] for c in out), flat.dtype)
    b2 = views.reshape(_as_letters(b, sb, "".join(summed) + fb, sizes), (merged,) + tuple(sizes[c] for c in fb))
    return _contract2(a2, fa + spare, b2, spare + fb, out)


def _dim(fname: str, dim: Any, axis: Any) -> Any:
    """The axis of ``pt.softmax(x, dim)`` given as torch's ``dim=`` or NumPy's and JAX's ``axis=`` (not both)."""
    if axis is None:
        return dim
    if dim != -1:
        raise TracingError(f"pt.{fname}: give the axis once, as dim= or axis=, not both (dim={dim!r}, axis={axis!r})",
                           user_loc(3))  # fmt: skip
    return axis


def softmax(x: Any, dim: int = -1, *, axis: Any = None) -> Array:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim`` (one fused nest; ``axis=`` as NumPy and JAX spell it)."""
    dim = _dim("softmax", dim, axis)
    x = _array(x, "pt.softmax")
    ex = unary("exp", x - stop_gradient(x.max(dim, keepdims=True)))  # any shift gives the same result
    return ex / ex.sum(dim, keepdims=True)


def log_softmax(x: Any, dim: int = -1, *, axis: Any = None) -> Array:
    """``x - max - log(sum(exp(x - max)))`` along ``dim`` (or ``axis=``)."""
    dim = _dim("log_softmax", dim, axis)
    x = _array(x, "pt.log_softmax")
    shifted = x - stop_gradient(x.max(dim, keepdims=True))
    return shifted - unary("log", unary("exp", shifted).sum(dim, keepdims=True))


def _along(x: Array, axis: Any, what: str) -> tuple[Array, int]:
    """``x`` and the one axis an operation along an axis runs on (NumPy's ``axis``: an int, or None for the
    flattened array; a 0-d array is one element)."""
    if axis is None:
        x = views.reshape(x, (-1,)) if x.ndim != 1 else x
        a = 0
    elif isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        if x.ndim == 0:
            raise TracingError(f"{what}: axis {axis} is out of bounds for a 0-d array", user_loc(),
                               "pass axis=None (the array as one element)")  # fmt: skip
        (a,) = normalize_axes(int(axis), x.ndim, what)
    else:
        raise TracingError(f"{what}: axis must be an int or None, got {axis!r}", user_loc(),
                           "take one axis at a time (NumPy's functions do too)")  # fmt: skip
    return (views.reshape(x, (1,)) if x.ndim == 0 else x), a


def arg_reduce(op: str, x: Any, axis: Any, keepdims: bool, what: str) -> Array:
    """``np.argmax`` / ``np.argmin`` (``op``: "max", "min"): the first position of the extreme along ``axis``
    (the flattened array's for ``None``), the first NaN's where there is one; int64."""
    x = _array(x, what)
    if x.dtype.is_complex:
        raise TracingError(f"{what} of a complex array (complex numbers have no order)", user_loc(),
                           "take it of the real parts (x.real) or of the magnitudes (pt.abs(x))")  # fmt: skip
    if not isinstance(keepdims, bool):
        raise TracingError(f"{what}: keepdims must be True or False, got {keepdims!r}", user_loc())
    ndim = x.ndim
    x, a = _along(x, axis, what)
    if x.shape[a] == 0:
        raise ShapeError(f"{what} of an empty sequence (axis {a} has size 0)", param="x",
                         expected="a non-empty axis", got=x.shape)  # fmt: skip
    if x.dtype.is_bool:
        x = cast(x, dtypes.int32)
    if not _exact(x):  # the two reductions compare one stored value (recomputed, it could round differently in
        x = Array("stop", (x,), "store", x.shape, x.dtype)  # each loop: a division made a multiplication, a fma)
    m = reduce(op, x, (a,), keepdims=True)
    hit = binary("or", binary("eq", x, m), binary("ne", x, x))  # the first NaN wins, as NumPy's
    pos = views._iota(x.shape[a], a, x.ndim)
    out = reduce("min", where(hit, pos, np.iinfo(np.int64).max), (a,), keepdims=keepdims and axis is not None)
    if keepdims and axis is None:
        out = views.reshape(out, (1,) * ndim)
    return out


def _exact(x: Array) -> bool:
    """Whether ``x`` is a load (of an input or a stored value, through views) or an exact function of one
    (negation, absolute value, a widening cast): computed the same wherever it is read."""
    while x.op in ("view", "unary", "cast", "stop") and (x.op != "unary" or x.attrs in ("neg", "abs")):
        x = x.args[0]
    return x.op in ("input", "fill", "iota", "concat", "reshape")


def scan(op: str, x: Any, axis: Any, reverse: bool, what: str) -> Array:
    """The running reduction ``op`` (a reducer of :data:`pypto.ir.ops.SCANS`) along ``axis`` (``None``: along the
    flattened array, as ``np.cumsum``), typed as ``pt.sum`` types a sum: narrow integers and booleans summed or
    multiplied in the default integer's width (int32; NumPy's is int64); a running maximum or minimum keeps the
    type (booleans refused)."""
    x, a = _along(_array(x, what), axis, what)
    dt = x.dtype
    if dt.is_complex and op != "sum":
        raise TracingError(f"{what} of a complex array (complex numbers have no order, and a product of them is not "
                           "supported yet)", user_loc(), "scan the real parts (x.real) or the magnitudes (pt.abs(x))")  # fmt: skip
    if dt.is_bool:
        if op in ("max", "min"):
            raise TracingError(f"{what} of a boolean array", user_loc(), "convert first: x.astype(pt.int32)")
        dt = dtypes.int32
    if op in ("sum", "prod") and dt.is_narrow_int:  # as pt.sum: the default integer's width (the array API's rule)
        dt = dtypes.uint32 if dt.is_unsigned else dtypes.DEFAULT_INT
    return Array("scan", (x,), (op, a, reverse, None, 0), x.shape, dt)


def user_scan(xs: Sequence[Any], axis: Any, reverse: bool, combine: Any, what: str) -> tuple[Array, ...]:
    """``pt.associative_scan`` of the arrays ``xs`` (of one shape) with the traced function ``combine``: one node
    per scanned value, each of its type (infer_types checks the function's)."""
    arrays = [_array(x, what) for x in xs]
    if any(x.shape != arrays[0].shape for x in arrays):
        raise ShapeError(f"{what}: the scanned arrays have shapes {[x.shape for x in arrays]}", param="x",
                         expected="arrays of one shape", got=[x.shape for x in arrays])  # fmt: skip
    pairs = [_along(x, axis, what) for x in arrays]
    arrays, a = [x for x, _ in pairs], pairs[0][1]
    if any(x.dtype.is_complex for x in arrays):
        raise TracingError(f"{what} of complex values is not supported yet", user_loc(),
                           "scan the real and imaginary parts as two real scans")  # fmt: skip
    args = tuple(arrays)
    return tuple(Array("scan", args, (USER_SCAN, a, reverse, combine, j), x.shape, x.dtype) for j, x in enumerate(args))


def ordering(name: str, x: Any, axis: Any, flag: bool, k: Any) -> Any:
    """``pt.sort``/``pt.argsort`` (``flag``: descending) and ``pt.topk`` (``flag``: largest, ``k`` the count) along
    ``axis`` (``None``: the flattened array): one ``sort`` node per result (:class:`~pypto.ir.nodes.Sort`)."""
    what = f"pt.{name}"
    x, a = _along(_array(x, what), axis, what)
    if x.dtype.is_complex:
        raise TracingError(f"{what} of a complex array (complex numbers have no order here)", user_loc(),
                           "order the real parts (x.real) or the magnitudes (pt.abs(x))")  # fmt: skip
    n = x.shape[a]
    m = n
    if name == "topk":
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TracingError(f"pt.topk: k must be an int, got {k!r}", user_loc(), "pass how many values to keep")
        m = int(k)
        if m < 0 or (isinstance(n, int) and m > n):
            raise ShapeError(f"pt.topk: k={m} is out of range for axis {a} of size {n}", param="k",
                             expected=f"0 <= k <= {n}", got=m)  # fmt: skip
    shape = tuple(m if d == a else s for d, s in enumerate(x.shape))
    out = []
    for which in ORDERINGS[name].results:
        dt = dtypes.int64 if which == "indices" else x.dtype
        out.append(Array("sort", (x,), (a, which, flag, name == "topk"), shape, dt))
    return tuple(out) if len(out) > 1 else out[0]


def one_hot(indices: Any, num_classes: int, dtype: Any = None) -> Array:
    """``indices.shape + (num_classes,)``: 1 where the last axis equals the index, else 0 (``jax.nn.one_hot``:
    an index outside ``[0, num_classes)`` gives a row of zeros). ``dtype`` defaults to float32."""
    from pypto import dtypes

    indices = _array(indices, "pt.one_hot")
    if not indices.dtype.is_int:
        raise TracingError(f"pt.one_hot: indices have type {indices.dtype}, expected an integer type", user_loc(),
                           "convert them: idx.astype(pt.int64)")  # fmt: skip
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 0:
        raise ShapeError("pt.one_hot: num_classes must be a non-negative int", param="num_classes",
                         expected="an int >= 0", got=num_classes)  # fmt: skip
    iota = views._iota(num_classes, indices.ndim, indices.ndim + 1)
    hot = binary("eq", views.reshape(indices, (*indices.shape, 1)), iota)
    return cast(hot, dtypes.as_dtype(dtype if dtype is not None else dtypes.float32, what="pt.one_hot dtype"))


def cross_entropy(logits: Any, labels: Any, reduction: str = "mean") -> Array:
    """Softmax cross-entropy of ``logits`` (..., C) against integer class ``labels`` (...):
    ``logsumexp(logits) - logits[label]``, averaged (``reduction="mean"``), summed ("sum") or per row ("none"),
    as ``torch.nn.functional.cross_entropy``. The picked logit is a gather (labels are checked on every call: a
    ``pt.IndexError`` for one outside ``[-C, C)``); the gradient is ``softmax(logits) - one_hot(labels)``."""
    logits, labels = _array(logits, "pt.cross_entropy"), _array(labels, "pt.cross_entropy")
    if reduction not in ("mean", "sum", "none"):
        raise ShapeError("pt.cross_entropy: reduction must be 'mean', 'sum' or 'none'", param="reduction",
                         expected="'mean', 'sum' or 'none'", got=reduction)  # fmt: skip
    if labels.shape != logits.shape[:-1]:
        raise ShapeError(f"pt.cross_entropy: labels have shape {labels.shape}, the logits {logits.shape}",
                         param="labels", expected=f"shape {logits.shape[:-1]}", got=labels.shape)  # fmt: skip
    c = logits.shape[-1]
    top = stop_gradient(logits.max(-1, keepdims=True))
    lse = unary("log", unary("exp", logits - top).sum(-1)) + views.reshape(top, logits.shape[:-1])
    # the value picked by a (bounds-checked) gather; the gradient through a dense one-hot product of the same value
    col = views.reshape(labels, (*labels.shape, 1))
    picked = views.reshape(views.take_along_axis(logits, col, -1), labels.shape)
    labels_mod = binary("mod", labels, c)  # -1 is the last class, as the gather reads it
    dense = (logits * one_hot(labels_mod, c, logits.dtype)).sum(-1)
    loss = lse - (stop_gradient(picked) + (dense - stop_gradient(dense)))
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


def _normalized_axes(x: Array, weight: Array | None) -> tuple[int, ...]:
    n = weight.ndim if weight is not None else 1
    if weight is not None and x.shape[x.ndim - n :] != weight.shape:
        raise ShapeError(
            f"the weight's shape {weight.shape} is not the last axes of x's shape {x.shape}",
            param="weight",
            expected=f"shape {x.shape[x.ndim - n :]}",
            got=weight.shape,
        )
    return tuple(range(x.ndim - n, x.ndim))


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Array:
    """Normalise over the last axes (as many as ``weight`` has, else the last): ``(x - mean) / sqrt(var + eps)
    * weight + bias`` with the biased variance, as ``torch.nn.functional.layer_norm``."""
    x = _array(x, "pt.layer_norm")
    w = _array(weight, "pt.layer_norm weight") if weight is not None else None
    axes = _normalized_axes(x, w)
    mean = x.mean(axes, keepdims=True)
    centred = x - mean
    y = centred * unary("rsqrt", (centred * centred).mean(axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if bias is not None:
        y = y + _array(bias, "pt.layer_norm bias")
    return y


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6) -> Array:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last axes (as many as ``weight`` has)."""
    x = _array(x, "pt.rms_norm")
    w = _array(weight, "pt.rms_norm weight") if weight is not None else None
    axes = _normalized_axes(x, w)
    y = x * unary("rsqrt", (x * x).mean(axes, keepdims=True) + eps)
    return y * w if w is not None else y


def gelu(x: Any, approximate: str = "none") -> Array:
    """GELU: ``0.5 x (1 + erf(x / sqrt 2))``, or with ``approximate="tanh"`` the tanh form."""
    x = _array(x, "pt.gelu")
    if approximate == "none":
        return 0.5 * x * (1.0 + unary("erf", x * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        return 0.5 * x * (1.0 + unary("tanh", math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))
    raise TracingError(f"pt.gelu: approximate must be 'none' or 'tanh', got {approximate!r}", user_loc())


def silu(x: Any) -> Array:
    """``x * sigmoid(x)``."""
    x = _array(x, "pt.silu")
    return x * unary("sigmoid", x)


def relu(x: Any) -> Array:
    """``maximum(x, 0)`` (NaN stays NaN)."""
    x = _array(x, "pt.relu")
    return binary("maximum", x, 0)


def transpose(x: Any, axes: Any = None) -> Array:
    return views.transpose(_array(x, "pt.transpose"), axes)


def reshape(x: Any, shape: Any) -> Array:
    return views.reshape(_array(x, "pt.reshape"), shape)


def concat(arrays: Sequence[Any], axis: int = 0) -> Array:
    """Join arrays along an existing axis (``np.concatenate``); the result is stored part by part."""
    parts = [_array(a, "pt.concat") for a in arrays]
    if not parts:
        raise ShapeError("pt.concat: no arrays given", param="arrays", expected="at least one array", got=arrays)
    nd = parts[0].ndim
    if nd == 0:
        raise ShapeError("pt.concat: 0-d arrays cannot be joined", param="arrays", expected="arrays of rank >= 1",
                         got=[p.shape for p in parts], fix="use pt.stack")  # fmt: skip
    ax = normalize_axes((axis,), nd, "pt.concat")[0]
    for k, p in enumerate(parts):
        if p.ndim != nd or any(a != b for d, (a, b) in enumerate(zip(p.shape, parts[0].shape)) if d != ax):
            raise ShapeError(
                f"pt.concat: array {k} has shape {p.shape}, array 0 has {parts[0].shape}",
                param=f"arrays[{k}]",
                expected=f"the same shape except along axis {ax}",
                got=p.shape,
            )
    if len(parts) == 1:
        return parts[0]
    dt = parts[0].dtype
    for p in parts[1:]:
        dt = _promote(dt, p.dtype)
    parts = [p if p.dtype == dt else cast(p, dt) for p in parts]
    shape = tuple(sum(p.shape[ax] for p in parts) if d == ax else n for d, n in enumerate(parts[0].shape))
    return Array("concat", tuple(parts), ax, shape, dt)


def stack(arrays: Sequence[Any], axis: int = 0) -> Array:
    """Join arrays of one shape along a new axis (``np.stack``)."""
    parts = [_array(a, "pt.stack") for a in arrays]
    if not parts:
        raise ShapeError("pt.stack: no arrays given", param="arrays", expected="at least one array", got=arrays)
    for k, p in enumerate(parts):
        if p.shape != parts[0].shape:
            raise ShapeError(f"pt.stack: array {k} has shape {p.shape}, array 0 has {parts[0].shape}",
                             param=f"arrays[{k}]", expected=str(parts[0].shape), got=p.shape)  # fmt: skip
    ax = normalize_axes((axis,), parts[0].ndim + 1, "pt.stack")[0]
    return concat([views.expand_dims(p, ax) for p in parts], axis=ax)


STRUCTURAL.update(matmul=matmul, arg_reduce=arg_reduce, scan=scan)  # Array's @, .argmax and .argmin


# -- arrays made from positions (NumPy's creation functions; outside a trace, NumPy's own) ----------------------
def _int_arg(fname: str, name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ShapeError(f"pt.{fname}: {name} must be a Python int (a size known when the function is traced)",
                         param=name, expected="an int", got=v)  # fmt: skip
    return int(v)


def arange(start: Any, stop: Any = None, step: Any = 1, *, dtype: Any = None) -> Any:
    """``np.arange``: ``start, start + step, ...`` below ``stop`` (``arange(n)``: ``0 .. n-1``). The bounds are Python
    numbers; the result is int64 when they are all ints, else float32 (pypto's default float), or ``dtype``."""
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ShapeError(f"pt.arange: {name} must be a Python number (the length is known when the function is "
                             "traced)", param=name, expected="an int or a float", got=v)  # fmt: skip
    if step == 0:
        raise ShapeError("pt.arange: step must not be 0", param="step", expected="a nonzero number", got=step)
    integral = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    dt = dtypes.as_dtype(dtype, what="pt.arange dtype") if dtype is not None else (
        dtypes.int64 if integral else dtypes.DEFAULT_FLOAT)  # fmt: skip
    n = max(0, math.ceil((stop - start) / step))
    if not in_trace():
        return np.arange(start, stop, step, dtype=dt.numpy)
    positions = views._iota(n, 0, 1)
    return cast(positions * step + start if (step != 1 or start != 0) else positions, dt)


def linspace(start: Any, stop: Any, num: Any = 50, endpoint: bool = True, *, dtype: Any = None) -> Any:
    """``np.linspace``: ``num`` evenly spaced numbers from ``start`` to ``stop`` (included with ``endpoint``), computed
    as NumPy does (``start + k * step`` in float64, the last one exactly ``stop``); float32 by default (pypto's
    default float), or ``dtype``. The bounds and ``num`` are Python numbers."""
    for name, v in (("start", start), ("stop", stop)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ShapeError(f"pt.linspace: {name} must be a Python number (the values are known when the function is "
                             "traced)", param=name, expected="an int or a float", got=v)  # fmt: skip
    num = _int_arg("linspace", "num", num)
    if num < 0:
        raise ShapeError("pt.linspace: num must be >= 0", param="num", expected="a count >= 0", got=num)
    dt = dtypes.as_dtype(dtype if dtype is not None else dtypes.DEFAULT_FLOAT, what="pt.linspace dtype")
    if not in_trace():
        return np.linspace(start, stop, num, endpoint=endpoint, dtype=dt.numpy)
    div = num - 1 if endpoint else num
    step = (float(stop) - float(start)) / div if div > 0 else 0.0
    values = cast(views._iota(num, 0, 1), dtypes.float64) * step + float(start)
    if endpoint and num > 1:  # the last value is stop itself, as NumPy makes it
        values = where(binary("eq", views._iota(num, 0, 1), num - 1), float(stop), values)
    return cast(values, dt)


def eye(n: Any, m: Any = None, k: Any = 0, *, dtype: Any = None) -> Any:
    """``np.eye``: ones on the ``k``-th diagonal of an ``n x m`` matrix, zeros elsewhere (float32 by default)."""
    n = _int_arg("eye", "n", n)
    m = n if m is None else _int_arg("eye", "m", m)
    k = _int_arg("eye", "k", k)
    dt = dtypes.as_dtype(dtype if dtype is not None else dtypes.DEFAULT_FLOAT, what="pt.eye dtype")
    if not in_trace():
        return np.eye(n, m, k, dtype=dt.numpy)
    return cast(binary("eq", views._iota(m, 1, 2), views._iota(n, 0, 2) + k), dt)


def _triangle(fname: str, x: Any, k: Any, keep: str) -> Any:
    k = _int_arg(fname, "k", k)
    if not in_trace() and not isinstance(x, Array):
        return (np.tril if keep == "le" else np.triu)(x, k)
    x = _array(x, f"pt.{fname}")
    if x.ndim < 2:
        raise ShapeError(f"pt.{fname}: expected an array of 2 or more dimensions", param="x",
                         expected="a matrix (or a stack of them)", got=x.shape)  # fmt: skip
    rows, cols = views._iota(x.shape[-2], 0, 2), views._iota(x.shape[-1], 1, 2)
    return where(binary(keep, cols, rows + k), x, 0)


def tril(x: Any, k: int = 0) -> Any:
    """``np.tril``: ``x`` with the elements above the ``k``-th diagonal zeroed (of each matrix of a stack)."""
    return _triangle("tril", x, k, "le")


def triu(x: Any, k: int = 0) -> Any:
    """``np.triu``: ``x`` with the elements below the ``k``-th diagonal zeroed (of each matrix of a stack)."""
    return _triangle("triu", x, k, "ge")


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Array:
    """``log(sum(exp(x)))`` along ``axis`` without overflow (``scipy.special.logsumexp``): the maximum taken out
    first; a row of -inf gives -inf, one with +inf gives +inf, NaN gives NaN."""
    x = _array(x, "pt.logsumexp")
    m = stop_gradient(x.max(axis, keepdims=True))
    shift = where(binary("lt", unary("abs", m), math.inf), m, 0)  # (an infinite maximum: shift by 0)
    total = unary("log", unary("exp", x - shift).sum(axis, keepdims=True)) + shift
    if keepdims:
        return total
    return views.reshape(total, reduce_shape(x.shape, axis))


def reduce_shape(shape: tuple, axis: Any) -> tuple:
    """``shape`` without the reduced ``axis`` (``None``: all)."""
    axes = normalize_axes(axis, len(shape), "pt.logsumexp")
    return tuple(s for k, s in enumerate(shape) if k not in axes)
