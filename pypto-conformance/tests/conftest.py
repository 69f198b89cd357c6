"""Fixtures for testing the suite itself: plugins installed as distributions in a temporary directory,
and the CLI run in a subprocess whose PYTHONPATH includes that directory."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def plugin_site(tmp_path: Path):
    """``install(name, source)`` puts a plugin distribution in a directory for PYTHONPATH; returns it."""
    site = tmp_path / "site"
    site.mkdir()

    def install(name: str, source: str) -> Path:
        module = f"pypto_conformance_test_{name}"
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"pypto_conformance_test_{name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pypto-conformance-test-{name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[pypto]\n{name} = {module}\n")
        return site

    return install


class CliRun:
    """The result of one ``python -m pypto_conformance`` run."""

    def __init__(self, proc: subprocess.CompletedProcess, report: Path):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.report_path = report

    @property
    def report(self) -> dict:
        return json.loads(self.report_path.read_text())

    def results(self, **match) -> list[dict]:
        """Report rows whose fields equal ``match``."""
        return [r for r in self.report["results"] if all(r[k] == v for k, v in match.items())]

    def __repr__(self) -> str:  # shown when an assertion fails
        return f"<exit {self.returncode}>\nstdout:\n{self.stdout[-6000:]}\nstderr:\n{self.stderr[-3000:]}"


def installed_plugin_names() -> list[str]:
    """Entry-point names of the backend plugins installed in this environment."""
    return sorted({ep.name for ep in importlib.metadata.entry_points(group="pypto")})


@pytest.fixture
def run_cli(tmp_path: Path):
    """Run the CLI in a subprocess (PYTHONPATH gets ``site`` first) with a JSON report in tmp_path."""

    def run(*args: str, site: Path | None = None, isolate: bool = True, timeout: float = 600) -> CliRun:
        env = dict(os.environ)
        if isolate:  # only the reference backend and the test's own plugins
            env["PYPTO_DISABLE_PLUGINS"] = ",".join(installed_plugin_names()) or "none"
        paths = [str(site)] if site else []
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYPTO_CACHE_DIR"] = str(tmp_path / "pypto-cache")
        report = tmp_path / f"report-{len(list(tmp_path.glob('report-*.json')))}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pypto_conformance", *args, "--report", str(report)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return CliRun(proc, report)

    return run
