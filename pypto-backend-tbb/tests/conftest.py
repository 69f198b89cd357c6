"""Every test runs on the ``tbb`` executor with a private compile cache; subprocess helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


@pytest.fixture(autouse=True)
def _tbb_executor(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("PYPTO_EXECUTOR", "tbb")
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tbb-cache"))
    monkeypatch.delenv("PYPTO_DUMP_IR", raising=False)
    monkeypatch.delenv("PYPTO_NUM_THREADS", raising=False)


@pytest.fixture
def run_py(tmp_path_factory):
    """Run Python source in a fresh interpreter; returns the CompletedProcess (never raises on failure)."""
    cache = str(tmp_path_factory.getbasetemp() / "tbb-cache")

    def run(code: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        full = {**os.environ, "PYPTO_EXECUTOR": "tbb", "PYPTO_CACHE_DIR": cache, **(env or {})}
        for name in ("PYPTO_NUM_THREADS", "PYPTO_DUMP_IR", *drop):
            if name not in (env or {}):
                full.pop(name, None)
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env=full, timeout=600)  # fmt: skip

    return run
