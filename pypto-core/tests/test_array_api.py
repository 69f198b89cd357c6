"""The array-level API (``@pt.jit``, ``pt.einsum``, ``pt.softmax`` ...) against NumPy.

Every function is compiled for the test executor (``PYPTO_TEST_EXECUTOR``, the reference backend by
default). Tolerances: float32 results within 1e-5 relative (1e-4 for sums over tens of terms and for
transcendental functions) of a float64 NumPy computation on the same inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pt

F32 = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture
def jit(pypto_executor):
    return lambda fn: pt.jit(fn, executor=pypto_executor)


def r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def wide(x):
    return np.asarray(x, np.float64)


def close(got, want, **tol):
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, **(tol or F32))


# -- elementwise operations, broadcasting and promotion ----------------------------------------------------


def test_elementwise_chain_with_broadcasting(jit, rng):
    x, y, z = r(rng, 6, 7), r(rng, 7), r(rng, 6, 1)
    close(jit(lambda x, y, z: x * y - z / 2 + 1.5)(x, y, z), wide(x) * y - wide(z) / 2 + 1.5)


def test_math_functions_comparisons_and_where(jit, rng):
    x = r(rng, 5, 9)
    f = jit(lambda x: pt.where(x > 0, pt.log(pt.exp(x) + 1), pt.tanh(x) * pt.sqrt(abs(x))))
    want = np.where(x > 0, np.log(np.exp(wide(x)) + 1), np.tanh(wide(x)) * np.sqrt(np.abs(wide(x))))
    close(f(x), want)
    np.testing.assert_array_equal(jit(lambda a, b: a <= b)(x, x.T.copy().T), np.ones_like(x, bool))


def test_promotion_follows_the_kernel_language(jit, rng):
    i = np.arange(-6, 6, dtype=np.int32)
    got = jit(lambda a: (a // 4, a % 4, a / 4, a * 2.5))(i)
    assert [g.dtype for g in got] == [np.int32, np.int32, np.float32, np.float32]
    for g, w in zip(got, (i // 4, i % 4, i / 4, i * 2.5)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    d = r(rng, 4).astype(np.float64)
    assert jit(lambda a, b: a + b)(d, r(rng, 4)).dtype == np.float64


def test_powers(jit, rng):
    x = np.abs(r(rng, 20)) + 0.1
    close(
        jit(lambda x: x**3 + x**0.5 + x**-2 + x**1.7)(x), wide(x) ** 3 + wide(x) ** 0.5 + wide(x) ** -2 + wide(x) ** 1.7
    )
    z = np.array([0.0, 2.0, np.nan], np.float32)
    np.testing.assert_array_equal(jit(lambda x: x**0)(z), np.ones(3, np.float32))


def test_python_numbers_are_runtime_arguments(jit, rng):
    x = r(rng, 8)
    f = jit(lambda x, s: x * s)
    close(f(x, 3.0), wide(x) * 3)
    close(f(x, -1.5), wide(x) * -1.5)  # another value: the same program, not a stale constant
    assert len(f._cache) == 1
    assert f(x, 2.5).dtype == x.dtype  # weakly typed, as a literal


# -- reductions --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["sum", "max", "min", "mean", "prod"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(jit, rng, method, axis, keepdims):
    a = (r(rng, 3, 4, 5) * 0.5 + 1).astype(np.float32)
    got = jit(lambda a: getattr(a, method)(axis=axis, keepdims=keepdims))(a)
    close(got, getattr(wide(a), method)(axis=axis, keepdims=keepdims))


def test_reductions_of_expressions_and_a_scalar_result(jit, rng):
    v = r(rng, 100)
    got = jit(lambda v: (v * v).sum())(v)
    assert got.shape == () and got.dtype == np.float32
    close(got, (wide(v) ** 2).sum())


def test_max_of_an_empty_axis_is_a_shape_error(jit):
    with pytest.raises(pt.ShapeError, match="size 0"):
        jit(lambda a: a.max(0))(np.zeros((0, 3), np.float32))


# -- views -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a.T,
        lambda a: a.transpose(1, 0, 2),
        lambda a: a[1:3, ::-2],
        lambda a: a[..., 1],
        lambda a: a[0, None, :, None],
        lambda a: a[-1],
        lambda a: a.reshape(6, 2, 5),
        lambda a: a.reshape(3, 2, 2, 5, 1),
        lambda a: a.reshape(12, 5),
        lambda a: a.reshape(-1),
        lambda a: (a * 2).reshape(3, 20),
        lambda a: a.T.reshape(5, 12)[::2],
        lambda a: a[::2, 1::3].sum(0),
    ],
)
def test_views_match_numpy(jit, rng, view):
    a = r(rng, 3, 4, 5)
    close(jit(lambda a: view(a) + 0)(a), view(wide(a)))


def test_indexing_errors_are_typed(jit, rng):
    a = r(rng, 3, 4)
    with pytest.raises(pt.ShapeError, match="out of bounds"):
        jit(lambda a: a[5])(a)
    with pytest.raises(pt.ShapeError, match="too many indices"):
        jit(lambda a: a[0, 0, 0])(a)
    close(jit(lambda a: a[[0, 2]])(a), wide(a)[[0, 2]])  # a list of indices: an input the program reads
    with pytest.raises(pt.ShapeError, match="cannot reshape"):
        jit(lambda a: a.reshape(5, 5))(a)


# -- contractions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((5, 8), (8, 3)), ((8,), (8, 3)), ((5, 8), (8,)), ((8,), (8,)), ((4, 5, 8), (1, 8, 3)), ((4, 5, 8), (8, 3)),
     ((1, 1), (1, 1)), ((2, 1, 5, 8), (3, 8, 2))],
)  # fmt: skip
def test_matmul_follows_numpy(jit, rng, sa, sb):
    a, b = r(rng, *sa), r(rng, *sb)
    close(jit(lambda a, b: a @ b)(a, b), wide(a) @ wide(b))
    close(jit(lambda a, b: pt.matmul(a, b))(a, b), wide(a) @ wide(b))


def test_matmul_shape_errors(jit, rng):
    with pytest.raises(pt.ShapeError, match="inner sizes differ"):
        jit(lambda a, b: a @ b)(r(rng, 3, 4), r(rng, 5, 2))


EINSUMS = [
    ("ij,jk->ik", [(5, 8), (8, 3)]),
    ("ij,jk", [(5, 8), (8, 3)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(5, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ijk->", [(2, 3, 4)]),
    ("bhid,bhjd->bhij", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,ij->i", [(5, 3), (5, 3)]),
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
    ("i,i", [(6,), (6,)]),
    ("kj,ki->ij", [(6, 5), (6, 3)]),  # the factor without i first: the contraction schedule must still find it
]


@pytest.mark.parametrize(("subscripts", "shapes"), EINSUMS)
def test_einsum_matches_numpy(jit, rng, subscripts, shapes):
    ops = [r(rng, *s) for s in shapes]
    close(jit(lambda *o: pt.einsum(subscripts, *o))(*ops), np.einsum(subscripts, *map(wide, ops)))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_einsum_random_subscripts(data):
    letters = "abcde"
    sizes = {c: data.draw(st.integers(1, 4), label=f"size {c}") for c in letters}
    n_ops = data.draw(st.integers(1, 3), label="operands")
    subs = [data.draw(st.text(letters, min_size=0, max_size=3), label=f"subscripts {k}") for k in range(n_ops)]
    used = sorted(set("".join(subs)))
    out = "".join(data.draw(st.permutations(used), label="output order")[: data.draw(st.integers(0, len(used)))])
    spec = ",".join(subs) + "->" + out
    rng = np.random.default_rng(len(spec))
    ops = [rng.standard_normal([sizes[c] for c in s]).astype(np.float32) for s in subs]
    got = pt.jit(lambda *o: pt.einsum(spec, *o), executor="reference")(*ops)
    close(got, np.einsum(spec, *map(wide, ops)), rtol=1e-4, atol=1e-4)


def test_einsum_errors_name_the_problem(jit, rng):
    with pytest.raises(pt.ShapeError, match="names 2 operand"):
        jit(lambda a: pt.einsum("ij,jk->ik", a))(r(rng, 2, 2))
    with pytest.raises(pt.ShapeError, match="index 'j' has size"):
        jit(lambda a, b: pt.einsum("ij,jk->ik", a, b))(r(rng, 2, 3), r(rng, 4, 2))


# -- layers ------------------------------------------------------------------------------------------------


def test_softmax_log_softmax_and_norms(jit, rng):
    x, g, b = r(rng, 16, 32), r(rng, 32), r(rng, 32)
    xw = wide(x)
    e = np.exp(xw - xw.max(-1, keepdims=True))
    close(jit(lambda x: pt.softmax(x, dim=-1))(x), e / e.sum(-1, keepdims=True))
    e0 = np.exp(xw - xw.max(0))
    close(jit(lambda x: pt.softmax(x, dim=0))(x), e0 / e0.sum(0))
    sh = xw - xw.max(-1, keepdims=True)
    close(jit(pt.log_softmax)(x), sh - np.log(np.exp(sh).sum(-1, keepdims=True)))
    mu = xw.mean(-1, keepdims=True)
    var = ((xw - mu) ** 2).mean(-1, keepdims=True)
    close(jit(lambda x, g, b: pt.layer_norm(x, g, b, eps=1e-5))(x, g, b), (xw - mu) / np.sqrt(var + 1e-5) * g + b)
    close(jit(lambda x: pt.layer_norm(x))(x), (xw - mu) / np.sqrt(var + 1e-5))
    close(jit(lambda x, g: pt.rms_norm(x, g))(x, g), xw / np.sqrt((xw**2).mean(-1, keepdims=True) + 1e-6) * g)


def test_activations(jit, rng):
    x = r(rng, 200) * 3
    xw = wide(x)
    erf = np.vectorize(math.erf)
    close(jit(pt.gelu)(x), 0.5 * xw * (1 + erf(xw / math.sqrt(2))))
    close(jit(lambda x: pt.gelu(x, approximate="tanh"))(x),
          0.5 * xw * (1 + np.tanh(math.sqrt(2 / math.pi) * (xw + 0.044715 * xw**3))))  # fmt: skip
    close(jit(pt.silu)(x), xw / (1 + np.exp(-xw)))
    close(jit(pt.relu)(x), np.maximum(xw, 0))
    with pytest.raises(pt.TracingError, match="approximate"):
        jit(lambda x: pt.gelu(x, approximate="fast"))(x)


def test_softmax_is_one_nest(pypto_executor, rng):
    f = pt.jit(lambda x: pt.softmax(x), executor=pypto_executor)
    x = r(rng, 8, 16)
    fused = f.ir(x, stage="fuse")
    assert fused.count("nest ") == 1 and "tmp" not in fused
    assert pt.show_graph(f, x).nests == 1


def test_dense_layer_is_one_contraction_with_its_epilogue(pypto_executor, rng):
    f = pt.jit(lambda x, w, b: pt.gelu(x @ w + b), executor=pypto_executor)
    x, w, b = r(rng, 8, 16), r(rng, 16, 4), r(rng, 4)
    sched = f.ir(x, w, b, stage="schedule")
    assert sched.count("nest ") == 1 and "schedule: contraction" in sched


def test_mlp_stores_the_hidden_layer_once(jit, rng):
    x, w1, b1, w2 = r(rng, 16, 32), r(rng, 32, 64), r(rng, 64), r(rng, 64, 8)
    f = jit(lambda x, w1, b1, w2: pt.relu(x @ w1 + b1) @ w2)
    close(f(x, w1, b1, w2), np.maximum(wide(x) @ w1 + b1, 0) @ w2)
    mem = pt.check_memory(f, x, w1, b1, w2)
    assert mem.temporaries == 16 * 64 * 4  # the hidden layer, and nothing else
    assert mem.peak == mem.inputs + mem.outputs + mem.temporaries


def test_attention(jit, rng):
    q, k, v = r(rng, 2, 3, 8, 16), r(rng, 2, 3, 8, 16), r(rng, 2, 3, 8, 16)

    def attention(q, k, v):
        s = pt.einsum("bhid,bhjd->bhij", q, k) * (1 / math.sqrt(q.shape[-1]))
        return pt.einsum("bhij,bhjd->bhid", pt.softmax(s, dim=-1), v)

    s = np.einsum("bhid,bhjd->bhij", wide(q), k) / 4
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    close(jit(attention)(q, k, v), np.einsum("bhij,bhjd->bhid", p, v))


# -- calls -------------------------------------------------------------------------------------------------


def test_results_out_and_several_outputs(jit, rng):
    x = r(rng, 6, 7)
    f = jit(lambda x: (x.sum(0), x.max(1)))
    s, m = f(x)
    close(s, wide(x).sum(0))
    close(m, x.max(1))
    o = pt.empty((6, 7))
    g = jit(lambda x: x * 2)
    assert g(x, out=o) is o
    close(o, wide(x) * 2)
    y = g(x)
    assert y.ctypes.data % 64 == 0  # results are 64-byte aligned
    with pytest.raises(pt.ShapeError, match="out\\[0\\] has shape"):
        g(x, out=pt.empty((7, 6)))
    with pytest.raises(pt.DTypeError, match="dtype"):
        g(x, out=np.empty((6, 7), np.float64))


def test_returned_arrays_are_never_reused_while_referenced(jit, rng):
    x = r(rng, 32)
    f = jit(lambda x: x + 1)
    kept = [f(x + k) for k in range(5)]  # every result still referenced: five distinct buffers
    for k, y in enumerate(kept):
        close(y, wide(x) + k + 1)
    assert len({y.ctypes.data for y in kept}) == 5
    total = jit(lambda x: x.sum())  # a 0-d result: declared (1,) to the kernel, returned as ()
    sums = [total(x + k) for k in range(4)]
    for k, s in enumerate(sums):
        assert s.shape == ()
        close(s, wide(x).sum() + 32 * k)


def test_bad_arguments_are_typed_errors(jit, rng):
    f = jit(lambda a, b: a + b)
    x = r(rng, 4)
    with pytest.raises(pt.ArgumentError, match="takes 2 argument"):
        f(x)
    with pytest.raises(pt.ArgumentError, match="is a str"):
        f(x, "y")
    with pytest.raises(pt.DTypeError, match="float128"):
        f(x, x.astype(np.longdouble))
    with pytest.raises(pt.ShapeError, match="do not broadcast"):
        f(x, r(rng, 3))
    with pytest.raises(pt.TracingError, match="truth value"):
        jit(lambda a: a if a > 0 else -a)(x)
    with pytest.raises(pt.TracingError, match="a captured NumPy array of dtype float128"):
        big = x.astype(np.longdouble)
        jit(lambda a: a + big)(x)


def test_get_code_and_ir(pypto_executor, rng):
    f = pt.jit(lambda x, w: pt.relu(x @ w), executor=pypto_executor)
    x, w = r(rng, 4, 8), r(rng, 8, 2)
    assert "reduce_sum" in f.ir(x, w, stage="traced")
    assert isinstance(f.get_code(x, w), str)
    assert "__global__" in f.get_code(x, w, backend="cuda") if "cuda" in pt.list_backends() else True


# -- custom ops, modules, graphs, profiles -----------------------------------------------------------------


def test_custom_op_in_jit_and_alone(jit, rng):
    @pt.custom_op
    def gelu(x):
        return 0.5 * x * (1 + pt.tanh(pt.sqrt(2 / pt.pi) * (x + 0.044715 * x**3)))

    x, w = r(rng, 8, 16), r(rng, 16, 4)
    ref = lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))  # noqa: E731
    close(gelu(x), ref(wide(x)))
    f = jit(lambda x, w: gelu(x @ w))
    close(f(x, w), ref(wide(x) @ w))
    dot = str(pt.show_graph(f, x, w))
    assert 'label="gelu"' in dot and "nest 0: contraction" in dot


def test_modules_take_their_parameters_as_inputs(rng):
    @pt.module
    class Dense:
        def __init__(self, n_in, n_out):
            self.w = pt.Parameter(rng.standard_normal((n_in, n_out)).astype(np.float32), "w")
            self.b = pt.Parameter(np.zeros(n_out, np.float32), "b")

        def forward(self, x):
            return pt.relu(x @ self.w + self.b)

    @pt.module
    class Two:
        def __init__(self):
            self.layers = [Dense(8, 6), Dense(6, 2)]

        def forward(self, x):
            for layer in self.layers:
                x = layer.forward(x)
            return x

    m = Two()
    assert [n for n, _ in m.named_parameters()] == ["layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b"]
    x = r(rng, 5, 8)
    want = np.maximum(np.maximum(wide(x) @ m.layers[0].w.data, 0) @ m.layers[1].w.data, 0)
    close(m(x), want)
    m.layers[1].b.data[:] = 1.0  # new values, same program
    close(m(x), np.maximum(np.maximum(wide(x) @ m.layers[0].w.data, 0) @ m.layers[1].w.data + 1, 0))
    assert isinstance(m.layers[0].w, pt.Parameter)  # restored after tracing


def test_a_modules_other_attributes_are_constants_of_its_programs_never_stale(rng):
    """A module's attributes other than its parameters (a scale, a mask array) are read when its forward is
    traced: a new value, or another instance with other values, gets its own program, in the forward, in
    pt.grad and in pt.value_and_grad (they used to reuse the first instance's program: stale values)."""

    @pt.module
    class Scaled:
        def __init__(self, scale):
            self.w = pt.Parameter(rng.standard_normal(4).astype(np.float32), "w")
            self.scale = scale
            self.mask = np.ones(4, np.float32)

        def forward(self, x):
            return (self.w * x * self.scale * self.mask).sum()

    x = r(rng, 4)
    grad = pt.grad(lambda m, x: m(x))
    value_and_grad = pt.value_and_grad(lambda m, x: m(x))
    a, b = Scaled(0.5), Scaled(3.0)
    for m in (a, b, a):
        close(m(x), (m.w.data * wide(x)).sum() * m.scale)
        (g,) = grad(m, x)
        close(g, wide(x) * m.scale)
        v, (g,) = value_and_grad(m, x)
        close(v, (m.w.data * wide(x)).sum() * m.scale)
        close(g, wide(x) * m.scale)
    a.scale = 2.0  # a new value of the same instance
    close(a(x), (a.w.data * wide(x)).sum() * 2.0)
    close(grad(a, x)[0], wide(x) * 2.0)
    a.mask = np.zeros(4, np.float32)  # a new array (new values in the old one are read at each call anyway)
    close(a(x), 0.0)
    close(grad(a, x)[0], np.zeros(4))
    a.mask[:] = 1.0
    close(a(x), (a.w.data * wide(x)).sum() * 2.0)


def test_profile_counts_calls_bytes_and_operations(jit, rng):
    x = r(rng, 64, 64)
    f = jit(lambda x: pt.softmax(x))
    f(x)
    with pt.profile() as prof:
        for _ in range(3):
            f(x)
    (st,) = prof.stats.values()
    assert st.calls == 3 and st.bytes == 3 * 2 * x.nbytes and st.seconds > 0
    assert st.flops >= 3 * 4 * x.size  # a subtraction, an exp, a division and the sums per element
    assert "calls" in str(prof)
    f(x)  # outside the block: not counted
    assert st.calls == 3


def test_show_graph_marks_materialised_arrays(jit, rng):
    f = jit(lambda x, w1, w2: pt.softmax(x @ w1) @ w2)
    x, w1, w2 = r(rng, 4, 8), r(rng, 8, 8), r(rng, 8, 3)
    g = pt.show_graph(f, x, w1, w2)
    assert g.nests == 3 and "(temporary)" in g.dot and "(result)" in g.dot
    assert g.dot.startswith("digraph")


def test_concat_and_stack(jit, rng):
    a, b = r(rng, 2, 3), r(rng, 4, 3)
    close(jit(lambda a, b: pt.concat([a * 2, b], axis=0))(a, b), np.concatenate([wide(a) * 2, b]))
    close(jit(lambda a, b: pt.concat([a.T, b.T], axis=-1).sum(0))(a, b), np.concatenate([a.T, b.T], -1).sum(0))
    close(jit(lambda a: pt.stack([a, a + 1, a * a], axis=1))(a), np.stack([wide(a), wide(a) + 1, wide(a) ** 2], 1))
    i = np.arange(3, dtype=np.int32)
    got = jit(lambda a, i: pt.concat([a[0], i], axis=0))(a, i)
    assert got.dtype == np.float32
    close(got, np.concatenate([a[0], i]).astype(np.float32))
    with pytest.raises(pt.ShapeError, match="array 1 has shape \\(3, 4\\)"):
        jit(lambda a, b: pt.concat([a, b.T], axis=0))(a, b)


def test_graph_pictures_need_graphviz(jit, rng, tmp_path):
    import shutil

    f = jit(lambda x: pt.softmax(x))
    g = pt.show_graph(f, r(rng, 4, 8))
    try:
        import graphviz  # noqa: F401

        renders = shutil.which("dot") is not None
    except ImportError:
        renders = False
    if renders:
        out = g.render(tmp_path / "softmax.svg")
        assert out.exists() and out.read_text().lstrip().startswith(("<?xml", "<svg"))
    else:  # a typed error that says what to install, never a half-written file
        with pytest.raises(pt.ArgumentError, match="[Gg]raphviz"):
            g.render(tmp_path / "softmax.svg")
        assert not (tmp_path / "softmax.svg").exists()


def test_one_function_called_from_eight_threads(jit, rng):
    from concurrent.futures import ThreadPoolExecutor

    f = jit(lambda x, y: pt.softmax(x * y, dim=-1))
    xs = [r(rng, 16, 32) for _ in range(8)]
    y = r(rng, 32)

    def want(x):
        s = wide(x) * y
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda k: [f(xs[k], y) for _ in range(20)], range(8)))
    for k, runs in enumerate(results):
        for got in runs:
            close(got, want(xs[k]))


