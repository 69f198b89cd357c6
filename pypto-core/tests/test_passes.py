"""Each core pass on its own: the IR of the stage before it in, the pass called directly, the IR out.

A pass is a function of an IR record: it must leave its input as it was, give what the pipeline recorded for
its stage, pass the verifier, and make the one change it is for (checked on the printed IR).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pypto as pt
from pypto.ir.printer import format_kernel, format_loops
from pypto.passes import LOOP_PASSES, PASSES, STAGES
from pypto.passes.lower import lower
from pypto.passes.verify import verify_kernel, verify_loops
from pypto.testing import softmax, sum_exp, vector_add

N = pt.dim("N")


def _folding(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    y[i] = (x[i] * 1.0 + 6.0) + pt.exp(x[i]) * pt.exp(x[i])


def _reverse_in_place(x: pt.Tensor[float, (N,)]):
    i = pt.axis(0)
    x[i] = x[N - 1 - i]


M, K = pt.dims("M K")


def _silu_matmul(a: pt.Tensor[float, (M, K)], w: pt.Tensor[float, (K, N)], c: pt.Tensor[float, (M, N)]):
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    c[i, j] = pt.reduce_sum(a[i, k] * pt.sigmoid(a[i, k]) * w[k, j], axis=k)


def _gated(x: pt.Tensor[float, (M, K)], w1: pt.Tensor[float, (K, N)], w3: pt.Tensor[float, (K, N)],
           h: pt.Tensor[float, (M, N)]):  # fmt: skip
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    h[i, j] = pt.reduce_sum(x[i, k] * w1[k, j], axis=k) * pt.reduce_sum(x[i, k] * w3[k, j], axis=k)


def _one_row(x: pt.Tensor[float, (1, N)], w: pt.Tensor[float, (N,)], y: pt.Tensor[float, (1, N)]):
    i, j = pt.axis(0), pt.axis(1)
    y[i, j] = x[i, j] * w[j] + x[i, 0]


def _stored_twice(x: pt.Tensor[float, (M, K)], w: pt.Tensor[float, (K, N)], h: pt.Tensor[float, (M, N)],
                  h2: pt.Tensor[float, (M, N)]):  # fmt: skip
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    v = pt.tanh(pt.reduce_sum(x[i, k] * w[k, j], axis=k))
    h[i, j] = v
    h2[i, j] = v * 2.0


def _shared_contraction(x: pt.Tensor[float, (M, K)], w: pt.Tensor[float, (K, N)], h: pt.Tensor[float, (M, N)],
                        h2: pt.Tensor[float, (M, N)]):  # fmt: skip
    i, j, k = pt.axis(0), pt.axis(1), pt.axis(2)
    c = pt.reduce_sum(x[i, k] * w[k, j], axis=k)
    h[i, j] = pt.tanh(c)
    h2[i, j] = pt.sigmoid(c) + x[i, j]


def _row_functions(x: pt.Tensor[float, (M, N)], b: pt.Tensor[float, (N,)], y: pt.Tensor[float, (M, N)],
                   z: pt.Tensor[float, (M,)]):  # fmt: skip
    i, j = pt.axis(0), pt.axis(1)
    y[i, j] = pt.tanh(0.5 * b[j]) * x[i, j] + (b[j] + 1.0) + pt.exp(x[i, 0])  # exp(x[i, 0]): inner loop hoists it
    z[i] = pt.reduce_max(pt.exp(b[j]) + x[i, j], axis=j)


def _two_rows(x: pt.Tensor[float, (2, 1000)], b: pt.Tensor[float, (1000,)], y: pt.Tensor[float, (2, 1000)]):
    i, j = pt.axis(0), pt.axis(1)
    y[i, j] = x[i, j] * (1.0 / b[j]) + pt.tanh(b[j])


KERNELS = {"row_functions": _row_functions, "two_rows": _two_rows, "stored_twice": _stored_twice, "shared_contraction": _shared_contraction, "one_row": _one_row, "folding": _folding, "reverse": _reverse_in_place, "softmax": softmax.fn, "sum_exp": sum_exp.fn,
           "vector_add": vector_add.fn, "silu_matmul": _silu_matmul, "gated": _gated}  # fmt: skip


def stages_of(name: str):
    """Every stage of a kernel, compiled for the reference backend (no target: the core's passes only)."""
    return pt.kernel(executor="reference")(KERNELS[name]).compilation()


def run_pass(name: str, stage: str) -> tuple[str, str]:
    """The printed IR before and after the pass ``stage``, the pass run directly on its input."""
    comp = stages_of(name)
    fns = dict(PASSES)
    previous = STAGES[STAGES.index(stage) - 1]
    ir_in = comp.stages[previous]
    before = format_kernel(ir_in)
    out = fns[stage](ir_in)
    assert format_kernel(ir_in) == before, f"{stage} changed its input"
    done = set(STAGES[1 : STAGES.index(stage) + 1])
    verify_kernel(out, stage, done)
    assert format_kernel(out) == format_kernel(comp.stages[stage]), f"{stage} differs from the pipeline's"
    return before, format_kernel(out)


def test_infer_types_gives_weak_scalars_the_type_of_the_other_operand():
    before, after = run_pass("folding", "infer_types")
    assert "%0 * weak 1.0" in before and "%0 * 1.0 : float32" in after
    values = [line for line in after.splitlines() if line.lstrip().startswith("%")]
    assert len(values) == 9 and all(line.endswith(": float32") for line in values)  # every value is typed
    assert not any(line.endswith(": float32") for line in before.splitlines())


def test_infer_shapes_finds_each_axis_extent_and_the_bounds_to_check():
    before, after = run_pass("reverse", "infer_shapes")
    assert "  axis i = pt.axis(0)" in before.splitlines()
    assert "axis i = pt.axis(0) in [0, N)  (from x.shape[0])" in after
    assert "check 0 <= -i + N - 1 < N   (x dim 0)" in after and "check" not in before


def test_simplify_removes_identities_and_shares_equal_subtrees():
    before, after = run_pass("folding", "simplify")
    assert "* 1.0" in before and "* 1.0" not in after
    assert before.count("exp(") == 2 and after.count("exp(") == 1 and "%2 * %2" in after  # exp(x[i]) computed once
    assert before.count("load x[i]") == 3 and after.count("load x[i]") == 1


def test_fuse_puts_the_stores_of_one_domain_in_one_nest():
    before, after = run_pass("softmax", "fuse")
    assert "nest" not in before and after.count("nest ") == 1 and "nest 0 loops=(row, col):" in after


def test_materialize_computes_a_self_read_into_a_temporary_first():
    before, after = run_pass("reverse", "materialize")
    assert "temp" not in before and "temp _t0: float32[N]" in after
    assert "_t0[i] = %0" in after and "nest 1 loops=(i):" in after  # then copied back in a second nest


def test_contraction_operands_computes_a_computed_factor_once_in_its_own_nest():
    before, after = run_pass("silu_matmul", "contraction_operands")
    assert "temp" not in before and before.count("nest ") == 1 and "sigmoid" in before
    assert "temp _t0: float32[M, K]" in after and "nest 0 loops=(i, k):" in after
    nest0, nest1 = after.split("nest 1 ")
    assert "sigmoid" in nest0 and "_t0[i, k] = " in nest0  # silu(a) computed M x K times
    assert "sigmoid" not in nest1 and "load _t0[i, k]" in nest1 and "load w[k, j]" in nest1  # a plain product


def test_contraction_operands_gives_each_combined_contraction_a_nest():
    before, after = run_pass("gated", "contraction_operands")
    assert before.count("nest ") == 1 and before.count("reduce_sum") == 2
    assert "temp _t0: float32[M, N]" in after and "temp _t1: float32[M, N]" in after
    nests = after.split("  nest ")[1:]
    assert len(nests) == 3 and [n.count("reduce_sum") for n in nests] == [1, 1, 0]
    assert "load _t0[i, j]" in nests[2] and "load _t1[i, j]" in nests[2]  # the product of the two results


def test_contraction_operands_separates_a_contraction_a_nest_stores_twice():
    """One nest storing a contraction's result twice (a gradient storing a value and its flat copy): the
    contraction gets a nest of its own, which the contraction kernels take, instead of one dot product per
    output element inside the nest."""
    from pypto.ir.kernel import Group
    from pypto.passes.prologues import contraction_operands

    k = stages_of("stored_twice").stages["materialize"]
    g0, g1 = k.groups  # the kernel language gives each store a nest; a jit program's copies share one
    merged = k.replace(groups=(Group(g0.stores + g1.stores, g0.loops),))
    assert format_kernel(merged).count("reduce_sum") == 1
    nests = format_kernel(contraction_operands(merged)).split("  nest ")[1:]
    assert len(nests) == 2 and "reduce_sum" in nests[0] and "_t0[i, j] = " in nests[0]
    assert "reduce_sum" not in nests[1] and "load _t0[i, j]" in nests[1]
    assert "h[i, j] = " in nests[1] and "h2[i, j] = " in nests[1]


def test_contraction_operands_reads_a_stored_contraction_back_instead_of_computing_it_again():
    """Fusion gives each contraction store a nest: the second store of ``v = tanh(x @ w)`` (``h2 = v * 2``)
    reads ``h`` instead of computing the product again (it took 2x the time of one store)."""
    before, after = run_pass("stored_twice", "contraction_operands")
    assert before.count("reduce_sum") == 2 and after.count("reduce_sum") == 1
    nest0, nest1 = after.split("  nest ")[1:]
    assert "reduce_sum" in nest0 and "h[i, j] = " in nest0
    assert "load h[i, j]" in nest1 and "h2[i, j] = " in nest1 and "load x" not in nest1
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((37, 53)).astype(np.float32), rng.standard_normal((53, 29)).astype(np.float32)
    h, h2 = np.empty((37, 29), np.float32), np.empty((37, 29), np.float32)
    pt.kernel(_stored_twice)(x, w, h, h2)  # the default backend
    want = np.tanh(x.astype(np.float64) @ w)
    np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h2, 2 * want, rtol=1e-5, atol=2e-5)


