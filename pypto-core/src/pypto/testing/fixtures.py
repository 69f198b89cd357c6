"""pytest fixtures for pypto tests: the executor and a private compile cache for every test, ``run_py``.

Import all of them into a ``conftest.py`` (they then apply to the tests in that folder and below; the
autouse fixture needs the others), and override :func:`pypto_executor` (and, if need be,
:func:`pypto_cache_dir`) after the import::

    import pytest
    from pypto.testing.fixtures import *  # noqa: F403

    @pytest.fixture
    def pypto_executor():
        return "mybackend"

or load the module for a whole test run with ``pytest_plugins = ["pypto.testing.fixtures"]`` in the
top-level ``conftest.py``. This module imports pytest; :mod:`pypto.testing` itself does not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pypto.testing.process import run_python

__all__ = ["pypto_cache_dir", "pypto_env", "pypto_executor", "run_py"]

CLEARED = ("PYPTO_DUMP_IR", "PYPTO_NUM_THREADS")
"""Variables from the developer's shell that would change what the tests see; unset for every test."""


@pytest.fixture
def pypto_executor() -> str | None:
    """The executor every test runs on (``PYPTO_EXECUTOR``); ``None`` unsets it ("auto"). Override it."""
    return None


@pytest.fixture
def pypto_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compile cache (``PYPTO_CACHE_DIR``): one per test session, never the user's own cache."""
    return tmp_path_factory.getbasetemp() / "pypto-cache"


@pytest.fixture(autouse=True)
def pypto_env(monkeypatch: pytest.MonkeyPatch, pypto_executor: str | None, pypto_cache_dir: Path) -> None:
    """Every test: ``PYPTO_EXECUTOR`` = :func:`pypto_executor`, ``PYPTO_CACHE_DIR`` = :func:`pypto_cache_dir`,
    and none of :data:`CLEARED` (``PYPTO_DUMP_IR``, ``PYPTO_NUM_THREADS``)."""
    if pypto_executor is None:
        monkeypatch.delenv("PYPTO_EXECUTOR", raising=False)
    else:
        monkeypatch.setenv("PYPTO_EXECUTOR", pypto_executor)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(pypto_cache_dir))
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def run_py(pypto_env: None) -> Callable[..., object]:
    """:func:`pypto.testing.run_python`, in a child that inherits the test's executor and compile cache.

    ``run_py(code, env=None, *, drop=(), check=False, timeout=600)`` returns the
    :class:`subprocess.CompletedProcess` (it raises only with ``check=True``).
    """
    return run_python