def test_views_of_results_outlive_later_calls(pypto_executor):
    """A result's buffer is reused only when nothing refers to it: neither the result nor a view of it (a row,
    a transpose), which NumPy points at the memory's owner rather than at the result."""
    f = pt.jit(lambda x, s: x * s, executor=pypto_executor)
    x = np.arange(12.0).reshape(3, 4)
    row, t = f(x, 2.0)[1], f(x, 3.0).T
    later = [f(x, 4.0) for _ in range(3)]
    np.testing.assert_array_equal(row, x[1] * 2.0)
    np.testing.assert_array_equal(t, (x * 3.0).T)
    np.testing.assert_array_equal(later[0], x * 4.0)
    grad = pt.grad(lambda x, s: (x * s).sum())
    first, second = grad(x, 2.0)[0], grad(x, 3.0)[0]
    np.testing.assert_array_equal(first, 2.0)
    np.testing.assert_array_equal(second, 3.0)
    # a dropped result's buffer is taken again (steady loops do not allocate)
    address = f(x, 5.0).__array_interface__["data"][0]
    assert any(f(x, 6.0).__array_interface__["data"][0] == address for _ in range(2))


# -- symbolic sizes (pt.jit(dims=...)) -----------------------------------------------------------------------


def _layer_norm(x, w, b):
    mu = wide(x).mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def test_symbolic_dims_compile_once_for_every_size(pypto_executor, rng):
    f = pt.jit(lambda x, w, b: pt.layer_norm(x, w, b, 1e-5), executor=pypto_executor, dims="symbolic")
    for n, m in [(8, 32), (13, 32), (5, 77), (1, 77), (40, 3)]:
        x, w, b = r(rng, n, m), r(rng, m), r(rng, m)
        close(f(x, w, b), _layer_norm(x, w, b))
    # one program per pattern of equal sizes and sizes of 1: (n, m) with n != m, and (1, m)
    assert len(f._cache) == 2
    assert "N0" in f.get_code(r(rng, 8, 32), r(rng, 32), r(rng, 32))


