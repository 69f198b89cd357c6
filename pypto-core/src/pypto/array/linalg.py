"""Small dense linear algebra on traced arrays: ``np.linalg.cholesky``, ``solve``, ``inv`` and ``det`` in ``@pt.jit``.

Stacks of small matrices (``(..., n, n)`` with a static ``n`` of at most :data:`MAX_N`): the factorisation is
unrolled over the ``n`` columns into array operations (reductions along a column, selects on the position), so a batch of many small systems (poses, Kalman filters, per-pixel fits) is one kernel
with the batch on threads and vector lanes. Large single matrices belong to LAPACK (``np.linalg`` outside the
function), and a larger ``n`` is a :class:`~pypto.errors.TracingError` that says so.

* ``cholesky``: column by column (``L[j, j] = sqrt(a[j, j] - sum L[j, :j]^2)``, the column below divided by
  it); a matrix that is not positive definite gives NaN where NumPy raises ``LinAlgError``.
* ``solve``, ``inv``, ``det``: Gauss-Jordan elimination with partial pivoting (the row of the largest magnitude
  in the column swapped in, as LAPACK's ``getrf``); a singular matrix gives infinities or NaN (NumPy raises).

Each step's matrix is stored once (the next step reads it): a factorisation is n loop nests over the stack.
Integer matrices are computed in float64, as NumPy does.

Gradients are the analytic ones (as LAPACK-backed autodiff systems give them), not the unrolled algorithm's
(whose backward would be n times longer): each function's result is a ``custom`` node whose backward is
another factorisation -- ``solve``: ``gb = solve(a.T, g)``, ``ga = -gb @ x.T``; ``inv``: ``-y.T @ g @ y.T``;
``det``: ``g * det * inv(a).T``; ``cholesky``: ``L^-T Phi(L.T @ gL) L^-1``, symmetrised (Phi: the lower
triangle, its diagonal halved).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pypto import dtypes
from pypto.array import ops, views
from pypto.array.graph import Array, binary, broadcast_shapes, cast, reduce, stored, unary, where
from pypto.errors import ShapeError, TracingError
from pypto.lang.location import user_loc

MAX_N = 16  # the largest matrix unrolled (n steps of O(n^2) work per matrix)


def _square(a: Any, fname: str) -> Array:
    if not isinstance(a, Array):
        raise TracingError(f"numpy.linalg.{fname}: expected a traced array, got {type(a).__name__}", user_loc(3))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"numpy.linalg.{fname}: expected a stack of square matrices (..., n, n), got {a.shape}",
                         param="a", expected="shape (..., n, n)", got=a.shape)  # fmt: skip
    n = int(a.shape[-1])
    if n > MAX_N:
        raise TracingError(
            f"numpy.linalg.{fname} of {n} x {n} matrices inside @pt.jit: the generated code unrolls n steps and is "
            f"meant for stacks of small matrices (n <= {MAX_N})",
            user_loc(3),
            f"call np.linalg.{fname} outside the jit function (LAPACK) and pass its result in",
        )
    if a.dtype.is_complex:
        raise TracingError(f"numpy.linalg.{fname}: complex matrices are not supported inside @pt.jit", user_loc(3))
    if not a.dtype.is_float:
        a = cast(a, dtypes.float64)  # as NumPy computes integer matrices
    elif a.dtype.is_half:
        a = cast(a, dtypes.float32)
    return a


class _Adjoint:
    """The backward of a linear algebra function, as a ``custom`` node's op (:mod:`pypto.array.custom`)."""

    def __init__(self, op_name: str, vjp_fn: Callable[..., Any]):
        self.op_name, self.vjp_fn = op_name, vjp_fn


def _with_vjp(name: str, value: Array, args: tuple[Array, ...], vjp: Callable[..., Any]) -> Array:
    """``value`` (computed from ``args``) whose gradient is ``vjp(g, *args)``, not its algorithm's."""
    return Array("custom", (value, *args), (_Adjoint(f"numpy.linalg.{name}", vjp), args), value.shape, value.dtype)


def _t(x: Array) -> Array:
    return views.swapaxes(x, -1, -2)


def _rows(n: int, ndim: int) -> Array:
    """The row position of every element of a (..., n, k) stack (shape (n, 1))."""
    return views._iota(n, ndim - 2, ndim)


def cholesky(a: Any, upper: bool = False) -> Array:
    """The lower triangular ``L`` with ``L @ L.T == a`` (``upper=True``: ``L.T``)."""
    a = _square(a, "cholesky")
    n, nd = int(a.shape[-1]), a.ndim
    i = _rows(n, nd)[..., 0]  # (n,): the position along a column
    cols: list[Array] = []  # the columns found so far, each (..., n) and zero above its diagonal
    for j in range(n):
        col = a[..., :, j]
        for c in cols:  # subtract L[:, k] * L[j, k]
            col = col - c * c[..., j : j + 1]
        d = unary("sqrt", col[..., j : j + 1])
        cols.append(stored(where(binary("lt", i, j), 0.0, where(binary("eq", i, j), d, col / d))))
    low = _with_vjp("cholesky", ops.stack(cols, axis=-1), (a,), lambda g, a: _cholesky_vjp(g, low))
    return views.swapaxes(low, -1, -2) if upper else low


