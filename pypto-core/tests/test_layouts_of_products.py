"""How the products of a batched layer are laid out: the weight gradient of ``x @ w`` over batch and token axes
(``einsum("btd,btn->dn")``), ``x @ w.T`` with ``x`` of several batches, and results the program also reads.

Each layout is a decision the IR shows (``jit.ir(..., stage=...)``); the results are NumPy's and the gradients
torch's, on every executor.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pypto as pt


def nests(text: str) -> list[str]:
    """The nest headers and their stores, one string per nest."""
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("nest "):
            out.append(s)
        elif out and "] = " in s and not s.startswith("%"):
            out[-1] += " | " + s
    return out


def test_a_merged_store_walks_its_largest_stride_first(pypto_executor, rng):
    """The weight gradient of a batched layer merges the batch and token axes of a computed operand into one
    (a store ``tmp[n + 512 * t + 32768 * b]``): its nest walks (b, t, n), writes and reads contiguous along n, a
    map; walked in the order the axes are numbered, (n, b, t), it was a transpose that read a row apart at every
    step (3.9 ms against 0.85 for the whole product at 32 x 64 x 512, 2 threads)."""
    f = pt.jit(lambda x, g: pt.einsum("btd,btn->dn", pt.tanh(x), g * 2), executor=pypto_executor)
    x = rng.standard_normal((4, 6, 8)).astype(np.float32)
    g = rng.standard_normal((4, 6, 10)).astype(np.float32)
    np.testing.assert_allclose(f(x, g), np.einsum("btd,btn->dn", np.tanh(x), g * 2), rtol=2e-5, atol=2e-5)
    (merged,) = [
        n for n in nests(f.ir(x, g, stage="schedule")) if "* 2.0" not in n and re.search(r"tmp\d+\[i\d+ \+", n)
    ]
    assert "schedule: map" in merged, merged


def test_a_transpose_tiles_the_axes_its_reads_and_writes_run_along(pypto_executor, rng):
    """``y[n, 64*b + t] = f(x[b, t, n])``: reads contiguous along n, writes along t. The nest walks (b, n, t) and
    the CPU target tiles (n, t), so that the lines it reads stay in cache; the batch axis b is outermost."""
    f = pt.jit(lambda x, g: pt.einsum("btd,btn->dn", pt.gelu(x), g), executor=pypto_executor)
    x = rng.standard_normal((3, 20, 40)).astype(np.float32)
    g = rng.standard_normal((3, 20, 5)).astype(np.float32)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.gelu(torch.from_numpy(x)).reshape(-1, 40).T @ torch.from_numpy(g).reshape(-1, 5)
    np.testing.assert_allclose(f(x, g), want.numpy(), rtol=1e-5, atol=1e-5)
    (tr,) = [n for n in nests(f.ir(x, g, stage="schedule")) if "transpose" in n]
    order = re.search(r"order=\((\w+), (\w+), (\w+)\)", tr).groups()
    assert re.search(rf"\[{order[0]}, {order[2]}, {order[1]}\]", f.ir(x, g, stage="schedule")), tr  # x[b, t, n]
    tiles = re.search(r"tile\((\w+)=\d+, (\w+)=\d+\)", tr)  # (a CPU's: a GPU's threads read in groups)
    assert tiles is None or tiles.groups() == order[1:], tr  # the two inner loops are the tiled ones


@pytest.mark.parametrize("spelling", ["x @ w.T", "einsum"])
def test_a_weight_read_along_its_rows_by_every_batch_is_stored_transposed_once(pypto_executor, rng, spelling):
    """``x @ w.T`` (``w[j, k]``) for ``x`` of several batches: ``w.T`` is stored once, laid out as the product
    packs it, instead of gathering a column of ``w`` at every point of every batch (1.12 -> 0.68 ms at
    x 32 x 64 x 512, w 128 x 512). The gradients pass through the stored copy (checked against torch), and a
    single batch (nothing repeated) keeps reading ``w`` in place."""
    torch = pytest.importorskip("torch")
    if spelling == "einsum":
        fn = lambda x, w: pt.einsum("btk,jk->btj", x, w)  # noqa: E731
    else:
        fn = lambda x, w: x @ w.T  # noqa: E731
    f = pt.jit(fn, executor=pypto_executor)
    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    w = rng.standard_normal((12, 16)).astype(np.float32)
    np.testing.assert_allclose(f(x, w), x @ w.T, rtol=1e-5, atol=1e-5)
    text = f.ir(x, w, stage="schedule")
    (copy,) = [n for n in nests(text) if "contraction" not in n]  # w.T stored, then the product reading it
    assert len(nests(text)) == 2 and re.search(r"(tmp|_t)\d+\[i\d+, i\d+\] = %0", copy), text
    one = rng.standard_normal((1, 5, 16)).astype(np.float32)
    assert len(nests(f.ir(one, w, stage="schedule"))) == 1  # one batch: w read in place
    np.testing.assert_allclose(f(one, w), one @ w.T, rtol=1e-5, atol=1e-5)

    loss = pt.jit(lambda x, w: (pt.tanh(fn(x, w)) ** 2).sum(), executor=pypto_executor)
    gx, gw = pt.grad(loss, argnums=(0, 1))(x, w)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    (torch.tanh(tx @ tw.T) ** 2).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_a_result_the_program_also_reads_is_computed_into_its_output(pypto_executor, rng):
    """A result that later values read (a forward value and what is computed from it; the kept values of a
    training call) is computed straight into its output and read from there, not stored in a temporary and
    copied."""

    def both(a, b):
        p = a @ b
        return p, pt.tanh(p) * 2

    f = pt.jit(both, executor=pypto_executor)
    a = rng.standard_normal((9, 7)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    p, t = f(a, b)
    np.testing.assert_allclose(p, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t, np.tanh(a @ b) * 2, rtol=1e-5, atol=1e-5)
    text = nests(f.ir(a, b, stage="schedule"))
    assert len(text) == 2 and "contraction" in text[0] and "out0[" in text[0], text
    assert "load out0[" in f.ir(a, b, stage="schedule")
    if "float16" not in pt.get_runtime_info()["backends"][pypto_executor]["dtypes"]:
        return
    h = pt.jit(both, executor=pypto_executor)
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    p16, t16 = h(a16, b16)
    want = a16.astype(np.float32) @ b16.astype(np.float32)
    np.testing.assert_allclose(p16, want.astype(np.float16), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(t16, (np.tanh(want) * 2).astype(np.float16), rtol=2e-3, atol=2e-3)
