"""The ``pypto`` command: ``info``, ``bench``, ``show`` and ``cache``.

pypto info                                  versions, backends (available or why not), cache
pypto bench [--backend B ...] [--case C ...] [--plot out.png]
pypto show FILE.py:KERNEL [--backend B] [--ir STAGE]
pypto cache info | clear
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# -- pypto info ---------------------------------------------------------------------------------------


def cmd_info(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from pypto import get_runtime_info
    from pypto.cache import DiskCache

    info = get_runtime_info()
    con = _console()
    con.print(f"[bold]pypto {info['pypto']}[/bold]  Python {info['python']}, NumPy {info['numpy']}, "
              f"{info['platform']}, {info['cpu_count']} CPUs")  # fmt: skip
    con.print(f"default executor: [bold]{info['default_executor']}[/bold]")
    table = Table(title="backends (highest priority first)", show_lines=False)
    for col in ("backend", "version", "priority", "status", "device", "threads", "compiler"):
        table.add_column(col, overflow="fold")
    for name, b in info["backends"].items():
        status = "[green]available[/green]" if b["available"] else f"[red]unavailable[/red]: {escape(b['reason'])}"
        cells = (b.get("device", ""), b.get("threads", ""), b.get("compiler", ""))
        table.add_row(name, b["version"], str(b["priority"]), status, *(escape(str(c)) for c in cells))
    con.print(table)
    for s in info["skipped_plugins"]:
        dist = f" ({s['distribution']})" if s["distribution"] else ""
        con.print(f"[yellow]skipped plugin[/yellow] {escape(s['name'] + dist)}: {escape(s['reason'])}")
    cache = DiskCache().info()
    state = "enabled" if info["cache_enabled"] else "disabled (PYPTO_NO_CACHE)"
    con.print(f"cache: {cache['path']} — {cache['entries']} kernels, {_human(cache['bytes'])}, {state}", markup=False)
    if info["env"]:
        con.print("environment: " + ", ".join(f"{k}={v}" for k, v in info["env"].items()), markup=False)
    return 0


# -- pypto bench ---------------------------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.progress import Progress
    from rich.table import Table

    from pypto import benchsuite
    from pypto.plugins import get_registry

    reg = get_registry()
    if args.backend:
        backends = args.backend
        for b in backends:
            reg.resolve(b)  # a clear error for unknown or unavailable backends
    else:
        backends = [b.spec.name for b in reg.ordered() if b.availability.available]
    con = _console()
    with Progress(console=con, transient=True) as bar:
        task = bar.add_task("benchmarking", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        results = benchsuite.run(backends, args.case or None, size=args.size, repeat=args.repeat, progress=progress)
    table = Table(title=f"median time per call ({args.size} size, {args.repeat} interleaved rounds)")
    table.add_column("case")
    table.add_column("numpy", justify="right")
    for b in backends:
        table.add_column(b, justify="right")
        table.add_column(f"{b} vs numpy", justify="right")
    for r in results:
        base = r.medians["numpy"]
        row = [r.name, f"{base * 1e3:.3f} ms"]
        for b in backends:
            if b in r.medians:
                row += [f"{r.medians[b] * 1e3:.3f} ms", _speed(base, r.medians[b])]
            else:
                row += [escape(f"error: {r.errors.get(b, '?')}"), ""]
        table.add_row(*row)
    con.print(table)
    if args.plot:
        _plot(results, backends, Path(args.plot))
        con.print(f"plot written to {args.plot}")
    return 0


def _plot(results: list[Any], backends: list[str], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("pypto bench --plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(backends))
    for i, b in enumerate(backends):
        ys = [r.medians["numpy"] / r.medians[b] if b in r.medians else 0 for r in results]
        ax.bar([j + i * width for j in range(len(results))], ys, width, label=b)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(results))], [r.name for r in results])
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_ylabel("speed-up over NumPy (median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# -- pypto show ---------------------------------------------------------------------------------------


def _load_kernel(target: str):
    from pypto import Kernel
    from pypto.errors import ArgumentError

    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise ArgumentError(f"pypto show: expected FILE.py:KERNEL, got {target!r}", param="target",
                            expected="FILE.py:KERNEL", got=target)  # fmt: skip
    file = Path(path)
    if not file.exists():
        raise ArgumentError(f"pypto show: no such file {path}", param="target", expected="an existing file", got=path)
    spec = importlib.util.spec_from_file_location(f"_pypto_show_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    obj = getattr(module, name, None)
    if not isinstance(obj, Kernel):
        kernels = sorted(k for k, v in vars(module).items() if isinstance(v, Kernel))
        raise ArgumentError(f"pypto show: {path} has no kernel named {name!r}; kernels there: "
                            f"{', '.join(kernels) or 'none'}", param="target", expected="a @pt.kernel function",
                            got=name)  # fmt: skip
    return obj


def _speed(base: float, t: float) -> str:
    """How a time compares with NumPy's: "3.10x faster", "2.50x slower" (never "0.40x faster")."""
    if t <= base:
        return f"{base / t:.2f}x faster" if t > 0 else "faster"
    return f"{t / base:.2f}x slower" if base > 0 else "slower"