def test_contraction_operands_shares_a_contraction_two_nests_use_through_a_temporary():
    before, after = run_pass("shared_contraction", "contraction_operands")
    assert before.count("reduce_sum") == 2 and after.count("reduce_sum") == 1
    nests = after.split("  nest ")[1:]
    assert len(nests) == 3 and "_t0[i, j] = " in nests[0] and "reduce_sum" in nests[0]
    assert all("load _t0[i, j]" in n and "reduce_sum" not in n for n in nests[1:])
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((40, 40)).astype(np.float32), rng.standard_normal((40, 40)).astype(np.float32)
    h, h2 = np.empty((40, 40), np.float32), np.empty((40, 40), np.float32)
    pt.kernel(_shared_contraction)(x, w, h, h2)
    c = x.astype(np.float64) @ w
    np.testing.assert_allclose(h, np.tanh(c), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h2, 1 / (1 + np.exp(-c)) + x, rtol=1e-5, atol=1e-5)


def test_hoist_broadcasts_computes_a_function_of_a_broadcast_row_once():
    before, after = run_pass("row_functions", "hoist_broadcasts")
    assert "temp" not in before and before.count("tanh(") == 1 and before.count("exp(") == 2
    assert "temp _t0: float32[N]" in after and "temp _t1: float32[N]" in after
    nests = after.split("  nest ")[1:]
    assert len(nests) == 4  # tanh(0.5 * b[j]) once, then y; exp(b[j]) once, then z
    assert nests[0].startswith("0 loops=(j):") and "# _t0: computed once: tanh over (j), work 13/point" in nests[0]
    assert "evaluated M times per point inline (sizes known at run time" in nests[0] and "_t0[j] = " in nests[0]
    assert "load _t0[j]" in nests[1] and "tanh(" not in nests[1] and "exp(" in nests[1]  # exp(x[i, 0]) stays
    assert "# recomputed: add over (j), work 1/point" in nests[1]  # b[j] + 1.0: cheaper than a temporary
    assert nests[2].startswith("2 loops=(j):") and "_t1[j] = " in nests[2] and "exp(" in nests[2]
    assert "load _t1[j]" in nests[3] and "exp(" not in nests[3] and "reduce_max" in nests[3]
    x, b = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32), np.linspace(0.5, 2, 7, dtype=np.float32)
    y, z = np.empty_like(x), np.empty(5, np.float32)
    pt.kernel(_row_functions)(x, b, y, z)
    want = np.tanh(0.5 * b)[None, :] * x + (b + 1.0) + np.exp(x[:, :1])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, (np.exp(b)[None, :] + x).max(axis=1), rtol=1e-6)


