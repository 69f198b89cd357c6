"""One conformance case on the opencl backend with every launch logged and waited for, to find the launch that
breaks an OpenCL queue (a failing launch surfaces asynchronously, at a later call, on GPU runtimes).

    python benchmarks/gpu/opencl_probe.py CASE SIZE     # SIZE: index into the case's sizes; -1 prints the code

run.sh runs it on the first catalogue case that fails on NVIDIA's OpenCL runtime.
"""

from __future__ import annotations

import sys
import traceback

import numpy as np

import pypto as pt
import pypto_opencl.launcher as launcher
from pypto_conformance import runner
from pypto_conformance.cases import all_cases

_launch = launcher.OpenCLLauncher._launch


def _logged(self, k, extents, hint, counts, mem, args):  # noqa: ANN001, ANN202 - same signature as the original
    print(f"launch {k.launch.name} ({k.launch.kind}) extents={extents} hint={hint} local counts={counts} "
          f"max group={k.max_group} static local={k.static_local}", flush=True)  # fmt: skip
    _launch(self, k, extents, hint, counts, mem, args)
    self.dev.queue.finish()
    print("  finished", flush=True)


def main() -> None:
    launcher.OpenCLLauncher._launch = _logged
    name, index = sys.argv[1], int(sys.argv[2])
    case = next(c for c in all_cases() if c.name == name)
    k = pt.kernel(executor="opencl")(case.build("float32"))
    if index < 0:
        print(k.get_code(backend="opencl"))
        return
    try:
        inputs, expected = runner.case_data(case, "float32", index)
        args = dict(inputs)
        for out, want in expected.items():
            args.setdefault(out, np.empty_like(want))
        print("arguments:", {a: getattr(v, "shape", v) for a, v in args.items()}, flush=True)
        k(**args)
        print("completed")
    except Exception:  # noqa: BLE001 - the point is to print it
        traceback.print_exc()


if __name__ == "__main__":
    main()
