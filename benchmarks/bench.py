"""pypto against NumPy, numexpr, Numba, torch (eager and torch.compile) and hand-written C, in one run.

    python benchmarks/bench.py                      # everything, 2 threads, prints the table
    python benchmarks/bench.py --write-results      # also rewrites benchmarks/RESULTS.md and the plot
    python benchmarks/bench.py --cases softmax_4096 --repeat 10

Timings are interleaved: every round runs each implementation once, in a new random order, so machine
noise and the effects of whichever ran just before hit all of them alike; the reported figure is the median over rounds. Ratios compare medians from the
same run. Outputs are preallocated. Every implementation's result is checked against NumPy first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def set_threads(n: int) -> None:
    # Several OpenMP runtimes take turns here (pypto's, the hand-written C's, torch's, Numba's); with
    # the default spin-waiting, one runtime's idle workers keep a core busy while the next one runs.
    # Passive waiting makes the interleaved comparison fair to every competitor. OpenBLAS (NumPy's matmul)
    # has its own pool, whose workers spin for 2**28 cycles after each call by default: the same rule,
    # a short spin, for it (benchmarks/blas_interference.py measures what that spinning costs the next call).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    for var in ("OMP_NUM_THREADS", "PYPTO_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENBLAS_NUM_THREADS", "NUMEXPR_MAX_THREADS", "NUMEXPR_NUM_THREADS"):  # fmt: skip
        os.environ[var] = str(n)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def interleaved(impls: dict, repeat: int, warmup: int, progress=None) -> dict[str, list[float]]:
    """Seconds per call of each implementation over ``repeat`` rounds, after ``warmup`` calls of each."""
    for _ in range(warmup):
        for fn in impls.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in impls}
    names = list(impls)
    # A new order every round: with a fixed cyclic order each implementation would always run right after
    # the same neighbour and inherit its effects (an output evicted by streaming stores, a busy pool).
    rng = random.Random(0)
    for _ in range(repeat):
        for k in rng.sample(names, len(names)):
            times[k].append(timed(impls[k]))
        if progress is not None:
            progress()
    return times


def run_case(case, repeat: int, warmup: int, progress) -> dict:
    import numpy as np

    want = case.reference()
    results: dict[str, dict] = {}
    impls = {}
    for name, fn in case.impls.items():
        try:
            fn()
            got = np.asarray(case.result(), dtype=np.float64).reshape(np.shape(want))
        except Exception as e:  # a failing competitor is reported, not timed
            results[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            continue
        if not np.allclose(got, want, **case.tolerance):
            rel = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))
            results[name] = {
                "error": f"result differs from NumPy (max relative error {rel:.2g}, tolerance {case.tolerance})"
            }
            continue
        impls[name] = fn
    times = interleaved(impls, repeat, warmup, progress)
    for k, ts in times.items():
        med = statistics.median(ts)
        results[k] = {"median_ms": med * 1e3, "min_ms": min(ts) * 1e3, "gbs": case.bytes_moved / med / 1e9}
        if case.flops:
            results[k]["gflops"] = case.flops / med / 1e9
    base_c = results.get("C", {}).get("median_ms")
    base_np = results.get("numpy", {}).get("median_ms")
    for v in results.values():
        if "median_ms" in v:
            v["vs_C"] = v["median_ms"] / base_c if base_c else None
            v["vs_numpy"] = v["median_ms"] / base_np if base_np else None
    return {"title": case.title, "bytes": case.bytes_moved, "flops": case.flops, "results": results,
            "skipped": case.skipped}  # fmt: skip


def dispatch_overhead(comp, repeat: int) -> dict:
    """Per-call cost of a 3-array kernel on 8 elements: the price of calling, not of computing."""
    import timeit

    import numpy as np
    from cases import PYPTO_KERNELS

    import pypto as pt

    a = pt.empty(8)
    b = pt.empty(8)
    c = pt.empty(8)
    a[:] = 1
    b[:] = 2
    fns = {"numpy (np.add out=)": lambda: np.add(a, b, out=c)}
    for be in comp.pypto_backends:
        k = pt.kernel(executor=be)(PYPTO_KERNELS["vector_add"].fn)
        fns[f"pypto-{be}"] = lambda k=k: k(a, b, c)
    if "openmp" in comp.pypto_backends:
        add = pt.jit(lambda x, y: x + y, executor="openmp")
        fns["pypto-jit (x + y, new result)"] = lambda: add(a, b)
        fns["pypto-jit (x + y, out=)"] = lambda: add(a, b, out=c)
    if comp.numba:
        from numba import njit

        @njit
        def vadd(x, y, z):
            for i in range(x.shape[0]):
                z[i] = x[i] + y[i]

        fns["numba (njit)"] = lambda: vadd(a, b, c)
    if comp.c:
        ffi, lib = comp.ffi, comp.c
        fns["C via cffi from_buffer"] = lambda: lib.vector_add(
            ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b), ffi.from_buffer("float[]", c), 8
        )
    out = {}
    for name, fn in fns.items():
        fn()
        n = 20000
        best = min(timeit.repeat(fn, number=n, repeat=max(3, repeat // 4))) / n
        out[name] = best * 1e6
    return out


_COLD = """
import time, numpy as np
t0 = time.perf_counter()
import pypto as pt
t1 = time.perf_counter()
M, N = pt.dims("M N")
@pt.kernel(executor="openmp")
def fused_softmax(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (M, N)]):
    row, col = pt.axis(0), pt.axis(1)
    max_val = pt.reduce_max(x[row, col], axis=col)
    exp_val = pt.exp(x[row, col] - max_val)
    sum_val = pt.reduce_sum(exp_val, axis=col)
    y[row, col] = exp_val / sum_val
