"""Checks of the standard kernels against NumPy that every backend's tests run with their own shapes and tolerances."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import pypto as pt
from pypto.testing.kernels import np_softmax, softmax


def assert_softmax_matches_numpy(
    shape: tuple[int, int],
    *,
    rtol: float,
    atol: float,
    seed: int = 0,
    kernel: Callable = softmax,
    reference_dtype: type | None = None,
) -> None:
    """Run a softmax ``kernel`` on standard-normal float32 input of ``shape`` (``default_rng(seed)``) and
    compare with :func:`np_softmax` (computed in float32, or in ``reference_dtype``) with the tolerances given."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    y = pt.empty_like(x)
    kernel(x, y)
    want = np_softmax(x if reference_dtype is None else x.astype(reference_dtype))
    np.testing.assert_allclose(y, want, rtol=rtol, atol=atol)


def assert_nan_poisons_only_its_row(kernel: Callable = softmax, seed: int = 1) -> None:
    """A NaN in one row of a softmax input (4 x 100, ``default_rng(seed)``) must make that whole row NaN (the row
    maximum propagates it, vectorised or not) and leave the other rows free of NaN."""
    x = np.random.default_rng(seed).standard_normal((4, 100)).astype(np.float32)
    x[2, 57] = np.nan
    y = np.empty_like(x)
    kernel(x, y)
    if not np.isnan(y[2]).all() or np.isnan(y[[0, 1, 3]]).any():
        raise AssertionError(f"a NaN at x[2, 57] must give exactly row 2 NaN; NaN per row: {np.isnan(y).sum(1)}")