def test_named_dims_keep_other_sizes_static(pypto_executor, rng):
    w1, b1, w2 = r(rng, 16, 24), r(rng, 24), r(rng, 24, 8)

    def mlp(x, w1, b1, w2):
        return pt.relu(x @ w1 + b1) @ w2

    f = pt.jit(mlp, executor=pypto_executor, dims={"x": ("batch", None)})
    for batch in (4, 9, 33):
        x = r(rng, batch, 16)
        close(f(x, w1, b1, w2), np.maximum(wide(x) @ w1 + b1, 0) @ w2, rtol=1e-4, atol=1e-4)
    assert len(f._cache) == 1
    ir = f.ir(x, w1, b1, w2, stage="infer_shapes")
    assert "batch" in ir and "n16" in ir  # the named dim, and a static size passed as a dim


def test_symbolic_results_out_and_reuse(pypto_executor, rng):
    f = pt.jit(lambda x: (x * 2, x.sum(1)), executor=pypto_executor, dims="symbolic")
    for n in (3, 6, 3):
        x = r(rng, n, 5)
        a, s = f(x)
        close(a, wide(x) * 2)
        close(s, wide(x).sum(1))
    o = (pt.empty((4, 5)), pt.empty(4))
    x = r(rng, 4, 5)
    assert f(x, out=o)[0] is o[0]
    close(o[1], wide(x).sum(1))
    with pytest.raises(pt.ShapeError, match="out\\[1\\] has shape"):
        f(x, out=(pt.empty((4, 5)), pt.empty(5)))


