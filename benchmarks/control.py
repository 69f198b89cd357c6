"""Control flow and ordering in kernels against NumPy and torch, in one run.

    python benchmarks/control.py [part of a case's name]

``argmax`` over the rows of 4096 x 32000 float32 logits (greedy decoding: one index per row), in a kernel
(``pt.argmax(x[r, c], axis=c)``) and in ``@pt.jit`` (``x.argmax(axis=1)``); a piecewise function of 16M float32
written with ``if``/``elif``/``else`` (rewritten into selects) next to the same function written with
``pt.where``, NumPy's ``np.where`` / ``np.select`` and torch's ``torch.where``; ``cumsum`` of 16M float32 (``@pt.jit``,
along the flattened array) and of 4096 x 4096 float32 along rows and along columns (kernels) against
``np.cumsum`` and ``torch.cumsum``; sorting the rows of 1024 x 4096 float32 (``pt.sort``, ``pt.argsort``) against ``np.sort`` /
``np.argsort(kind="stable")`` and ``torch.sort``, and the 50 largest of each row of 64 x 32000 logits
(``pt.topk``: LLM sampling) against ``np.argpartition`` + ``np.sort`` and ``torch.topk``;
``python benchmarks/control.py recurrence``: a first-order recurrence
``h = 0.9 * h + x[r, t]`` over 4096 rows x 4096 steps (a ``for t in pt.range(N)`` loop, and
``pt.associative_scan``), and the Mandelbrot set on 1000 x 1000 points with at most 100 iterations (a ``while``
on each point's condition) and Newton's square roots of 4M float64 (a ``break`` once converged), against Numba (``@njit(parallel=True)``, a ``prange`` over rows, each row's loop in
order; the Mandelbrot loop breaking per point) and NumPy (a loop over the steps, each step one vector operation
over the rows or over all points). Medians of 9 calls after one
warm-up, 2 threads; every result checked against NumPy. The table gives each time and the speed relative to
the others (``t_other / t_pypto``: above 1, pypto is faster).
"""

from __future__ import annotations

import os
import sys

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

M, N = pt.dims("M N")


@pt.kernel
def row_argmax(x: pt.Tensor[pt.float32, (M, N)], out: pt.Tensor[pt.int64, (M,)]):
    r, c = pt.axis(0), pt.axis(1)
    out[r] = pt.argmax(x[r, c], axis=c)