x = np.ones((64, 64), np.float32); y = np.empty_like(x)
t2 = time.perf_counter()
fused_softmax(x, y)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


def first_call_times() -> dict:
    """Cold (trace + compile) and warm-cache first calls of fused_softmax, each in a new process."""
    with tempfile.TemporaryDirectory() as d:
        # the default cache location (under $XDG_CACHE_HOME), as a user's process finds it
        env = {**os.environ, "XDG_CACHE_HOME": d}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYPTO_CACHE_DIR", None)
        script = Path(d) / "first_call.py"
        script.write_text(textwrap.dedent(_COLD))
        kernels = Path(d) / "pypto" / "openmp"

        def run() -> tuple[float, float]:
            out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
            imp, call = out.stdout.split()
            return float(imp), float(call)

        run()  # probes the toolchain (once per machine) and writes bytecode
        time.sleep(2.1)  # pypto trusts its list of installed plugins once sys.path has been still for 2 s
        run()
        for p in kernels.glob("*"):
            for f in p.iterdir():
                f.unlink()
        colds = []
        warms = []
        for _ in range(3):
            for p in kernels.glob("*/*"):
                p.unlink()
            colds.append(run()[1])
            warms.append(run()[1])
        return {"cold_first_call_s": statistics.median(colds), "warm_first_call_s": statistics.median(warms),
                "import_s": run()[0]}  # fmt: skip


_ATTENTION_COLD = """
import sys, time, numpy as np
sys.path.insert(0, {examples!r})
import pypto as pt
from attention import MultiHeadAttention
block = MultiHeadAttention(256, 8, np.random.default_rng(0))
x = np.ones((4, 256, 256), np.float32)
t0 = time.perf_counter()
block(x)
print(time.perf_counter() - t0)
"""


def attention_cold_compile() -> float:
    """First call of the attention block (trace, lower, compile) with an empty cache, in a new process (median of 3)."""
    times = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            env = {**os.environ, "PYPTO_CACHE_DIR": d}
            script = Path(d) / "attention_cold.py"
            script.write_text(_ATTENTION_COLD.format(examples=str(HERE.parent / "examples")))
            out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
            times.append(float(out.stdout.split()[-1]))
    return statistics.median(times)


def stream_ceiling(comp, repeat: int) -> dict:
    import numpy as np

    import pypto as pt

    if not comp.c:
        return {}
    n = 32 << 20
    a, b, c = pt.empty(n), pt.empty(n), pt.empty(n)
    a[:] = 1
    b[:] = 2
    pa, pb, pc = comp.ptr(a), comp.ptr(b), comp.ptr(c)
    triad = [timed(lambda: comp.c.stream_triad(pa, pb, pc, 3.0, n)) for _ in range(repeat)]
    read = [timed(lambda: comp.c.stream_read(pa, n)) for _ in range(repeat)]
    copy = [timed(lambda: np.copyto(c, a)) for _ in range(repeat)]
    iters = 2_000_000
    peak = []
    for _ in range(5):
        t0 = time.perf_counter()
        flops = comp.c.fma_peak(iters)
        peak.append(flops / (time.perf_counter() - t0))
    return {"triad_gbs": 12 * n / statistics.median(triad) / 1e9, "read_gbs": 4 * n / statistics.median(read) / 1e9,
            "numpy_copy_gbs": 8 * n / statistics.median(copy) / 1e9, "peak_gflops": max(peak) / 1e9}  # fmt: skip


