"""Core tests run every kernel on the NumPy reference backend unless a test says otherwise.

``PYPTO_TEST_EXECUTOR=openmp pytest pypto-core/tests/test_language.py`` runs the language tests on
another backend (the other modules check reference-specific details).
"""

import os

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _reference_executor(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("PYPTO_EXECUTOR", os.environ.get("PYPTO_TEST_EXECUTOR", "reference"))
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "pypto-cache"))
    monkeypatch.delenv("PYPTO_DUMP_IR", raising=False)
    yield


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def pytest_report_header(config):
    return f"pypto core tests on executor {os.environ.get('PYPTO_TEST_EXECUTOR', 'reference')!r}"
