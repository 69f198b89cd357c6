"""Testing helpers for pypto and its backend plugins: standard kernels, NumPy references, processes.

The kernels every backend is tested with, written once with the public API (``import pypto as pt``,
symbolic dims), with their NumPy references and checks against them; a runner for Python snippets in
a fresh interpreter (cache hits across processes, thread counts fixed at start-up, clean interpreter
exit) and snippets to run in it; a counting compiler (a stand-in for ``CC`` / ``CXX`` that logs every invocation, to check that a
cached kernel is not compiled again). A third-party backend can test itself with the same pieces::

    import numpy as np
    from pypto.testing import assert_softmax_matches_numpy, np_sum_exp, sum_exp

    def test_softmax():
        assert_softmax_matches_numpy((64, 1031), rtol=1e-5, atol=1e-7)  # on $PYPTO_EXECUTOR

    def test_sum_exp():
        x = np.random.default_rng(0).standard_normal(100_003).astype(np.float32)
        out = np.zeros(1, np.float32)
        sum_exp(x, out)
        np.testing.assert_allclose(out[0], np_sum_exp(x), rtol=1e-5)

The pytest fixtures (a private compile cache and the executor for every test, ``run_py``) live in
:mod:`pypto.testing.fixtures`, the only module here that imports pytest. Use them from a
``conftest.py``::

    import pytest
    from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse)

    @pytest.fixture
    def pypto_executor():
        return "mybackend"

The kernels are module-level :func:`pypto.kernel` objects: calling one compiles it for the executor
in effect (``$PYPTO_EXECUTOR``); ``pt.kernel(executor="x")(softmax.fn)`` makes a separate kernel
object with its own compiled state.
"""

from __future__ import annotations

from pypto.testing.checks import (
    FLOAT32_EDGES,
    assert_column_reductions_match_numpy,
    assert_contractions_match_numpy,
    assert_nan_poisons_only_its_row,
    assert_softmax_matches_numpy,
    assert_transposes_match_numpy,
    float32_math_errors,
    float32_sweep,
    ulp_error,
)
from pypto.testing.compilers import CountingCompiler, counting_compiler
from pypto.testing.kernels import (
    K,
    M,
    N,
    batched_matmul,
    column_softmax,
    column_stats,
    dense_relu,
    layernorm,
    matmul,
    np_column_stats,
    np_layernorm,
    np_softmax,
    np_sum_exp,
    softmax,
    sum_exp,
    transpose_add,
    two_layer_net,
    vector_add,
)
from pypto.testing.process import CUBE_SCRIPT, THREADED_SUM_SCRIPT, run_python, unavailable_script

__all__ = [
    "FLOAT32_EDGES",
    "float32_math_errors",
    "float32_sweep",
    "ulp_error",
    "CUBE_SCRIPT",
    "THREADED_SUM_SCRIPT",
    "assert_column_reductions_match_numpy",
    "assert_contractions_match_numpy",
    "assert_nan_poisons_only_its_row",
    "assert_softmax_matches_numpy",
    "assert_transposes_match_numpy",
    "CountingCompiler",
    "K",
    "M",
    "N",
    "counting_compiler",
    "column_softmax",
    "batched_matmul",
    "column_stats",
    "dense_relu",
    "layernorm",
    "matmul",
    "np_column_stats",
    "np_layernorm",
    "np_softmax",
    "np_sum_exp",
    "run_python",
    "softmax",
    "two_layer_net",
    "sum_exp",
    "transpose_add",
    "unavailable_script",
    "vector_add",
]
