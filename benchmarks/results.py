"""Writes the measured section of benchmarks/RESULTS.md; text outside the markers is kept."""

from __future__ import annotations

import datetime
from pathlib import Path

BEGIN = "<!-- BEGIN GENERATED: benchmarks/bench.py --write-results -->"
END = "<!-- END GENERATED -->"

# (case, implementation, compared with, limit, description)
TARGETS = [
    ("softmax_4096", "pypto-openmp", "C", 1.05, "softmax 4096² ≤ 1.05 × hand-written C"),
    ("vector_add_16M", "pypto-openmp", "C", 1.05, "vector add 16M ≤ 1.05 × hand-written C"),
    ("sum_exp_16M", "pypto-openmp", "C", 1.10, "sum(exp) 16M ≤ 1.10 × hand-written C"),
    ("softmax_1024", "pypto-openmp", "C", 1.10, "softmax 1024² ≤ 1.10 × hand-written C"),
    ("softmax_4096", "pypto-openmp", "numpy", 1 / 7, "softmax 4096² at least 7 × faster than NumPy"),
    ("softmax_4096", "pypto-tbb", "pypto-openmp", 1.10, "TBB softmax 4096² ≤ 1.10 × OpenMP"),
    ("vector_add_16M", "pypto-tbb", "pypto-openmp", 1.10, "TBB vector add 16M ≤ 1.10 × OpenMP"),
    ("sum_exp_16M", "pypto-tbb", "pypto-openmp", 1.10, "TBB sum(exp) 16M ≤ 1.10 × OpenMP"),
    ("layernorm_4096", "pypto-tbb", "pypto-openmp", 1.10, "TBB layernorm 4096² ≤ 1.10 × OpenMP"),
    ("softmax_4096", "pypto-opencl", "pypto-openmp", 2.0, "OpenCL (PoCL) softmax 4096² ≤ 2 × OpenMP"),
    ("vector_add_16M", "pypto-opencl", "pypto-openmp", 2.0, "OpenCL (PoCL) vector add 16M ≤ 2 × OpenMP"),
    ("sum_exp_16M", "pypto-opencl", "pypto-openmp", 2.0, "OpenCL (PoCL) sum(exp) 16M ≤ 2 × OpenMP"),
    ("matmul_1024", "pypto-openmp", "numpy", 1 / 0.8, "matmul 1024³ at least 0.8 × OpenBLAS's speed"),
    ("matmul_2048", "pypto-openmp", "numpy", 1 / 0.8, "matmul 2048³ at least 0.8 × OpenBLAS's speed"),
    ("matmul_1024", "pypto-tbb", "pypto-openmp", 1.10, "TBB matmul 1024³ ≤ 1.10 × OpenMP"),
    ("matmul_2048", "pypto-tbb", "pypto-openmp", 1.10, "TBB matmul 2048³ ≤ 1.10 × OpenMP"),
    ("column_sum_4096", "pypto-openmp", "numpy", 1 / 2, "column sum 4096² at least 2 × faster than NumPy"),
    ("jit_softmax_4096", "pypto-jit (out=)", "pypto kernel", 1.05, "pt.softmax through @pt.jit ≤ 1.05 × the kernel"),
    (
        "jit_layernorm_4096",
        "pypto-jit (out=)",
        "pypto kernel",
        1.05,
        "pt.layer_norm through @pt.jit ≤ 1.05 × the kernel",
    ),
    ("mlp_block", "pypto-jit", "torch", 1.0, "MLP block at least as fast as torch eager"),
    ("mlp_block", "pypto-jit", "jax.jit", 1.0, "MLP block at least as fast as jax.jit"),
    ("mlp_block", "pypto-jit", "numpy", 1 / 3, "MLP block at least 3 × faster than NumPy"),
    ("attention_block", "pypto-jit", "torch", 1.0, "attention block at least as fast as torch eager"),
    ("attention_block", "pypto-jit", "jax.jit", 1.0, "attention block at least as fast as jax.jit"),
    ("attention_block", "pypto-jit", "numpy", 1 / 3, "attention block at least 3 × faster than NumPy"),
    ("grad_softmax_4096", "pypto-grad", "torch", 1 / 1.2, "softmax backward ≥ 1.2 × faster than torch autograd"),
    ("grad_softmax_4096", "pypto-grad", "jax.jit(grad)", 1.1, "softmax backward ≤ 1.1 × jax.jit(grad)"),
    ("grad_layernorm_4096", "pypto-grad", "torch", 1 / 1.2, "layer_norm backward ≥ 1.2 × faster than torch autograd"),
    ("grad_layernorm_4096", "pypto-grad", "jax.jit(grad)", 1.1, "layer_norm backward ≤ 1.1 × jax.jit(grad)"),
    ("grad_gelu_16M", "pypto-grad", "torch", 1 / 1.2, "gelu backward ≥ 1.2 × faster than torch autograd"),
    ("grad_gelu_16M", "pypto-grad", "jax.jit(grad)", 1.1, "gelu backward ≤ 1.1 × jax.jit(grad)"),
    ("train_mlp_block", "pypto-grad", "torch", 1.0, "MLP training step at least as fast as torch eager"),
    ("train_attention_block", "pypto-grad", "torch", 1.0, "attention training step at least as fast as torch eager"),
]


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def render(report: dict, command: str) -> str:
    env = report["environment"]
    lines = [BEGIN, "", f"Command: `{command}`  ", f"Date: {datetime.date.today().isoformat()}  "]
    lines.append("Machine: " + ", ".join(f"{k} {v}" for k, v in env.items()) + f"; {report['threads']} threads  ")
    lines.append(f"Hand-written C flags: `{report['c_flags']}`  ")
    lines.append(f"Medians of {report['repeat']} interleaved rounds; outputs preallocated.")
    if report.get("missing"):
        lines.append("")
        lines.append("Not measured: " + "; ".join(f"{k} ({v})" for k, v in report["missing"].items()))
    lines += ["", "### Targets", "", "| target | measured ratio | met |", "|---|---|---|"]
    for case, impl, base, limit, text in TARGETS:
        res = report["cases"].get(case, {}).get("results", {})
        a, b = res.get(impl, {}).get("median_ms"), res.get(base, {}).get("median_ms")
        if a is None or b is None:
            continue
        ratio = a / b
        shown = f"{b / a:.2f}× the speed" if base == "numpy" else f"{ratio:.3f}"
        lines.append(f"| {text} | {shown} | {'yes' if ratio <= limit else 'no'} |")
    fc = report.get("first_call")
    if fc:
        lines.append(
            f"| cold first call of fused_softmax (trace + compile) ≤ 0.3 s | {fc['cold_first_call_s']:.3f} s "
            f"| {'yes' if fc['cold_first_call_s'] <= 0.3 else 'no'} |"
        )
        lines.append(
            f"| first call in a new process, warm cache, ≤ 20 ms after import | "
            f"{fc['warm_first_call_s'] * 1e3:.1f} ms | {'yes' if fc['warm_first_call_s'] <= 0.02 else 'no'} |"
        )
    if fc and "attention_cold_s" in fc:
        lines.append(
            f"| cold first call of the attention block (trace + compile) ≤ 1 s | {fc['attention_cold_s']:.2f} s "
            f"| {'yes' if fc['attention_cold_s'] <= 1.0 else 'no'} |"
        )
    d = report.get("dispatch_us", {})
    jit_key = "pypto-jit (x + y, new result)"
    if jit_key in d:
        lines.append(f"| per-call dispatch of a jit function on small arrays ≤ 3 µs | {d[jit_key]:.2f} µs "
                     f"| {'yes' if d[jit_key] <= 3.0 else 'no'} |")  # fmt: skip
    if "pypto-openmp" in d:
        lines.append(
            f"| per-call overhead, 3-array kernel ≤ 1 µs | {d['pypto-openmp']:.2f} µs "
            f"| {'yes' if d['pypto-openmp'] <= 1.0 else 'no'} |"
        )
    s = report.get("stream") or {}
    tr = report["cases"].get("transpose_4096", {}).get("results", {}).get("pypto-openmp", {})
    if s.get("numpy_copy_gbs") and tr.get("gbs"):
        ratio = s["numpy_copy_gbs"] / tr["gbs"]
        lines.append(f"| transpose 4096² within 1.3 × the time of a copy (NumPy copy bandwidth) | {ratio:.2f} "
                     f"| {'yes' if ratio <= 1.3 else 'no'} |")  # fmt: skip
    for name, case in report["cases"].items():
        lines += [
            "",
            f"### {case['title']} (`{name}`)",
            "",
            "| implementation | median ms | "
            + ("GFLOP/s" if case.get("flops") else "GB/s")
            + " | × hand-written C | speed-up over NumPy |",
            "|---|---|---|---|---|",
        ]
        rows = sorted(case["results"].items(), key=lambda kv: kv[1].get("median_ms", 1e99))
        for impl, r in rows:
            if "error" in r:
                lines.append(f"| {impl} | error: {r['error']} | | | |")
                continue
            vs_c = f"{r['vs_C']:.2f}" if r.get("vs_C") else "—"
            vs_np = f"{1 / r['vs_numpy']:.2f}" if r.get("vs_numpy") else "—"
            rate = r["gflops"] if case.get("flops") else r["gbs"]
            lines.append(f"| {impl} | {_ms(r['median_ms'])} | {rate:.1f} | {vs_c} | {vs_np} |")
    if d:
        lines += [
            "",
            "### Per-call overhead (3 arrays of 8 float32, best of several runs)",
            "",
            "| caller | µs per call |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v:.2f} |" for k, v in d.items()]
    s = report.get("stream")
    if s:
        lines += [
            "",
            "### Bandwidth ceiling",
            "",
            f"STREAM-style triad {s['triad_gbs']:.1f} GB/s, read-only {s['read_gbs']:.1f} GB/s, "
            f"NumPy copy {s['numpy_copy_gbs']:.1f} GB/s (hand-written C, {report['threads']} threads). "
            f"Peak float32 multiply-add rate {s.get('peak_gflops', 0):.0f} GFLOP/s (independent FMA chains).",
        ]
    lines += ["", "![speed-up over NumPy](results.png)", "", END]
    return "\n".join(lines)


