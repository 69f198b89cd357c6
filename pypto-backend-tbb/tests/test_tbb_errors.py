"""Failures say what is missing and how to fix it: no C++ compiler, no TBB headers, no libtbb."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

import pypto as pt
from pypto.testing import unavailable_script
from pypto_tbb import locate

_USE = unavailable_script("tbb", "pt_tbb->parallel_for(")

_HIDE_DIST = """
from importlib import metadata
_real = metadata.distribution
def _hidden(name):
    if name == {name!r}:
        raise metadata.PackageNotFoundError(name)
    return _real(name)
metadata.distribution = _hidden
"""


def test_missing_cxx_compiler_names_cxx_and_how_to_install_gxx(run_py, tmp_path):
    r = run_py(_USE, {"CXX": "/nonexistent/g++", "PYPTO_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "AVAILABLE False" in out
    assert (
        "UNAVAILABLE backend 'tbb' is installed but unavailable: no C++ compiler found (tried /nonexistent/g++)" in out
    )
    assert "apt install g++" in out and "set CXX" in out
    assert out.endswith("\nCODE\n")  # code generation needs no compiler


def test_no_compiler_on_path_and_cxx_unset(run_py, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = run_py(_USE, {"PATH": str(empty), "PYPTO_CACHE_DIR": str(tmp_path)}, drop=("CXX",))
    assert r.returncode == 0, r.stderr
    assert "no C++ compiler found (tried g++, c++, clang++)" in r.stdout
    assert "set CXX" in r.stdout and "apt install g++" in r.stdout


def test_missing_tbb_devel_says_pip_install_tbb_devel(run_py, tmp_path):
    r = run_py(_HIDE_DIST.format(name="tbb-devel") + _USE, {"PYPTO_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "AVAILABLE False" in out
    assert "UNAVAILABLE backend 'tbb' is installed but unavailable: oneTBB headers not found" in out
    assert "pip install tbb-devel" in out
    assert out.endswith("\nCODE\n")


def test_auto_still_works_when_tbb_is_unavailable(run_py, tmp_path):
    use_auto = """
import numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel
def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] + 1.0
y = np.zeros(3, np.float32)
k(np.ones(3, np.float32), y)
print(y.tolist(), pt.get_runtime_info()["default_executor"])
"""
    r = run_py(
        _HIDE_DIST.format(name="tbb-devel") + use_auto, {"PYPTO_EXECUTOR": "auto", "PYPTO_CACHE_DIR": str(tmp_path)}
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("]")[0] == "[2.0, 2.0, 2.0" and "tbb" not in r.stdout.split("]")[1]


# -- the locator, in process ------------------------------------------------------------------------------


@pytest.fixture
def fresh_locator():
    locate.locate_tbb.cache_clear()
    yield
    locate.locate_tbb.cache_clear()


def _hide(monkeypatch, *names: str) -> None:
    real = metadata.distribution

    def distribution(name: str):
        if name in names:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", distribution)


def test_locator_finds_the_wheels_files(fresh_locator):
    tbb = locate.locate_tbb()
    assert (Path(tbb.include_dir) / "oneapi" / "tbb" / "parallel_for.h").is_file()
    assert Path(tbb.library).is_file() and Path(tbb.library).name == "libtbb.so.12"
    assert Path(tbb.library).parent == Path(tbb.lib_dir) and tbb.version == metadata.version("tbb-devel")
    assert tbb.link_flags()[-1] == f"-Wl,-rpath,{tbb.lib_dir}" and "-ltbb" in tbb.link_flags()


def test_locator_without_tbb_devel(fresh_locator, monkeypatch):
    _hide(monkeypatch, "tbb-devel")
    with pytest.raises(locate.TBBNotFound, match="pip install tbb-devel"):
        locate.locate_tbb()


def test_locator_without_libtbb(fresh_locator, monkeypatch, tmp_path):
    _hide(monkeypatch, "tbb")
    (tmp_path / "include").mkdir()
    with pytest.raises(locate.TBBNotFound, match=r"libtbb\.so\.12\) was not found.*\n.*pip install"):
        locate._find_library(tmp_path / "include")


def test_tbb_not_found_is_a_toolchain_error():
    assert issubclass(locate.TBBNotFound, pt.CompileError)
