"""GPU benchmarks: pypto's CUDA backend side by side with torch (eager) and Triton, in one run, on torch tensors.

    python benchmarks/gpu_bench.py [--json FILE] [--md FILE] [--quick]

Every case is checked against torch on the same inputs before it is timed. Times are medians of CUDA-event
timings (each timed call between two events on the current stream, after warm-up calls); bandwidths count
the bytes a kernel must move (inputs read once, outputs written once) over the measured device-to-device
copy bandwidth of the same run. Launch overhead is host time per call of a kernel on 1,024 elements,
10,000 calls enqueued back to back (the GPU keeps up, so the host path is what is measured).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from datetime import date
from typing import Any

import numpy as np
import torch

import pypto as pt
from pypto.testing import layernorm, matmul, softmax, vector_add

DEV = "cuda"
RESULTS: list[dict[str, Any]] = []


def gpu_time(fn: Callable[[], Any], warmup: int = 5, repeat: int = 30) -> float:
    """Median seconds of ``fn()`` by CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeat):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return math.inf
    return float(torch.linalg.vector_norm(out - ref) / max(float(torch.linalg.vector_norm(ref)), 1e-30))


def record(case: str, impl: str, seconds: float | None, *, bytes_moved: float = 0, flops: float = 0,
           err: float | None = None, note: str = "") -> None:  # fmt: skip
    row = {"case": case, "impl": impl, "ms": None if seconds is None else seconds * 1e3, "err": err, "note": note}
    if seconds:
        if bytes_moved:
            row["GB/s"] = bytes_moved / seconds / 1e9
        if flops:
            row["TFLOP/s"] = flops / seconds / 1e12
    RESULTS.append(row)
    shown = "-" if seconds is None else f"{seconds * 1e3:9.4f} ms"
    extra = (f"  {row.get('GB/s', 0):8.1f} GB/s" if bytes_moved and seconds else "") + (
        f"  {row.get('TFLOP/s', 0):7.2f} TFLOP/s" if flops and seconds else "")  # fmt: skip
    print(f"{case:34s} {impl:14s} {shown}{extra}  err={err if err is None else f'{err:.1e}'} {note}", flush=True)


