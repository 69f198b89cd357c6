"""pypto on dask arrays against dask.array + NumPy, on a LocalCluster of 1 and 2 workers × 1 thread.

    python benchmarks/dask_bench.py [--gib 2] [--repeat 3]

Cases (float32, 2 GiB per input by default): vector add, softmax over rows (rows within one chunk, and
rows cut into 4 chunks: the online (max, sum) path), and sum(exp(x)). Inputs are generated on the workers
and kept in their memory (persisted) before timing; each timed run computes the result and keeps it in
worker memory (``persist`` + ``wait``), so what is measured is the computation, not transfers to this
process. Both sides run the same chunks on the same cluster, interleaved; medians are reported as
throughput (GB/s of input read) and ratios. The last section measures the graph overhead per chunk:
a tiny elementwise kernel on 1 chunk and on 4,000 chunks of the same total size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per single-threaded worker (inherited by workers)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from dask.distributed import Client, LocalCluster, wait  # noqa: E402

import pypto as pt  # noqa: E402
from pypto.testing.kernels import softmax, sum_exp, vector_add  # noqa: E402


def np_softmax(x):
    e = da.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _tasks(dask_scheduler=None) -> int:
    return len(dask_scheduler.tasks)


def timed(client: Client, make) -> float:
    """Seconds to compute ``make()`` into worker memory. Its keys are released before the next run, so a
    repeated graph (the same keys) is computed again instead of found in memory."""
    before = client.run_on_scheduler(_tasks)
    start = time.perf_counter()
    result = client.persist(make())
    wait(result)
    elapsed = time.perf_counter() - start
    client.cancel(result)
    del result
    deadline = time.monotonic() + 60
    while client.run_on_scheduler(_tasks) > before and time.monotonic() < deadline:
        time.sleep(0.01)
    return elapsed


def run(workers: int, gib: float, repeat: int) -> list[dict]:
    n = int(gib * 2**30 / 4)
    cols = 32768
    rows = n // cols
    chunk = 2**23  # 32 MiB float32 chunks
    rows_per_chunk = chunk // cols
    rows_long = chunk // (cols // 4)  # rows cut into 4 column chunks
    out = []
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0", memory_limit=0) as cluster:
        with Client(cluster) as client:
            rng = da.random.default_rng(0)
            a = client.persist(rng.standard_normal(n, dtype=np.float32, chunks=chunk))
            b = client.persist(rng.standard_normal(n, dtype=np.float32, chunks=chunk))
            x = client.persist(rng.standard_normal((rows, cols), dtype=np.float32, chunks=(rows_per_chunk, cols)))
            xl = client.persist(rng.standard_normal((rows, cols), dtype=np.float32, chunks=(rows_long, cols // 4)))
            wait([a, b, x, xl])
            cases = {
                "vector add": (lambda: vector_add(a, b), lambda: a + b, 2 * n * 4),
                "softmax (rows in one chunk)": (lambda: softmax(x), lambda: np_softmax(x), n * 4),
                "softmax (rows in 4 chunks)": (lambda: softmax(xl), lambda: np_softmax(xl), n * 4),
                "sum(exp)": (lambda: sum_exp(a), lambda: da.exp(a).sum(), n * 4),
            }
            for name, (ours, theirs, nbytes) in cases.items():
                for fn in (ours, theirs):  # warm: kernels compiled on every worker, graphs exercised
                    timed(client, fn)
                times: dict[str, list[float]] = {"pypto": [], "numpy": []}
                for _ in range(repeat):
                    times["pypto"].append(timed(client, ours))
                    times["numpy"].append(timed(client, theirs))
                med = {k: statistics.median(v) for k, v in times.items()}
                out.append({"workers": workers, "case": name, "bytes": nbytes, **med})
                print(f"{workers} worker(s)  {name:28s} pypto {med['pypto']:.3f} s  dask+numpy {med['numpy']:.3f} s",
                      flush=True)  # fmt: skip
    return out


def overhead(repeat: int) -> tuple[float, float]:
    """Seconds per chunk of graph work: building the graph, and running it (threads scheduler)."""
    n, many = 4_000_000, 4000
    x = np.ones(n, np.float32)
    one, split = da.from_array(x, chunks=n), da.from_array(x, chunks=n // many)
    with dask.config.set(scheduler="threads", num_workers=1):
        vector_add(one, one).compute()
        vector_add(split, split).compute()
        build, run_ = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            g = vector_add(split, split)
            build.append((time.perf_counter() - t) / many)
            t = time.perf_counter()
            g.compute()
            t_many = time.perf_counter() - t
            t = time.perf_counter()
            vector_add(one, one).compute()
            t_one = time.perf_counter() - t
            run_.append((t_many - t_one) / many)
    return statistics.median(build), statistics.median(run_)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=2.0, help="GiB per input array (default 2)")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = run(1, args.gib, args.repeat) + run(2, args.gib, args.repeat)
    print()
    print(f"Command: `python benchmarks/dask_bench.py --gib {args.gib:g} --repeat {args.repeat}`")
    print(f"dask {dask.__version__}, numpy {np.__version__}, pypto {pt.__version__}; medians of {args.repeat}")
    print()
    print("| case | workers | pypto GB/s | dask+NumPy GB/s | pypto / dask+NumPy | pypto 1→2 workers |")
    print("|---|---|---|---|---|---|")
    by = {(r["workers"], r["case"]): r for r in rows}
    for r in rows:
        base = by[(1, r["case"])]
        scale = f"{base['pypto'] / r['pypto']:.2f}×" if r["workers"] == 2 else ""
        print(f"| {r['case']} | {r['workers']} | {r['bytes'] / r['pypto'] / 1e9:.2f} | "
              f"{r['bytes'] / r['numpy'] / 1e9:.2f} | {r['numpy'] / r['pypto']:.2f}× | {scale} |")  # fmt: skip
    build, per_chunk = overhead(args.repeat)
    print()
    print(f"Graph overhead per chunk: building {build * 1e3:.3f} ms, scheduling and calling {per_chunk * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
