"""The exception hierarchy of pypto.

Every error pypto raises on purpose derives from :class:`PyptoError`. The argument errors carry the
parameter they are about, what was expected, what was given and how to fix it, both as attributes
(for programs) and in the message (for people).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A place in the user's source: file, line and (when known) the source line's text."""

    filename: str
    lineno: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


class PyptoError(Exception):
    """Base class of every error raised by pypto."""


class _ArgumentProblem(PyptoError):
    """An error about one argument: names the parameter, the expectation, the value and the fix."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        expected: object = None,
        got: object = None,
        fix: str | None = None,
    ):
        self.param = param
        self.expected = expected
        self.got = got
        self.fix = fix
        text = message
        if fix:
            text += f"\n  fix: {fix}"
        super().__init__(text)


class DTypeError(_ArgumentProblem, TypeError):
    """An array or expression has a data type the kernel does not accept."""


class IndexError(_ArgumentProblem, builtins.IndexError):  # noqa: A001 - pt.IndexError, also a built-in IndexError
    """An index read from an argument is outside the dimension it indexes (a gather's bounds check)."""


class ShapeError(_ArgumentProblem, ValueError):
    """Array shapes disagree with the kernel's declared shapes or with each other."""


class AliasingError(_ArgumentProblem, ValueError):
    """An output overlaps an input in a way the kernel cannot compute correctly."""


class ArgumentError(_ArgumentProblem, TypeError):
    """Arguments are missing, unexpected, or of a kind that cannot be passed to a kernel."""


class ScheduleError(_ArgumentProblem, ValueError):
    """A schedule hint (``@pt.tile``, ``pt.kernel(schedule=...)``) names an axis the kernel does not
    have, or a value the nest's schedule cannot use."""


class TracingError(PyptoError):
    """The kernel's Python source cannot be turned into a kernel; points at the offending line."""

    def __init__(self, message: str, loc: SourceLoc | None = None, hint: str | None = None):
        self.loc = loc
        self.hint = hint
        self.bare_message = message
        text = f"{loc}: {message}" if loc else message
        if loc and loc.text:
            text += f"\n    {loc.text.strip()}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class BackendNotFound(PyptoError, LookupError):
    """The requested executor is not an installed backend."""


class BackendUnavailable(PyptoError, RuntimeError):
    """The requested backend is installed but cannot run here (the message says why)."""


class CompileError(PyptoError, RuntimeError):
    """A backend failed to build the generated code; the message holds the compiler's output."""


class LaunchError(PyptoError, RuntimeError):
    """A device refused a launch (out of resources, groups too large); the message has the sizes and
    the device's limits."""


class PluginError(PyptoError):
    """A plugin could not be loaded (raised instead of a warning when PYPTO_STRICT_PLUGINS=1)."""


class CacheWarning(UserWarning):
    """The disk cache cannot be written (a read-only or full disk): kernels still compile and run."""


class SpecializationWarning(UserWarning):
    """A ``@pt.jit`` function marked symbolic in ``dims=`` is compiled per shape: its program depends on the
    value of a symbolic size."""


class RechunkWarning(UserWarning):
    """A kernel called on dask arrays needed some inputs in one chunk along an axis (read at shifted or
    strided indices, or used as a value): they were rechunked, which moves data between workers."""


class PluginWarning(UserWarning):
    """A plugin was skipped: it failed to import or was built for another plugin API."""


class IRVerificationError(PyptoError):
    """A compiler pass produced malformed IR (a bug in pypto or in a plugin's pass)."""


class PerformanceWarning(UserWarning):
    """A call works but pays for something avoidable, once per kernel: host arrays copied to a GPU and
    back on every call (pass device arrays instead), a feature run on a slower path."""