# the columns of the summary in docs/performance.md: speed-up over NumPy of each implementation
SUMMARY = [
    "pypto-openmp",
    "pypto-tbb",
    "pypto-opencl",
    "pypto-jit",
    "C",
    "numba",
    "torch",
    "torch.compile",
    "jax.jit",
    "numexpr",
]


def render_summary(report: dict) -> str:
    """The short table for the performance guide: speed-up over NumPy per case and implementation."""
    cols = [c for c in SUMMARY if any(c in case["results"] for case in report["cases"].values())]
    names = {"C": "hand-written C"}
    lines = [
        BEGIN,
        "",
        f"Speed-up over NumPy (NumPy's time / each one's; medians of {report['repeat']} interleaved rounds, "
        f"{report['threads']} threads, float32, outputs preallocated; {datetime.date.today().isoformat()}):",
        "",
        "| case | " + " | ".join(names.get(c, c) for c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for case in report["cases"].values():
        cells = []
        for c in cols:
            r = case["results"].get(c, {})
            cells.append(f"{1 / r['vs_numpy']:.2f}" if r.get("vs_numpy") else ("error" if "error" in r else "—"))
        lines.append(f"| {case['title']} | " + " | ".join(cells) + " |")
    lines += ["", "![speed-up over NumPy](img/benchmarks.png)", "", END]
    return "\n".join(lines)


def replace_generated(path: Path, generated: str) -> None:
    """Put ``generated`` between the markers of ``path`` (which must have them)."""
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + generated + rest.split(END, 1)[1])


def write_results(report: dict, path: Path, command: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmark results\n\n" + BEGIN + "\n" + END + "\n"
    generated = render(report, command)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + generated + tail
    else:
        text = text.rstrip() + "\n\n" + generated + "\n"
    path.write_text(text)