def test_symbolic_dims_with_only_sizes_of_one_run_again(pypto_executor):
    """Sizes 0 and 1 stay static under dims="symbolic": a call with no other size runs the program compiled for
    those shapes, the second time as the first (it used to look for symbolic sizes it does not have)."""
    f = pt.jit(lambda a: np.reshape(a, (1, 1)) * 2.0, executor=pypto_executor, dims="symbolic")
    for _ in range(2):
        assert f(np.full(1, 3.0)).tolist() == [[6.0]]


def test_a_program_that_needs_a_size_is_compiled_per_shape(pypto_executor, rng):
    f = pt.jit(lambda x: x[1:] - x[:-1], executor=pypto_executor, dims="symbolic")
    x = r(rng, 6)
    with pytest.warns(pt.SpecializationWarning, match="compiled for each new shape"):
        close(f(x), np.diff(x))
    x = r(rng, 9)
    close(f(x), np.diff(x))


def test_symbolic_trace_runs_the_function_once(pypto_executor, rng):
    traced = []

    def f(x, y):
        traced.append(x.shape)
        return (x.reshape(x.shape[0], 2, 3) * y).sum(-1)[:, 0] + x[1, 0]  # a split keeping the symbolic axis

    g = pt.jit(f, executor=pypto_executor, dims={"x": ("n", None)})
    for n in (4, 6, 11):
        x, y = r(rng, n, 6), r(rng, 3)
        close(g(x, y), (wide(x).reshape(n, 2, 3) * y).sum(-1)[:, 0] + x[1, 0])
    assert len(traced) == 1 and len(g._cache) == 1


