"""Every test runs on the ``opencl`` executor with a private compile cache (``pypto.testing.fixtures``)."""

from __future__ import annotations

import pytest

from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse; run_py, pypto_executor, pypto_cache_dir)


@pytest.fixture
def pypto_executor():
    return "opencl"