def test_hoist_broadcasts_weighs_known_sizes():
    """Two rows: a division recomputed twice costs what a temporary does (kept inline); tanh is worth storing."""
    before, after = run_pass("two_rows", "hoist_broadcasts")
    assert "# recomputed: div over (j), work 4/point, evaluated 2 times per point inline " in after
    assert "(est. 8,000 inline vs 8,000 stored: kept inline)" in after
    assert "# _t0: computed once: tanh over (j), work 12/point, evaluated 2 times per point inline " in after
    assert "(est. 24,000 inline vs 16,000 stored)" in after and "1.0 / " in after.split("  nest ")[2]
    assert after.count("temp ") == 1 and "tanh(" not in after.split("  nest ")[2]


def test_hoist_broadcasts_reads_a_value_an_earlier_nest_stored(pypto_executor, rng):
    """``rsqrt(v + eps)`` broadcast into two weight-gradient operands (as a layer norm's gradient reads its kept
    variance): the first nest's value is stored once and the second nest reads it there, not stored again; an
    update of ``v`` between them would make the second compute it again (checked below with ``v`` written)."""

    def f(x, v, g1, g2):
        s = pt.rsqrt(v + 1e-5)[:, :, None]
        return pt.einsum("btd,btn->dn", x * s, g1), pt.einsum("btd,btn->dn", (x + 1) * s, g2)

    x = rng.standard_normal((4, 16, 128)).astype(np.float32)
    v = rng.uniform(0.5, 2, (4, 16)).astype(np.float32)
    g1, g2 = (rng.standard_normal((4, 16, 8)).astype(np.float32) for _ in range(2))
    jf = pt.jit(f, executor=pypto_executor)
    notes = re.findall(r"# (_t\d+): (computed once: rsqrt|rsqrt over .* read from the nest that computed it)",
                       jf.ir(x, v, g1, g2, stage="hoist_broadcasts"))  # fmt: skip
    assert [n for n, _ in notes] == ["_t0", "_t0"] and "computed once" in notes[0][1], notes
    s = 1 / np.sqrt(v.astype(np.float64) + 1e-5)[:, :, None]
    a, b = jf(x, v, g1, g2)
    np.testing.assert_allclose(a, np.einsum("btd,btn->dn", x * s, g1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b, np.einsum("btd,btn->dn", (x + 1) * s, g2), rtol=1e-5, atol=1e-4)

    @pt.kernel(executor=pypto_executor)
    def written(x: pt.Tensor[pt.float32, (4, 16, 128)], v: pt.Tensor[pt.float32, (4, 16)],
                y: pt.Tensor[pt.float32, (128, 4, 16)], z: pt.Tensor[pt.float32, (128, 4, 16)]):  # fmt: skip
        b, t, d = pt.axis(0), pt.axis(1), pt.axis(2)
        y[d, b, t] = x[b, t, d] * pt.rsqrt(v[b, t] + 1e-5)
        v[b, t] = v[b, t] * 2.0
        z[d, b, t] = x[b, t, d] * pt.rsqrt(v[b, t] + 1e-5)

    text = written.ir("hoist_broadcasts")
    assert "read from the nest that computed it" not in text and text.count("computed once: rsqrt") == 2, text
    v0, y, z = v.copy(), np.empty((128, 4, 16), np.float32), np.empty((128, 4, 16), np.float32)
    written(x, v, y, z)
    np.testing.assert_allclose(y, (x / np.sqrt(v0 + 1e-5)[:, :, None]).transpose(2, 0, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, (x / np.sqrt(2 * v0 + 1e-5)[:, :, None]).transpose(2, 0, 1), rtol=1e-5, atol=1e-6)


def test_unit_loops_drops_a_loop_of_one_iteration():
    before, after = run_pass("one_row", "unit_loops")
    assert "nest 0 loops=(i, j):" in before and "load x[i, j]" in before
    assert "nest 0 loops=(j):" in after and "load x[0, j]" in after and "load x[0, 0]" in after
    assert "y[0, j] = " in after and "[i" not in after.split("nest 0")[1]
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    w = np.linspace(-1, 1, 6).astype(np.float32)
    y = np.empty_like(x)
    pt.kernel(_one_row)(x, w, y)  # the default backend: the loop over j is the one on threads
    np.testing.assert_array_equal(y, x * w + x[:, :1])


def test_split_reductions_splits_a_full_reduction_into_fixed_blocks():
    before, after = run_pass("sum_exp", "split_reductions")
    assert "split=" not in before and "nest 0 loops=() split=blocks of 16384:" in after


def test_schedule_chooses_parallel_and_vector_loops():
    before, after = run_pass("vector_add", "schedule")
    assert "schedule:" not in before and "schedule: map order=(i) parallel=i vector=i" in after


def test_online_softmax_marks_long_rows_for_the_online_variant():
    before, after = run_pass("softmax", "online_softmax")
    assert "online=" not in before and "online=(col) for rows >= 524288 bytes, blocks of 4096" in after


def test_lower_turns_nests_into_loops():
    comp = stages_of("softmax")
    scheduled = comp.final
    loops = lower(scheduled, noalias=True)
    verify_loops(loops)
    text = format_loops(loops)
    assert text == format_loops(comp.loop_stages["lower"])
    assert "parallel for row in 0..M:" in text and "vector for col in 0..N reduce(max: " in text
    assert "if ((N * 4) >= 524288):" in text  # the online variant for long rows, chosen when the kernel runs


@pytest.mark.parametrize("name, fn", LOOP_PASSES)
def test_loop_passes_leave_their_input_and_match_the_pipeline(name, fn):
    comp = stages_of("softmax")
    before = format_loops(comp.loop_stages["lower"])
    out = fn(comp.loop_stages["lower"])
    verify_loops(out, name)
    assert format_loops(comp.loop_stages["lower"]) == before
    assert format_loops(out) == format_loops(comp.loop_stages[name])


def test_optimize_loops_hoists_the_reciprocal_of_an_invariant_divisor():
    comp = stages_of("softmax")
    before, after = format_loops(comp.loop_stages["lower"]), format_loops(comp.loop_stages["optimize_loops"])
    assert "/ sum_2)" in before and "let inv1 = (1.0 / sum_2)" in after and "* inv1)" in after
    assert "let h2 = ((N + 4095) // 4096)" in after  # the block count, invariant in the row loop, hoisted


def test_loop_ir_is_verified_before_code_is_generated(monkeypatch):
    """The loop stages are verified when a backend is about to render them (not when the disk cache holds the
    kernel: it was built from the same IR, verified then)."""
    from dataclasses import replace

    from pypto import passes
    from pypto.dtypes import int64
    from pypto.errors import IRVerificationError
    from pypto.ir.loops import Block, Let, Var

    def broken(k):  # a pass that reads a name nothing defines
        return replace(k, body=Block((Let("_x", Var("_defined_nowhere", dtype=int64)), k.body)))

    monkeypatch.setattr(passes, "LOOP_PASSES", [*passes.LOOP_PASSES, ("broken", broken)])
    k = pt.kernel(executor="reference")(_two_rows)
    comp = k.compilation()  # the passes run; nothing is rendered yet
    assert "_defined_nowhere" in format_loops(comp.loop_stages["broken"])
    with pytest.raises(IRVerificationError, match="after 'broken'.*_defined_nowhere"):
        k.get_code()
    x, b = np.ones((2, 1000), np.float32), np.ones(1000, np.float32)
    with pytest.raises(IRVerificationError, match="after 'broken'"):
        k(x, b, np.empty_like(x))


def test_a_kernel_call_does_not_import_numpy_ma():
    """A masked-array argument is refused without importing numpy.ma (20 ms of a cached kernel's first call)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, pypto as pt\n"
        "from pypto.testing import vector_add\n"
        "x = np.ones(8, np.float32)\n"
        "vector_add(x, x, np.empty_like(x))\n"
        "assert 'numpy.ma' not in sys.modules, 'numpy.ma imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
