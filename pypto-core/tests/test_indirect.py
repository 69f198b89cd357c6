"""Gathers and scatters in the kernel language: reads at indices taken from integer tensors, compared with
NumPy's integer-array indexing (exact: a gather moves values), accumulating writes at such indices, compared
with NumPy's ``ufunc.at`` in the same type and order (exact too), and their bounds check."""

import ml_dtypes
import numpy as np
import pytest

import pypto as pt

V, D, B, S, N, M = pt.dims("V D B S N M")


def _embed(executor, dt=pt.float32, it=pt.int32, **options):
    @pt.kernel(executor=executor, **options)
    def embed(table: pt.Tensor[dt, (V, D)], tok: pt.Tensor[it, (B, S)], out: pt.Tensor[dt, (B, S, D)]):
        b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
        out[b, s, d] = table[tok[b, s], d]

    return embed


@pytest.mark.parametrize("index_type", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_embedding_lookup_with_every_index_type(pypto_executor, rng, index_type):
    table = rng.standard_normal((40, 9)).astype(np.float32)
    lo = 0 if index_type.startswith("u") else -40
    tok = rng.integers(lo, 40, (3, 5)).astype(index_type)  # negative indices count from the end, as in NumPy
    out = np.zeros((3, 5, 9), np.float32)
    _embed(pypto_executor, it=getattr(pt, index_type))(table, tok, out)
    np.testing.assert_array_equal(out, table[tok])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "complex64", "int8", "uint64", "bool"])
def test_gather_in_other_dtypes(pypto_executor, rng, dtype):
    np_dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    values = rng.standard_normal((11, 4)) * 50
    if dtype.startswith("complex"):
        values = values + 1j * rng.standard_normal((11, 4))
    table = (values > 0) if dtype == "bool" else values.astype(np_dt)
    tok = rng.integers(-11, 11, (2, 6)).astype(np.int64)
    out = np.zeros((2, 6, 4), table.dtype)
    dt = pt.bool_ if dtype == "bool" else getattr(pt, dtype)
    _embed(pypto_executor, dt=dt, it=pt.int64)(table, tok, out)
    np.testing.assert_array_equal(out, table[tok])


