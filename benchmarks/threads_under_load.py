"""A small kernel's calls while other processes keep every core busy: thread count and OpenMP wait policy.

    python benchmarks/threads_under_load.py [--seconds 3]

For each variant a child process calls the OpenMP backend's ``vector_add`` on 1M float32 for ``--seconds``,
first on an idle machine, then with one busy-looping process per core. Reported per call: the median, the
90th percentile, and the mean (wall time over calls: what a loop of calls sees, preemptions included).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np
import pypto as pt
from pypto.testing import vector_add
a = np.ones(1 << 20, np.float32)
c = np.empty_like(a)
k = pt.kernel(executor="openmp")(vector_add.fn)
k(a, a, c)
times = []
start = time.perf_counter()
end = start + float(sys.argv[1])
while time.perf_counter() < end:
    t = time.perf_counter()
    k(a, a, c)
    times.append(time.perf_counter() - t)
wall = time.perf_counter() - start
times.sort()
print(json.dumps({"median": times[len(times) // 2], "p90": times[int(len(times) * 0.9)], "mean": wall / len(times)}))
"""

VARIANTS = [
    ("1 thread", {"PYPTO_NUM_THREADS": "1"}),
    ("2 threads (default wait policy)", {"PYPTO_NUM_THREADS": "2"}),
    ("2 threads, OMP_WAIT_POLICY=PASSIVE", {"PYPTO_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}),
    ("2 threads, GOMP_SPINCOUNT=10000", {"PYPTO_NUM_THREADS": "2", "GOMP_SPINCOUNT": "10000"}),
]


def run(extra: dict[str, str], busy: int, seconds: float) -> dict[str, float]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.3)
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        env.update(extra)
        out = subprocess.run([sys.executable, "-c", CHILD, str(seconds)], env=env, capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])
    finally:
        for h in hogs:
            h.kill()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args()
    cores = os.cpu_count() or 1
    print("| load | variant | median | p90 | mean per call |\n|---|---|---|---|---|")
    for busy in (0, cores):
        for name, extra in VARIANTS:
            r = run(extra, busy, args.seconds)
            load = "idle" if not busy else f"{busy} busy processes"
            print(f"| {load} | {name} | {r['median'] * 1e3:.3f} ms | {r['p90'] * 1e3:.3f} ms | {r['mean'] * 1e3:.3f} ms |",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
