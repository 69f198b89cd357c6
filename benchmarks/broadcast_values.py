"""Functions of a broadcast row vector: computed once per value, not once per row (the ``hoist_broadcasts`` pass).

    python benchmarks/broadcast_values.py

``pt.tanh(pt.exp(b) * 0.5 + 1)[None, :] * w`` on a 4096 x 4096 float32 ``w`` (the function of ``b`` computed
for every row unless the compiler stores it first), next to the same with the vector broadcast down the
columns (``[:, None]``: the C compiler lifts it out of the inner loop itself) and the plain product
``b[None, :] * w``; NumPy and torch eager on the same inputs. Medians of 11 calls after one warm-up, 2
threads; every result checked against NumPy.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(0)
    b = rng.standard_normal(4096).astype(np.float32)
    w = rng.standard_normal((4096, 4096)).astype(np.float32)
    try:
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        tb, tw = torch.from_numpy(b), torch.from_numpy(w)
    except ImportError:
        torch = None
    cases = [
        ("f(b)[None, :] * w", lambda m, v: m.tanh(m.exp(v) * 0.5 + 1)[None, :]),
        ("f(b)[:, None] * w", lambda m, v: m.tanh(m.exp(v) * 0.5 + 1)[:, None]),
        ("b[None, :] * w", lambda m, v: v[None, :]),
    ]
    print("| float32, 4096 x 4096 | pypto | NumPy | torch eager | NumPy / pypto |\n|---|---|---|---|---|")
    for name, body in cases:
        ours = pt.jit(lambda v, x, body=body: body(pt, v) * x)
        want = body(np, b) * w
        np.testing.assert_allclose(ours(b, w), want, rtol=2e-5, atol=1e-6)
        tp, tn = median_ms(ours, b, w, n=11), median_ms(lambda v, x, body=body: body(np, v) * x, b, w, n=11)
        tt = median_ms(lambda v, x, body=body: body(torch, v) * x, tb, tw, n=11) if torch is not None else float("nan")
        print(f"| {name} | {tp:.2f} ms | {tn:.2f} ms | {tt:.2f} ms | {tn / tp:.2f}x |")


if __name__ == "__main__":
    main()
