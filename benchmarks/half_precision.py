"""float16 and bfloat16 against float32, and against torch's 16-bit CPU kernels, in one run.

    python benchmarks/half_precision.py

Softmax and layer norm over the rows of a 4096 x 4096 array, gelu (erf form) of 4096 x 4096 values and
the matrix product 1024^3 and 2048^3, each in float32, float16 and bfloat16 with pypto (computed in
float32, stored in 16 bits: the ``half_compute`` pass) and torch eager on the same inputs. Medians of 11
calls after one warm-up, 2 threads; every pypto result checked against the float32 result within the
type's rounding. The table gives each time and the speed of the 16-bit run relative to pypto's float32 run
(``f32 / t``: above 1 is faster) and to torch's 16-bit run.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

import numpy as np  # noqa: E402
from linalg_shapes import median_ms  # noqa: E402  (this folder's scripts share their timing loop)

import pypto as pt  # noqa: E402

EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def cases(rng: np.random.Generator, torch) -> list:  # noqa: ANN001
    F = torch.nn.functional  # noqa: N806
    x = rng.standard_normal((4096, 4096)).astype(np.float32)
    w, b = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4096).astype(np.float32)
    m1 = [(rng.standard_normal((1024, 1024)) / 32).astype(np.float32) for _ in range(2)]
    m2 = [(rng.standard_normal((2048, 2048)) / 45).astype(np.float32) for _ in range(2)]
    return [
        ("softmax 4096^2", lambda x: pt.softmax(x, dim=-1), lambda x: F.softmax(x, -1), (x,)),
        ("layer norm 4096^2", lambda x, w, b: pt.layer_norm(x, w, b, 1e-5),
         lambda x, w, b: F.layer_norm(x, (4096,), w, b, 1e-5), (x, w, b)),
        ("gelu 4096^2", lambda x: pt.gelu(x), lambda x: F.gelu(x), (x,)),
        ("matmul 1024^3", lambda a, b: a @ b, lambda a, b: a @ b, tuple(m1)),
        ("matmul 2048^3", lambda a, b: a @ b, lambda a, b: a @ b, tuple(m2)),
    ]  # fmt: skip


def main() -> None:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    print("| case | dtype | pypto | torch eager | pypto f32 / pypto | torch / pypto |\n|---|---|---|---|---|---|")
    for name, fn, tfn, args in cases(rng, torch):
        f32 = 0.0
        for dt in ("float32", "float16", "bfloat16"):
            xs = [a.astype(getattr(pt, dt).numpy) for a in args]
            ours = pt.jit(fn)
            got = ours(*xs)
            want = pt.jit(fn)(*[x.astype(np.float32) for x in xs])  # the same inputs, computed in float32
            err = float(np.max(np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1.0)))
            assert err <= 2 * EPS[dt], (name, dt, err)
            t = median_ms(ours, *xs, n=11)
            ts = [torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if dt == "bfloat16" else torch.from_numpy(x)
                  for x in xs]  # fmt: skip
            tt = median_ms(tfn, *ts, n=11)
            f32 = t if dt == "float32" else f32
            print(f"| {name} | {dt} | {t:.2f} ms | {tt:.2f} ms | {f32 / t:.2f}x | {tt / t:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
