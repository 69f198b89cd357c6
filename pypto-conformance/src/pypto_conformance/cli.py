"""``pypto-conformance``: run the suite against installed backends and print the conformance table.

    pypto-conformance [--backend NAME|all] [-k EXPR] [--report out.json]
                      [--xfails FILE] [--tolerances FILE] [--max-examples N] [-- PYTEST_ARGS...]

It runs ``pytest --pyargs pypto_conformance.suite`` in this process and exits with pytest's
status: non-zero when any result fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import pytest

from .backends import SelectionError, select_backends
from .settings import SLICES
from .table import format_summary, format_table


class _Capture:
    """A pytest plugin that hands the run's records to the command line once the session ends."""

    def __init__(self) -> None:
        self.records: list = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from .plugin import COLLECTOR_KEY

        collector = session.config.stash.get(COLLECTOR_KEY, None)
        if collector is not None:
            self.records = list(collector.records)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pypto-conformance",
        description="Run the pypto conformance suite (catalogue + differential fuzzing) against installed backends.",
        epilog="Arguments after '--' go to pytest unchanged (for example: -- -x --maxfail=3).",
    )
    p.add_argument("--backend", default="all", metavar="NAME|all", help="backend name(s), comma-separated, or all")
    p.add_argument("-k", dest="keyword", default=None, metavar="EXPR", help="only tests matching EXPR (as pytest -k)")
    p.add_argument("--report", default=None, metavar="FILE", help="write the results as JSON to FILE")
    p.add_argument("--xfails", default=None, metavar="FILE", help="TOML/JSON file of expected failures")
    p.add_argument("--tolerances", default=None, metavar="FILE", help="TOML/JSON file of tolerance overrides")
    p.add_argument(
        "--max-examples", type=int, default=None, metavar="N", help="random kernels per backend (default 300)"
    )
    p.add_argument("--quiet-table", action="store_true", help="print only failing rows of the table")
    p.add_argument(
        "--slice",
        default=None,
        choices=SLICES,
        help="full (default): every case in each of its dtypes; dtypes: each case in one of its dtypes taken in "
        "turn (every case and every dtype still runs on every backend)",
    )
    return p


def pytest_arguments(args: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    """The pytest command line equivalent to the CLI's options."""
    ini = resources.files("pypto_conformance").joinpath("suite", "conformance.ini")
    argv = [
        "--pyargs",
        "pypto_conformance.suite",
        "-c",
        str(ini),
        "-p",
        "pypto_conformance.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "--assert=plain",  # the suite reports through pytest.fail; nothing to rewrite
        "--pypto-backend",
        args.backend,
    ]
    for flag, value in (
        ("-k", args.keyword),
        ("--pypto-report", args.report),
        ("--pypto-xfails", args.xfails),
        ("--pypto-tolerances", args.tolerances),
        ("--pypto-max-examples", args.max_examples),
        ("--pypto-slice", args.slice),
    ):
        if value is not None:
            argv += [flag, str(value)]
    return argv + list(extra)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pypto-conformance`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    try:
        targets = select_backends(args.backend)
    except SelectionError as e:
        print(f"pypto-conformance: {e}", file=sys.stderr)
        return 2
    for t in targets:
        state = "available" if t.available else f"unavailable: {t.reason}"
        print(f"backend {t.name} {t.version} ({state})")
    capture = _Capture()
    status = int(pytest.main(pytest_arguments(args, extra), plugins=[capture]))
    records = capture.records
    if args.quiet_table:
        records = [r for r in records if r.outcome in ("failed", "error", "xpassed")]
    table = format_table(records)
    if table:
        print()
        print(table)
    print()
    print(f"pypto-conformance: {format_summary(capture.records)}")
    if args.report:
        print(f"JSON report: {Path(args.report)}")
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