def test_nested_gathers_and_take_along_axis(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def nested(x: pt.Tensor[pt.float64, (N,)], p: pt.Tensor[pt.int64, (N,)], q: pt.Tensor[pt.uint8, (M,)],
               pos: pt.Tensor[pt.int32, (M, N)], y: pt.Tensor[pt.float64, (M,)], z: pt.Tensor[pt.float64, (M, N)]):  # fmt: skip
        i, j = pt.axis(0), pt.axis(1)
        y[i] = x[p[q[i]]] * 2.0 + x[q[i] + 1]  # an index read through another; an index with an offset
        z[i, j] = x[pos[i, j]] - x[j]

    x = rng.standard_normal(17)
    p = rng.integers(-17, 17, 17)
    q = rng.integers(0, 16, 9).astype(np.uint8)
    pos = rng.integers(-17, 17, (9, 17)).astype(np.int32)
    y, z = np.zeros(9), np.zeros((9, 17))
    nested(x, p, q, pos, y, z)
    np.testing.assert_array_equal(y, x[p[q]] * 2.0 + x[q.astype(np.int64) + 1])
    np.testing.assert_array_equal(z, x[pos] - x[None, :])


def test_cross_entropy_rows(pypto_executor, rng):
    """The loss of a row of logits at its label: ``logsumexp(x[r]) - x[r, label[r]]`` in one kernel."""

    @pt.kernel(executor=pypto_executor)
    def cross_entropy(x: pt.Tensor[pt.float64, (N, V)], label: pt.Tensor[pt.int64, (N,)],
                      loss: pt.Tensor[pt.float64, (N,)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        top = pt.reduce_max(x[r, c], axis=c)
        loss[r] = top + pt.log(pt.reduce_sum(pt.exp(x[r, c] - top), axis=c)) - x[r, label[r]]

    x = rng.standard_normal((33, 50)) * 4
    label = rng.integers(0, 50, 33)
    loss = np.zeros(33)
    cross_entropy(x, label, loss)
    m = x.max(axis=1)
    want = m + np.log(np.exp(x - m[:, None]).sum(axis=1)) - x[np.arange(33), label]
    np.testing.assert_allclose(loss, want, rtol=1e-13, atol=1e-13)


def test_an_index_out_of_bounds_is_an_index_error_and_nothing_is_written(pypto_executor, rng):
    embed = _embed(pypto_executor)
    table = rng.standard_normal((40, 9)).astype(np.float32)
    tok = rng.integers(0, 40, (3, 5)).astype(np.int32)
    out = np.full((3, 5, 9), 7.0, np.float32)
    for bad in (40, -41, 1000):
        tok[2, 1] = bad
        with pytest.raises(pt.IndexError) as e:
            embed(table, tok, out)
        err = e.value
        assert isinstance(err, IndexError) and isinstance(err, pt.PyptoError)  # also the built-in IndexError
        assert err.param == "table" and err.got == bad
        assert f"index {bad} (from tok[b, s] at b=2, s=1)" in str(err) and "table.shape[0] = 40" in str(err)
        assert (out == 7.0).all()  # nothing was written
    tok[2, 1] = -40  # the lowest valid index
    embed(table, tok, out)
    np.testing.assert_array_equal(out, table[tok])


def test_an_unsigned_index_past_int64_is_out_of_bounds(pypto_executor, rng):
    table = rng.standard_normal((5, 2)).astype(np.float32)
    tok = np.array([[1, 2**63 + 3]], np.uint64)
    with pytest.raises(pt.IndexError, match=str(2**63 + 3)):
        _embed(pypto_executor, it=pt.uint64)(table, tok, np.zeros((1, 2, 2), np.float32))


def test_boundscheck_false_skips_the_check(pypto_executor, rng):
    table = rng.standard_normal((40, 9)).astype(np.float32)
    tok = rng.integers(-40, 40, (3, 5)).astype(np.int32)
    out = np.zeros((3, 5, 9), np.float32)
    unchecked = _embed(pypto_executor, boundscheck=False)
    unchecked(table, tok, out)
    np.testing.assert_array_equal(out, table[tok])
    assert "gather table" in unchecked.ir("infer_shapes")
    with pytest.raises(pt.ArgumentError, match="boundscheck must be True or False"):
        _embed(pypto_executor, boundscheck="no")


def test_gather_errors_are_typed_and_explained():
    @pt.kernel
    def float_index(x: pt.Tensor[pt.float32, (N,)], f: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        y[i] = x[f[i]]

    with pytest.raises(pt.DTypeError, match="index 0 has type float32, expected an integer type") as e:
        float_index.ir("infer_types")
    assert "pt.cast" in e.value.fix

    @pt.kernel
    def scatter_store(x: pt.Tensor[pt.float32, (N,)], idx: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        y[idx[i]] = x[i]

    with pytest.raises(pt.TracingError, match="several points may write the same element") as e:
        scatter_store.ir()
    assert "y[...] += v" in str(e.value) and "unique=True" in str(e.value)

    @pt.kernel
    def index_from_output(x: pt.Tensor[pt.float32, (N,)], t: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        t[i] = pt.cast(x[i], pt.int32)
        y[i] = x[t[i]]

    with pytest.raises(pt.TracingError, match="computes an index of a gather from 't', which it also writes") as e:
        index_from_output.ir("infer_types")
    assert "split the kernel in two" in str(e.value)


def test_a_gather_from_a_tensor_the_kernel_wrote_reads_the_new_values(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def from_own_output(x: pt.Tensor[pt.float32, (N,)], idx: pt.Tensor[pt.int32, (N,)], t: pt.Tensor[pt.float32, (N,)],
                        y: pt.Tensor[pt.float32, (N,)]):  # fmt: skip
        i = pt.axis(0)
        t[i] = x[i] * 2.0
        y[i] = t[idx[i]] + t[i]  # t is complete before any element of y is computed
        x[i] = x[idx[i]]  # in place: the right-hand side is read whole first (NumPy's semantics)

    x = rng.standard_normal(50).astype(np.float32)
    idx = rng.integers(-50, 50, 50).astype(np.int32)
    t, y, x0 = np.zeros(50, np.float32), np.zeros(50, np.float32), x.copy()
    from_own_output(x, idx, t, y)
    np.testing.assert_array_equal(t, x0 * 2)
    np.testing.assert_array_equal(y, (x0 * 2)[idx] + x0 * 2)
    np.testing.assert_array_equal(x, x0[idx])


def test_the_same_array_as_gathered_input_and_output_is_refused(rng):
    @pt.kernel
    def shift(x: pt.Tensor[pt.float64, (N,)], idx: pt.Tensor[pt.int64, (N,)], y: pt.Tensor[pt.float64, (N,)]):
        i = pt.axis(0)
        y[i] = x[idx[i]]

    x = rng.standard_normal(8)
    with pytest.raises(pt.AliasingError):
        shift(x, np.arange(8)[::-1].copy(), x)  # y[i] = x[7 - i] in place would read values already written


def test_histogram_and_extrema(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def hist(bins: pt.Tensor[pt.int32, (N,)], w: pt.Tensor[pt.float32, (N,)], counts: pt.Tensor[pt.int64, (B,)],
             mass: pt.Tensor[pt.float32, (B,)], top: pt.Tensor[pt.float32, (B,)], low: pt.Tensor[pt.float32, (B,)]):  # fmt: skip
        i = pt.axis(0)
        counts[bins[i]] += 1
        mass[bins[i]] -= w[i] * 2.0
        top[bins[i]] = pt.maximum(top[bins[i]], w[i])
        pt.scatter_min(low[bins[i]], w[i])

    bins = rng.integers(-12, 12, 2000).astype(np.int32)
    w = rng.standard_normal(2000).astype(np.float32)
    counts, mass = np.full(12, 5, np.int64), rng.standard_normal(12).astype(np.float32)  # accumulated onto
    top, low = np.full(12, -np.inf, np.float32), np.full(12, np.inf, np.float32)
    want = [a.copy() for a in (counts, mass, top, low)]
    np.add.at(want[0], bins, 1)
    np.add.at(want[1], bins, -(w * np.float32(2.0)))
    np.maximum.at(want[2], bins, w)
    np.minimum.at(want[3], bins, w)
    hist(bins, w, counts, mass, top, low)
    for got, ref in zip((counts, mass, top, low), want):
        np.testing.assert_array_equal(got, ref)  # the same additions in the same order: the same rounding


def test_scatter_add_is_deterministic_and_reads_stores(pypto_executor, rng):
    """An embedding's gradient with a reduction in the scattered value, after a store it may read."""

    @pt.kernel(executor=pypto_executor)
    def grad(dout: pt.Tensor[pt.float32, (B, S, D)], tok: pt.Tensor[pt.int64, (B, S)],
             scale: pt.Tensor[pt.float32, (B, S)], dtable: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
        b, s, d = pt.axis(0), pt.axis(1), pt.axis(2)
        scale[b, s] = pt.reduce_sum(dout[b, s, d] * dout[b, s, d], axis=d)
        pt.scatter_add(dtable[tok[b, s], d], dout[b, s, d] * scale[b, s])

    dout = rng.standard_normal((6, 9, 16)).astype(np.float32)
    tok = rng.integers(0, 5, (6, 9))
    scale, results = np.zeros((6, 9), np.float32), []
    for _ in range(3):
        dtable = np.zeros((5, 16), np.float32)
        grad(dout, tok, scale, dtable)
        results.append(dtable)
    want = np.zeros((5, 16), np.float64)
    np.add.at(want, tok, dout.astype(np.float64) * (dout.astype(np.float64) ** 2).sum(-1, keepdims=True))
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-4)
    assert all(np.array_equal(r, results[0]) for r in results)  # bit for bit, call after call
    assert "scatter dtable[" in grad.ir("infer_shapes")


def test_scatter_in_other_dtypes_and_a_unique_permutation(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def mixed(x: pt.Tensor[pt.complex64, (N,)], p: pt.Tensor[pt.int64, (N,)], q: pt.Tensor[pt.uint8, (N,)],
              y: pt.Tensor[pt.complex64, (N,)], h: pt.Tensor[pt.float16, (B,)], c: pt.Tensor[pt.int8, (B,)]):  # fmt: skip
        i = pt.axis(0)
        pt.scatter(y[p[i]], x[i] * 2.0, unique=True)
        h[q[i]] += pt.abs(x[i])
        c[q[i]] += 100  # int8 wraps around, as NumPy's does

    x = (rng.standard_normal(40) + 1j * rng.standard_normal(40)).astype(np.complex64)
    p, q = rng.permutation(40), rng.integers(0, 4, 40).astype(np.uint8)
    y, h, c = np.zeros(40, np.complex64), np.zeros(4, np.float16), np.zeros(4, np.int8)
    mixed(x, p, q, y, h, c)
    want_y = np.zeros(40, np.complex64)
    want_y[p] = x * np.float32(2.0)
    want_h, want_c = np.zeros(4, np.float16), np.zeros(4, np.int8)
    np.add.at(want_h, q, np.abs(x).astype(np.float16))
    np.add.at(want_c, q, np.int8(100))
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(h, want_h)
    np.testing.assert_array_equal(c, want_c)


def test_a_scatter_index_out_of_bounds_writes_nothing(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def count(bins: pt.Tensor[pt.int64, (N,)], x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N,)],
              counts: pt.Tensor[pt.int64, (B,)]):  # fmt: skip
        i = pt.axis(0)
        y[i] = x[i] + 1.0
        counts[bins[i]] += 1

    bins, x = np.array([0, 1, 7, 2]), np.ones(4, np.float32)
    y, counts = np.zeros(4, np.float32), np.zeros(3, np.int64)
    with pytest.raises(pt.IndexError, match=r"index 7 \(from bins\[i\] at i=2\) is out of bounds for counts"):
        count(bins, x, y, counts)
    assert not y.any() and not counts.any()  # neither the store nor the scatter ran


def test_scatter_errors_are_typed_and_explained():
    @pt.kernel
    def late_store(idx: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (N,)], z: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        y[idx[i]] += 1.0
        z[i] = 2.0

    with pytest.raises(pt.TracingError, match="follows a scatter"):
        late_store.ir()

    @pt.kernel
    def reads_target(idx: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (N,)], z: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        z[i] = y[i] * 2.0
        y[idx[i]] += 1.0

    with pytest.raises(pt.TracingError, match="reads 'y', which a scatter of this kernel writes"):
        reads_target.ir("infer_types")

    @pt.kernel
    def bool_add(idx: pt.Tensor[pt.int32, (N,)], m: pt.Tensor[pt.bool_, (N,)]):
        i = pt.axis(0)
        pt.scatter_add(m[idx[i]], True)

    with pytest.raises(pt.TracingError, match="booleans do not add"):
        bool_add.ir("infer_types")

    @pt.kernel
    def not_unique(idx: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float32, (N,)]):
        i = pt.axis(0)
        pt.scatter(y[idx[i]], 1.0)

    with pytest.raises(pt.TracingError, match="unique=True"):
        not_unique.ir()
    with pytest.raises(pt.TracingError, match="an element of a tensor parameter"):
        pt.scatter_add(1.0, 2.0)


def test_gathers_and_scatters_on_dask_arrays_run_in_blocks(rng):
    """Gathers blockwise (the table whole in every block: rechunked with one warning when it was cut along the
    gathered axis), scatter-adds and maxima as a partial target per block combined by a tree, and stores through
    unique indices as one task on whole arrays."""
    da = pytest.importorskip("dask.array")
    import pypto.dask as pdask

    @pt.kernel
    def lookup_count(table: pt.Tensor[pt.float64, (V, D)], tok: pt.Tensor[pt.int64, (B,)],
                     out: pt.Tensor[pt.float64, (B, D)], counts: pt.Tensor[pt.int64, (V,)],
                     dtable: pt.Tensor[pt.float32, (V, D)], top: pt.Tensor[pt.float16, (V,)]):  # fmt: skip
        b, d = pt.axis(0), pt.axis(1)
        out[b, d] = table[tok[b], d] * 2.0
        counts[tok[b]] += 1
        pt.scatter_add(dtable[tok[b], d], pt.cast(out[b, d], pt.float32))
        pt.scatter_max(top[tok[b]], pt.cast(tok[b], pt.float16))

    table, tok = rng.standard_normal((30, 8)), rng.integers(-30, 30, 50)
    counts0, dtable0 = rng.integers(0, 5, 30), rng.standard_normal((30, 8)).astype(np.float32)
    args = (da.from_array(table, chunks=(30, 3)), da.from_array(tok, chunks=11), None,
            da.from_array(counts0, chunks=10), da.from_array(dtable0, chunks=(7, 8)), None)  # fmt: skip
    out, counts, dtable, top = lookup_count(*args)
    want_counts, want_dtable, want_top = counts0.copy(), dtable0.copy(), np.zeros(30, np.float16)
    np.add.at(want_counts, tok, 1)
    np.add.at(want_dtable, tok, (table[tok] * 2.0).astype(np.float32))
    np.maximum.at(want_top, tok, tok.astype(np.float16))  # an output not passed in starts at zero
    np.testing.assert_array_equal(out.compute(), table[tok] * 2.0)
    np.testing.assert_array_equal(counts.compute(), want_counts)
    np.testing.assert_allclose(dtable.compute(), want_dtable, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(top.compute(), want_top)
    plan = pdask.explain(lookup_count, *args)
    assert "counts: scatter-add into a partial counts per block" in plan and "a tree over the blocks" in plan
    assert "dtable_part: float32[1, 30, n_d]" in plan  # blocks along d write their own columns: no partial for d
    with pytest.warns(pt.RechunkWarning, match="table is gathered at indices read from data"):
        lookup_count(da.from_array(table, chunks=(10, 8)), *args[1:])

    @pt.kernel
    def permute(x: pt.Tensor[pt.float64, (B,)], p: pt.Tensor[pt.int64, (B,)], y: pt.Tensor[pt.float64, (B,)]):
        i = pt.axis(0)
        pt.scatter(y[p[i]], x[i], unique=True)

    x, p = rng.standard_normal(40), rng.permutation(40)
    y = permute(da.from_array(x, chunks=15), da.from_array(p, chunks=15), None)
    want = np.zeros(40)
    want[p] = x
    np.testing.assert_array_equal(y.compute(), want)
    assert "one task on whole arrays" in pdask.explain(
        permute, da.from_array(x, chunks=15), da.from_array(p, chunks=15)
    )
    # a jit program reading a scatter's result: its steps one after another, each a dask plan
    steps = pt.jit(lambda x, i: pt.exp(x.at[i].add(1.0)).sum())
    dx, di = da.from_array(x, chunks=15), da.from_array(tok % 40, chunks=11)
    want = x.copy()
    np.add.at(want, tok % 40, 1.0)
    np.testing.assert_allclose(steps(dx, di).compute(), np.exp(want).sum(), rtol=1e-12)
    assert "step 1 of 2" in pdask.explain(steps, dx, di)


# -- the array API ---------------------------------------------------------------------------------------------


def test_integer_array_indexing_in_jit_matches_numpy(pypto_executor, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    idx = rng.integers(-6, 6, 4)
    rows, cols = rng.integers(0, 6, (3, 1)), rng.integers(-5, 5, (1, 4))
    pos = rng.integers(0, 5, (6, 3))
    cases = [
        (lambda x, i: x[i] * 2.0, (x, idx), lambda: x[idx] * 2.0),
        (lambda x, i: x[:, i].sum(axis=1), (x, idx % 5), lambda: x[:, idx % 5].sum(axis=1)),
        (lambda x, a, b: x[a, b] + x[a, 0], (x, rows, cols), lambda: x[rows, cols] + x[rows, 0]),
        (lambda x, i: x[1:, i], (x, idx % 5), lambda: x[1:, idx % 5]),
        (lambda x, i: pt.take_along_axis(x, i, axis=1), (x, pos), lambda: np.take_along_axis(x, pos, axis=1)),
        (lambda x, i: pt.take(x, i), (x, pos), lambda: np.take(x, pos)),
        (lambda x, i: pt.take(x, i, axis=1), (x, idx % 5), lambda: np.take(x, idx % 5, axis=1)),
    ]
    for fn, args, want in cases:
        np.testing.assert_allclose(pt.jit(fn, executor=pypto_executor)(*args), want(), rtol=1e-6, atol=1e-6)


def test_embedding_cross_entropy_and_gather_from_computed_arrays(pypto_executor, rng):
    tok = rng.integers(0, 50, (4, 7))
    table = rng.standard_normal((50, 16)).astype(np.float32)
    w = rng.standard_normal((16, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 28)

    def model(tok, table, w, labels):
        logits = (pt.embedding(tok, table) @ w).reshape(28, 10)  # an embedding feeding a matrix product
        m = logits.max(axis=1, keepdims=True)
        lse = pt.log(pt.exp(logits - m).sum(axis=1)) + m[:, 0]
        return (lse - pt.take_along_axis(logits, labels[:, None], axis=1)[:, 0]).mean()

    logits = (table[tok] @ w).reshape(28, 10).astype(np.float64)
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    want = (lse - logits[np.arange(28), labels]).mean()
    got = pt.jit(model, executor=pypto_executor)(tok, table, w, labels)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_array_indexing_errors(rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    with pytest.raises(pt.IndexError, match=r"index 6 \(from i\[") as e:
        pt.jit(lambda x, i: x[i])(x, np.array([0, 6]))
    assert e.value.param == "x"
    with pytest.raises(pt.TracingError, match="boolean mask") as e:
        pt.jit(lambda x, m: x[m])(x, x > 0)
    assert "pt.where" in e.value.hint
    with pytest.raises(pt.TracingError, match="expected an integer type"):
        pt.jit(lambda x, f: x[f])(x, np.ones(2, np.float32))


def test_one_hot_and_cross_entropy_match_torch(pypto_executor, rng):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    logits = rng.standard_normal((3, 5, 7)).astype(np.float32) * 3
    labels = rng.integers(-7, 7, (3, 5))
    np.testing.assert_array_equal(pt.jit(lambda i: pt.one_hot(i, 9), executor=pypto_executor)(labels),
                                  F.one_hot(torch.tensor(labels % 7), 9).numpy() * (labels >= 0)[..., None])  # fmt: skip
    t = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    for reduction in ("mean", "sum", "none"):
        fn = pt.jit(lambda x, y, r=reduction: pt.cross_entropy(x, y, reduction=r), executor=pypto_executor)
        want = F.cross_entropy(t.permute(0, 2, 1), torch.tensor(labels % 7), reduction=reduction)
        np.testing.assert_allclose(fn(logits, labels), want.detach().numpy(), rtol=2e-6, atol=2e-6)
    with pytest.raises(pt.IndexError, match="index 7"):
        pt.jit(lambda x, y: pt.cross_entropy(x, y), executor=pypto_executor)(logits, np.full((3, 5), 7))


def test_gradient_of_an_embedding_model_matches_torch(pypto_executor, rng):
    """pt.grad through an embedding lookup (a scatter-add into the table) and a cross-entropy, against torch
    autograd in float64 on the same inputs (repeated and negative tokens included)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    vocab, width, classes = 40, 16, 10
    tok = rng.integers(-vocab, vocab, (4, 7))
    table = rng.standard_normal((vocab, width)).astype(np.float32)
    w = (rng.standard_normal((width, classes)) * 0.3).astype(np.float32)
    labels = rng.integers(0, classes, 28)

    def model(table, w, tok, labels):
        h = pt.embedding(tok, table).reshape(28, width)
        return pt.cross_entropy(pt.tanh(h) @ w, labels) + (table * table).sum() * 1e-3

    step = pt.jit(lambda *a: pt.grad(model, argnums=(0, 1))(*a), executor=pypto_executor)
    g_table, g_w = step(table, w, tok, labels)
    tt = torch.tensor(table, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    h = F.embedding(torch.tensor(tok % vocab), tt).reshape(28, width)
    loss = F.cross_entropy(torch.tanh(h) @ tw, torch.tensor(labels)) + (tt * tt).sum() * 1e-3
    loss.backward()
    np.testing.assert_allclose(g_table, tt.grad.numpy(), rtol=1e-5, atol=1e-6)  # float32 against float64
    np.testing.assert_allclose(g_w, tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(g_table[np.setdiff1d(np.arange(vocab), tok % vocab)]).max() <= 2e-3 * np.abs(table).max()


def test_functional_scatters_in_jit(pypto_executor, rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    idx = rng.integers(-6, 6, 8)
    v = rng.standard_normal((8, 5)).astype(np.float32)
    want = x.copy()
    np.add.at(want, idx, v)
    jit = lambda f: pt.jit(f, executor=pypto_executor)  # noqa: E731
    np.testing.assert_array_equal(jit(lambda x, i, v: x.at[i].add(v))(x, idx, v), want)
    np.testing.assert_array_equal(jit(lambda x, i, v: pt.index_add(x, i, v))(x, idx, v), want)
    cols = rng.integers(0, 5, 4)
    want_cols = x.copy()
    np.add.at(want_cols, (slice(None), cols), 1.5)
    np.testing.assert_array_equal(jit(lambda x, c: pt.index_add(x, c, 1.5, axis=1))(x, cols), want_cols)
    np.testing.assert_array_equal(jit(lambda x, i: x.at[i].get())(x, idx), x[idx])
    c, w = rng.integers(0, 7, 300), rng.standard_normal(300).astype(np.float32)
    np.testing.assert_array_equal(jit(lambda c: pt.bincount(c, length=9))(c), np.bincount(c, minlength=9))
    np.testing.assert_allclose(jit(lambda c, w: pt.bincount(c, w, length=9))(c, w), np.bincount(c, w, minlength=9),
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    with pytest.raises(pt.IndexError):
        jit(lambda c: pt.bincount(c, length=9))(np.array([1, -1]))  # NumPy refuses negative values too
    # the adjoint of a scatter-add: the base's cotangent passes through, the values' is a gather of it
    out, pullback = pt.vjp(lambda x, v, i: pt.index_add(x, i, v), x, v, idx)
    g = rng.standard_normal((6, 5)).astype(np.float32)
    gx, gv = pullback(g)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(gx, g)
    np.testing.assert_array_equal(gv, g[idx])


def test_scatter_results_read_inside_a_program_run_in_steps(pypto_executor, rng):
    """A program reading a scatter's result runs as kernels one after another: the scatters first."""
    x = rng.standard_normal((6, 5)).astype(np.float32)
    idx, v = rng.integers(-6, 6, 8), rng.standard_normal((8, 5)).astype(np.float32)
    y = x.copy()
    np.add.at(y, idx, v)
    z = y.copy()
    np.add.at(z, idx[::-1], y[idx] * 0.5)  # a scatter of values gathered from a scatter's result, into it

    def program(x, i, v):
        y = x.at[i].add(v)
        z = y.at[i[::-1]].add(y[i] * 0.5)
        return pt.exp(y) * 2.0, z.sum(axis=1), y

    f = pt.jit(program, executor=pypto_executor)
    a, b, c = f(x, idx, v)
    np.testing.assert_allclose(a, np.exp(y) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(b, z.sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(c, y)
    assert [k.name for k in f.compiled(x, idx, v).kernels] == ["program_step0", "program_step1", "program"]
    text = f.ir(x, idx, v)  # all three kernels shown, in order
    assert text.index("program_step0(") < text.index("program_step1(") < text.index("program(")
    assert "scattered0" in str(pt.check_memory(f, x, idx, v))
    again = f(x * 0.0, idx, v)  # the steps' buffers are reused: nothing of the first call leaks in
    want = np.zeros_like(x)
    np.add.at(want, idx, v)
    np.testing.assert_array_equal(again[2], want)
    # one program for every size under dims="symbolic"
    g = pt.jit(lambda x, i, v: x.at[i].add(v).max(axis=0), executor=pypto_executor, dims="symbolic")
    for n in (6, 9):
        xs = rng.standard_normal((n, 5)).astype(np.float32)
        want = xs.copy()
        np.add.at(want, idx % n, v)
        np.testing.assert_array_equal(g(xs, idx % n, v), want.max(axis=0))


def test_gradients_through_scatters_and_gathers_of_computed_arrays_match_torch(pypto_executor, rng):
    """The adjoint of a gather from a computed array is a scatter-add its operands' adjoints then read; the
    adjoint of a scatter-add is a gather of the cotangent."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((7, 4))
    i, v = rng.integers(-7, 7, 9), rng.standard_normal((9, 4))

    def loss(x, v, i):
        p = pt.softmax(pt.tanh(x) * 2.0, dim=1)
        y = x.at[i].add(v * p[i])  # gathers of a computed array, scattered
        return (pt.sin(y) * p).sum()

    gx, gv = pt.jit(pt.grad(loss, argnums=(0, 1)), executor=pypto_executor)(x, v, i)
    tx, tv = (torch.tensor(a, requires_grad=True) for a in (x, v))
    p = torch.softmax(torch.tanh(tx) * 2.0, dim=1)
    ti = torch.tensor(i % 7)
    y = tx.index_add(0, ti, tv * p[ti])
    (torch.sin(y) * p).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)  # float64 both
    np.testing.assert_allclose(gv, tv.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.fixture
def threads():
    """Sets the CPU backends' thread count for a test, then restores it."""
    before = pt.get_num_threads()
    yield pt.set_num_threads
    pt.set_num_threads(before)


def test_blocked_scatters_give_the_same_bits_on_one_and_two_threads(pypto_executor, rng, threads):
    """Enough points for several blocks: integers and extrema match ``ufunc.at`` exactly, a float sum to the
    float64 sum within a few roundings, and every result is the same bit for bit on one and two threads."""

    @pt.kernel(executor=pypto_executor)
    def hist(bins: pt.Tensor[pt.int32, (N,)], w: pt.Tensor[pt.float32, (N,)], counts: pt.Tensor[pt.int32, (B,)],
             mass: pt.Tensor[pt.float32, (B,)], top: pt.Tensor[pt.float32, (B,)],
             batch: pt.Tensor[pt.float64, (M, B)], rows: pt.Tensor[pt.int64, (M, N)]):  # fmt: skip
        i, m = pt.axis(0), pt.axis(1)
        counts[bins[i]] += 1
        mass[bins[i]] += w[i]
        pt.scatter_max(top[bins[i]], w[i])
        batch[m, rows[m, i]] += w[i]  # a per-row histogram: the row index is a plain axis, too short to own

    n = 150_000  # blocks of at least 16384 points: nine of them
    bins = rng.integers(-37, 37, n).astype(np.int32)
    w = rng.standard_normal(n).astype(np.float32)
    rows = rng.integers(0, 37, (3, n))
    results = []
    for count in (1, 2):
        threads(count)
        out = (np.zeros(37, np.int32), np.zeros(37, np.float32), np.full(37, -np.inf, np.float32),
               np.zeros((3, 37), np.float64))  # fmt: skip
        hist(bins, w, *out[:3], out[3], rows)
        results.append(out)
    for one, two in zip(*results):
        assert one.tobytes() == two.tobytes()
    counts, mass, top, batch = results[0]
    np.testing.assert_array_equal(counts, np.bincount(bins % 37, minlength=37))
    want = np.zeros(37, np.float64)
    np.add.at(want, bins, w.astype(np.float64))
    np.testing.assert_allclose(mass, want, rtol=1e-5, atol=1e-3)
    want_top = np.full(37, -np.inf, np.float32)
    np.maximum.at(want_top, bins, w)
    np.testing.assert_array_equal(top, want_top)
    want_batch = np.zeros((3, 37))
    np.add.at(want_batch, (np.arange(3)[:, None], rows), w.astype(np.float64))
    np.testing.assert_allclose(batch, want_batch, rtol=1e-12, atol=1e-9)
    stage = hist.ir("schedule_scatters")
    assert stage.count("# blocks of >= 16384 points") == 4


def test_an_owned_scatter_is_bit_equal_to_add_at_on_any_thread_count(pypto_executor, rng, threads):
    """An embedding gradient: runs of the plain ``d`` axis go to threads, and every element is updated in the
    serial order, so the result is ``np.add.at``'s bit for bit; with ``d`` too short for two runs (known at run
    time only) the same kernel runs in blocks."""

    @pt.kernel(executor=pypto_executor)
    def grad(dout: pt.Tensor[pt.float32, (N, D)], tok: pt.Tensor[pt.int64, (N,)],
             dtable: pt.Tensor[pt.float32, (V, D)]):  # fmt: skip
        t, d = pt.axis(0), pt.axis(1)
        pt.scatter_add(dtable[tok[t], d], dout[t, d])

    first = None
    for width in (200, 7):
        dout = rng.standard_normal((60_000 if width == 7 else 3000, width)).astype(np.float32)
        tok = rng.integers(0, 50, len(dout))
        want = np.zeros((50, width), np.float32)
        np.add.at(want, tok, dout)
        for count in (1, 2):
            threads(count)
            dtable = np.zeros((50, width), np.float32)
            grad(dout, tok, dtable)
            if width == 200:
                np.testing.assert_array_equal(dtable, want)
            else:
                np.testing.assert_allclose(dtable, want, rtol=1e-4, atol=1e-3)
                first = dtable if count == 1 else first
                assert first is not None and dtable.tobytes() == first.tobytes()
    assert "# owner: runs of 64 of d on threads" in grad.ir("schedule_scatters")


def test_a_unique_scatter_runs_in_parallel(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def permute(x: pt.Tensor[pt.float64, (N, D)], p: pt.Tensor[pt.int32, (N,)], y: pt.Tensor[pt.float64, (N, D)]):
        i, d = pt.axis(0), pt.axis(1)
        pt.scatter(y[p[i], d], x[i, d] + 1.0, unique=True)

    x, p = rng.standard_normal((5000, 3)), rng.permutation(5000).astype(np.int32)
    y = np.zeros_like(x)
    permute(x, p, y)
    want = np.zeros_like(x)
    want[p] = x + 1.0
    np.testing.assert_array_equal(y, want)
    assert "# parallel (indices declared unique)" in permute.ir("schedule_scatters")
    if permute.stages[-1] != "schedule_scatters":  # the loop IR has a parallel loop for it
        assert "parallel for" in permute.ir("lower")


def test_histogram_with_fixed_bins_counts_as_numpy(pypto_executor, rng):
    """``pt.histogram`` against ``np.histogram`` with the same bins: NaN and values outside the range left out,
    the last bin closed, values on the edges (and one float64 step either side) in NumPy's bins."""
    jit = lambda f: pt.jit(f, executor=pypto_executor)  # noqa: E731
    x = rng.standard_normal(20_000).astype(np.float32)
    x[:6] = [np.nan, 3.0, -3.0, np.inf, -np.inf, np.float32(2.9999)]
    np.testing.assert_array_equal(jit(lambda x: pt.histogram(x, 37, range=(-3, 3)))(x),
                                  np.histogram(x, 37, range=(-3, 3))[0])  # fmt: skip
    edges = np.linspace(-1, 1, 11)  # steps of 0.2: the edges are rounded, as NumPy rounds them
    on_edges = np.concatenate([edges, np.nextafter(edges, -2), np.nextafter(edges, 2), [0.3, 0.7]])
    for bins, lo, hi in ((10, -1, 1), (3, 0.1, 0.4), (7, -0.95, 0.6)):
        np.testing.assert_array_equal(jit(lambda x: pt.histogram(x, bins, range=(lo, hi)))(on_edges),
                                      np.histogram(on_edges, bins, range=(lo, hi))[0])  # fmt: skip
    w = rng.random(20_000)
    got = jit(lambda x, w: pt.histogram(x, 5, range=(0, 0), weights=w))(x, w)  # an empty range: widened by 0.5
    np.testing.assert_allclose(got, np.histogram(x, 5, range=(0, 0), weights=w)[0], rtol=1e-12)
    with pytest.raises(pt.TracingError, match="range"):
        jit(lambda x: pt.histogram(x, 5))(x)
    with pytest.raises(pt.ShapeError, match="bins"):
        jit(lambda x: pt.histogram(x, np.array([0.0, 1.0])))(x)
    with pytest.raises(pt.ShapeError, match="lo <= hi"):
        jit(lambda x: pt.histogram(x, 4, range=(1, 0)))(x)


def test_scatters_with_atomic_updates_when_determinism_is_not_asked_for(pypto_executor, rng, threads):
    """``deterministic=False``: every point on any thread, each update atomic. Integer sums and maxima are exact;
    a float sum is within a few roundings of the float64 sum (its order varies from run to run)."""

    @pt.kernel(executor=pypto_executor, deterministic=False)
    def hist(bins: pt.Tensor[pt.int64, (N,)], w: pt.Tensor[pt.float32, (N,)], counts: pt.Tensor[pt.int32, (B,)],
             mass: pt.Tensor[pt.float64, (B,)], top: pt.Tensor[pt.float32, (B,)]):  # fmt: skip
        i = pt.axis(0)
        counts[bins[i]] += 1
        mass[bins[i]] += w[i] * 0.5
        top[bins[i]] = pt.maximum(top[bins[i]], w[i])

    n = 100_000
    bins, w = rng.integers(-40, 40, n), rng.standard_normal(n).astype(np.float32)
    w[::1000] = np.nan  # a NaN wins a maximum, as in NumPy
    threads(2)
    counts, mass, top = np.zeros(40, np.int32), np.ones(40), np.full(40, -np.inf, np.float32)
    hist(bins, w, counts, mass, top)
    np.testing.assert_array_equal(counts, np.bincount(bins % 40, minlength=40))
    want = np.ones(40)
    np.add.at(want, bins, w.astype(np.float64) * 0.5)
    np.testing.assert_allclose(mass, want, rtol=1e-10, atol=1e-10, equal_nan=True)
    want_top = np.full(40, -np.inf, np.float32)
    with np.errstate(invalid="ignore"):
        np.maximum.at(want_top, bins, w)
    np.testing.assert_array_equal(top, want_top)
    assert hist.ir("schedule_scatters").count("# atomic updates from every thread (deterministic=False)") == 3
    with pytest.raises(pt.ArgumentError, match="deterministic must be True or False"):
        pt.kernel(deterministic="no")(hist.fn)


def test_kernel_vjp_of_a_gather_is_a_scatter_add(pypto_executor, rng):
    """kernel.vjp through an embedding lookup (repeated and negative tokens, a constant index too), against the
    gradient written with ``np.add.at``."""

    @pt.kernel(executor=pypto_executor)
    def emb(table: pt.Tensor[pt.float64, (V, D)], tok: pt.Tensor[pt.int64, (B,)], w: pt.Tensor[pt.float64, (D,)],
            out: pt.Tensor[pt.float64, (B, D)]):  # fmt: skip
        b, d = pt.axis(0), pt.axis(1)
        out[b, d] = pt.tanh(table[tok[b], d]) * w[d] + table[tok[b], 0]

    table, tok, w = rng.standard_normal((7, 5)), rng.integers(-7, 7, 30), rng.standard_normal(5)
    out, pullback = emb.vjp(table, tok, w, np.zeros((30, 5)))
    h = table[tok]
    np.testing.assert_allclose(out, np.tanh(h) * w + h[:, :1], rtol=1e-12)
    g = rng.standard_normal((30, 5))
    g_table, g_w = pullback(g)  # the int64 tokens have no cotangent
    want = np.zeros_like(table)
    np.add.at(want, tok, (1 - np.tanh(h) ** 2) * w * g)
    np.add.at(want[:, 0], tok, g.sum(axis=1))
    np.testing.assert_allclose(g_table, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g_w, (np.tanh(h) * g).sum(axis=0), rtol=1e-10, atol=1e-12)


def test_kernel_vjp_of_a_scatter_add_is_a_gather(pypto_executor, rng):
    """kernel.vjp through scatter-adds (segment sums into a stored output and into an in-place one): the
    values' cotangent is the output's cotangent gathered, checked against torch autograd's ``index_add``."""
    torch = pytest.importorskip("torch")

    @pt.kernel(executor=pypto_executor)
    def pool(x: pt.Tensor[pt.float64, (N, D)], seg: pt.Tensor[pt.int64, (N,)], w: pt.Tensor[pt.float64, (D,)],
             b: pt.Tensor[pt.float64, (S, D)], out: pt.Tensor[pt.float64, (S, D)],
             total: pt.Tensor[pt.float64, (S,)]):  # fmt: skip
        s, i, d = pt.axis(0), pt.axis(1), pt.axis(2)
        out[s, d] = b[s, d] * 2.0
        out[seg[i], d] += pt.tanh(x[i, d]) * w[d]
        total[seg[i]] += x[i, d] * x[i, d]  # every d of a point adds into one element

    x, seg, w = rng.standard_normal((20, 4)), rng.integers(-6, 6, 20), rng.standard_normal(4)
    bias, total0 = rng.standard_normal((6, 4)), rng.standard_normal(6)
    (out, total), pullback = pool.vjp(x, seg, w, bias, np.zeros((6, 4)), total0.copy())
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, bias))
    ts = torch.tensor(seg % 6)
    t_out = (tb * 2.0).index_add(0, ts, torch.tanh(tx) * tw)
    t_total = torch.tensor(total0).index_add(0, ts, (tx * tx).sum(dim=1))
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(total, t_total.detach().numpy(), rtol=1e-12)
    g_out, g_total = rng.standard_normal((6, 4)), rng.standard_normal(6)
    gx, gw, gb = pullback(g_out, g_total)
    torch.autograd.backward([t_out, t_total], [torch.tensor(g_out), torch.tensor(g_total)])
    for got, want in ((gx, tx), (gw, tw), (gb, tb)):
        np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-10, atol=1e-12)

    @pt.kernel(executor=pypto_executor)
    def top(x: pt.Tensor[pt.float64, (N,)], seg: pt.Tensor[pt.int64, (N,)], y: pt.Tensor[pt.float64, (S,)]):
        i = pt.axis(0)
        pt.scatter_max(y[seg[i]], x[i])

    _, pullback = top.vjp(x[:, 0].copy(), seg % 6, np.zeros(6))
    with pytest.raises(pt.TracingError, match="pt.scatter_max; kernel.vjp differentiates scatter-adds"):
        pullback(np.ones(6))
