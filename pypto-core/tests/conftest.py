"""Core tests run every kernel on the NumPy reference backend unless a test says otherwise.

``PYPTO_TEST_EXECUTOR=openmp pytest pypto-core/tests/test_language.py`` runs the language tests on
another backend (the other modules check reference-specific details). Every test gets a private
compile cache (``pypto.testing.fixtures``).
"""

import os

import numpy as np
import pytest

from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse; run_py, pypto_executor, pypto_cache_dir)


@pytest.fixture
def pypto_executor():
    return os.environ.get("PYPTO_TEST_EXECUTOR", "reference")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def pytest_report_header(config):
    return f"pypto core tests on executor {os.environ.get('PYPTO_TEST_EXECUTOR', 'reference')!r}"
