"""Finding the user's source line for IR nodes and error messages."""

from __future__ import annotations

import linecache
import os
import sys

from pypto.errors import SourceLoc

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_USER_DIR = os.path.join(_PKG_DIR, "testing") + os.sep  # pypto.testing's kernels are user code


def user_loc(skip: int = 1) -> SourceLoc | None:
    """The innermost stack frame outside the pypto package (the line of the user's kernel).

    ``pypto.testing`` counts as user code: its kernels are written with the public API like any user's.
    """
    try:
        f = sys._getframe(skip)
    except ValueError:  # pragma: no cover - stack shallower than expected
        return None
    while f is not None:
        fn = f.f_code.co_filename
        path = os.path.abspath(fn)
        if not path.startswith(_PKG_DIR + os.sep) or path.startswith(_USER_DIR):
            return SourceLoc(fn, f.f_lineno, linecache.getline(fn, f.f_lineno).rstrip())
        f = f.f_back
    return None