def _cholesky_vjp(g: Array, low: Array) -> Array:
    n = int(low.shape[-1])
    i, j = _rows(n, 2), views._iota(n, 1, 2)
    phi = ops.matmul(_t(low), g)
    phi = where(binary("gt", i, j), phi, where(binary("eq", i, j), phi * 0.5, 0.0))
    lin = _inverse(low)
    ga = ops.matmul(ops.matmul(_t(lin), phi), lin)
    return (ga + _t(ga)) * 0.5


def _eliminate(m: Array, n: int) -> tuple[Array, Array]:
    """Gauss-Jordan elimination with partial pivoting on the first ``n`` columns of the stack ``m``
    ``(..., n, k)``: the reduced stack (diagonal in its first n columns) and the sign of the row permutation."""
    nd = m.ndim
    i = _rows(n, nd)  # (n, 1)
    sign = Array("fill", (), 1.0, m.shape[:-2], m.dtype)
    for k in range(n):
        p = binary("add", ops.arg_reduce("max", unary("abs", m[..., k:, k]), -1, True, "numpy.linalg"), k)  # (..., 1)
        p = views.expand_dims(p, -1)  # (..., 1, 1)
        # the pivot row, picked by a sum over the rows of a select (a reduction fused with what reads it; a
        # gather at a computed row would store every step's matrix first)
        row_p = reduce("sum", where(binary("eq", i, p), m, 0.0), -2, True)  # (..., 1, k)
        m = where(binary("eq", i, k), row_p, where(binary("eq", i, p), m[..., k : k + 1, :], m))
        sign = where(binary("eq", p[..., 0, 0], k), sign, unary("neg", sign))
        f = where(binary("ne", i, k), m[..., :, k : k + 1] / row_p[..., :, k : k + 1], 0.0)  # (..., n, 1)
        m = stored(m - f * row_p)  # the next step reads this one's matrix from memory
    return m, sign


def _diagonal(m: Array, n: int) -> Array:
    """The diagonal of the first ``n`` columns of ``m`` (..., n, k), as (..., n, 1)."""
    eye = ops.eye(n, dtype=m.dtype)
    return reduce("sum", m[..., :n] * eye, -1, True)


def solve(a: Any, b: Any) -> Array:
    """``x`` with ``a @ x == b``; ``b`` a stack of vectors ``(..., n)`` only when it is 1-D (NumPy 2's rule),
    else of matrices ``(..., n, k)``."""
    a = _square(a, "solve")
    n = int(a.shape[-1])
    if not isinstance(b, Array):
        raise TracingError("numpy.linalg.solve: b must be a traced array", user_loc(2))
    vector = b.ndim == 1
    bm = views.reshape(b, (n, 1)) if vector else b
    if bm.shape[-2] != n:
        raise ShapeError(f"numpy.linalg.solve: b has {bm.shape[-2]} rows, a is {n} x {n}", param="b",
                         expected=f"shape (..., {n}) or (..., {n}, k)", got=b.shape)  # fmt: skip
    dt = dtypes.promote(a.dtype, bm.dtype if bm.dtype.is_float else a.dtype)
    a, bm = cast(a, dt), cast(bm, dt)
    batch = tuple(broadcast_shapes(a.shape[:-2], bm.shape[:-2], what="numpy.linalg.solve's stacks"))
    a = views.broadcast_to(a, (*batch, n, n))
    bm = views.broadcast_to(bm, (*batch, n, bm.shape[-1]))
    x = _with_vjp("solve", _solve(a, bm), (a, bm), lambda g, a, bm: _solve_vjp(g, a, x))
    return views.reshape(x, x.shape[:-1]) if vector else x


def _solve(a: Array, bm: Array) -> Array:
    n = int(a.shape[-1])
    m, _ = _eliminate(ops.concat([a, bm], axis=-1), n)
    return m[..., n:] / _diagonal(m, n)


def _solve_vjp(g: Array, a: Array, x: Array) -> tuple[Array, Array]:
    gb = _solve(_t(a), g)
    return -ops.matmul(gb, _t(x)), gb


def inv(a: Any) -> Array:
    """The inverse of each matrix of the stack."""
    a = _square(a, "inv")
    y = _with_vjp("inv", _inverse(a), (a,), lambda g, a: -ops.matmul(ops.matmul(_t(y), g), _t(y)))
    return y


def _inverse(a: Array) -> Array:
    n = int(a.shape[-1])
    eye = views.broadcast_to(ops.eye(n, dtype=a.dtype), a.shape)
    m, _ = _eliminate(ops.concat([a, eye], axis=-1), n)
    return m[..., n:] / _diagonal(m, n)


def det(a: Any) -> Array:
    """The determinant of each matrix of the stack: the product of the pivots, signed by the row swaps."""
    a = _square(a, "det")
    n = int(a.shape[-1])
    m, sign = _eliminate(a, n)
    d = views.reshape(_diagonal(m, n), m.shape[:-1])
    det_ = _with_vjp("det", binary("mul", reduce("prod", d, -1, False), sign), (a,),
                     lambda g, a: views.expand_dims(views.expand_dims(g * det_, -1), -1) * _t(_inverse(a)))  # fmt: skip
    return det_
