"""Accuracy of float32 exp, tanh and erf on each backend, in ulp, over a sweep of float32 inputs.

    python benchmarks/vmath_accuracy.py [--stride 61] [--backends openmp,tbb,opencl,numba,reference]

Every ``--stride``-th finite float32 bit pattern of both signs (70 million values at 61) and the edge values of
``pypto.testing.FLOAT32_EDGES``, against float64 NumPy (``math.erf`` for erf): the largest error in units of the
last place, where it occurs, and the share of inputs more than 1 ulp off. The reference backend is NumPy's own
float32 functions. Backends that are not installed or not available are skipped.
"""

from __future__ import annotations

import argparse
import sys

import pypto as pt
from pypto.testing import float32_math_errors


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stride", type=int, default=61)
    p.add_argument("--backends", default="openmp,tbb,opencl,numba,reference")
    args = p.parse_args()
    info = pt.get_runtime_info()["backends"]
    print(f"float32 sweep: one bit pattern in {args.stride}, both signs\n")
    print("| backend | function | max error | at x = | share > 1 ulp |\n|---|---|---|---|---|")
    for backend in args.backends.split(","):
        if not info.get(backend, {}).get("available"):
            print(f"skipped: {backend} (not available)", file=sys.stderr)
            continue
        for name, (worst, at, share) in float32_math_errors(backend, args.stride).items():
            print(f"| {backend} | {name} | {worst:.2f} ulp | {at:.8g} | {share:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
