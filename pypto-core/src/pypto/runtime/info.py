"""``pt.get_runtime_info``: what is installed, what can run here, and why not."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import numpy as np

from pypto._version import __version__


def get_runtime_info() -> dict[str, Any]:
    """Versions, every backend (version, availability or why not, device, threads), cache and env.

    The result is a plain dict (JSON-serialisable) so it can be printed, logged or attached to
    bug reports; ``pypto info`` on the command line prints the same.
    """
    from pypto.cache import cache_dir, cache_enabled
    from pypto.plugins import get_registry

    reg = get_registry()
    backends: dict[str, Any] = {}
    for b in reg.ordered():
        av = b.availability
        entry: dict[str, Any] = {
            "version": b.spec.version,
            "priority": b.spec.priority,
            "available": av.available,
            "reason": av.reason,
            "plugin": b.plugin,
            "distribution": b.distribution,
            "description": b.spec.description,
            "dtypes": sorted(b.spec.capabilities.dtypes),
            "fp64": b.spec.capabilities.fp64,
            "atomics": b.spec.capabilities.atomics,
        }
        if b.spec.info is not None:
            try:
                entry.update(dict(b.spec.info()))
            except Exception as e:  # info is best-effort: report the failure instead of raising
                entry["info_error"] = f"{type(e).__name__}: {e}"
        backends[b.spec.name] = entry
    try:
        default = reg.resolve(None).spec.name
    except Exception as e:
        default = f"none ({e})"
    return {
        "pypto": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_count": os.cpu_count(),
        "default_executor": default,
        "backends": backends,
        "skipped_plugins": [{"name": s.name, "distribution": s.distribution, "reason": s.reason} for s in reg.skipped],
        "cache_dir": str(cache_dir()),
        "cache_enabled": cache_enabled(),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("PYPTO_")},
    }
