"""A small kernel's calls while other processes keep every core busy: thread count, wait policy, adaptive teams.

    python benchmarks/threads_under_load.py [--seconds 3] [--size 1048576]

For each variant a child process calls ``vector_add`` on ``--size`` float32 for ``--seconds``, first on an
idle machine, then with one busy-looping process per core. The OpenMP variants: one thread; the whole team
with the adaptive rule off (``PYPTO_ADAPT_THREADS=0``) under each wait policy; the default (the team shrinks
while its threads start late, :mod:`pypto_openmp.load`); then the TBB backend. Reported per call: the median, the
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
a = np.ones(int(sys.argv[2]), np.float32)
c = np.empty_like(a)
k = pt.kernel(executor=sys.argv[3])(vector_add.fn)
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
info = pt.get_runtime_info()["backends"][sys.argv[3]].get("load", {})
print(json.dumps({"median": times[len(times) // 2], "p90": times[int(len(times) * 0.9)], "mean": wall / len(times),
                  "late": info.get("late_regions")}))
"""

FIXED = {"PYPTO_ADAPT_THREADS": "0"}


def variants(cores: int) -> list[tuple[str, str, dict[str, str]]]:
    n = str(cores)
    return [
        ("openmp", "1 thread", {"PYPTO_NUM_THREADS": "1"}),
        ("openmp", f"{n} threads, fixed team (default wait policy)", {"PYPTO_NUM_THREADS": n, **FIXED}),
        ("openmp", f"{n} threads, fixed team, `OMP_WAIT_POLICY=PASSIVE`",
         {"PYPTO_NUM_THREADS": n, "OMP_WAIT_POLICY": "PASSIVE", **FIXED}),
        ("openmp", f"{n} threads, fixed team, `GOMP_SPINCOUNT=10000`",
         {"PYPTO_NUM_THREADS": n, "GOMP_SPINCOUNT": "10000", **FIXED}),
        ("openmp", f"{n} threads, adaptive team (the default)", {"PYPTO_NUM_THREADS": n}),
        ("tbb", "TBB, 1 thread", {"PYPTO_NUM_THREADS": "1"}),
        ("tbb", f"TBB, {n} threads", {"PYPTO_NUM_THREADS": n}),
    ]  # fmt: skip


def run(backend: str, extra: dict[str, str], busy: int, seconds: float, size: int) -> dict[str, float]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.3)
        drop = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "PYPTO_ADAPT_THREADS", "PYPTO_NUM_THREADS")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update(extra)
        out = subprocess.run([sys.executable, "-c", CHILD, str(seconds), str(size), backend], env=env,
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        return json.loads(out.strip().splitlines()[-1])
    finally:
        for h in hogs:
            h.kill()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--only", default="", help="run the variants whose name contains this text")
    args = p.parse_args()
    cores = os.cpu_count() or 1
    import pypto as pt

    available = {b for b, info in pt.get_runtime_info()["backends"].items() if info.get("available", True)}
    print("| load | variant | median | p90 | mean per call | late regions |\n|---|---|---|---|---|---|")
    for busy in (0, cores):
        for backend, name, extra in variants(cores):
            if args.only not in name:
                continue
            if backend not in available:
                print(f"skipped (backend {backend} not available): {name}", file=sys.stderr)
                continue
            r = run(backend, extra, busy, args.seconds, args.size)
            load = "idle" if not busy else f"{busy} busy processes"
            late = "" if r["late"] is None else str(r["late"])
            print(f"| {load} | {name} | {r['median'] * 1e3:.3f} ms | {r['p90'] * 1e3:.3f} ms | {r['mean'] * 1e3:.3f} ms "
                  f"| {late} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