def cmd_show(args: argparse.Namespace) -> int:
    from rich.syntax import Syntax

    kernel = _load_kernel(args.target)
    con = _console()
    code = kernel.ir(args.ir) if args.ir else kernel.get_code(backend=args.backend)
    if not con.is_terminal:  # redirected (pypto show f.py:k > k.c): the text as it is, not wrapped nor coloured
        sys.stdout.write(code if code.endswith("\n") else code + "\n")
        return 0
    if args.ir:
        con.print(code, markup=False)
        return 0
    lexer = "python" if code.lstrip().startswith("def ") else "c"
    con.print(Syntax(code, lexer, theme="ansi_dark", background_color="default"))
    return 0


# -- pypto cache ---------------------------------------------------------------------------------------


def cmd_cache(args: argparse.Namespace) -> int:
    from pypto.cache import DiskCache

    cache = DiskCache()
    con = _console()
    if args.action == "clear":
        before = cache.info()
        cache.clear()
        con.print(f"removed {before['entries']} cached kernels ({_human(before['bytes'])}) from {before['path']}",
                  markup=False)  # fmt: skip
    else:
        info = cache.info()
        con.print(f"cache directory: {info['path']}\nkernels: {info['entries']}\nsize: {_human(info['bytes'])}",
                  markup=False)  # fmt: skip
    return 0


def cmd_passes(args: argparse.Namespace) -> int:
    from pypto.passes import STAGES, format_pipeline
    from pypto.plugins import get_registry

    reg = get_registry()
    if args.target is None:
        print(format_pipeline())
        for name, entry in reg.targets.items():
            t = entry.target
            users = [b.spec.name for b in reg.ordered() if b.spec.target == name]
            print(f"\ntarget {name} ({t.description}; plugin {entry.plugin}) appends: "
                  + (", ".join(n for n, _ in t.passes) or "nothing")
                  + f"\n  backends: {', '.join(users) or 'none installed'}")  # fmt: skip
        plain = [b.spec.name for b in reg.ordered() if b.spec.target is None and b.spec.stage is None]
        if plain:
            print(f"\nno target (render the loop IR after {STAGES[-1]}): {', '.join(plain)}")
        for b in reg.ordered():
            if b.spec.stage is not None:
                print(f"\n{b.spec.name} renders the IR after {b.spec.stage}")
        return 0
    if args.target not in reg.targets:
        raise ValueError(f"unknown target {args.target!r}; known targets: {', '.join(reg.targets)}")
    print(format_pipeline(reg.target(args.target)))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pypto", description="pypto: kernels in Python, native code out.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, backends and why unavailable ones are, cache").set_defaults(fn=cmd_info)
    b = sub.add_parser("bench", help="benchmark the built-in kernels on each backend against NumPy")
    b.add_argument("--backend", action="append", help="backend to run (repeatable; default: every available one)")
    b.add_argument(
        "--case", action="append", help="case to run (repeatable): vector_add softmax sum_exp layernorm gelu"
    )
    b.add_argument("--size", choices=("small", "medium", "large"), default="medium")
    b.add_argument("--repeat", type=int, default=20)
    b.add_argument("--plot", metavar="PNG", help="also write a bar chart (needs matplotlib)")
    b.set_defaults(fn=cmd_bench)
    s = sub.add_parser("show", help="print a kernel's generated code or IR")
    s.add_argument("target", metavar="FILE.py:KERNEL")
    s.add_argument("--backend", help="backend whose code to show (default: the kernel's executor)")
    s.add_argument("--ir", metavar="STAGE", help="print the IR after STAGE instead (e.g. lower, fuse, traced)")
    s.set_defaults(fn=cmd_show)
    ps = sub.add_parser("passes", help="the compiler pipeline: every pass in order, and what each target adds")
    ps.add_argument("--target", help="show the whole pipeline for this target (cpu-simd, simt)")
    ps.set_defaults(fn=cmd_passes)
    c = sub.add_parser("cache", help="inspect or clear the compiled-kernel cache")
    c.add_argument("action", choices=("info", "clear"))
    c.set_defaults(fn=cmd_cache)
    return p


def main(argv: list[str] | None = None) -> int:
    from pypto.errors import PyptoError

    args = parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (PyptoError, ValueError) as e:
        print(f"pypto {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
