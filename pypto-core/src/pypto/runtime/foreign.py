"""Arrays of other libraries that a call does not run on here, recognised without importing them."""

from __future__ import annotations

from typing import Any


def is_dask_array(v: Any) -> bool:
    """Whether ``v`` is a ``dask.array.Array`` (checked without importing dask): a kernel or ``pt.jit``
    call on one builds a dask graph (:mod:`pypto.dask`)."""
    t = type(v)
    return t.__name__ == "Array" and t.__module__.startswith("dask.array") and hasattr(v, "__dask_graph__")
