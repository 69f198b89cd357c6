"""Random NumPy-style programs under ``@pt.jit`` against NumPy itself: ufuncs, methods with ``axis=`` and
``keepdims=``, scans, flips and rolls, selects and broadcasting, drawn by hypothesis.

A program is a list of steps over a pool of values (the inputs first); each step applies one NumPy function or
method to values of the pool and adds its result. The same Python function runs on NumPy arrays (the expected
values) and, under ``@pt.jit``, on traced arrays (NumPy's dispatch builds the graph): the compiled result must
agree within float64 rounding. Values stay bounded (``tanh``, ``clip`` and averages), so a difference is a bug,
not an overflow."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto as pt

UNARY = [
    ("tanh", lambda v: np.tanh(v)),
    ("abs", lambda v: np.abs(v)),
    ("sin", lambda v: np.sin(v)),
    ("exp of tanh", lambda v: np.exp(np.tanh(v))),
    ("sqrt of abs", lambda v: np.sqrt(np.abs(v))),
    ("clip", lambda v: v.clip(-0.5, 0.5)),
    ("negative", lambda v: np.negative(v)),
    ("scale", lambda v: v * 0.75 + 0.25),
    ("square", lambda v: np.square(np.tanh(v))),
    ("floor", lambda v: np.floor(v * 4.0)),
]
AXIS = [  # (name, function of (value, axis))
    ("sum", lambda v, a: v.sum(axis=a, keepdims=True) * 0.25),
    ("mean", lambda v, a: np.mean(v, axis=a, keepdims=True)),
    ("max", lambda v, a: v.max(axis=a, keepdims=True)),
    ("min", lambda v, a: np.min(v, axis=a, keepdims=True)),
    ("std", lambda v, a: v.std(axis=a, keepdims=True)),
    ("cumsum", lambda v, a: np.tanh(np.cumsum(v, axis=a))),
    ("cummax", lambda v, a: np.maximum.accumulate(v, axis=a)),
    ("flip", lambda v, a: np.flip(v, axis=a)),
    ("roll", lambda v, a: np.roll(v, 1, axis=a)),
    ("argmax", lambda v, a: np.argmax(v, axis=a, keepdims=True).astype(np.float64) * 0.5),  # (int * float is
    # float32 in pypto, float64 in NumPy: a documented difference)
]
BINARY = [
    ("add", lambda a, b: np.add(a, b)),
    ("subtract", lambda a, b: a - b),
    ("multiply", lambda a, b: np.multiply(a, b)),
    ("maximum", lambda a, b: np.maximum(a, b)),
    ("minimum", lambda a, b: np.minimum(a, b)),
    ("where", lambda a, b: np.where(a > b, a, b * 0.5)),
    ("hypot", lambda a, b: np.hypot(np.tanh(a), b)),
    ("average", lambda a, b: (a + b) / 2.0),
]


@st.composite
def programs(draw):
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    n_inputs = draw(st.integers(1, 3))
    steps = []
    for k in range(draw(st.integers(1, 6))):
        pool = n_inputs + k
        kind = draw(st.sampled_from(["unary", "axis", "binary", "binary"]))
        if kind == "unary":
            steps.append(("unary", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, pool - 1))))
        elif kind == "axis":
            steps.append(("axis", draw(st.integers(0, len(AXIS) - 1)), draw(st.integers(0, pool - 1)),
                          draw(st.integers(0, 1))))  # fmt: skip
        else:
            steps.append(("binary", draw(st.integers(0, len(BINARY) - 1)), draw(st.integers(0, pool - 1)),
                          draw(st.integers(0, pool - 1))))  # fmt: skip
    seed = draw(st.integers(0, 2**16))
    return (rows, cols), n_inputs, tuple(steps), seed


def run(steps, inputs):
    """The program on NumPy arrays or traced arrays alike."""
    pool = list(inputs)
    for step in steps:
        if step[0] == "unary":
            pool.append(UNARY[step[1]][1](pool[step[2]]))
        elif step[0] == "axis":
            v = pool[step[2]]
            axis = step[3] if v.ndim == 2 else 0
            pool.append(AXIS[step[1]][1](v, axis))
        else:
            pool.append(BINARY[step[1]][1](pool[step[2]], pool[step[3]]))
    return pool[-1]


def describe(steps) -> str:
    names = {"unary": UNARY, "axis": AXIS, "binary": BINARY}
    return "; ".join(f"{names[s[0]][s[1]][0]}{s[2:]}" for s in steps)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)  # (the executor's name)
@given(programs())
def test_random_numpy_programs_match_numpy(pypto_executor, program):
    shape, n_inputs, steps, seed = program
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(shape) for _ in range(n_inputs)]
    want = run(steps, inputs)
    got = pt.jit(lambda *xs: run(steps, xs), executor=pypto_executor)(*inputs)
    assert np.shape(got) == np.shape(want), describe(steps)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12, err_msg=describe(steps))