@pytest.mark.parametrize(
    "fn, reason",
    [
        (lambda x: x - x.sum(0) / x.shape[0], "used as a number"),
        (lambda x: sum(x[k] for k in range(x.shape[0])), "used as a number"),
        (lambda x: x[::2] if x.shape[0] % 2 else x[1::2], "arithmetic on size"),
        (lambda x: x[-1] * x, "negative index"),
        (lambda x: x.reshape(-1)[: x.shape[1]], "merges or splits a symbolic axis"),
    ],
    ids=["divide", "range", "branch", "negative-index", "merge"],
)
def test_a_use_of_a_size_is_found_in_one_trace(pypto_executor, rng, fn, reason):
    f = pt.jit(fn, executor=pypto_executor, dims="symbolic")
    with pytest.warns(pt.SpecializationWarning, match=reason):
        for n in (6, 9, 4):
            x = r(rng, n, 5)
            close(f(x), fn(wide(x)))
    assert len(f._cache) == 3  # a program per shape, each right for its sizes


def test_dims_errors(rng):
    def f(x, y):
        return x + y

    with pytest.raises(pt.ArgumentError, match="does not have"):
        pt.jit(f, dims={"z": ("N",)})
    with pytest.raises(pt.ArgumentError, match="dims="):
        pt.jit(f, dims="dynamic")
    with pytest.raises(pt.ArgumentError, match="not a sequence"):
        pt.jit(f, dims={"x": "N"})
    with pytest.raises(pt.ArgumentError, match="identifier"):
        pt.jit(f, dims={"x": ("_N",)})
    g = pt.jit(f, dims={"x": ("N",), "y": ("N",)})
    with pytest.raises(pt.ShapeError, match=r"dim N is 4 in x.shape\[0\] but 5 in y.shape\[0\]"):
        g(r(rng, 4), r(rng, 5))
    with pytest.raises(pt.ShapeError, match="names 1 axes of x, which has 2"):
        g(r(rng, 4, 4), r(rng, 4))


