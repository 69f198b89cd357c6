"""A counting compiler: a stand-in for ``CC`` / ``CXX`` that logs each invocation, then runs the real one."""

from __future__ import annotations

import shlex
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CountingCompiler:
    """A shell script that appends its command line to :attr:`log` and runs the real compiler.

    Put :attr:`path` into ``CC`` (C backends) or ``CXX`` (C++ backends) of the process that compiles,
    then ask :meth:`count` how often a given source file was compiled.
    """

    path: str
    """The script: the value for ``CC`` / ``CXX``."""
    log: Path
    """One line per invocation: the arguments it got."""

    def invocations(self) -> list[str]:
        """The command lines so far (none before the first compilation)."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def count(self, containing: str = "") -> int:
        """How many invocations had ``containing`` in their command line (e.g. ``"cube.c"``)."""
        return sum(1 for line in self.invocations() if containing in line)


def counting_compiler(directory: str | Path, language: str = "c") -> CountingCompiler:
    """Write a counting compiler for ``language`` ("c" or "c++") into ``directory`` (e.g. pytest's ``tmp_path``).

    It wraps the compiler pypto finds for that language (``$CC`` / ``$CXX``, else the usual names).
    """
    from pypto.targets.cpu.toolchain import find_compiler

    directory = Path(directory)
    name = "cc" if language == "c" else "cxx"
    log = directory / f"{name}.log"
    script = directory / name
    real = find_compiler(language).split()[0]
    script.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return CountingCompiler(str(script), log)
