"""The ``pypto`` command: every subcommand is run and its output checked."""

import subprocess
import sys
import textwrap

import pytest

from pypto.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_info_lists_backends_and_cache(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert "pypto 0.1.0" in out and "reference" in out and "available" in out
    assert "default executor: reference" in out  # PYPTO_EXECUTOR=reference in these tests
    assert "cache:" in out and "PYPTO_EXECUTOR=reference" in out


KERNEL_FILE = """
import pypto as pt

N = pt.dim("N")


@pt.kernel
def scale(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * 2.0
"""


def test_show_code_and_ir(tmp_path, capsys):
    f = tmp_path / "kern.py"
    f.write_text(KERNEL_FILE)
    code, out, _ = run(capsys, "show", f"{f}:scale", "--backend", "reference")
    assert code == 0 and "def scale(x, y, N):" in out and "_np.multiply" in out
    code, out, _ = run(capsys, "show", f"{f}:scale", "--ir", "optimize_loops")
    assert code == 0 and "parallel vector for i in 0..N:" in out and "y[i] = (x[i] * 2.0)" in out
    code, out, _ = run(capsys, "show", f"{f}:scale", "--ir", "traced")
    assert "kernel scale(x: float32[N] in, y: float32[N] out)" in out


def test_show_redirected_to_a_file_is_the_code_as_it_is(tmp_path):
    """``pypto show f.py:k > k.c``: no line is wrapped (a long C line stays one line) and nothing is coloured,
    so the file compiles; the text is the kernel's generated code exactly."""
    f = tmp_path / "kern.py"
    f.write_text(KERNEL_FILE)
    r = subprocess.run([sys.executable, "-m", "pypto", "show", f"{f}:scale", "--backend", "openmp"],
                       capture_output=True, text=True, timeout=300, env={**__import__("os").environ, "COLUMNS": "40"})  # fmt: skip
    if r.returncode != 0 and "openmp" in r.stderr:
        pytest.skip("the openmp backend is not installed here")
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stdout and max(len(line) for line in r.stdout.splitlines()) > 120
    import importlib.util

    spec = importlib.util.spec_from_file_location("kern", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert r.stdout.rstrip("\n") == mod.scale.get_code(backend="openmp").rstrip("\n")


def test_speeds_are_said_as_faster_or_slower():
    from pypto.cli import _speed

    assert _speed(2.0, 1.0) == "2.00x faster" and _speed(1.0, 2.5) == "2.50x slower"


def test_show_reports_bad_targets(tmp_path, capsys):
    f = tmp_path / "kern.py"
    f.write_text(KERNEL_FILE)
    code, _, err = run(capsys, "show", f"{f}:missing")
    assert code == 2 and "no kernel named 'missing'" in err and "kernels there: scale" in err
    code, _, err = run(capsys, "show", f"{tmp_path / 'nope.py'}:scale")
    assert code == 2 and "no such file" in err
    code, _, err = run(capsys, "show", "no-colon")
    assert code == 2 and "expected FILE.py:KERNEL" in err
    code, _, err = run(capsys, "show", f"{f}:scale", "--ir", "bogus")
    assert code == 2 and "unknown IR stage" in err


def test_bench_prints_medians_and_ratios(capsys, tmp_path):
    png = tmp_path / "bench.png"
    args = ["bench", "--backend", "reference", "--case", "vector_add", "--case", "softmax", "--size", "small",
            "--repeat", "2"]  # fmt: skip
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(png)]
    except ImportError:
        pass
    code, out, _ = run(capsys, *args)
    assert code == 0
    assert "vector_add" in out and "softmax" in out and "numpy" in out and "reference" in out
    assert ("faster" in out or "slower" in out) and "ms" in out and "sum_exp" not in out
    ratios = [float(w[:-1]) for w in out.split() if w.endswith("x") and w[:-1].replace(".", "", 1).isdigit()]
    assert ratios and min(ratios) >= 1.0  # "0.40x faster" is said "2.50x slower"
    if "--plot" in args:
        assert png.exists() and png.stat().st_size > 1000


def test_bench_rejects_unknown_backend_and_case(capsys):
    code, _, err = run(capsys, "bench", "--backend", "nosuch", "--size", "small", "--repeat", "1")
    assert code == 2 and "BackendNotFound" in err and "nosuch" in err
    code, _, err = run(capsys, "bench", "--backend", "reference", "--case", "nosuch", "--size", "small")
    assert code == 2 and "unknown benchmark case" in err


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path / "c"))
    entry = tmp_path / "c" / "openmp" / "ab"
    entry.mkdir(parents=True)
    (entry / "abcd.so").write_bytes(b"x" * 2048)
    (entry / "abcd.json").write_text("{}")
    code, out, _ = run(capsys, "cache", "info")
    assert code == 0 and "kernels: 1" in out and str(tmp_path / "c") in out and "KiB" in out
    code, out, _ = run(capsys, "cache", "clear")
    assert code == 0 and "removed 1 cached kernels" in out
    assert not (tmp_path / "c").exists()
    code, out, _ = run(capsys, "cache", "info")
    assert "kernels: 0" in out


def test_console_script_and_module_entry_points():
    r = subprocess.run([sys.executable, "-m", "pypto", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "info" in r.stdout and "bench" in r.stdout and "show" in r.stdout
    r = subprocess.run([sys.executable, "-m", "pypto", "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.parametrize("argv", [["info"], ["cache", "info"]])
def test_commands_in_a_subprocess(argv, tmp_path):
    env_code = textwrap.dedent(f"""
        import sys
        from pypto.cli import main
        sys.exit(main({argv!r}))
    """)
    r = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_passes_lists_the_pipeline_in_order(capsys):
    from pypto.passes import PASSES, STAGES

    code, out, _ = run(capsys, "passes")
    assert code == 0
    names = [line.split()[1] for line in out.splitlines() if line[:3].strip().rstrip(".").isdigit()]
    assert tuple(names) == STAGES and names[1 : 1 + len(PASSES)] == [n for n, _ in PASSES]
    assert (
        "target cpu-simd" in out
        and "block_columns, block_contractions, tile_transposes, private_scratch, while_lanes, parallel_threshold, "
        "stream_outputs"
        in out
    )
    code, out, _ = run(capsys, "passes", "--target", "cpu-simd")
    assert code == 0 and out.splitlines()[-1].split()[1] == "stream_outputs"
    assert "pypto.targets.cpu.parallel_threshold" in out
    code, _, err = run(capsys, "passes", "--target", "tpu")
    assert code == 2 and "unknown target 'tpu'; known targets: cpu-simd, simt" in err
