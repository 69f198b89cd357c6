"""A traced function's own source, parsed: what the front ends read of it (axis names, the control-flow pass)."""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
from collections.abc import Callable
from typing import Any


def _last_line(code: Any) -> int:
    """The last source line of ``code`` and of the functions defined in it."""
    last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    for c in code.co_consts:
        if hasattr(c, "co_lines"):
            last = max(last, _last_line(c))
    return last


def function_tree(fn: Callable) -> ast.AST:
    """``fn``'s parsed source: its lines as the code object spans them (cheap), else those
    :func:`inspect.getsource` finds (it tokenizes the file: a few milliseconds of a cached kernel's first call)."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        lines = linecache.getlines(code.co_filename)
        if lines:
            try:
                return ast.parse(textwrap.dedent("".join(lines[code.co_firstlineno - 1 : _last_line(code)])))
            except SyntaxError:  # a statement running past the last line with code (a closing bracket)
                pass
    return ast.parse(textwrap.dedent(inspect.getsource(fn)))
