"""One launch of each pypto kernel the GPU benchmarks time, on torch tensors: what ``profile.sh`` hands to
Nsight Compute (``ncu``), and a cProfile of the host path of small calls.

    python benchmarks/gpu/kernels.py [--host-profile]
"""

from __future__ import annotations

import cProfile
import pstats
import sys

import torch

import pypto as pt
from pypto.testing import layernorm, matmul, softmax, vector_add


def main() -> None:
    dev = "cuda"
    x = torch.randn(8192, 8192, device=dev)
    y = torch.empty_like(x)
    g, b = torch.randn(8192, device=dev), torch.randn(8192, device=dev)
    a = torch.randn(1 << 26, device=dev)
    c = torch.empty_like(a)
    m1, m2 = torch.randn(2048, 2048, device=dev), torch.randn(2048, 2048, device=dev)
    m3 = torch.empty(2048, 2048, device=dev)
    for kern, args in ((softmax, (x, y)), (layernorm, (x, g, b, y)), (vector_add, (a, a, c)), (matmul, (m1, m2, m3))):
        k = pt.kernel(executor="cuda")(kern.fn)
        k(*args)
        torch.cuda.synchronize()
    if "--host-profile" in sys.argv:
        k = pt.kernel(executor="cuda")(vector_add.fn)
        s = torch.randn(1024, device=dev)
        t = torch.empty_like(s)
        k(s, s, t)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20000):
            k(s, s, t)
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