@pt.kernel
def piecewise_if(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
    i = pt.axis(0)
    v = x[i]
    if v <= -3.0:
        out = 0.0
    elif v >= 3.0:
        out = v
    else:
        out = v * (v + 3.0) / 6.0
    y[i] = out


@pt.kernel
def piecewise_where(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
    i = pt.axis(0)
    v = x[i]
    y[i] = pt.where(v <= -3.0, 0.0, pt.where(v >= 3.0, v, v * (v + 3.0) / 6.0))


@pt.kernel
def row_cumsum(x: pt.Tensor[pt.float32, (M, N)], y: pt.Tensor[pt.float32, (M, N)]):
    r, c = pt.axis(0), pt.axis(1)
    y[r, c] = pt.cumsum(x[r, c], axis=c)


@pt.kernel
def column_cumsum(x: pt.Tensor[pt.float32, (M, N)], y: pt.Tensor[pt.float32, (M, N)]):
    r, c = pt.axis(0), pt.axis(1)
    y[r, c] = pt.cumsum(x[r, c], axis=r)


@pt.kernel
def decayed(x: pt.Tensor[pt.float32, (M, N)], h: pt.Tensor[pt.float32, (M, N)]):
    r, t = pt.axis(0), pt.axis(1)
    h[r, t] = pt.associative_scan(lambda prev, v: 0.9 * prev + v, x[r, t], axis=t)


@pt.kernel
def decayed_loop(x: pt.Tensor[pt.float32, (M, N)], h: pt.Tensor[pt.float32, (M, N)]):
    r = pt.axis(0)
    acc = 0.0
    for t in pt.range(N):
        acc = 0.9 * acc + x[r, t]
        h[r, t] = acc


@pt.kernel
def decayed_loop_last(x: pt.Tensor[pt.float32, (M, N)], h: pt.Tensor[pt.float32, (M, N)],
                      last: pt.Tensor[pt.float32, (M,)]):  # fmt: skip
    """The loop storing each step's value and its variable after the last step (one nest runs the steps)."""
    r = pt.axis(0)
    acc = 0.0
    for t in pt.range(N):
        acc = 0.9 * acc + x[r, t]
        h[r, t] = acc
    last[r] = acc


LIMIT = 100


@pt.kernel
def mandelbrot(cr: pt.Tensor[pt.float64, (N,)], ci: pt.Tensor[pt.float64, (M,)], out: pt.Tensor[pt.int32, (M, N)]):
    i, j = pt.axis(0), pt.axis(1)
    zr, zi, n = 0.0, 0.0, 0
    while zr * zr + zi * zi <= 4.0 and n < LIMIT:
        zr, zi = zr * zr - zi * zi + cr[j], 2.0 * zr * zi + ci[i]
        n += 1
    out[i, j] = n


@pt.kernel
def newton_sqrt(a: pt.Tensor[pt.float64, (N,)], root: pt.Tensor[pt.float64, (N,)]):
    """Newton's iterations for the square root, each point until its step is below its tolerance (a break)."""
    i = pt.axis(0)
    x = 1.0
    for _ in pt.range(60):
        dx = (x * x - a[i]) / (2.0 * x)
        x = x - dx
        if pt.abs(dx) < 1e-12 * x:
            break
    root[i] = x


def recurrence() -> None:
    """The recurrence table: pypto, Numba and NumPy on the same input, every result checked against Numba."""
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def numba_decayed(x, h):
        for r in numba.prange(x.shape[0]):
            acc = x[r, 0]
            h[r, 0] = acc
            for t in range(1, x.shape[1]):
                acc = np.float32(0.9) * acc + x[r, t]
                h[r, t] = acc

    def numpy_decayed(x, h):
        h[:, 0] = x[:, 0]
        for t in range(1, x.shape[1]):
            np.add(np.float32(0.9) * h[:, t - 1], x[:, t], out=h[:, t])

    @numba.njit(parallel=True, fastmath=False)
    def numba_mandelbrot(cr, ci, out):
        for a in numba.prange(ci.shape[0]):
            for b in range(cr.shape[0]):
                zr, zi, n = 0.0, 0.0, 0
                while zr * zr + zi * zi <= 4.0 and n < LIMIT:
                    zr, zi = zr * zr - zi * zi + cr[b], 2.0 * zr * zi + ci[a]
                    n += 1
                out[a, b] = n

    def numpy_mandelbrot(cr, ci, out):  # every point at once, LIMIT vector steps (the usual NumPy way)
        c = cr[None, :] + 1j * ci[:, None]
        z = np.zeros_like(c)
        out[:] = 0
        for _ in range(LIMIT):
            go = z.real * z.real + z.imag * z.imag <= 4.0
            z = np.where(go, z * z + c, z)
            out += go

    @numba.njit(parallel=True, fastmath=False)
    def numba_newton(a, root):
        for i in numba.prange(a.shape[0]):
            x = 1.0
            for _ in range(60):
                dx = (x * x - a[i]) / (2.0 * x)
                x = x - dx
                if abs(dx) < 1e-12 * x:
                    break
            root[i] = x

    def numpy_newton(a, root):  # every point at once, steps until every point has converged
        x = np.ones_like(a)
        go = np.ones(a.shape, bool)
        for _ in range(60):
            dx = (x * x - a) / (2.0 * x)
            x = np.where(go, x - dx, x)
            go &= ~(np.abs(dx) < 1e-12 * x)
            if not go.any():
                break
        root[:] = x

    numba.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    x = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    h, hl, hn, hp = (np.empty_like(x) for _ in range(4))
    numba_decayed(x, hn)  # compiled on the first call
    decayed(x, h)
    decayed_loop(x, hl)
    numpy_decayed(x, hp)
    hll, last = np.empty_like(x), np.empty(x.shape[0], np.float32)
    decayed_loop_last(x, hll, last)
    for got in (h, hl, hp, hll):
        assert np.allclose(got, hn, rtol=1e-5, atol=1e-5)
    assert np.allclose(last, hn[:, -1], rtol=1e-5, atol=1e-5)
    cr, ci = np.linspace(-2.0, 0.6, 1000), np.linspace(-1.3, 1.3, 1000)
    m, mn, mp = (np.empty((1000, 1000), np.int32) for _ in range(3))
    numba_mandelbrot(cr, ci, mn)
    mandelbrot(cr, ci, m)
    numpy_mandelbrot(cr, ci, mp)
    assert (m == mn).all() and (mp == mn).all()
    a = np.random.default_rng(1).uniform(1e-3, 1e6, 1 << 22)
    r, rn, rp = (np.empty_like(a) for _ in range(3))
    numba_newton(a, rn)
    newton_sqrt(a, r)
    numpy_newton(a, rp)
    assert np.allclose(r, rn, rtol=1e-14) and np.allclose(rp, rn, rtol=1e-14)
    print("| case | pypto | Numba parallel | NumPy | Numba / pypto | NumPy / pypto |")
    print("|---|---|---|---|---|---|")
    rows = [
        ("h = 0.9 h + x, 4096 rows x 4096 steps, for t in pt.range", lambda: decayed_loop(x, hl),
         lambda: numba_decayed(x, hn), lambda: numpy_decayed(x, hp)),
        ("h = 0.9 h + x, 4096 rows x 4096 steps, pt.associative_scan", lambda: decayed(x, h),
         lambda: numba_decayed(x, hn), lambda: numpy_decayed(x, hp)),
        ("the same loop storing h and its last value", lambda: decayed_loop_last(x, hll, last),
         lambda: numba_decayed(x, hn), lambda: numpy_decayed(x, hp)),
        (f"Mandelbrot 1000 x 1000, {LIMIT} iterations, while", lambda: mandelbrot(cr, ci, m),
         lambda: numba_mandelbrot(cr, ci, mn), lambda: numpy_mandelbrot(cr, ci, mp)),
        ("Newton square roots of 4M float64, at most 60 steps, break", lambda: newton_sqrt(a, r),
         lambda: numba_newton(a, rn), lambda: numpy_newton(a, rp)),
    ]  # fmt: skip
    for name, ours, nb, npy in rows:
        t, tn, tp = median_ms(ours), median_ms(nb), median_ms(npy)
        print(f"| {name} | {t:.2f} ms | {tn:.2f} ms | {tp:.2f} ms | {tn / t:.2f}x | {tp / t:.2f}x |", flush=True)


def main() -> None:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4096, 32000)).astype(np.float32)
    xs = rng.uniform(-5, 5, 1 << 24).astype(np.float32)
    tl, tx = torch.from_numpy(logits), torch.from_numpy(xs)
    idx, y = np.empty(4096, np.int64), np.empty_like(xs)
    jit_argmax = pt.jit(lambda x: x.argmax(axis=1))
    jit_cumsum = pt.jit(lambda x: pt.cumsum(x))
    sq = rng.standard_normal((4096, 4096)).astype(np.float32)
    tsq, ysq = torch.from_numpy(sq), np.empty_like(sq)
    rows, vocab = rng.standard_normal((1024, 4096)).astype(np.float32), logits[:64]
    trows, tvocab = torch.from_numpy(rows), torch.from_numpy(vocab)
    jit_sort, jit_argsort = pt.jit(lambda x: pt.sort(x, axis=1)), pt.jit(lambda x: pt.argsort(x, axis=1))
    jit_topk = pt.jit(lambda x: pt.topk(x, 50)[0])

    def np_topk(x):  # NumPy's fastest way: a partition, then the 50 sorted
        part = np.take_along_axis(x, np.argpartition(x, -50, axis=1)[:, -50:], 1)
        return np.sort(part, axis=1)[:, ::-1]

    def np_piecewise():
        return np.where(xs <= -3, 0, np.where(xs >= 3, xs, xs * (xs + 3) / 6)).astype(np.float32)

    def torch_piecewise():
        return torch.where(tx <= -3, 0.0, torch.where(tx >= 3, tx, tx * (tx + 3) / 6))

    # (name, pypto, NumPy, torch, tolerance)
    cases = [
        ("argmax rows of 4096 x 32000 (kernel)", lambda: (row_argmax(logits, idx), idx)[1],
         lambda: logits.argmax(axis=1), lambda: tl.argmax(dim=1), 0.0),
        ("argmax rows of 4096 x 32000 (pt.jit)", lambda: jit_argmax(logits), lambda: logits.argmax(axis=1),
         lambda: tl.argmax(dim=1), 0.0),
        ("piecewise 16M, if/elif/else", lambda: (piecewise_if(xs, y), y)[1], np_piecewise, torch_piecewise, 1e-6),
        ("piecewise 16M, pt.where", lambda: (piecewise_where(xs, y), y)[1], np_piecewise, torch_piecewise, 1e-6),
        ("cumsum 16M (pt.jit)", lambda: jit_cumsum(xs), lambda: np.cumsum(xs), lambda: torch.cumsum(tx, 0), 1e-3),
        ("cumsum 16M as one row of a kernel (not split)", lambda: (row_cumsum(xs.reshape(1, -1), y.reshape(1, -1)), y)[1],
         lambda: np.cumsum(xs), lambda: torch.cumsum(tx, 0), 1e-3),
        ("cumsum rows of 4096 x 4096 (kernel)", lambda: (row_cumsum(sq, ysq), ysq)[1], lambda: np.cumsum(sq, 1),
         lambda: torch.cumsum(tsq, 1), 1e-3),
        ("cumsum columns of 4096 x 4096 (kernel)", lambda: (column_cumsum(sq, ysq), ysq)[1],
         lambda: np.cumsum(sq, 0), lambda: torch.cumsum(tsq, 0), 1e-3),
        ("sort rows of 1024 x 4096 (pt.jit)", lambda: jit_sort(rows), lambda: np.sort(rows, axis=1),
         lambda: torch.sort(trows, dim=1).values, 0.0),
        ("argsort rows of 1024 x 4096 (pt.jit)", lambda: jit_argsort(rows), lambda: np.argsort(rows, axis=1, kind="stable"),
         lambda: torch.sort(trows, dim=1, stable=True).indices, 0.0),
        ("topk 50 of rows of 64 x 32000 (pt.jit)", lambda: jit_topk(vocab), lambda: np_topk(vocab),
         lambda: torch.topk(tvocab, 50).values, 0.0),
    ]  # fmt: skip
    print("| case | pypto | NumPy | torch eager | NumPy / pypto | torch / pypto |")
    print("|---|---|---|---|---|---|")
    only = sys.argv[1] if len(sys.argv) > 1 else ""  # a part of the names of the cases to run
    for name, ours, nfn, tfn, tol in cases:
        if only not in name:
            continue
        got, want = np.asarray(ours()), np.asarray(nfn())
        assert np.allclose(got, want, rtol=tol, atol=tol), name
        scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0  # (torch sums in another order)
        assert np.allclose(np.asarray(tfn()), want, rtol=max(tol, 1e-5), atol=max(tol, 1e-5) * scale), name
        t, tn, tt_ = median_ms(ours), median_ms(nfn), median_ms(tfn)
        cols = [f"{t:.2f} ms", f"{tn:.2f} ms", f"{tt_:.2f} ms", f"{tn / t:.2f}x", f"{tt_ / t:.2f}x"]
        print(f"| {name} | {' | '.join(cols)} |", flush=True)


if __name__ == "__main__":
    recurrence() if sys.argv[1:] == ["recurrence"] else main()
