"""Model blocks side by side in one run: pypto against NumPy, torch eager, ``torch.compile`` and ``jax.jit``,
forward and training step (gradients of every parameter).

    python benchmarks/models/run.py                        # every block at sizes a and b (several minutes)
    python benchmarks/models/run.py --blocks llama --sizes a --repeat 7
    python benchmarks/models/run.py --write-results        # also rewrites the section in benchmarks/RESULTS.md
    python benchmarks/models/run.py --check                # the CI check: size "ci", pypto against NumPy

Every implementation's result is checked first: forward outputs against NumPy in float64, gradients
against torch's autograd in float64 (when torch is installed). Timings are interleaved (every round
runs each implementation once, in a new random order) and the figure reported is the median over
rounds; ratios compare medians of the same run. pypto's first call (trace, compile, load; cached kernels
make it shorter) is reported separately. ``--check`` exits 1 when pypto's forward pass of any block falls
below :data:`CHECK_MIN_RATIO` of NumPy's speed in two measurements, or a result is wrong.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # blocks.py; the harness's bench.py and cases.py

MODES = ("forward", "train")
CHECK_MIN_RATIO = 0.8
"""What ``--check`` tolerates: the cliffs it guards against are several times slower (0.04-0.5x NumPy), while
at its small size the matrix-product-bound blocks (SwiGLU, cross-entropy) run level with OpenBLAS
(0.96-1.22x measured) and millisecond medians on a shared 2-core machine move by 10-20 % between runs."""
IMPLS = ("pypto", "numpy", "torch", "torch.compile", "jax.jit")


def _set_threads(n: int) -> None:
    from bench import set_threads  # the harness's rules: passive OpenMP waiting, OpenBLAS's short spin

    set_threads(n)


def _libraries(threads: int, wanted: set[str]) -> dict:
    libs: dict = {}
    try:  # a competitor, and the reference for gradients
        import torch

        torch.set_num_threads(threads)
        libs["torch"] = torch
    except ImportError:
        pass
    if "jax.jit" in wanted:
        try:
            import jax

            libs["jax"] = jax
        except ImportError:
            pass
    return libs


def implementations(block, mode: str, libs: dict, wanted: set[str]) -> tuple[dict, dict]:
    """``{name: callable returning the result as NumPy}`` for ``block`` in ``mode``, and the first-call
    seconds of pypto."""
    import numpy as np

    import pypto as pt

    arrays = block.arrays
    n_params = len(block.params)
    r = block.cotangent
    impls: dict = {}
    first: dict = {}
    if mode == "forward":
        if "numpy" in wanted:
            impls["numpy"] = lambda: block.numpy(*arrays)
        if "pypto" in wanted:
            f = pt.jit(block.pypto)
            t0 = time.perf_counter()
            f(*arrays)
            first["pypto"] = time.perf_counter() - t0
            impls["pypto"] = lambda: f(*arrays)
    else:
        if "pypto" in wanted:
            fn = block.pypto
            loss = (lambda *a: fn(*a)) if r is None else (lambda *a: (fn(*a[:-1]) * a[-1]).sum())
            args = arrays if r is None else [*arrays, r]
            g = pt.grad(loss, argnums=tuple(range(n_params)))
            t0 = time.perf_counter()
            g(*args)
            first["pypto"] = time.perf_counter() - t0
            impls["pypto"] = lambda: g(*args)
    torch = libs.get("torch")
    if torch is not None and wanted & {"torch", "torch.compile"}:
        ts = [torch.from_numpy(a) for a in arrays]
        tr = torch.from_numpy(r) if r is not None else None

        def t_forward(*a):
            return block.torch(torch, *a)

        def t_loss(*a):
            y = block.torch(torch, *a)
            return y if tr is None else (y * tr).sum()

        def runner(fwd, lossf):
            if mode == "forward":

                def run():
                    with torch.no_grad():
                        return fwd(*ts).numpy()

                return run
            leaves = [t.detach().clone().requires_grad_(k < n_params) for k, t in enumerate(ts)]

            def run():
                for t in leaves[:n_params]:
                    t.grad = None
                lossf(*leaves).backward()
                return [t.grad.numpy() for t in leaves[:n_params]]

            return run

        if "torch" in wanted:
            impls["torch"] = runner(t_forward, t_loss)
        if "torch.compile" in wanted:
            impls["torch.compile"] = runner(torch.compile(t_forward, dynamic=False),
                                            torch.compile(t_loss, dynamic=False))  # fmt: skip
    jax = libs.get("jax")
    if jax is not None and "jax.jit" in wanted:
        js = [jax.numpy.asarray(a) for a in arrays]
        jr = jax.numpy.asarray(r) if r is not None else None

        def j_forward(*a):
            return block.jax(jax, *a)

        if mode == "forward":
            jf = jax.jit(j_forward)
            impls["jax.jit"] = lambda: np.asarray(jf(*js).block_until_ready())
        else:

            def j_loss(*a):
                y = block.jax(jax, *a)
                return y if jr is None else (y * jr).sum()

            jg = jax.jit(jax.grad(j_loss, argnums=tuple(range(n_params))))
            impls["jax.jit"] = lambda: [np.asarray(v) for v in jax.block_until_ready(jg(*js))]
    return impls, first


def reference(block, mode: str, libs: dict):
    """The float64 answer: NumPy's forward, or torch autograd's gradients (None without torch)."""
    import numpy as np

    arrays64 = [a.astype(np.float64) for a in block.arrays]
    if mode == "forward":
        return block.numpy(*arrays64)
    torch = libs.get("torch")
    if torch is None:
        return None
    n_params = len(block.params)
    ts = [torch.from_numpy(a).requires_grad_(k < n_params) for k, a in enumerate(arrays64)]
    y = block.torch(torch, *ts)
    loss = y if block.cotangent is None else (y * torch.from_numpy(block.cotangent.astype(np.float64))).sum()
    loss.backward()
    return [t.grad.numpy() for t in ts[:n_params]]


def agrees(got, want) -> str | None:
    """None when ``got`` matches ``want``, else why not: each array to 2e-3 of its largest magnitude, or of a
    thousandth of the largest among all of them, whichever is larger (a gradient that is zero in exact
    arithmetic, like that of a bias added to every key of a softmax, is rounding noise in float32)."""
    import numpy as np

    gots = got if isinstance(got, (list, tuple)) else [got]
    wants = [np.asarray(w, np.float64) for w in (want if isinstance(want, (list, tuple)) else [want])]
    floor = 1e-3 * max(float(np.max(np.abs(w))) for w in wants)
    for k, (g, w) in enumerate(zip(gots, wants)):
        g = np.asarray(g, np.float64)
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, expected {w.shape}"
        scale = max(float(np.max(np.abs(w))), floor, 1e-30)
        err = float(np.max(np.abs(g - w))) / scale
        if not err <= 2e-3:
            return f"output {k}: max error {err:.2g} of its largest magnitude (tolerance 2e-3)"
    return None


def run_one(block, mode: str, libs: dict, wanted: set[str], repeat: int, warmup: int) -> dict:
    impls, first = implementations(block, mode, libs, wanted)
    want = reference(block, mode, libs)
    out: dict = {"block": block.name, "title": block.title, "size": block.size.name, "size_text": str(block.size),
                 "mode": mode, "flops": block.flops * (3 if mode == "train" else 1), "results": {}}  # fmt: skip
    if "pypto" in first:
        out["pypto_first_call_s"] = first["pypto"]
    timed = {}
    for name, fn in impls.items():
        try:
            got = fn()
        except Exception as e:  # a failing competitor is reported, not timed
            out["results"][name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            continue
        why = agrees(got, want) if want is not None else None
        if why:
            out["results"][name] = {"error": f"wrong result: {why}"}
            continue
        timed[name] = fn
    from bench import interleaved

    times = interleaved(timed, repeat, warmup)
    for k, ts in times.items():
        out["results"][k] = {"median_ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3}
    return out


def ratio(row: dict, other: str) -> float | None:
    """How many times faster pypto is than ``other`` (medians), or None."""
    p = row["results"].get("pypto", {}).get("median_ms")
    o = row["results"].get(other, {}).get("median_ms")
    return o / p if p and o else None


def table(rows: list[dict], impls: tuple[str, ...]) -> str:
    shown = [i for i in impls if any(i in r["results"] for r in rows)]
    head = ["block", "size", "step", *(f"{i} ms" for i in shown), *(f"vs {i}" for i in shown if i != "pypto"),
            "pypto 1st call"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["block"], r["size"], r["mode"]]
        for i in shown:
            res = r["results"].get(i)
            cells.append("—" if res is None else "error" if "error" in res else f"{res['median_ms']:.2f}")
        for i in shown:
            if i != "pypto":
                x = ratio(r, i)
                cells.append("—" if x is None else f"{x:.2f}×")
        first = r.get("pypto_first_call_s")
        cells.append("—" if first is None else f"{first:.2f} s")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def errors(rows: list[dict]) -> list[str]:
    return [f"{r['block']} {r['size']} {r['mode']} {name}: {res['error']}"
            for r in rows for name, res in r["results"].items() if "error" in res]  # fmt: skip


BEGIN, END = "<!-- models:begin -->", "<!-- models:end -->"


def write_results(rows: list[dict], command: str, impls: tuple[str, ...]) -> None:
    from cases import environment

    path = HERE.parent / "RESULTS.md"
    env = environment()
    sizes = {r["size"]: r["size_text"] for r in rows}
    text = "\n".join([
        BEGIN,
        f"Command: `{command}` ({time.strftime('%Y-%m-%d')}; {env.get('cpu', '')}). Median ms per call; "
        "\"vs X\" is how many times faster pypto is than X (above 1: pypto is faster); \"pypto 1st call\" is the "
        "trace, compile and load of the first call in the run. The training step computes the gradients of "
        "every parameter (NumPy has no automatic differentiation). Sizes: "
        + "; ".join(f"{k}: {v}" for k, v in sizes.items()) + ".",
        "",
        table(rows, impls),
        *(["", "Not timed: " + "; ".join(errors(rows))] if errors(rows) else []),
        END,
    ])  # fmt: skip
    body = path.read_text()
    if BEGIN in body:
        body = body[: body.index(BEGIN)] + text + body[body.index(END) + len(END) :]
    else:
        body += "\n## Model blocks (`benchmarks/models/`)\n\n" + text + "\n"
    path.write_text(body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blocks", nargs="*", default=None, help="llama, gpt2, cross_entropy, swiglu (default: all)")
    p.add_argument("--sizes", nargs="*", default=None, help="ci, a, b (default: a b)")
    p.add_argument("--modes", nargs="*", default=list(MODES), choices=MODES)
    p.add_argument("--impls", nargs="*", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=HERE.parent / "out")
    p.add_argument("--write-results", action="store_true")
    p.add_argument("--check", action="store_true",
                   help="CI: size ci, forward against NumPy (and gradients checked against torch); exit 1 when "
                        f"pypto is below {CHECK_MIN_RATIO}x NumPy's speed on any block, twice")  # fmt: skip
    args = p.parse_args(argv)
    _set_threads(args.threads)
    import numpy as np
    from blocks import BLOCKS, SIZES

    if args.check:
        args.sizes, args.impls, args.repeat = args.sizes or ["ci"], ["pypto", "numpy"], max(args.repeat, 31)
    sizes = args.sizes or ["a", "b"]
    names = args.blocks or list(BLOCKS)
    wanted = set(args.impls)
    libs = _libraries(args.threads, wanted)
    missing = [i for i in wanted
               if (i.startswith("torch") and "torch" not in libs) or (i == "jax.jit" and "jax" not in libs)]  # fmt: skip
    if missing:
        print(f"not installed, not timed: {', '.join(sorted(missing))}", file=sys.stderr)
    rows = []
    for size in sizes:
        for name in names:
            block = BLOCKS[name](SIZES[size], np.random.default_rng(0))
            for mode in args.modes:
                if args.check and mode == "train":  # correctness only: NumPy has no training step to race
                    row = run_one(block, mode, libs, {"pypto"}, 1, 0)
                else:
                    row = run_one(block, mode, libs, wanted, args.repeat, args.warmup)
                rows.append(row)
                print(f"  {name} {size} {mode}: " + ", ".join(
                    f"{k} {v['median_ms']:.2f} ms" if "median_ms" in v else f"{k} error"
                    for k, v in row["results"].items()), file=sys.stderr, flush=True)  # fmt: skip
    print(table(rows, IMPLS))
    for e in errors(rows):
        print("error:", e)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "models.json").write_text(json.dumps(rows, indent=1))
    if args.write_results:
        command = "python benchmarks/models/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_results(rows, command.strip(), IMPLS)
    if args.check:
        bad = [r for r in rows if any("error" in v for k, v in r["results"].items() if k == "pypto")]
        slow = [r for r in rows if r["mode"] == "forward" and (ratio(r, "numpy") or 0) < CHECK_MIN_RATIO]
        if slow:  # measured again, twice as long, before a failure is reported: one noisy run is not a cliff
            again = []
            for r in slow:
                block = BLOCKS[r["block"]](SIZES[r["size"]], np.random.default_rng(0))
                row = run_one(block, "forward", libs, wanted, 2 * args.repeat, args.warmup)
                print(f"  {r['block']} {r['size']} forward, measured again: pypto {ratio(row, 'numpy') or 0:.2f}x "
                      "NumPy's speed", file=sys.stderr)  # fmt: skip
                if (ratio(row, "numpy") or 0) < CHECK_MIN_RATIO:
                    again.append(row)
            slow = again
        for r in bad:
            print(f"FAIL: {r['block']} {r['mode']}: {r['results']['pypto']['error']}")
        for r in slow:
            print(f"FAIL: {r['block']} forward at size {r['size']}: pypto {ratio(r, 'numpy') or 0:.2f}x NumPy's speed")
        return 1 if bad or slow else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
