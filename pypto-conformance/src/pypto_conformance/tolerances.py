"""Tolerances as data: the shipped defaults, a backend's declared ones, a case's own, and user files.

See ``tolerances.toml`` in this package for the schema. Resolution takes, for one result dtype,
the loosest of: the dtype default, the overrides of every function the kernel calls, the
backend's tolerance and the case's tolerance. A ``--pypto-tolerances`` file replaces the entries
it names at each level (so it can tighten a level as well as loosen it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .datafile import DataFileError, load_data_file

DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
               "float16", "bfloat16", "complex64", "complex128")  # fmt: skip


@dataclass(frozen=True)
class Tolerance:
    """``|got - want| <= atol + rtol * |want|``; (0, 0) means exact."""

    rtol: float
    atol: float

    def loosen(self, other: Tolerance | None) -> Tolerance:
        """The looser of the two, per component."""
        if other is None:
            return self
        return Tolerance(max(self.rtol, other.rtol), max(self.atol, other.atol))

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def as_dict(self) -> dict[str, float]:
        return {"rtol": self.rtol, "atol": self.atol}


EXACT = Tolerance(0.0, 0.0)

DtypeTable = Mapping[str, Tolerance]


def as_tolerance(value: Any, where: str) -> Tolerance:
    """A :class:`Tolerance` from ``{rtol, atol}``, ``(rtol, atol)`` or a Tolerance; checked."""
    if isinstance(value, Tolerance):
        rtol, atol = value.rtol, value.atol
    elif isinstance(value, Mapping):
        unknown = set(value) - {"rtol", "atol"}
        if unknown:
            raise DataFileError(f"{where}: unknown key(s) {sorted(unknown)}; a tolerance has 'rtol' and 'atol'")
        rtol, atol = value.get("rtol", 0.0), value.get("atol", 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        rtol, atol = value
    else:
        raise DataFileError(f"{where}: expected {{rtol = ..., atol = ...}} or (rtol, atol), got {value!r}")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise DataFileError(f"{where}: {name} must be a number >= 0, got {v!r}")
    return Tolerance(float(rtol), float(atol))


def _dtype_table(data: Any, where: str) -> dict[str, Tolerance]:
    if not isinstance(data, Mapping):
        raise DataFileError(f"{where}: expected a table of dtypes, got {data!r}")
    out = {}
    for dt, tol in data.items():
        if dt not in DTYPE_NAMES:
            raise DataFileError(f"{where}: unknown dtype {dt!r}; use one of {', '.join(DTYPE_NAMES)}")
        out[dt] = as_tolerance(tol, f"{where}.{dt}")
    return out


def _nested(data: Any, where: str) -> dict[str, dict[str, Tolerance]]:
    if not isinstance(data, Mapping):
        raise DataFileError(f"{where}: expected a table, got {data!r}")
    return {str(k): _dtype_table(v, f"{where}.{k}") for k, v in data.items()}


@dataclass(frozen=True)
class ToleranceTable:
    """All tolerance levels the suite knows, before resolution for one result."""

    dtypes: Mapping[str, Tolerance] = field(default_factory=dict)
    functions: Mapping[str, Mapping[str, Tolerance]] = field(default_factory=dict)  # dtype -> function -> tol
    backends: Mapping[str, Mapping[str, Tolerance]] = field(default_factory=dict)  # backend -> dtype -> tol
    cases: Mapping[str, Mapping[str, Tolerance]] = field(default_factory=dict)  # case glob -> dtype -> tol

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> ToleranceTable:
        """Validate and convert the content of a tolerance file."""
        unknown = set(data) - {"dtype", "function", "backend", "case"}
        if unknown:
            raise DataFileError(
                f"{source}: unknown section(s) {sorted(unknown)}; expected dtype, function, backend, case"
            )
        functions: dict[str, dict[str, Tolerance]] = {}
        for dt, per_fn in data.get("function", {}).items():
            if dt not in DTYPE_NAMES:
                raise DataFileError(f"{source}: function.{dt}: unknown dtype; use one of {', '.join(DTYPE_NAMES)}")
            if not isinstance(per_fn, Mapping):
                raise DataFileError(f"{source}: function.{dt}: expected a table of functions")
            functions[dt] = {fn: as_tolerance(t, f"{source}: function.{dt}.{fn}") for fn, t in per_fn.items()}
        return cls(
            dtypes=_dtype_table(data.get("dtype", {}), f"{source}: dtype"),
            functions=functions,
            backends=_nested(data.get("backend", {}), f"{source}: backend"),
            cases=_nested(data.get("case", {}), f"{source}: case"),
        )

    def overridden_by(self, other: ToleranceTable) -> ToleranceTable:
        """This table with every entry ``other`` names replaced by ``other``'s value."""
        functions = {dt: dict(fns) for dt, fns in self.functions.items()}
        for dt, fns in other.functions.items():
            functions.setdefault(dt, {}).update(fns)
        backends = {b: dict(t) for b, t in self.backends.items()}
        for b, t in other.backends.items():
            backends.setdefault(b, {}).update(t)
        cases = {c: dict(t) for c, t in self.cases.items()}
        for c, t in other.cases.items():
            cases.setdefault(c, {}).update(t)
        return ToleranceTable({**self.dtypes, **other.dtypes}, functions, backends, cases)

    def resolve(
        self,
        dtype: str,
        *,
        backend: str = "",
        backend_declared: Mapping[str, Any] | None = None,
        case: str = "",
        case_declared: Mapping[str, Any] | None = None,
        functions: Iterable[str] = (),
    ) -> Tolerance:
        """The tolerance for one result of ``dtype`` computed by ``backend`` in ``case``."""
        tol = self.dtypes.get(dtype, EXACT)
        for fn in sorted(set(functions)):
            tol = tol.loosen(self.functions.get(dtype, {}).get(fn))
        if backend in self.backends:
            tol = tol.loosen(self.backends[backend].get(dtype))
        elif backend_declared and dtype in backend_declared:
            tol = tol.loosen(as_tolerance(backend_declared[dtype], f"backend '{backend}' tolerances[{dtype!r}]"))
        matching = [pattern for pattern in self.cases if fnmatch.fnmatchcase(case, pattern)]
        if matching:
            for pattern in matching:
                tol = tol.loosen(self.cases[pattern].get(dtype))
        elif case_declared and dtype in case_declared:
            tol = tol.loosen(as_tolerance(case_declared[dtype], f"case '{case}' tolerances[{dtype!r}]"))
        return tol


def default_table() -> ToleranceTable:
    """The tolerances shipped with the suite (``tolerances.toml`` in this package)."""
    ref = resources.files("pypto_conformance").joinpath("tolerances.toml")
    with resources.as_file(ref) as path:
        return ToleranceTable.from_mapping(load_data_file(path), "tolerances.toml (shipped defaults)")


def load_tolerances(path: str | Path | None = None) -> ToleranceTable:
    """The shipped defaults, with the entries of the file at ``path`` (if given) replacing them."""
    table = default_table()
    if path is None:
        return table
    return table.overridden_by(ToleranceTable.from_mapping(load_data_file(path), str(path)))
