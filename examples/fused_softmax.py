"""fused_softmax: a row-wise softmax in one kernel, checked against NumPy."""

import numpy as np

import pypto as pt

M, N = pt.dims("M N")


@pt.kernel
def fused_softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    row, col = pt.axis(0), pt.axis(1)
    max_val = pt.reduce_max(x[row, col], axis=col)
    exp_val = pt.exp(x[row, col] - max_val)
    sum_val = pt.reduce_sum(exp_val, axis=col)
    y[row, col] = exp_val / sum_val


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main(m: int = 1024, n: int = 1024) -> float:
    x = np.random.default_rng(0).standard_normal((m, n)).astype(np.float32)
    y = pt.empty_like(x)
    fused_softmax(x, y)
    err = float(np.max(np.abs(y - numpy_softmax(x))))
    print(f"fused_softmax  {m}x{n}  max |pypto - numpy| = {err:.3g}")
    return err


if __name__ == "__main__":
    assert main() < 1e-6
