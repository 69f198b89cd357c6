"""The catalogue of conformance cases: every feature of the kernel language, with NumPy references.

Importing this package registers every case module's cases; :func:`all_cases` lists them in a
stable order.
"""

from __future__ import annotations

from . import (
    complex_numbers,
    functions,
    fused,
    gather,
    indexing,
    kernels,
    linalg,
    loops,
    operators,
    ordering,
    reductions,
    select,
    special,
)
from .spec import REGISTRY, Case, case

# The order cases are listed and run in: simple features first, whole kernels last.
MODULE_ORDER = [
    m.__name__
    for m in (
        operators,
        functions,
        select,
        indexing,
        reductions,
        ordering,
        loops,
        special,
        fused,
        linalg,
        complex_numbers,
        gather,
        kernels,
    )
]


def all_cases() -> list[Case]:
    """Every catalogue case, grouped by module in :data:`MODULE_ORDER`, then in definition order."""
    cases = list(REGISTRY.values())
    rank = {name: k for k, name in enumerate(MODULE_ORDER)}
    return sorted(cases, key=lambda c: rank.get(c.factory.__module__, len(rank)))


def get_case(name: str) -> Case:
    """The case called ``name`` (KeyError naming the known cases otherwise)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no conformance case {name!r}; known: {', '.join(REGISTRY)}") from None


__all__ = ["Case", "all_cases", "case", "get_case"]