def guarded(case: str):
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        def run(*a: Any) -> None:
            try:
                fn(*a)
            except Exception as e:  # noqa: BLE001 - one failing case must not hide the others
                traceback.print_exc()
                record(case, "ERROR", None, note=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
            torch.cuda.synchronize()

        return run

    return wrap


# -- triton kernels, written for this comparison ---------------------------------------------------------------
def triton_kernels() -> dict[str, Any]:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return {}

    @triton.jit
    def softmax_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)

    @triton.jit
    def layernorm_rows(x_ptr, g_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        inv = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        g = tl.load(g_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(y_ptr + row * n_cols + cols, d * inv * g + b, mask=mask)

    def softmax_fn(x: torch.Tensor, y: torch.Tensor) -> None:
        m, n = x.shape
        block = triton.next_power_of_2(n)
        softmax_rows[(m,)](x, y, n, BLOCK=block, num_warps=8 if block >= 2048 else 4)

    def layernorm_fn(x: torch.Tensor, g: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        m, n = x.shape
        block = triton.next_power_of_2(n)
        layernorm_rows[(m,)](x, g, b, y, n, 1e-5, BLOCK=block, num_warps=8 if block >= 2048 else 4)

    return {"softmax": softmax_fn, "layernorm": layernorm_fn, "version": triton.__version__}


# -- cases ---------------------------------------------------------------------------------------------------------
def copy_bandwidth(n_bytes: int) -> float:
    x = torch.empty(n_bytes // 4, device=DEV)
    y = torch.empty_like(x)
    x.uniform_()
    t = gpu_time(lambda: y.copy_(x))
    record(f"copy {n_bytes >> 20} MiB", "torch", t, bytes_moved=2 * n_bytes)
    return 2 * n_bytes / t


@guarded("softmax")
def bench_softmax(m: int, n: int, tri: dict) -> None:
    case = f"softmax {m}x{n} f32"
    x = torch.randn(m, n, device=DEV)
    y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    k = pt.kernel(executor="cuda")(softmax.fn)
    k(x, y)
    torch.cuda.synchronize()
    moved = 2 * x.numel() * 4
    record(case, "pypto", gpu_time(lambda: k(x, y)), bytes_moved=moved, err=rel_err(y, ref))
    record(case, "torch", gpu_time(lambda: torch.softmax(x, -1)),
           bytes_moved=moved, err=rel_err(torch.softmax(x, -1), ref))  # fmt: skip
    if "softmax" in tri:
        yt = torch.empty_like(x)
        tri["softmax"](x, yt)
        record(case, "triton", gpu_time(lambda: tri["softmax"](x, yt)), bytes_moved=moved, err=rel_err(yt, ref))


@guarded("layernorm")
def bench_layernorm(m: int, n: int, tri: dict) -> None:
    case = f"layernorm {m}x{n} f32"
    x = torch.randn(m, n, device=DEV)
    g, b = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    y = torch.empty_like(x)
    ref = torch.nn.functional.layer_norm(x.double(), (n,), g.double(), b.double(), 1e-5)
    k = pt.kernel(executor="cuda")(layernorm.fn)
    k(x, g, b, y)
    torch.cuda.synchronize()
    moved = 2 * x.numel() * 4
    record(case, "pypto", gpu_time(lambda: k(x, g, b, y)), bytes_moved=moved, err=rel_err(y, ref))
    f = torch.nn.functional.layer_norm
    record(
        case,
        "torch",
        gpu_time(lambda: f(x, (n,), g, b, 1e-5)),
        bytes_moved=moved,
        err=rel_err(f(x, (n,), g, b, 1e-5), ref),
    )
    if "layernorm" in tri:
        yt = torch.empty_like(x)
        tri["layernorm"](x, g, b, yt)
        record(case, "triton", gpu_time(lambda: tri["layernorm"](x, g, b, yt)), bytes_moved=moved, err=rel_err(yt, ref))


@guarded("vector add")
def bench_vector_add(n: int) -> None:
    case = f"vector add {n >> 20}M f32"
    a, b = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    c = torch.empty_like(a)
    k = pt.kernel(executor="cuda")(vector_add.fn)
    k(a, b, c)
    torch.cuda.synchronize()
    moved = 3 * n * 4
    record(case, "pypto", gpu_time(lambda: k(a, b, c)), bytes_moved=moved, err=rel_err(c, a + b))
    record(case, "torch", gpu_time(lambda: torch.add(a, b, out=c)), bytes_moved=moved)


@guarded("matmul")
def bench_matmul(n: int) -> None:
    case = f"matmul {n}^3 f32 (no tf32)"
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(n, n, device=DEV), torch.randn(n, n, device=DEV)
    c = torch.empty(n, n, device=DEV)
    ref = a.double() @ b.double()
    k = pt.kernel(executor="cuda")(matmul.fn)
    k(a, b, c)
    torch.cuda.synchronize()
    flops = 2.0 * n**3
    record(case, "pypto", gpu_time(lambda: k(a, b, c), 2, 10), flops=flops, err=rel_err(c, ref))
    record(case, "torch", gpu_time(lambda: torch.matmul(a, b, out=c), 2, 10), flops=flops, err=rel_err(a @ b, ref))
    for dt in (torch.float16, torch.bfloat16):
        ah, bh = a.to(dt), b.to(dt)
        record(f"matmul {n}^3 {str(dt)[6:]}", "torch", gpu_time(lambda ah=ah, bh=bh: ah @ bh, 2, 10), flops=flops,
               err=rel_err(ah @ bh, ref), note="pypto: 16-bit dtypes not supported yet")  # fmt: skip


def swiglu(x, w1, w3, w2):
    return (pt.silu(x @ w1) * (x @ w3)) @ w2


def attention(x, wq, wk, wv, wo):
    q = pt.einsum("bsd,dhe->bhse", x, wq)
    k = pt.einsum("bsd,dhe->bhse", x, wk)
    v = pt.einsum("bsd,dhe->bhse", x, wv)
    p = pt.softmax(pt.einsum("bhie,bhje->bhij", q, k) * (1.0 / math.sqrt(wq.shape[2])), dim=-1)
    return pt.einsum("bhse,hed->bsd", pt.einsum("bhij,bhje->bhie", p, v), wo)


@guarded("swiglu")
def bench_swiglu(tokens: int, dim: int, hidden: int) -> None:
    case = f"SwiGLU MLP {tokens}x{dim}x{hidden} f32"
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device=DEV).manual_seed(0)
    x = torch.randn(tokens, dim, device=DEV, generator=g)
    w1, w3 = (torch.randn(dim, hidden, device=DEV, generator=g) / dim**0.5 for _ in range(2))
    w2 = torch.randn(hidden, dim, device=DEV, generator=g) / hidden**0.5

    def eager():
        return (torch.nn.functional.silu(x @ w1) * (x @ w3)) @ w2

    ref = eager()
    f = pt.jit(swiglu)
    t0 = time.perf_counter()
    out = f(x, w1, w3, w2)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    flops = 2.0 * tokens * dim * hidden * 3
    record(case, "pypto", gpu_time(lambda: f(x, w1, w3, w2), 2, 10), flops=flops, err=rel_err(out, ref),
           note=f"first call {compile_s:.1f} s")  # fmt: skip
    record(case, "torch", gpu_time(eager, 2, 10), flops=flops)


@guarded("attention")
def bench_attention(batch: int, seq: int, dim: int, heads: int) -> None:
    case = f"attention b{batch} s{seq} d{dim} h{heads} f32"
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device=DEV).manual_seed(1)
    e = dim // heads
    x = torch.randn(batch, seq, dim, device=DEV, generator=g)
    wq, wk, wv = (torch.randn(dim, heads, e, device=DEV, generator=g) / dim**0.5 for _ in range(3))
    wo = torch.randn(heads, e, dim, device=DEV, generator=g) / dim**0.5

    def eager():
        q, k, v = (torch.einsum("bsd,dhe->bhse", x, w) for w in (wq, wk, wv))
        p = torch.softmax(torch.einsum("bhie,bhje->bhij", q, k) / math.sqrt(e), -1)
        return torch.einsum("bhse,hed->bsd", torch.einsum("bhij,bhje->bhie", p, v), wo)

    ref = eager()
    f = pt.jit(attention)
    t0 = time.perf_counter()
    out = f(x, wq, wk, wv, wo)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    flops = 2.0 * batch * seq * dim * dim * 4 + 4.0 * batch * heads * seq * seq * e
    record(case, "pypto", gpu_time(lambda: f(x, wq, wk, wv, wo), 2, 10), flops=flops, err=rel_err(out, ref),
           note=f"first call {compile_s:.1f} s")  # fmt: skip
    record(case, "torch", gpu_time(eager, 2, 10), flops=flops)


@guarded("launch overhead")
def bench_overhead(n: int = 1024, calls: int = 10_000) -> None:
    a, b = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    c = torch.empty_like(a)
    k = pt.kernel(executor="cuda")(vector_add.fn)
    for impl, fn in (("pypto", lambda: k(a, b, c)), ("torch", lambda: torch.add(a, b, out=c))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) / calls)
            torch.cuda.synchronize()
        record("launch overhead (host, per call)", impl, statistics.median(samples), note=f"{n} elements")
    # the NumPy path: copies in and out, and a wait, on every call
    x = np.random.rand(n).astype(np.float32)
    z = np.empty_like(x)
    k(x, x, z)
    t0 = time.perf_counter()
    for _ in range(1000):
        k(x, x, z)
    record("NumPy arrays (copies + wait)", "pypto", (time.perf_counter() - t0) / 1000, note=f"{n} elements")


def markdown(copy_bw: float, info: dict) -> str:
    lines = [
        f"### GPU run {date.today().isoformat()}: {info.get('device')} ({info.get('arch')}), driver "
        f"{info.get('driver_version')}, torch {torch.__version__}, triton {info.get('triton', '-')}",
        "",
        f"Measured device-to-device copy bandwidth: {copy_bw / 1e9:.0f} GB/s (read + write).",
        "",
        "| case | impl | median ms | GB/s | % of copy | TFLOP/s | rel. error | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in RESULTS:
        bw, tf, ms, err = r.get("GB/s"), r.get("TFLOP/s"), r["ms"], r["err"]
        cells = [
            r["case"], r["impl"], "-" if ms is None else f"{ms:.4f}", "" if bw is None else f"{bw:.0f}",
            "" if bw is None else f"{100 * bw * 1e9 / copy_bw:.0f} %", "" if tf is None else f"{tf:.2f}",
            "" if err is None else f"{err:.1e}", r["note"],
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None)
    ap.add_argument("--quick", action="store_true", help="small sizes (a dry run of the script's logic)")
    args = ap.parse_args()
    info = pt.get_runtime_info()["backends"]["cuda"]
    print(json.dumps(info, indent=1, default=str))
    dev_info = info.get("info", info)
    tri = triton_kernels()
    dev_info["triton"] = tri.get("version", "not installed")
    q = args.quick
    copy_bw = copy_bandwidth((64 if q else 2048) << 20)
    bench_overhead()
    bench_vector_add(1 << (20 if q else 28))
    for m, n in [(256, 1024)] if q else [(8192, 8192), (4096, 1024), (32768, 512)]:
        bench_softmax(m, n, tri)
        bench_layernorm(m, n, tri)
    bench_matmul(512 if q else 4096)
    bench_swiglu(*((256, 256, 512) if q else (4096, 1024, 4096)))
    bench_attention(*((2, 128, 128, 4) if q else (8, 1024, 1024, 16)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"date": date.today().isoformat(), "python": platform.python_version(), "info": dev_info,
                       "copy_GBps": copy_bw / 1e9, "results": RESULTS}, fh, indent=1, default=str)  # fmt: skip
    md = markdown(copy_bw, dev_info)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(md)
    print(md)
    return 0 if all(r["impl"] != "ERROR" for r in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