def print_table(report: dict) -> None:
    for name, case in report["cases"].items():
        print(f"\n{case['title']}  [{name}]")
        rows = sorted(case["results"].items(), key=lambda kv: kv[1].get("median_ms", 1e99))
        for impl, r in rows:
            if "error" in r:
                print(f"  {impl:22s}  error: {r['error']}")
                continue
            vs_c = f"{r['vs_C']:.2f}x C" if r.get("vs_C") else ""
            vs_np = f"{1 / r['vs_numpy']:.2f}x faster than NumPy" if r.get("vs_numpy") else ""
            rate = f"{r['gflops']:7.1f} GFLOP/s" if "gflops" in r else f"{r['gbs']:7.1f} GB/s   "
            print(f"  {impl:22s} {r['median_ms']:9.3f} ms {rate}  {vs_c:>9s}  {vs_np}")
    if report.get("dispatch_us"):
        print("\nper-call overhead, 3 arrays of 8 floats:")
        for k, v in report["dispatch_us"].items():
            print(f"  {k:26s} {v:6.2f} us")
    if report.get("first_call"):
        fc = report["first_call"]
        print(
            f"\nfused_softmax first call: cold (trace + compile) {fc['cold_first_call_s'] * 1e3:.0f} ms, "
            f"warm cache {fc['warm_first_call_s'] * 1e3:.1f} ms; import pypto {fc['import_s'] * 1e3:.0f} ms"
        )
        if "attention_cold_s" in fc:
            print(f"attention block (examples/attention.py) first call, empty cache: {fc['attention_cold_s']:.2f} s")
    if report.get("stream"):
        s = report["stream"]
        print(
            f"\nbandwidth ceiling (hand-written, {report['threads']} threads): triad {s['triad_gbs']:.1f} GB/s, "
            f"read {s['read_gbs']:.1f} GB/s; NumPy copy {s['numpy_copy_gbs']:.1f} GB/s; "
            f"peak float32 FMA rate {s.get('peak_gflops', 0):.0f} GFLOP/s"
        )


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(report["cases"])
    impls: list[str] = []
    for c in report["cases"].values():
        for k, v in c["results"].items():
            if "median_ms" in v and k not in impls:
                impls.append(k)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / max(1, len(impls))
    for i, impl in enumerate(impls):
        ys = []
        for c in cases:
            r = report["cases"][c]["results"].get(impl, {})
            ys.append(1 / r["vs_numpy"] if r.get("vs_numpy") else 0)
        ax.bar([j + i * width for j in range(len(cases))], ys, width, label=impl)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))], cases, rotation=15)
    ax.set_ylabel("speed-up over NumPy (median, higher is better)")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_title(f"pypto vs the alternatives, {report['threads']} threads, float32")
    ax.legend(ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", help="case names (default: all)")
    p.add_argument("--repeat", type=int, default=25, help="timed rounds per case (default 25)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=HERE / "out", help="folder for results.json and the plot")
    p.add_argument("--write-results", action="store_true", help="rewrite benchmarks/RESULTS.md and the plot")
    p.add_argument("--skip-extras", action="store_true", help="skip dispatch, first-call and bandwidth probes")
    args = p.parse_args(argv)
    set_threads(args.threads)
    sys.path.insert(0, str(HERE))
    from cases import Competitors, build_cases, environment

    args.out.mkdir(parents=True, exist_ok=True)
    comp = Competitors(args.threads, args.out / "build")
    cases = build_cases(comp, args.cases)
    report: dict = {"threads": args.threads, "repeat": args.repeat, "environment": environment(),
                    "c_flags": comp.c_flags, "missing": comp.missing, "cases": {}}  # fmt: skip
    total = len(cases) * args.repeat
    done = [0]

    def progress() -> None:
        done[0] += 1
        print(f"\r  {done[0]}/{total} rounds", end="", file=sys.stderr, flush=True)

    for case in cases:
        report["cases"][case.name] = run_case(case, args.repeat, args.warmup, progress)
    print(file=sys.stderr)
    if not args.skip_extras:
        report["dispatch_us"] = dispatch_overhead(comp, args.repeat)
        if "openmp" in comp.pypto_backends:
            report["first_call"] = first_call_times()
            report["first_call"]["attention_cold_s"] = attention_cold_compile()
        report["stream"] = stream_ceiling(comp, args.repeat)
    print_table(report)
    (args.out / "results.json").write_text(json.dumps(report, indent=1))
    if args.write_results:
        plot(report, HERE / "results.png")
        from results import render_summary, replace_generated, write_results

        cmd = "python benchmarks/bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_results(report, HERE / "RESULTS.md", cmd.strip())
        docs = HERE.parent / "docs"
        (docs / "img").mkdir(exist_ok=True)
        shutil.copyfile(HERE / "results.png", docs / "img" / "benchmarks.png")
        replace_generated(docs / "performance.md", render_summary(report))
        print(f"\nwrote {HERE / 'RESULTS.md'}, {HERE / 'results.png'} and the summary in {docs / 'performance.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
