"""vector_add: c[i] = a[i] + b[i], checked against NumPy."""

import numpy as np

import pypto as pt

N = pt.dim("N")


@pt.kernel
def vector_add(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    c[i] = a[i] + b[i]


def main(n: int = 1_000_000) -> float:
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    c = pt.empty_like(a)
    vector_add(a, b, c)
    err = float(np.max(np.abs(c - (a + b))))
    print(f"vector_add   n={n:>9}  max |pypto - numpy| = {err:.3g}")
    return err


if __name__ == "__main__":
    assert main() == 0.0
