"""Every test gets its own compile cache and no PYPTO_EXECUTOR (kernels name ``numba``) from
``pypto.testing.fixtures``; PYPTO_NUMBA_PARALLEL_MIN_WORK is unset unless a test sets it."""

from __future__ import annotations

import pytest

from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse; run_py, pypto_executor, pypto_cache_dir)


@pytest.fixture
def pypto_cache_dir(tmp_path):
    return tmp_path / "cache"


@pytest.fixture(autouse=True)
def _no_parallel_threshold(monkeypatch):
    monkeypatch.delenv("PYPTO_NUMBA_PARALLEL_MIN_WORK", raising=False)
