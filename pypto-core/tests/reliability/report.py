"""Writes docs/reliability.md: every catalogue case run on every available backend, with its outcome.

    python pypto-core/tests/reliability/report.py [--out docs/reliability.md]

The table is regenerated from what happens now, not written by hand: a case is "as expected" when it
raised the stated error type with a matching message (or gave the right answer), and the page says so
per backend, with the totals.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from test_reliability_catalogue import BACKENDS, CATALOGUE, Case  # noqa: E402

import pypto as pt  # noqa: E402

BEGIN = "<!-- BEGIN GENERATED: pypto-core/tests/reliability/report.py -->"
END = "<!-- END GENERATED -->"


def outcome(case: Case, backend: str) -> tuple[bool, str]:
    """(as expected, what happened in a few words)."""
    try:
        with np.errstate(all="ignore"):
            result = case.run(backend)
    except Exception as e:  # every outcome is recorded, the expected ones and the others
        text = str(e).splitlines()[0] if str(e) else ""
        if case.error is None:
            return False, f"raised {type(e).__name__}: {text[:80]}"
        kind, pattern = case.error
        ok = isinstance(e, kind) and re.search(pattern, str(e)) is not None
        return ok, type(e).__name__
    if case.error is not None:
        return False, f"no error (expected {case.error[0].__name__})"
    ok = case.check(result) if case.check is not None else True
    return bool(ok), "right answer" if ok else f"wrong answer: {result!r:.60}"


def render() -> str:
    available = [b for b in BACKENDS if pt.get_runtime_info()["backends"].get(b, {}).get("available")]
    rows = []
    good = total = 0
    for case in CATALOGUE:
        cells = []
        for b in available:
            ok, what = outcome(case, b)
            good += ok
            total += 1
            cells.append(("✓ " if ok else "✗ ") + what)
        expected = f"`{case.error[0].__name__}`" if case.error else "the right answer"
        rows.append(f"| `{case.name}` | {case.what} | {expected} | " + " | ".join(cells) + " |")
    head = [
        BEGIN,
        "",
        f"Generated on {datetime.date.today().isoformat()} by `python pypto-core/tests/reliability/report.py` "
        f"(pypto {pt.__version__}, backends: {', '.join(available)}).",
        "",
        f"**{len(CATALOGUE)} cases × {len(available)} backends: {good} of {total} as expected.**",
        "",
        "| case | situation | expected | " + " | ".join(available) + " |",
        "|---|---|---|" + "---|" * len(available),
    ]
    return "\n".join(head + rows + ["", END])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=HERE.parents[2] / "docs" / "reliability.md")
    args = p.parse_args(argv)
    table = render()
    text = args.out.read_text() if args.out.exists() else f"# Reliability\n\n{BEGIN}\n{END}\n"
    start, end = text.index(BEGIN), text.index(END) + len(END)
    args.out.write_text(text[:start] + table + text[end:])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
