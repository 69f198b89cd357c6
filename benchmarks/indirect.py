"""Gathers and scatters in kernels against NumPy and torch, in one run.

    python benchmarks/indirect.py

An embedding lookup (``table[tok[b, s], d]``: 32k rows of 256 float32, 64 x 512 tokens), the same
without the bounds check (``boundscheck=False``), a row pick for cross-entropy (``x[r, label[r]]`` next
to a row's logsumexp, 8192 x 1024), a histogram (``counts[bins[i]] += 1`` over 4M values into 1024
bins) and an embedding gradient (``pt.scatter_add(dtable[tok[b, s], d], dout[b, s, d])``). Medians
of 11 calls after one warm-up, 2 threads; every pypto result checked against NumPy. The table gives
each time and the speed relative to NumPy and torch (``t_other / t_pypto``: above 1, pypto is faster).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

V, D, B, S, N, C, K = pt.dims("V D B S N C K")


def embed_kernel(check: bool):
    @pt.kernel(boundscheck=check)
    def embed(table: pt.Tensor[pt.float32, (V, D)], tok: pt.Tensor[pt.int64, (B, S)],
              out: pt.Tensor[pt.float32, (B, S, D)]):  # fmt: skip
        b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
        out[b, s, d] = table[tok[b, s], d]

    return embed


@pt.kernel
def cross_entropy(
    x: pt.Tensor[pt.float32, (N, C)], label: pt.Tensor[pt.int64, (N,)], loss: pt.Tensor[pt.float32, (N,)]
):
    r, c = pt.axis(0), pt.axis(1)
    top = pt.reduce_max(x[r, c], axis=c)
    loss[r] = top + pt.log(pt.reduce_sum(pt.exp(x[r, c] - top), axis=c)) - x[r, label[r]]


@pt.kernel
def histogram(bins: pt.Tensor[pt.int64, (N,)], counts: pt.Tensor[pt.int64, (K,)]):
    i = pt.axis(0)
    counts[bins[i]] += 1


@pt.kernel
def embedding_grad(dout: pt.Tensor[pt.float32, (B, S, D)], tok: pt.Tensor[pt.int64, (B, S)],
                   dtable: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
    b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
    pt.scatter_add(dtable[tok[b, s], d], dout[b, s, d])


def _np_ce(x, label):
    top = x.max(axis=1)
    return top + np.log(np.exp(x - top[:, None]).sum(axis=1)) - x[np.arange(len(x)), label]


def main() -> None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    table = rng.standard_normal((1 << 15, 256)).astype(np.float32)
    tok = rng.integers(0, 1 << 15, (64, 512))
    x = rng.standard_normal((8192, 1024)).astype(np.float32)
    label = rng.integers(0, 1024, 8192)
    bins = rng.integers(0, 1024, 1 << 22)
    dout = rng.standard_normal((64, 512, 256)).astype(np.float32)
    t_table, t_tok, t_x, t_label = (torch.from_numpy(a) for a in (table, tok, x, label))
    t_bins, t_dout = torch.from_numpy(bins), torch.from_numpy(dout)
    out = np.empty((64, 512, 256), np.float32)
    loss = np.empty(8192, np.float32)
    counts = np.zeros(1024, np.int64)
    dtable = np.zeros_like(table)

    def ours_hist():
        counts[:] = 0
        histogram(bins, counts)
        return counts

    def ours_grad():
        dtable[:] = 0
        embedding_grad(dout, tok, dtable)
        return dtable

    def np_grad():
        g = np.zeros_like(table)
        np.add.at(g, tok, dout)
        return g

    def torch_grad():
        g = torch.zeros_like(t_table)
        return g.index_add_(0, t_tok.reshape(-1), t_dout.reshape(-1, 256))

    checked, unchecked = embed_kernel(True), embed_kernel(False)
    cases = [
        ("embedding lookup 64x512 of 32k x 256", lambda: checked(table, tok, out), lambda: table[tok],
         lambda: F.embedding(t_tok, t_table), 0.0),
        ("  the same, boundscheck=False", lambda: unchecked(table, tok, out), lambda: table[tok],
         lambda: F.embedding(t_tok, t_table), 0.0),
        ("cross-entropy rows 8192 x 1024", lambda: cross_entropy(x, label, loss), lambda: _np_ce(x, label),
         lambda: F.cross_entropy(t_x, t_label, reduction="none"), 1e-5),
        ("histogram 4M into 1024 bins", ours_hist, lambda: np.bincount(bins, minlength=1024),
         lambda: torch.bincount(t_bins, minlength=1024), 0.0),
        ("embedding gradient (scatter-add)", ours_grad, np_grad, torch_grad, 1e-4),
    ]  # fmt: skip
    print("| case | pypto | NumPy | torch eager | NumPy / pypto | torch / pypto |\n|---|---|---|---|---|---|")
    for name, ours, nfn, tfn, tol in cases:
        got, want = np.asarray(ours()), np.asarray(nfn())
        assert np.allclose(got, want, rtol=tol, atol=tol), name
        assert np.allclose(np.asarray(tfn()), want, rtol=1e-4, atol=1e-4), name
        t, tn, tt = median_ms(ours, n=11), median_ms(nfn, n=11), median_ms(tfn, n=11)
        print(f"| {name} | {t:.2f} ms | {tn:.2f} ms | {tt:.2f} ms | {tn / t:.2f}x | {tt / t:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
