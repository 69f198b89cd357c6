"""The standard test kernels (float32, symbolic dims) and their NumPy references.

Each reference computes in the dtype of its input: pass ``x.astype(np.float64)`` for a float64
reference of a float32 kernel.
"""

from __future__ import annotations

import numpy as np

import pypto as pt

M, N, K = pt.dims("M N K")


@pt.kernel
def vector_add(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
    """``c = a + b``: the pointwise kernel (one parallel, vectorised loop; aliasing allowed)."""
    i = pt.axis(0)
    c[i] = a[i] + b[i]


@pt.kernel
def softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    """Row-wise softmax, fused: a row max, exp, a row sum and the scaling in one loop nest."""
    row, col = pt.axis(0), pt.axis(1)
    max_val = pt.reduce_max(x[row, col], axis=col)
    exp_val = pt.exp(x[row, col] - max_val)
    y[row, col] = exp_val / pt.reduce_sum(exp_val, axis=col)


@pt.kernel
def sum_exp(x: pt.Tensor[float, (N,)], out: pt.Tensor[float, (1,)]):
    """``out[0] = sum(exp(x))``: a full reduction (split into fixed blocks with an ordered combine)."""
    i = pt.axis(0)
    out[0] = pt.reduce_sum(pt.exp(x[i]), axis=i)


@pt.kernel
def layernorm(x: pt.Tensor[float, (M, N)], g: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)],
              y: pt.Tensor[float, (M, N)]):  # fmt: skip
    """Row-wise layer normalisation (eps 1e-5) with a gain ``g`` and a bias ``b`` broadcast over rows."""
    r, c = pt.axis(0), pt.axis(1)
    mean = pt.reduce_mean(x[r, c], axis=c)
    var = pt.reduce_mean((x[r, c] - mean) ** 2, axis=c)
    y[r, c] = (x[r, c] - mean) * pt.rsqrt(var + 1e-5) * g[c] + b[c]


@pt.kernel
def matmul(a: pt.Tensor[float, (M, K)], b: pt.Tensor[float, (K, N)], c: pt.Tensor[float, (M, N)]):
    """``c = a @ b`` as a sum over the axis ``k``."""
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    c[i, j] = pt.reduce_sum(a[i, k] * b[k, j], axis=k)


@pt.kernel
def column_stats(x: pt.Tensor[float, (M, N)], total: pt.Tensor[float, (N,)], top: pt.Tensor[float, (N,)],
                 rms: pt.Tensor[float, (N,)]):  # fmt: skip
    """Reductions down the columns: a sum, a max (NaN propagates) and a root mean square."""
    i, j = pt.axis(0), pt.axis(1)
    total[j] = pt.reduce_sum(x[i, j], axis=i)
    top[j] = pt.reduce_max(x[i, j], axis=i)
    rms[j] = pt.sqrt(pt.reduce_mean(x[i, j] * x[i, j], axis=i))


@pt.kernel
def column_softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    """Softmax down the columns: every reduction and the store walk a column."""
    row, col = pt.axis(0), pt.axis(1)
    e = pt.exp(x[row, col] - pt.reduce_max(x[row, col], axis=row))
    y[row, col] = e / pt.reduce_sum(e, axis=row)


@pt.kernel
def transpose_add(x: pt.Tensor[float, (M, N)], w: pt.Tensor[float, (N, M)], y: pt.Tensor[float, (N, M)]):
    """``y = x.T + w``: contiguous writes, reads of ``x`` a row apart at every step."""
    r, c = pt.axis(0), pt.axis(1)
    y[c, r] = x[r, c] + w[c, r]


@pt.kernel
def dense_relu(x: pt.Tensor[float, (M, K)], w: pt.Tensor[float, (N, K)], bias: pt.Tensor[float, (N,)],
               y: pt.Tensor[float, (M, N)]):  # fmt: skip
    """A dense layer with its epilogue: ``y = relu(x @ w.T + bias)`` (the weight stored transposed)."""
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    y[i, j] = pt.maximum(pt.reduce_sum(x[i, k] * w[j, k], axis=k) + bias[j], 0.0)


B = pt.dim("B")


@pt.kernel
def batched_matmul(a: pt.Tensor[float, (B, M, K)], b: pt.Tensor[float, (B, K, N)], c: pt.Tensor[float, (B, M, N)]):
    """``c[q] = a[q] @ b[q]`` for every batch index ``q``."""
    q, i, j, k = pt.axis(0), pt.axis(1), pt.axis(2), pt.axis(3)
    c[q, i, j] = pt.reduce_sum(a[q, i, k] * b[q, k, j], axis=k)


def np_column_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return x.sum(0), x.max(0, initial=-np.inf), np.sqrt((x * x).sum(0) / x.shape[0])


def np_softmax(x: np.ndarray) -> np.ndarray:
    """What :data:`softmax` computes, in NumPy (in ``x``'s dtype; an all ``-inf`` row gives NaN)."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_sum_exp(x: np.ndarray) -> np.float64:
    """What :data:`sum_exp` computes, summed in float64 (the reference for any summation order)."""
    return np.exp(np.asarray(x, dtype=np.float64)).sum()


def np_layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """What :data:`layernorm` computes, in NumPy (in ``x``'s dtype)."""
    mu = x.mean(1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps) * g + b


def two_layer_net(rng: np.random.Generator, n_in: int = 4, hidden: int = 8, n_out: int = 2) -> pt.Module:
    """A small ``pt.Module`` for module, gradient, optimizer and PyTorch tests: two dense ``tanh`` layers in a list
    (parameters ``layers.0.w``, ``layers.0.b``, ``layers.1.w``, ``layers.1.b``, float64 from ``rng``)."""

    @pt.module
    class Dense:
        def __init__(self, a: int, b: int):
            self.w = pt.Parameter(rng.standard_normal((a, b)) * 0.4, "w")
            self.b = pt.Parameter(rng.standard_normal(b) * 0.1, "b")

        def forward(self, x):
            return pt.tanh(x @ self.w + self.b)

    @pt.module
    class Net:
        def __init__(self):
            self.layers = [Dense(n_in, hidden), Dense(hidden, n_out)]

        def forward(self, x):
            for layer in self.layers:
                x = layer.forward(x)
            return x

    return Net()