def test_symbolic_attention_module_and_memory_report(pypto_executor, rng):
    @pt.module(executor=pypto_executor, dims={"x": ("batch", "seq", None)})
    class Block:
        def __init__(self):
            self.wq = pt.Parameter(r(rng, 12, 3, 4) / 4, "wq")
            self.wo = pt.Parameter(r(rng, 3, 4, 12) / 4, "wo")

        def forward(self, x):
            q = pt.einsum("bsd,dhe->bhse", x, self.wq)
            p = pt.softmax(pt.einsum("bhie,bhje->bhij", q, q), dim=-1)
            o = pt.einsum("bhij,bhje->bhie", p, q)
            return pt.einsum("bhse,hed->bsd", o, self.wo)  # sums over h and e: a reshape that merges them

    block = Block()
    for batch, seq in [(2, 4), (2, 5), (3, 9), (6, 7)]:  # seq 4 equals a static size: the same program
        x = r(rng, batch, seq, 12)
        q = np.einsum("bsd,dhe->bhse", wide(x), block.wq.data)
        s = np.einsum("bhie,bhje->bhij", q, q)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        want = np.einsum("bhse,hed->bsd", np.einsum("bhij,bhje->bhie", p, q), block.wo.data)
        close(block(x), want, rtol=1e-4, atol=1e-4)
    (jit,) = block._pt_compiled.values()
    assert len(jit._cache) == 1  # symbolic sizes stay apart from static ones of equal value
    report = pt.check_memory(jit, block.wq.data, block.wo.data, r(rng, 6, 7, 12))
    assert {e.name: e.shape for e in report.entries}["out"] == (6, 7, 12)


