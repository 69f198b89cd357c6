"""Developer sessions. `nox` runs lint and the full test suite; `nox -s core` and friends run one package.

Every session installs the packages from this checkout (not editable: the tests see what users get).
"""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.error_on_missing_interpreters = True

CORE = "./pypto-core[test]"


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.17,<0.18")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's tests in one environment with every package installed."""
    session.install(CORE)
    session.run("pytest", "pypto-core/tests", *session.posargs)


@nox.session
def core(session: nox.Session) -> None:
    """pypto-core alone (no backend plugins installed)."""
    session.install(CORE)
    session.run("pytest", "pypto-core/tests", *session.posargs)
