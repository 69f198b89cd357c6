"""Training a transformer block: pypto's operator against torch eager, and data-parallel steps per second.

    python benchmarks/training.py

* ``block``: the block of ``pypto-core/tests/distributed/train.py`` (pre-norm single-head attention and a GELU
  MLP with residuals, a linear head on the mean token) at batch 32, 64 tokens, width 128, hidden 512, float32:
  the ``pt.Module`` through ``pt.torch.module`` (forward and backward are pypto kernels) against the same block
  written with torch operations (torch eager), forward alone and forward + backward of a mean-squared loss;
  the step both with the forward's costly values kept for the backward (``pt.torch.KEEP_RESIDUALS``, the
  default) and with the backward computing the forward again.
  15 rounds, each timing every measurement in turn (the median of 3 calls; a round's backward is its step less
  its forward): the medians of the rounds, and of the rounds' ratios; 2 threads. The gradients of both are checked
  against each other first.
* ``ddp``: steps per second of the whole training step (forward, backward, all-reduce, Adam) on a global batch of
  64, with 1 process (2 threads) and with 2 processes (``torchrun``, gloo, 32 samples and 1 thread each).
* a paper estimate for N machines: the step time of one process on its share plus a ring all-reduce of the
  gradients (``2 (N - 1) / N`` times their bytes) over a 10 Gbit/s network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from linalg_shapes import median_ms  # this folder's scripts share their timing loop

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parent / "pypto-core" / "tests" / "distributed" / "train.py"
B, T, D, H = 32, 64, 128, 512
GLOBAL_BATCH = 64
STEPS = 12
ROUNDS = 15


def _block_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("train", SCRIPT)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return train.Block


def torch_block(torch, net):
    """The same block in torch operations, on copies of ``net``'s weights."""
    F = torch.nn.functional
    p = {n: torch.nn.Parameter(torch.tensor(a.data.copy())) for n, a in net.named_parameters()}

    def forward(x):
        d = x.shape[-1]
        h = F.layer_norm(x, (d,), p["g"])
        q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
        att = torch.softmax(torch.einsum("btd,bsd->bts", q, k) * d**-0.5, dim=-1)
        x = x + torch.einsum("bts,bsd->btd", att, v) @ p["wo"]
        x = x + F.gelu(F.layer_norm(x, (d,), p["g"]) @ p["w1"]) @ p["w2"]
        return x.mean(dim=1) @ p["head"]

    return forward, p


def block() -> dict[str, float]:
    import torch

    import pypto as pt

    torch.set_num_threads(2)
    Block = _block_module()
    rng = np.random.default_rng(0)
    net = Block(rng, D, H)
    model = pt.torch.module(net)
    ref, ref_params = torch_block(torch, net)
    x = torch.tensor(rng.standard_normal((B, T, D)).astype(np.float32))
    y = torch.tensor(rng.standard_normal((B, 1)).astype(np.float32))

    def step(f, params):
        def run():
            for q in params:
                q.grad = None
            ((f(x) - y) ** 2).mean().backward()

        return run

    def fwd(f):
        def run():
            with torch.no_grad():
                f(x)

        return run

    # the gradients agree (pypto's and torch's, from the same weights)
    step(model, list(model.parameters()))()
    step(ref, list(ref_params.values()))()
    for name, q in model.named_parameters():
        np.testing.assert_allclose(q.grad.numpy(), ref_params[name].grad.numpy(), rtol=2e-3, atol=2e-5)
    runs = {
        "pypto forward": fwd(model),
        "torch forward": fwd(ref),
        "pypto step": step(model, list(model.parameters())),
        "torch step": step(ref, list(ref_params.values())),
    }

    def recomputed() -> None:  # the backward computing the forward again (pt.vjp's pullback)
        pt.torch.KEEP_RESIDUALS = False
        try:
            runs["pypto step"]()
        finally:
            pt.torch.KEEP_RESIDUALS = True

    runs["pypto step, forward recomputed"] = recomputed
    for f in runs.values():
        f()  # a second warm-up call (median_ms makes one)
    # rounds of every measurement in turn (this machine's speed drifts: each round compares like with like); a
    # round's backward is its step less its forward
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(ROUNDS):
        for k, f in runs.items():
            times[k].append(median_ms(f, n=3))
    out = {k: float(np.median(v)) for k, v in times.items()}
    backward = {  # per round: the step less the forward
        name.replace("step", "backward"): [s - f for s, f in zip(times[name], times[name.split()[0] + " forward"])]
        for name in ("pypto step", "torch step", "pypto step, forward recomputed")
    }
    out.update({k: float(np.median(v)) for k, v in backward.items()})
    per_round = {
        "forward": zip(times["torch forward"], times["pypto forward"]),
        "backward": zip(backward["torch backward"], backward["pypto backward"]),
        "step": zip(times["torch step"], times["pypto step"]),
        "backward, forward recomputed": zip(backward["torch backward"], backward["pypto backward, forward recomputed"]),
        "step, forward recomputed": zip(times["torch step"], times["pypto step, forward recomputed"]),
    }
    for what, pairs in per_round.items():
        out[f"torch / pypto {what}"] = float(np.median([t / p for t, p in pairs]))
    out["parameters"] = int(sum(q.numel() for q in model.parameters()))
    return out


