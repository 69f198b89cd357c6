"""Every test gets a private compile cache (``pypto.testing.fixtures``); kernels name the ``cuda``
backend where they need it, as it cannot run without a GPU."""

from __future__ import annotations

from pypto.testing.fixtures import *  # noqa: F403  (pypto_env is autouse; run_py, pypto_executor, pypto_cache_dir)
