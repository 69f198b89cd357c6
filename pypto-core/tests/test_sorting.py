"""Orderings: ``pt.sort``, ``pt.argsort`` and ``pt.topk`` in kernels and jit functions, compared with NumPy's
``np.sort``/``np.argsort(kind="stable")`` (ascending, NaN last) and torch's stable descending sort and ``topk``
(descending: NaN first) on the same inputs, and their gradients with torch autograd."""

import numpy as np
import pytest
import torch

import pypto as pt

N, M, K = pt.dims("N M K")


def _descending(x, axis):
    """Positions in torch's stable descending order (NaN first; ties in the order of their positions)."""
    return torch.sort(torch.from_numpy(np.ascontiguousarray(x)), dim=axis, descending=True, stable=True).indices.numpy()


def _ties(rng, shape, dtype=np.float64):
    x = rng.choice([-2.0, -1.0, -0.0, 0.0, 0.5, 3.0], shape).astype(dtype)
    if x.dtype.kind == "f":
        x[rng.random(shape) < 0.05] = np.nan
    return x


def test_kernel_sort_and_argsort_along_either_axis(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def orders(x: pt.Tensor[pt.float64, (N, M)], s: pt.Tensor[pt.float64, (N, M)],
               si: pt.Tensor[pt.int64, (N, M)], d: pt.Tensor[pt.float64, (N, M)],
               di: pt.Tensor[pt.int64, (N, M)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        s[r, c] = pt.sort(x[r, c], axis=c)
        si[r, c] = pt.argsort(x[r, c], axis=c)
        d[r, c] = pt.sort(x[r, c] * 2.0, axis=r, descending=True)
        di[r, c] = pt.argsort(x[r, c], axis=r, descending=True)

    x = _ties(rng, (37, 53))
    s, d = np.zeros_like(x), np.zeros_like(x)
    si, di = np.zeros(x.shape, np.int64), np.zeros(x.shape, np.int64)
    orders(x, s, si, d, di)
    np.testing.assert_array_equal(s, np.sort(x, axis=1))
    np.testing.assert_array_equal(si, np.argsort(x, axis=1, kind="stable"))
    np.testing.assert_array_equal(di, _descending(x, 0))
    np.testing.assert_array_equal(d, np.take_along_axis(x * 2.0, _descending(x, 0), 0))
    text = orders.ir("schedule")
    assert "sort(" in text and "argsort(" in text and "sort order=(r, c) parallel=r" in text
    assert "merge sort" in orders.ir("lower")
    # the sort and the argsort of one row are one nest (the column sorts order different values: two)
    assert orders.ir("lower").count("merge sort") == 3


@pytest.mark.parametrize("k", [1, 7, 64, 65, 200])
def test_kernel_topk_selection_and_merge_sort(pypto_executor, rng, k):
    @pt.kernel(executor=pypto_executor)
    def top(x: pt.Tensor[pt.float32, (N, M)], v: pt.Tensor[pt.float32, (N, K)], i: pt.Tensor[pt.int64, (N, K)],
            lo: pt.Tensor[pt.float32, (N, K)], li: pt.Tensor[pt.int64, (N, K)]):  # fmt: skip
        r, c, j = pt.axis(0), pt.axis(1), pt.axis(2)
        v[r, j], i[r, j] = pt.topk(x[r, c], j, axis=c)
        lo[r, j], li[r, j] = pt.topk(x[r, c], j, axis=c, largest=False)

    x = _ties(rng, (9, 500), np.float32)
    v, lo = np.zeros((9, k), np.float32), np.zeros((9, k), np.float32)
    i, li = np.zeros((9, k), np.int64), np.zeros((9, k), np.int64)
    top(x, v, i, lo, li)
    want = torch.topk(torch.from_numpy(x), k)
    np.testing.assert_array_equal(v, want.values.numpy())  # NaN the largest, as torch's
    np.testing.assert_array_equal(i, _descending(x, 1)[:, :k])
    np.testing.assert_array_equal(li, np.argsort(x, axis=1, kind="stable")[:, :k])
    np.testing.assert_array_equal(lo, np.sort(x, axis=1)[:, :k])
    assert "merge sort" in top.ir("lower")  # (k known at the call only)


def test_kernel_topk_of_a_static_k_selects(pypto_executor, rng):
    @pt.kernel(executor=pypto_executor)
    def top5(x: pt.Tensor[pt.float64, (N, M)], v: pt.Tensor[pt.float64, (N, 5)], i: pt.Tensor[pt.int64, (N, 5)]):
        r, c, j = pt.axis(0), pt.axis(1), pt.axis(2)
        v[r, j], i[r, j] = pt.topk(x[r, c], j, axis=c)

    x = rng.standard_normal((33, 1000))
    v, i = np.zeros((33, 5)), np.zeros((33, 5), np.int64)
    top5(x, v, i)
    want = torch.topk(torch.from_numpy(x), 5)
    np.testing.assert_array_equal(v, want.values.numpy())
    np.testing.assert_array_equal(i, want.indices.numpy())  # distinct values: the same positions as torch's
    assert "selection of 5 (insertions)" in top5.ir("lower")


def test_kernel_sorts_of_integers_booleans_halves_and_empty_rows(pypto_executor, rng):
    half = pt.float32 if pypto_executor == "numba" else pt.float16  # (the numba backend has no float16)

    @pt.kernel(executor=pypto_executor)
    def orders(a: pt.Tensor[pt.int16, (N, M)], b: pt.Tensor[pt.bool_, (N, M)], h: pt.Tensor[half, (N, M)],
               sa: pt.Tensor[pt.int16, (N, M)], ib: pt.Tensor[pt.int64, (N, M)], sh: pt.Tensor[half, (N, M)]):  # fmt: skip
        r, c = pt.axis(0), pt.axis(1)
        sa[r, c] = pt.sort(a[r, c], axis=c, descending=True)
        ib[r, c] = pt.argsort(b[r, c], axis=c)
        sh[r, c] = pt.sort(h[r, c], axis=r)

    for shape in ((6, 41), (0, 5), (4, 0)):
        a = rng.integers(-3, 3, shape).astype(np.int16)
        b = rng.random(shape) < 0.5
        h = rng.standard_normal(shape).astype(half.numpy)
        sa, sh = np.zeros_like(a), np.zeros_like(h)
        ib = np.zeros(shape, np.int64)
        orders(a, b, h, sa, ib, sh)
        np.testing.assert_array_equal(sa, -np.sort(-a.astype(np.int64), axis=1).astype(np.int16))
        np.testing.assert_array_equal(ib, np.argsort(b, axis=1, kind="stable"))
        np.testing.assert_array_equal(sh, np.sort(h, axis=0))


def test_jit_orderings_match_numpy_and_torch(pypto_executor, rng):
    @pt.jit(executor=pypto_executor)
    def orders(x):
        values, positions = pt.topk(x, 10)
        return pt.sort(x), pt.argsort(x, axis=0, descending=True), values, positions, pt.sort(x, axis=None)

    x = _ties(rng, (6, 300), np.float32)
    s, a, v, p, flat = orders(x)
    np.testing.assert_array_equal(s, np.sort(x, axis=-1))
    np.testing.assert_array_equal(a, _descending(x, 0))
    np.testing.assert_array_equal(v, torch.topk(torch.from_numpy(x), 10).values.numpy())
    np.testing.assert_array_equal(p, _descending(x, 1)[:, :10])
    np.testing.assert_array_equal(flat, np.sort(x, axis=None))

    @pt.jit(executor=pypto_executor)
    def composed(x):  # a sort of a computed row, read reversed and combined with more work
        return pt.sort(pt.exp(x) * 2.0, axis=1)[:, ::-1] + x.sum(axis=1, keepdims=True)

    y = rng.standard_normal((7, 129))
    np.testing.assert_allclose(composed(y), np.sort(np.exp(y) * 2.0, axis=1)[:, ::-1] + y.sum(1, keepdims=True),
                               rtol=1e-12)  # fmt: skip

    @pt.jit(executor=pypto_executor)
    def smallest(x):
        return pt.topk(x, 3, axis=0, largest=False)

    z = rng.integers(0, 5, (40, 6)).astype(np.int32)
    v, p = smallest(z)
    want = np.argsort(z, axis=0, kind="stable")[:3]
    np.testing.assert_array_equal(p, want)
    np.testing.assert_array_equal(v, np.take_along_axis(z, want, 0))


def test_jit_gradients_of_sorted_values_match_torch(pypto_executor, rng):
    x = rng.standard_normal((5, 64))  # distinct values: torch's topk positions are ours
    w = rng.standard_normal((5, 64))

    def f(x, w):
        values, _ = pt.topk(x, 8)
        return (pt.sort(x, axis=1) * w).sum() + (values * values).sum()

    g = pt.grad(pt.jit(f, executor=pypto_executor))(x, w)
    t = torch.tensor(x, requires_grad=True)
    loss = (torch.sort(t, dim=1).values * torch.from_numpy(w)).sum() + (torch.topk(t, 8).values ** 2).sum()
    loss.backward()
    np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_ordering_errors_name_the_construct():
    with pytest.raises(pt.ShapeError, match="k=7 is out of range"):
        pt.jit(lambda x: pt.topk(x, 7))(np.zeros((2, 5)))
    with pytest.raises(pt.TracingError, match="complex"):
        pt.jit(lambda x: pt.sort(x))(np.zeros(4, np.complex64))
    with pytest.raises(pt.TracingError, match="k must be an int"):
        pt.jit(lambda x: pt.topk(x, 2.5))(np.zeros(4))

    @pt.kernel
    def not_an_axis(x: pt.Tensor[pt.float32, (N, M)], v: pt.Tensor[pt.float32, (N, K)]):
        r, c = pt.axis(0), pt.axis(1)
        v[r, c], _ = pt.topk(x[r, c], 3, axis=c)

    with pytest.raises(pt.TracingError, match="k is the axis that numbers the results"):
        not_an_axis(np.zeros((2, 5), np.float32), np.zeros((2, 3), np.float32))

    @pt.kernel
    def too_many(x: pt.Tensor[pt.float32, (N, M)], v: pt.Tensor[pt.float32, (N, K)]):
        r, c, j = pt.axis(0), pt.axis(1), pt.axis(2)
        v[r, j], _ = pt.topk(x[r, c], j, axis=c)

    with pytest.raises(pt.ShapeError, match="keeps v.shape\\[1\\] = 6 values of rows of x.shape\\[1\\] = 5"):
        too_many(np.zeros((2, 5), np.float32), np.zeros((2, 6), np.float32))

    @pt.kernel
    def wrong_size(x: pt.Tensor[pt.float32, (N, 5)], y: pt.Tensor[pt.float32, (N, 4)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.sort(x[r, c], axis=c)

    with pytest.raises(pt.TracingError, match="the row has 5"):
        wrong_size(np.zeros((2, 5), np.float32), np.zeros((2, 4), np.float32))

    @pt.kernel
    def unsorted_axis(x: pt.Tensor[pt.float32, (N,)], y: pt.Tensor[pt.float32, (N, M)]):
        r, c = pt.axis(0), pt.axis(1)
        y[r, c] = pt.sort(x[r], axis=c)

    with pytest.raises(pt.TracingError, match="does not depend on"):
        unsorted_axis(np.zeros(3, np.float32), np.zeros((3, 2), np.float32))


def test_jit_gathers_at_positions_the_program_computes(pypto_executor, rng):
    """Indices from a reduction or a sort (``pt.argmax``, ``pt.topk``'s positions) are computed by a first kernel
    and passed to the one gathering (a call checks a kernel's indices before it runs); gradients flow through."""
    x = rng.standard_normal((6, 40))

    def picked(x):
        best = pt.take_along_axis(x, pt.argmax(x, axis=1, keepdims=True), 1)
        _, top = pt.topk(x, 3)
        return (best * 2.0).sum() + (pt.take_along_axis(x, top, 1) ** 2).sum()

    f = pt.jit(picked, executor=pypto_executor)
    t = torch.tensor(x, requires_grad=True)
    want = (t.max(dim=1).values * 2.0).sum() + (torch.topk(t, 3).values ** 2).sum()
    want.backward()
    np.testing.assert_allclose(f(x), want.item(), rtol=1e-12)
    np.testing.assert_allclose(pt.grad(f)(x), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def _bits(a):
    """The bytes of ``a`` (equal arrays of floats have the same zeros' signs and the same NaNs' payloads). A
    float16 NaN is made one NaN: a device may convert float16 to float32 and back (OpenCL's ``vstore_half``
    gives every NaN one payload)."""
    a = np.array(a)
    if a.dtype == np.float16:
        a[np.isnan(a)] = np.nan
    return a.view(np.uint8)


@pytest.mark.parametrize("n", [63, 64, 300, 1023, 1024, 2047, 2048, 3001])
def test_radix_sorts_of_random_rows_keep_every_bit(pypto_executor, rng, n):
    """Rows long enough for the radix sorts (8-bit digits from 64 values, 11-bit from 1024 or 2048) on random
    values of every width, with both zeros and NaNs of several payloads: the values come back bit for bit in
    ``np.sort(kind="stable")``'s order (so -0.0 and 0.0 keep their positions' order), the positions are
    ``np.argsort(kind="stable")``'s, and descending is the exact reverse order with ties by position."""
    f16 = np.float32 if pypto_executor == "numba" else np.float16
    wide = [np.float32, np.float64, np.int32, np.int64, np.uint32, np.int8, np.uint16, f16]
    if pypto_executor != "numba":
        wide.append(np.uint64)
    for dt in wide:
        if np.dtype(dt).kind == "f":
            x = (rng.standard_normal((3, n)) * 100).astype(dt)
            x[0, rng.random(n) < 0.1] = -0.0
            x[0, rng.random(n) < 0.1] = 0.0
            x[1, rng.random(n) < 0.05] = np.nan
            if dt is np.float32:  # NaNs of other payloads and signs
                x[1, :3] = np.array([0x7FC00001, 0xFFC00002, 0x7FC0F000], np.uint32).view(np.float32)
        else:
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max, (3, n), dtype=dt, endpoint=True)
            x[2, : n // 2] = x[2, 0]  # many ties

        @pt.jit(executor=pypto_executor)
        def orders(a):
            return pt.sort(a, axis=1), pt.argsort(a, axis=1), pt.sort(a, axis=1, descending=True)

        s, i, d = orders(x)
        up = np.argsort(x, axis=1, kind="stable")
        np.testing.assert_array_equal(i, up, err_msg=str(np.dtype(dt)))
        np.testing.assert_array_equal(_bits(s), _bits(np.take_along_axis(x, up, 1)), err_msg=str(np.dtype(dt)))
        down = _descending(x, 1) if np.dtype(dt) != np.uint64 else np.argsort(~x, axis=1, kind="stable")
        if np.dtype(dt).kind == "f":
            np.testing.assert_array_equal(_bits(d), _bits(np.take_along_axis(x, down, 1)), err_msg=str(np.dtype(dt)))
        else:
            np.testing.assert_array_equal(d, np.take_along_axis(x, down, 1), err_msg=str(np.dtype(dt)))
    text = orders.ir(x, stage="lower")
    assert "radix sort, 4 passes of 8 bits for rows of 64 to 2047 values" in pt.jit(lambda a: pt.sort(a)).ir(
        np.zeros((2, 100), np.float32), stage="lower"
    )
    assert "radix sort" in text and "bits<" in text  # the keys are the values' bits


def test_sort_scratch_is_allocated_per_row_on_cpu_threads(rng):
    """The ``private_scratch`` pass moves a sort's scratch rows into the parallel loop over rows: one row's
    worth, reused, instead of the whole scratch fresh at every call."""
    f = pt.jit(lambda a: pt.sort(a, axis=1), executor="openmp")
    x = rng.standard_normal((64, 500)).astype(np.float32)
    np.testing.assert_array_equal(f(x), np.sort(x, axis=1))

    def allocs(stage):
        lines = f.ir(x, stage=stage).splitlines()
        loop = next(k for k, line in enumerate(lines) if "parallel for" in line)
        return [(k > loop, line.strip()) for k, line in enumerate(lines) if line.strip().startswith("alloc ")]

    before, after = allocs("tile_transposes"), allocs("private_scratch")
    assert len(before) == len(after) == 3  # the values (and the merge sort's), keys, counters
    assert all(not inside and "[n64, " in text for inside, text in before), before
    assert all(inside and "n64" not in text for inside, text in after), after


def test_kernel_vjp_of_sorts_and_topk_matches_torch(pypto_executor, rng):
    """``kernel.vjp`` of a kernel that sorts and keeps the top values of computed rows: each value's cotangent
    goes back to the position it came from (torch's ``sort``/``topk`` autograd on the same inputs)."""

    @pt.kernel(executor=pypto_executor)
    def ordered(x: pt.Tensor[pt.float64, (N, M)], s: pt.Tensor[pt.float64, (N, M)],
                v: pt.Tensor[pt.float64, (N, 4)], i: pt.Tensor[pt.int64, (N, 4)]):  # fmt: skip
        r, c, j = pt.axis(0), pt.axis(1), pt.axis(2)
        s[r, c] = pt.sort(pt.tanh(x[r, c]) * 3.0, axis=c, descending=True) + x[r, c]
        v[r, j], i[r, j] = pt.topk(x[r, c] * x[r, c], j, axis=c)

    x = rng.standard_normal((5, 200))
    s, v, i = np.zeros_like(x), np.zeros((5, 4)), np.zeros((5, 4), np.int64)
    (s, v, i), pullback = ordered.vjp(x, s, v, i)
    ds, dv = rng.standard_normal(s.shape), rng.standard_normal(v.shape)
    (dx,) = pullback(ds, dv, np.zeros(i.shape, np.int64))

    t = torch.from_numpy(x).requires_grad_()
    ts = torch.sort(torch.tanh(t) * 3.0, dim=1, descending=True, stable=True).values + t
    tv = torch.topk(t * t, 4, dim=1).values
    np.testing.assert_allclose(s, ts.detach().numpy(), rtol=1e-12)
    np.testing.assert_array_equal(i, torch.topk(t * t, 4, dim=1).indices.numpy())  # distinct values
    (ts * torch.from_numpy(ds)).sum().add((tv * torch.from_numpy(dv)).sum()).backward()
    np.testing.assert_allclose(dx, t.grad.numpy(), rtol=1e-10, atol=1e-12)
