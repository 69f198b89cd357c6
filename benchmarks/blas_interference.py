"""How a pypto call is slowed by NumPy calls made just before it (OpenBLAS's worker threads).

    python benchmarks/blas_interference.py [--threads 2]

Times ``pt.silu(a) @ w`` (256 x 512 @ 512 x 1024, float32) three ways in one process: fresh, right after
five NumPy calls of the same computation, and after a one-second pause; then the same in a child process
with ``OMP_WAIT_POLICY=PASSIVE`` (what ``benchmarks/bench.py`` sets so that several OpenMP runtimes can
take turns). Medians of 41 calls.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def measure() -> None:
    import numpy as np

    import pypto as pt

    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 1024)) * 0.05).astype(np.float32)
    f = pt.jit(lambda a, w: pt.silu(a) @ w)
    f(a, w)

    def numpy_silu_matmul():
        return (a / (1 + np.exp(-a))) @ w

    def median_ms() -> float:
        times = []
        for _ in range(41):
            t = time.perf_counter()
            f(a, w)
            times.append(time.perf_counter() - t)
        return float(np.median(times) * 1e3)

    fresh = median_ms()
    for _ in range(5):
        numpy_silu_matmul()
    after = median_ms()
    time.sleep(1.0)
    rested = median_ms()
    policy = os.environ.get("OMP_WAIT_POLICY", "(default)")
    print(
        f"OMP_WAIT_POLICY={policy:10} fresh {fresh:6.2f} ms   after NumPy {after:6.2f} ms   after 1 s {rested:6.2f} ms"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        measure()
        return 0
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    for policy in (None, "PASSIVE"):
        child = dict(env)
        child.pop("OMP_WAIT_POLICY", None)
        if policy:
            child["OMP_WAIT_POLICY"] = policy
        subprocess.run([sys.executable, __file__, "--child"], env=child, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
