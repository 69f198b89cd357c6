"""Python snippets in a fresh interpreter, and the snippets the backend tests share.

A fresh process is what tests need for what one process cannot show: a compile cache hit across
processes, a thread count fixed when the runtime starts, a clean interpreter exit after native
code ran, an unavailable toolchain (``CC=/nonexistent/cc``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping


def run_python(
    code: str,
    env: Mapping[str, str] | None = None,
    *,
    drop: Iterable[str] = (),
    check: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) with ``python -c`` in a fresh interpreter and return the finished process.

    The child's environment is this process's, without the variables named in ``drop``, updated
    with ``env``. Output is captured as text. ``check=True`` raises :class:`AssertionError` with
    the exit status and the child's stderr unless it exited with 0.
    """
    full = {k: v for k, v in os.environ.items() if k not in set(drop)}
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          timeout=timeout)  # fmt: skip
    if check and proc.returncode != 0:
        raise AssertionError(f"the Python subprocess exited with status {proc.returncode}:\n{proc.stderr}")
    return proc


CUBE_SCRIPT = """
import numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel
def cube(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i] * x[i] * x[i] + 1.0
x = np.arange(1000, dtype=np.float32)
y = np.empty_like(x)
cube(x, y)
assert np.allclose(y, x ** 3 + 1, rtol=1e-6)
print("ok")
"""
"""A program that runs a kernel ``cube`` on ``$PYPTO_EXECUTOR``, checks it with NumPy and prints ``ok``.

Compiled backends build it from a source file named ``cube.*``: count those builds with
:func:`pypto.testing.counting_compiler`.
"""

THREADED_SUM_SCRIPT = """
import os, numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel
def total(x: pt.Tensor[float, (N,)], out: pt.Tensor[float, (1,)]):
    i = pt.axis(0)
    out[0] = pt.reduce_sum(pt.exp(x[i]) * 0.5, axis=i)
x = np.random.default_rng(7).standard_normal(3_000_001).astype(np.float32)
out = np.zeros(1, np.float32)
total(x, out)
print(out.view(np.uint32)[0], pt.get_runtime_info()["backends"][os.environ["PYPTO_EXECUTOR"]]["threads"])
"""
"""A program that sums ``0.5 * exp(x)`` over 3,000,001 float32 values (``default_rng(7)``, standard normal)
on ``$PYPTO_EXECUTOR`` (which must be set) and prints the result's bits (a uint32) and the backend's
thread count: run it with several ``PYPTO_NUM_THREADS`` to check that the bits do not depend on it.
"""


def unavailable_script(backend: str, marker: str) -> str:
    """A program that calls a copy kernel pinned to ``backend`` and prints what happened.

    Lines: ``AVAILABLE <bool>`` and ``REASON <text>`` from :func:`pypto.get_runtime_info`,
    ``UNAVAILABLE <message>`` when the call raised :class:`pypto.BackendUnavailable`, then ``CODE``
    when ``get_code()`` (which needs no toolchain) contains ``marker``, ``NOCODE`` otherwise. Run it
    with the toolchain hidden (``CC=/nonexistent/cc``, an empty ``PATH`` ...) to test the message.
    """
    return f"""
import numpy as np, pypto as pt
N = pt.dim("N")
@pt.kernel(executor={backend!r})
def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = x[i]
info = pt.get_runtime_info()["backends"][{backend!r}]
print("AVAILABLE", info["available"])
print("REASON", info.get("reason"))
try:
    k(np.ones(3, np.float32), np.ones(3, np.float32))
except pt.BackendUnavailable as e:
    print("UNAVAILABLE", e)
print("CODE" if {marker!r} in k.get_code() else "NOCODE")
"""