def test_a_parameter_given_a_shape_is_a_typed_error_not_an_int_vector():
    with pytest.raises(pt.ArgumentError, match=r"pt.Parameter\(\(4, 2, 8\)\): a tuple of ints reads as a shape") as e:
        pt.Parameter((4, 2, 8))
    assert "np.zeros((4, 2, 8), np.float32)" in str(e.value)
    assert pt.Parameter(np.array([4, 2, 8])).shape == (3,)  # the values, said as an array


def test_python_lists_and_memoryviews_as_arguments():
    """A list takes the types of Python numbers (floats float32 in @pt.jit, ints int64); in a kernel it converts
    to the declared type only as its numbers would in arithmetic; a memoryview is read (and written) in place."""
    f = pt.jit(lambda a, b: a * b)
    r = f([1.5, 2.0], [3, 4])
    assert r.dtype == np.float32 and r.tolist() == [4.5, 8.0]
    assert f([1, 2], [3, 4]).dtype == np.int64

    @pt.kernel(executor="reference")
    def narrow(x: pt.Tensor[pt.int8, (3,)], y: pt.Tensor[pt.float32, (3,)]):
        i = pt.axis(0)
        y[i] = pt.cast(x[i], pt.float32) * 2

    y = np.zeros(3, np.float32)
    narrow([1, -2, 100], y)
    assert y.tolist() == [2.0, -4.0, 200.0]
    with pytest.raises(pt.DTypeError, match="do not convert to int8 without loss"):
        narrow([1, 300, 2], y)
    with pytest.raises(pt.DTypeError, match="do not convert to int8 without loss"):
        narrow([1.5, 2.0, 2.0], y)
    out = np.zeros(3, np.float32)
    narrow(memoryview(np.array([1, 2, 3], np.int8)), memoryview(out))
    assert out.tolist() == [2.0, 4.0, 6.0]
    with pytest.raises(pt.ArgumentError, match="read-only memoryview, and outputs are written in place"):
        narrow([1, 2, 3], memoryview(out).toreadonly())


def test_arrays_from_the_closure_and_globals_are_inputs_read_by_reference(pypto_executor, rng):
    """Model code keeps its weights in a closure: ``pt.jit(lambda x: x @ W)`` reads W at every call (a change made
    in place is seen), gradients flow to the arguments only, and index arrays may be captured too."""
    w = r(rng, 4, 3)
    bias = r(rng, 3)
    rows = np.array([2, 0])
    f = pt.jit(lambda x: pt.relu(x @ w + bias)[rows], executor=pypto_executor)
    x = r(rng, 5, 4)
    close(f(x), np.maximum(wide(x) @ wide(w) + wide(bias), 0)[rows])
    w *= -1.0  # in place: the next call reads the new values
    close(f(x), np.maximum(wide(x) @ wide(w) + wide(bias), 0)[rows])
    g = pt.grad(lambda x: (x @ w).sum())(x)
    close(g, np.broadcast_to(wide(w).sum(1), x.shape))