def worker(out: str) -> None:
    """One process of the data-parallel measurement (under torchrun, or alone)."""
    import torch

    import pypto as pt

    Block = _block_module()
    net = Block(np.random.default_rng(0), D, H)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((GLOBAL_BATCH, T, D)).astype(np.float32)
    y = rng.standard_normal((GLOBAL_BATCH, 1)).astype(np.float32)
    if "WORLD_SIZE" in os.environ:
        pt.init_distributed("gloo")
        rank, size = pt.get_rank(), pt.get_world_size()
        model = pt.DistributedDataParallel(net)
        share = slice(rank * GLOBAL_BATCH // size, (rank + 1) * GLOBAL_BATCH // size)
        x, y = x[share], y[share]
    else:
        rank, size, model = 0, 1, pt.torch.module(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for _ in range(STEPS + 2):
        t = time.perf_counter()
        loss = ((model(tx) - ty) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    if rank == 0:
        Path(out).write_text(json.dumps({"step ms": float(np.median(times[2:]) * 1e3), "processes": size}))
    if size > 1:
        pt.distributed.destroy()


def ddp(processes: int) -> float:
    out = Path(f"/tmp/pypto_training_{os.getpid()}_{processes}.json")
    threads = str(max(1, 2 // processes))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "PYPTO_NUM_THREADS": threads}
    if processes == 1:
        cmd = [sys.executable, __file__, "--worker", str(out)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
               __file__, "--worker", str(out)]  # fmt: skip
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    result = json.loads(out.read_text())
    out.unlink()
    return result["step ms"]


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    os.environ.setdefault("PYPTO_NUM_THREADS", "2")
    b = block()
    print(f"block {B} x {T} x {D} (hidden {H}), {b['parameters']} parameters; medians of {ROUNDS} rounds in ms, "
          "torch / pypto the median of the rounds' ratios")  # fmt: skip
    print(f"{'':10} {'pypto':>9} {'torch':>9} {'torch / pypto':>14}")
    for what in ("forward", "backward", "step"):
        p, t = b[f"pypto {what}"], b[f"torch {what}"]
        print(f"{what:10} {p:9.2f} {t:9.2f} {b[f'torch / pypto {what}']:14.2f}")
    for what in ("backward", "step"):
        p, t = b[f"pypto {what}, forward recomputed"], b[f"torch {what}"]
        ratio = b[f"torch / pypto {what}, forward recomputed"]
        print(f"{what:10} {p:9.2f} {t:9.2f} {ratio:14.2f}   (the backward computing the forward again)")
    one, two = ddp(1), ddp(2)
    print(f"\ndata-parallel steps (global batch {GLOBAL_BATCH}): 1 process {1e3 / one:.2f} steps/s ({one:.1f} ms), "
          f"2 processes {1e3 / two:.2f} steps/s ({two:.1f} ms): {one / two:.2f}x")  # fmt: skip
    grad_bytes = 4 * b["parameters"]
    bandwidth = 10e9 / 8
    print(f"\npaper estimate, {grad_bytes / 1e6:.2f} MB of gradients, ring all-reduce over 10 Gbit/s:")
    per_sample = one / GLOBAL_BATCH  # ms of one process's compute per sample (this machine)
    for n in (1, 2, 4, 8, 16):
        compute = per_sample * GLOBAL_BATCH / n
        comm = 0.0 if n == 1 else 2 * (n - 1) / n * grad_bytes / bandwidth * 1e3
        print(f"  {n:2d} machines: {compute:7.1f} ms compute + {comm:5.2f} ms all-reduce -> "
              f"{(one / (compute + comm)):5.2f}x one machine")  # fmt: skip


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1])
    else:
        main()
