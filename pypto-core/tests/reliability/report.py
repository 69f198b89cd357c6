"""Writes docs/reliability.md: every catalogue case run on every available backend, with its outcome, and
the figures of the last long runs and fuzzing campaign.

    python pypto-core/tests/reliability/report.py [--out docs/reliability.md] [--records-only]

The catalogue table is regenerated from what happens now, not written by hand: a case is "as expected" when
it raised the stated error type with a matching message (or gave the right answer), and the page says so
per backend, with the totals. The long-run and fuzzing tables are regenerated from the records the last
``nox -s longrun`` and ``nox -s fuzz`` sessions wrote into ``results/`` beside this file (hours of work each,
so not repeated here); ``--records-only`` rewrites those two tables alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from test_reliability_catalogue import BACKENDS, CATALOGUE, Case  # noqa: E402

import pypto as pt  # noqa: E402

BEGIN = "<!-- BEGIN GENERATED: pypto-core/tests/reliability/report.py -->"
RECORDS_BEGIN = "<!-- BEGIN GENERATED: pypto-core/tests/reliability/report.py, from results/ -->"
END = "<!-- END GENERATED -->"
RESULTS = HERE / "results"  # longrun.json (nox -s longrun), fuzz.json (nox -s fuzz: a conformance report)


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


def _kib(kib: int) -> str:
    return f"{kib:+d} KiB" if abs(kib) < 10240 else f"{kib / 1024:+.1f} MiB"


def render_longrun(runs: dict) -> list[str]:
    """The long runs' table: what ran, resident memory growth (and its course), objects left loaded, time."""
    out = [
        "| run | resident memory growth | after each tenth of the run | kernels' objects still loaded | time | date |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(runs, key=lambda n: (not n.startswith("calls"), n)):
        r = runs[name]
        steps = ", ".join(_kib(kib).replace(" KiB", "") for _, kib in r.get("steps", [])) or "—"
        loaded = str(r["loaded_after"]) if "loaded_after" in r else "—"
        out.append(f"| {r['what']} | {_kib(r['rss_kib'])} | {steps} | {loaded} | {r['seconds']:,} s | {r['date']} |")
    machines = sorted({r["machine"] for r in runs.values()})
    return [*out, "", f"Machine: {'; '.join(machines)}."]


def render_fuzz(report: dict) -> list[str]:
    """The fuzzing campaign's table, one row per backend, from the conformance suite's JSON report."""
    rows: dict[str, list[dict]] = {}
    for r in report["results"]:
        if r["case"] == "fuzz":
            rows.setdefault(r["backend"], []).append(r)
    out = [
        "| backend | random kernels | by dtype | mismatches | largest error (abs / rel) | time |",
        "|---|---|---|---|---|---|",
    ]
    for backend, results in rows.items():
        examples = {r["dtype"]: r.get("details", {}).get("examples", 0) for r in results}
        bad = [f"{r['dtype']}: {r['outcome']}" for r in results if r["outcome"] != "passed"]
        floats = [r for r in results if r["dtype"].startswith("float") and r["max_abs_error"] is not None]
        err = (
            ", ".join(f"{r['dtype']} {r['max_abs_error']:.2g} / {r['max_rel_error']:.2g}" for r in floats)
            if floats
            else "—"
        )
        ints = [r for r in results if r["dtype"].startswith("int")]
        if ints and all(r["max_abs_error"] == 0 for r in ints):
            err += "; integers exact"
        minutes = sum(r["duration"] for r in results) / 60
        out.append(
            f"| {backend} | {sum(examples.values()):,} | "
            + ", ".join(f"{d} {n}" for d, n in examples.items())
            + f" | {'; '.join(bad) if bad else 0} | {err} | {minutes:.0f} min |"
        )
    when = report.get("date", "date not recorded")
    return [
        *out,
        "",
        f"Run on {when} ({report.get('machine', 'machine not recorded')}), pypto {report['pypto_core']}, "
        f"`--max-examples {report.get('max_examples')}`.",
    ]


def render_records() -> str:
    longrun, fuzz = RESULTS / "longrun.json", RESULTS / "fuzz.json"
    lines = [RECORDS_BEGIN, "", "**Long runs** (`nox -s longrun`, last recorded run):", ""]
    lines += render_longrun(json.loads(longrun.read_text())) if longrun.exists() else ["No recorded run yet."]
    lines += ["", "**Fuzzing at scale** (`nox -s fuzz`, last recorded run):", ""]
    lines += render_fuzz(json.loads(fuzz.read_text())) if fuzz.exists() else ["No recorded run yet."]
    return "\n".join([*lines, "", END])


def _replace(text: str, begin: str, block: str) -> str:
    start = text.index(begin)
    end = text.index(END, start) + len(END)
    return text[:start] + block + text[end:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=HERE.parents[2] / "docs" / "reliability.md")
    p.add_argument("--records-only", action="store_true", help="rewrite only the long-run and fuzzing tables")
    args = p.parse_args(argv)
    text = args.out.read_text() if args.out.exists() else f"# Reliability\n\n{BEGIN}\n{END}\n"
    if not args.records_only:
        text = _replace(text, BEGIN, render())
    if RECORDS_BEGIN not in text:
        text += f"\n{RECORDS_BEGIN}\n{END}\n"
    args.out.write_text(_replace(text, RECORDS_BEGIN, render_records()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
