"""Per-call overhead of pypto's call paths (microseconds, best of 7 rounds of 20,000 calls), as JSON.

Compares two checkouts side by side on one machine: run it with each one first on PYTHONPATH, alternating
(see RESULTS.md, "Call overhead"). Needs pypto-core and pypto-backend-openmp.
"""

from __future__ import annotations

import json
import timeit

import pypto as pt
from pypto.testing import vector_add


def main() -> None:
    a, b, c = pt.empty(8), pt.empty(8), pt.empty(8)
    a[:], b[:] = 1, 2
    k = pt.kernel(executor="openmp")(vector_add.fn)
    add = pt.jit(lambda x, y: x + y, executor="openmp")
    ref = pt.kernel(executor="reference")(vector_add.fn)
    calls = {
        "kernel openmp": lambda: k(a, b, c),
        "jit, new result": lambda: add(a, b),
        "jit, out=": lambda: add(a, b, out=c),
        "kernel reference": lambda: ref(a, b, c),
    }
    out = {}
    for name, fn in calls.items():
        fn()
        out[name] = round(min(timeit.repeat(fn, number=20000, repeat=7)) / 20000 * 1e6, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
