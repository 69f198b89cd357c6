"""Gathers and scatters in kernels against NumPy, torch and scipy.sparse, in one run.

    python benchmarks/indirect.py [part of a case's name]

The sizes of the indirect-indexing targets: an embedding lookup (``table[tok[t], d]``: 8192 tokens from a
32000 x 1024 float32 table), the same without the bounds check (``boundscheck=False``); cross-entropy over
8192 x 32000 logits, the loss alone and the loss with its gradient (one kernel: the row's logsumexp, the
label's logit picked by a gather, ``softmax - one_hot``); a histogram of 16M int32 values into 256 bins
(``counts[bins[i]] += 1``); an index-add of 1M rows of 32 float32 into 32768 rows
(``pt.scatter_add(dst[idx[r], d], src[r, d])``); an embedding gradient (64 x 512 tokens of 256 into 32k
rows); a sparse matrix-vector product, 1M x 1M with 10 nonzeros per row, in CSR (rows of equal length:
the CSR arrays viewed as 1M x 10 and gathered from ``x``) and as COO (a scatter-add into ``y``). The scatters
also run with ``@pt.kernel(deterministic=False)`` (atomic updates from every thread). Medians
of 9 calls after one warm-up (3 for the 1 GB cross-entropy cases), 2 threads; every result checked
against NumPy. The table gives each time and the speed relative to the others (``t_other / t_pypto``:
above 1, pypto is faster).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

V, D, B, S, N, C, K, R = pt.dims("V D B S N C K R")


def embed_kernel(check: bool):
    @pt.kernel(boundscheck=check)
    def embed(table: pt.Tensor[pt.float32, (V, D)], tok: pt.Tensor[pt.int64, (N,)],
              out: pt.Tensor[pt.float32, (N, D)]):  # fmt: skip
        t, d = pt.axis(0), pt.axis(1)
        out[t, d] = table[tok[t], d]

    return embed


@pt.kernel
def cross_entropy(
    x: pt.Tensor[pt.float32, (N, C)], label: pt.Tensor[pt.int64, (N,)], loss: pt.Tensor[pt.float32, (N,)]
):
    r, c = pt.axis(0), pt.axis(1)
    top = pt.reduce_max(x[r, c], axis=c)
    loss[r] = top + pt.log(pt.reduce_sum(pt.exp(x[r, c] - top), axis=c)) - x[r, label[r]]


@pt.kernel
def cross_entropy_grad(x: pt.Tensor[pt.float32, (N, C)], label: pt.Tensor[pt.int64, (N,)],
                       loss: pt.Tensor[pt.float32, (N,)], dx: pt.Tensor[pt.float32, (N, C)]):  # fmt: skip
    """The mean loss's gradient: (softmax - one_hot) / N, next to each row's loss."""
    r, c = pt.axis(0), pt.axis(1)
    top = pt.reduce_max(x[r, c], axis=c)
    lse = top + pt.log(pt.reduce_sum(pt.exp(x[r, c] - top), axis=c))
    loss[r] = lse - x[r, label[r]]
    dx[r, c] = (pt.exp(x[r, c] - lse) - pt.where(c == label[r], 1.0, 0.0)) / N


@pt.kernel
def histogram(bins: pt.Tensor[pt.int32, (N,)], counts: pt.Tensor[pt.int64, (K,)]):
    i = pt.axis(0)
    counts[bins[i]] += 1


@pt.kernel
def index_add(src: pt.Tensor[pt.float32, (R, D)], idx: pt.Tensor[pt.int64, (R,)],
              dst: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
    r, d = pt.axis(0), pt.axis(1)
    pt.scatter_add(dst[idx[r], d], src[r, d])


@pt.kernel
def embedding_grad(dout: pt.Tensor[pt.float32, (B, S, D)], tok: pt.Tensor[pt.int64, (B, S)],
                   dtable: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
    b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
    pt.scatter_add(dtable[tok[b, s], d], dout[b, s, d])


@pt.kernel
def spmv_rows(val: pt.Tensor[pt.float32, (R, K)], col: pt.Tensor[pt.int32, (R, K)], x: pt.Tensor[pt.float32, (N,)],
              y: pt.Tensor[pt.float32, (R,)]):  # fmt: skip
    """CSR with rows of equal length (the arrays viewed as rows x nonzeros per row)."""
    i, j = pt.axis(0), pt.axis(1)
    y[i] = pt.reduce_sum(val[i, j] * x[col[i, j]], axis=j)


@pt.kernel(deterministic=False)
def histogram_atomic(bins: pt.Tensor[pt.int32, (N,)], counts: pt.Tensor[pt.int64, (K,)]):
    i = pt.axis(0)
    counts[bins[i]] += 1


@pt.kernel(deterministic=False)
def index_add_atomic(src: pt.Tensor[pt.float32, (R, D)], idx: pt.Tensor[pt.int64, (R,)],
                     dst: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
    r, d = pt.axis(0), pt.axis(1)
    pt.scatter_add(dst[idx[r], d], src[r, d])


@pt.kernel(deterministic=False)
def spmv_coo_atomic(val: pt.Tensor[pt.float32, (K,)], row: pt.Tensor[pt.int32, (K,)], col: pt.Tensor[pt.int32, (K,)],
                    x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (R,)]):  # fmt: skip
    e = pt.axis(0)
    y[row[e]] += val[e] * x[col[e]]


@pt.kernel
def spmv_coo(val: pt.Tensor[pt.float32, (K,)], row: pt.Tensor[pt.int32, (K,)], col: pt.Tensor[pt.int32, (K,)],
             x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (R,)]):  # fmt: skip
    e = pt.axis(0)
    y[row[e]] += val[e] * x[col[e]]


def _np_ce(x, label):
    top = x.max(axis=1)
    return top + np.log(np.exp(x - top[:, None]).sum(axis=1)) - x[np.arange(len(x)), label]


def _np_ce_grad(x, label):
    top = x.max(axis=1, keepdims=True)
    e = np.exp(x - top)
    s = e.sum(axis=1, keepdims=True)
    loss = (top + np.log(s))[:, 0] - x[np.arange(len(x)), label]
    e /= s
    e[np.arange(len(x)), label] -= 1.0
    e /= len(x)
    return loss, e


def main() -> None:
    import scipy.sparse
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    table = rng.standard_normal((32000, 1024)).astype(np.float32)
    tok = rng.integers(0, 32000, 8192)
    logits = rng.standard_normal((8192, 32000)).astype(np.float32)
    label = rng.integers(0, 32000, 8192)
    bins = rng.integers(0, 256, 1 << 24).astype(np.int32)
    src, idx = rng.standard_normal((1 << 20, 32)).astype(np.float32), rng.integers(0, 32768, 1 << 20)
    dout, gtok = rng.standard_normal((64, 512, 256)).astype(np.float32), rng.integers(0, 1 << 15, (64, 512))
    n, per_row = 1 << 20, 10
    col = rng.integers(0, n, (n, per_row)).astype(np.int32)
    val = rng.standard_normal((n, per_row)).astype(np.float32)
    xv = rng.standard_normal(n).astype(np.float32)
    row = np.repeat(np.arange(n, dtype=np.int32), per_row)
    csr = scipy.sparse.csr_matrix((val.ravel(), col.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, n))
    t_csr = torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)),
                                    torch.from_numpy(csr.indices.astype(np.int64)), torch.from_numpy(csr.data),
                                    size=(n, n))  # fmt: skip
    tt = {name: torch.from_numpy(a) for name, a in
          (("table", table), ("tok", tok), ("logits", logits), ("label", label), ("bins", bins), ("src", src),
           ("idx", idx), ("dout", dout), ("gtok", gtok), ("x", xv))}  # fmt: skip

    out = np.empty((8192, 1024), np.float32)
    loss, dx = np.empty(8192, np.float32), np.empty_like(logits)
    counts, dst = np.zeros(256, np.int64), np.zeros((32768, 32), np.float32)
    dtable, y = np.zeros((1 << 15, 256), np.float32), np.empty(n, np.float32)

    def zeroed(a, fn):
        def run():
            a[...] = 0
            fn()
            return a

        return run

    def ours_ce_grad():
        cross_entropy_grad(logits, label, loss, dx)
        return np.concatenate([loss, dx[:4].ravel()])

    def np_ce_grad():
        lo, g = _np_ce_grad(logits, label)
        return np.concatenate([lo, g[:4].ravel()])

    def torch_ce_grad():
        t = tt["logits"].clone().requires_grad_(True)
        per = F.cross_entropy(t, tt["label"], reduction="none")
        per.mean().backward()
        return np.concatenate([per.detach().numpy(), t.grad[:4].numpy().ravel()])

    def np_add_at(shape, ix, v):
        def run():
            g = np.zeros(shape, np.float32)
            np.add.at(g, ix, v)
            return g

        return run

    def torch_index_add(shape, ix, v):
        return lambda: torch.zeros(shape).index_add_(0, ix.reshape(-1), v.reshape(-1, shape[1]))

    checked, unchecked = embed_kernel(True), embed_kernel(False)
    # (name, pypto, NumPy, torch, the third competitor (name, fn) or None, tolerance, calls)
    cases = [
        ("embedding lookup 8192 of 32000 x 1024", lambda: checked(table, tok, out), lambda: np.take(table, tok, 0),
         lambda: F.embedding(tt["tok"], tt["table"]), None, 0.0, 9),
        ("  the same, boundscheck=False", lambda: unchecked(table, tok, out), lambda: np.take(table, tok, 0),
         lambda: F.embedding(tt["tok"], tt["table"]), None, 0.0, 9),
        ("cross-entropy 8192 x 32000, loss", lambda: cross_entropy(logits, label, loss), lambda: _np_ce(logits, label),
         lambda: F.cross_entropy(tt["logits"], tt["label"], reduction="none"), None, 1e-4, 3),
        ("cross-entropy 8192 x 32000, loss and gradient", ours_ce_grad, np_ce_grad, torch_ce_grad, None, 1e-4, 3),
        ("histogram 16M int32 into 256 bins", zeroed(counts, lambda: histogram(bins, counts)),
         lambda: np.bincount(bins, minlength=256), lambda: torch.bincount(tt["bins"], minlength=256), None, 0.0, 9),
        ("  the same, deterministic=False (atomics)", zeroed(counts, lambda: histogram_atomic(bins, counts)),
         lambda: np.bincount(bins, minlength=256), lambda: torch.bincount(tt["bins"], minlength=256), None, 0.0, 9),
        ("index_add 1M rows of 32 into 32768", zeroed(dst, lambda: index_add(src, idx, dst)),
         np_add_at((32768, 32), idx, src), torch_index_add((32768, 32), tt["idx"], tt["src"]), None, 1e-4, 9),
        ("  the same, deterministic=False (atomics)", zeroed(dst, lambda: index_add_atomic(src, idx, dst)),
         np_add_at((32768, 32), idx, src), torch_index_add((32768, 32), tt["idx"], tt["src"]), None, 1e-4, 9),
        ("embedding gradient 64x512 of 256 into 32k", zeroed(dtable, lambda: embedding_grad(dout, gtok, dtable)),
         np_add_at((1 << 15, 256), gtok, dout), torch_index_add((1 << 15, 256), tt["gtok"], tt["dout"]), None,
         1e-4, 9),
        ("SpMV 1M x 1M, 10 per row (CSR rows)", lambda: (spmv_rows(val, col, xv, y), y)[1],
         lambda: (val * xv[col]).sum(axis=1), lambda: torch.mv(t_csr, tt["x"]), ("scipy", lambda: csr @ xv), 1e-4, 9),
        ("SpMV as COO (scatter-add)", zeroed(y, lambda: spmv_coo(val.ravel(), row, col.ravel(), xv, y)),
         lambda: (val * xv[col]).sum(axis=1), lambda: torch.mv(t_csr, tt["x"]), ("scipy", lambda: csr @ xv), 1e-4, 9),
        ("  the same, deterministic=False (atomics)",
         zeroed(y, lambda: spmv_coo_atomic(val.ravel(), row, col.ravel(), xv, y)),
         lambda: (val * xv[col]).sum(axis=1), lambda: torch.mv(t_csr, tt["x"]), ("scipy", lambda: csr @ xv), 1e-4, 9),
    ]  # fmt: skip
    print("| case | pypto | NumPy | torch eager | scipy.sparse | NumPy / pypto | torch / pypto | scipy / pypto |")
    print("|---|---|---|---|---|---|---|---|")
    only = sys.argv[1] if len(sys.argv) > 1 else ""  # a part of the names of the cases to run
    for name, ours, nfn, tfn, third, tol, calls in cases:
        if only not in name:
            continue
        got, want = np.asarray(ours()), np.asarray(nfn())
        assert np.allclose(got, want, rtol=tol, atol=tol), name
        assert np.allclose(np.asarray(tfn()), want, rtol=1e-4, atol=1e-4), name
        t, tn, tt_ = median_ms(ours, n=calls), median_ms(nfn, n=calls), median_ms(tfn, n=calls)
        ts = median_ms(third[1], n=calls) if third else None
        cols = [f"{t:.2f} ms", f"{tn:.2f} ms", f"{tt_:.2f} ms", f"{ts:.2f} ms" if ts else "-",
                f"{tn / t:.2f}x", f"{tt_ / t:.2f}x", f"{ts / t:.2f}x" if ts else "-"]  # fmt: skip
        print(f"| {name} | {' | '.join(cols)} |", flush=True)


if __name__ == "__main__":
    main()
