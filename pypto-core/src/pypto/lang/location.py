"""Finding the user's source line for IR nodes and error messages."""

from __future__ import annotations

import linecache
import os
import sys

from ..errors import SourceLoc

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_loc(skip: int = 1) -> SourceLoc | None:
    """The innermost stack frame outside the pypto package (the line of the user's kernel)."""
    try:
        f = sys._getframe(skip)
    except ValueError:  # pragma: no cover - stack shallower than expected
        return None
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_PKG_DIR + os.sep):
            return SourceLoc(fn, f.f_lineno, linecache.getline(fn, f.f_lineno).rstrip())
        f = f.f_back
    return None
