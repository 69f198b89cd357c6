"""Every test runs on the ``tbb`` executor with a private compile cache; ``run_py`` runs a snippet in a
fresh interpreter with the same settings (``pypto.testing.fixtures``)."""

from __future__ import annotations

import pytest

from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse; run_py, pypto_executor, pypto_cache_dir)


@pytest.fixture
def pypto_executor():
    return "tbb"
