"""NumPy functions inside ``@pt.jit`` against NumPy and torch, in one run: searching, repeating, logaddexp, shifts.

    python benchmarks/numpy_functions.py

``np.searchsorted`` of 1M float32 values (random, and already sorted) into sorted arrays of 100, 2000 and
100000 elements (pypto: a vectorised count up to 128 elements, a search by blocks of about sqrt(n) beyond;
NumPy and torch: binary searches); ``np.repeat`` and ``np.tile`` of a 1000 x 1000 float32 array followed by a sum
along rows (pypto fuses the broadcast view into the reduction; NumPy writes the repeated array); ``np.logaddexp``
of two 4M float32 arrays; ``<<`` and ``>>`` of 4M int32 values by per-element counts; ``np.nanmean`` and
``np.median`` along the rows of 1000 x 1000 float64 arrays (torch: ``nanmean``, ``quantile``); ``np.convolve`` of
1M float64 values with 16 and 101 taps (torch: ``conv1d``); ``np.interp`` of 1M values on 1000 points. Medians of 9 calls after a
warm-up, 2 threads; every pypto result checked against NumPy. Speed columns are ``t_other / t_pypto`` (above
1: pypto faster).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

try:
    import torch  # noqa: E402

    torch.set_num_threads(2)
except ImportError:  # torch's column is left empty
    torch = None


def cases(rng: np.random.Generator) -> list[tuple]:
    """(name, pypto function, NumPy function, torch function or None, arguments)."""
    out = []
    values = rng.standard_normal(1_000_000).astype(np.float32)
    for n in (100, 2000, 100_000):
        a = np.sort(rng.standard_normal(n)).astype(np.float32)
        for label, v in (("random", values), ("sorted", np.sort(values))):
            out.append((
                f"searchsorted 1M {label} values into {n}",
                pt.jit(lambda a, v: np.searchsorted(a, v)),
                np.searchsorted,
                (lambda a, v: torch.searchsorted(a, v)) if torch else None,
                (a, v),
            ))  # fmt: skip
    x = rng.standard_normal((1000, 1000)).astype(np.float32)
    out.append(("repeat 1000 x 1000 x 4 along rows, then row sums", pt.jit(lambda x: np.repeat(x, 4, 1).sum(1)),
                lambda x: np.repeat(x, 4, 1).sum(1),
                (lambda x: torch.repeat_interleave(x, 4, 1).sum(1)) if torch else None, (x,)))  # fmt: skip
    out.append(("tile 1000 x 1000 by (2, 3), then row sums", pt.jit(lambda x: np.tile(x, (2, 3)).sum(1)),
                lambda x: np.tile(x, (2, 3)).sum(1), (lambda x: x.tile((2, 3)).sum(1)) if torch else None, (x,)))  # fmt: skip
    p, q = rng.standard_normal(4_000_000).astype(np.float32), rng.standard_normal(4_000_000).astype(np.float32)
    out.append(("logaddexp 4M float32", pt.jit(lambda p, q: np.logaddexp(p, q)), np.logaddexp,
                torch.logaddexp if torch else None, (p, q)))  # fmt: skip
    i = rng.integers(-(2**30), 2**30, 4_000_000).astype(np.int32)
    c = rng.integers(0, 31, 4_000_000).astype(np.int32)
    out.append(("i << c and i >> c, 4M int32", pt.jit(lambda i, c: (i << c) ^ (i >> c)), lambda i, c: (i << c) ^ (i >> c),
                (lambda i, c: torch.bitwise_xor(i << c, i >> c)) if torch else None, (i, c)))  # fmt: skip
    y = rng.standard_normal((1000, 1000))
    y[::7, ::3] = np.nan
    out.append(("nanmean along rows, 1000 x 1000 float64 with NaN", pt.jit(lambda y: np.nanmean(y, axis=1)),
                lambda y: np.nanmean(y, axis=1), (lambda y: torch.nanmean(y, 1)) if torch else None, (y,)))  # fmt: skip
    z = rng.standard_normal((1000, 1000))
    out.append(("median along rows, 1000 x 1000 float64", pt.jit(lambda z: np.median(z, axis=1)),
                lambda z: np.median(z, axis=1), (lambda z: torch.quantile(z, 0.5, dim=1)) if torch else None, (z,)))  # fmt: skip
    signal = rng.standard_normal(1_000_000)
    for taps in (16, 101):
        k = rng.standard_normal(taps)
        out.append((f"convolve 1M float64 with {taps} taps, 'same'", pt.jit(lambda s, k: np.convolve(s, k, "same")),
                    lambda s, k: np.convolve(s, k, "same"),
                    (lambda s, k: torch.nn.functional.conv1d(s.reshape(1, 1, -1), k.flip(0).reshape(1, 1, -1),
                                                             padding="same").reshape(-1)) if torch else None,
                    (signal, k)))  # fmt: skip
    grid = np.sort(rng.uniform(-4, 4, 1000))
    out.append(("interp 1M values on 1000 points", pt.jit(lambda v, g: np.interp(v, g, np.sin(g))),
                lambda v, g: np.interp(v, g, np.sin(g)), None, (signal, grid)))  # fmt: skip
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for name, fn, ref, tfn, args in cases(rng):
        got, want = fn(*args), ref(*args)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-4), name
        t_pt, t_np = median_ms(fn, *args), median_ms(ref, *args)
        t_torch = None
        if tfn is not None:
            targs = [torch.from_numpy(a) for a in args]
            t_torch = median_ms(tfn, *targs)
        rows.append((name, t_pt, t_np, t_torch))
    print("| case | pypto | NumPy | torch | NumPy / pypto | torch / pypto |")
    print("|---|---|---|---|---|---|")
    for name, t_pt, t_np, t_torch in rows:
        torch_cols = f"{t_torch:.2f} ms | {t_torch / t_pt:.2f}x" if t_torch is not None else "- | -"
        tc, tr = torch_cols.split(" | ")
        print(f"| {name} | {t_pt:.2f} ms | {t_np:.2f} ms | {tc} | {t_np / t_pt:.2f}x | {tr} |")


if __name__ == "__main__":
    main()
