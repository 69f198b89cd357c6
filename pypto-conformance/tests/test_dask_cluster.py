"""The catalogue on dask arrays on a two-worker ``dask.distributed.LocalCluster``, and a worker lost
in the middle of a computation.

Workers are separate processes: each compiles the generated kernels it runs through the disk cache
(shared here, as on one machine) with the executor it resolves itself.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="needs pypto-core[dask]")
da = pytest.importorskip("dask.array")

from pypto.testing.kernels import softmax  # noqa: E402
from pypto_conformance.dask_matrix import CHUNKINGS, run_matrix  # noqa: E402


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    cache = tmp_path_factory.mktemp("dask-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("PYPTO_CACHE_DIR", str(cache))  # inherited by the worker processes
    mp.setenv("OMP_NUM_THREADS", "1")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
    mp.undo()


def test_catalogue_under_every_chunking(client):
    """The graph construction, on the reference executor (kernels built in milliseconds; the catalogue on
    each native backend is the conformance suite's job); the softmax cases again on the workers' own
    executor below."""
    assert len(client.scheduler_info()["workers"]) == 2
    results = list(run_matrix(executor="reference"))
    bad = [f"{r.case} [{r.chunking}]: {r.message}" for r in results if not r.ok]
    assert not bad, f"{len(bad)} of {len(results)} disagree with NumPy:\n" + "\n".join(bad)
    assert {r.chunking for r in results} == set(CHUNKINGS)
    assert len(results) > 200  # every kernel and array case that has a non-empty size


def test_softmax_cases_under_every_chunking_on_the_workers_executor(client):
    results = list(run_matrix(pattern="*softmax*"))
    bad = [f"{r.case} [{r.chunking}]: {r.message}" for r in results if not r.ok]
    assert not bad, "\n".join(bad)
    assert len(results) >= 9


def test_a_worker_closed_mid_computation_is_retried(client):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    y = softmax(da.from_array(x, chunks=(1, 512)))  # 512 blocks per layer: long enough to interrupt
    future = client.compute(y.sum(axis=1))
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline and not future.done():
        busy = [w for w, tasks in client.processing().items() if tasks]
        if busy:
            victim = busy[0]
        time.sleep(0.01)
    assert victim is not None, "the computation finished before a worker could be closed"
    cluster = client.cluster
    name = next(k for k, w in cluster.workers.items() if w.worker_address == victim)
    assert not future.done()
    cluster.sync(cluster.workers[name].close)
    got = future.result(timeout=300)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(axis=1, keepdims=True)).sum(axis=1), rtol=1e-5)
    assert victim not in client.scheduler_info()["workers"]
