"""The elementwise functions (``pt.exp log sqrt rsqrt tanh sin cos erf sigmoid`` and the rest of the op table),
edge values included.

References use NumPy in float64 (``math.erf`` for erf), rounded to the kernel's type. Kernel
annotations are evaluated when the factory runs: no ``from __future__ import annotations`` here.
"""

import math

import numpy as np

import pypto as pt
from pypto.ir.ops import FUNCTIONS as MATH_FUNCTIONS

from .spec import FLOATS, INTS, SIZES_1D, N, case
from .values import normal, span, with_values

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _exp_spread(lo: float, hi: float):
    """Positive floats spread over many orders of magnitude: exp(uniform(lo, hi))."""

    def gen(rng, shape, dt):
        return np.exp(rng.uniform(lo, hi, shape)).astype(dt)

    return gen


inf, nan = math.inf, math.nan

# name: (kernel function, NumPy reference on float64, inputs with the edge values always present)
FUNCTIONS = {
    "exp": (pt.exp, np.exp, with_values(normal(3.0), [0.0, -inf, inf, nan, 80.0, 89.0, -100.0, -750.0])),
    "log": (pt.log, np.log, with_values(_exp_spread(-20, 20), [0.0, -1.0, inf, nan, 1.0, 1e-30])),
    "sqrt": (pt.sqrt, np.sqrt, with_values(span(0.0, 100.0), [0.0, -1.0, inf, nan, 1e-30, 4.0])),
    "rsqrt": (pt.rsqrt, lambda v: 1.0 / np.sqrt(v), with_values(span(0.01, 100.0), [0.0, inf, nan, -1.0, 4.0])),
    "tanh": (pt.tanh, np.tanh, with_values(normal(5.0), [inf, -inf, nan, 0.0, 20.0, -1e-4])),
    "sin": (pt.sin, np.sin, with_values(span(-10.0, 10.0), [0.0, nan, inf, -inf, math.pi])),
    "cos": (pt.cos, np.cos, with_values(span(-10.0, 10.0), [0.0, nan, inf, -inf, math.pi / 2])),
    "erf": (pt.erf, _erf, with_values(normal(2.0), [inf, -inf, nan, 0.0, 6.0, -6.0, 1e-5])),
    "sigmoid": (
        pt.sigmoid,
        lambda v: 1.0 / (1.0 + np.exp(-v)),
        with_values(normal(10.0), [inf, -inf, nan, 0.0, -100.0, 100.0]),
    ),
}


# every other function of the op table (pypto.ir.ops), with its NumPy implementation as the reference and its
# declared edge values: a function added to the table is tested on every backend without an entry here
def _spread(kind: str, a: float, b: float):
    return normal(b) if kind == "normal" else span(a, b) if kind == "span" else _exp_spread(a, b)


for _f in MATH_FUNCTIONS:
    if _f.name not in FUNCTIONS:
        FUNCTIONS[_f.name] = (getattr(pt, _f.name), _f.numpy, with_values(_spread(*_f.spread), list(_f.edge)))


def _function_case(name: str) -> None:
    fn, ref, values = FUNCTIONS[name]

    def factory(dt):
        def kernel(x: pt.Tensor[dt, (N,)], y: pt.Tensor[dt, (N,)]):
            i = pt.axis(0)
            y[i] = fn(x[i])

        kernel.__name__ = kernel.__qualname__ = name
        return kernel

    factory.__doc__ = f"``pt.{name}(x)`` elementwise, with NaN, infinities and range edges among the inputs."
    case(
        name=name,
        dtypes=FLOATS,
        sizes=SIZES_1D,
        values={"x": values},
        functions=(name,),
        reference=lambda x: {"y": ref(x.astype(np.float64))},
    )(factory)


for _name in FUNCTIONS:
    _function_case(_name)


def _int_input_ref(x):
    v = x.astype(np.float32).astype(np.float64)  # integers meet a function as float32
    return {"y": np.stack([FUNCTIONS[name][1](v) for name in FUNCTIONS])}


@case(dtypes=INTS, sizes=SIZES_1D, values={"x": span(1, 50)}, functions=tuple(FUNCTIONS), reference=_int_input_ref)
def functions_int_input(dt):
    """Every function applied to integers computes in float32 (``float_type_for``), giving float32."""

    def functions_int_input(x: pt.Tensor[dt, (N,)], y: pt.Tensor[pt.float32, (len(FUNCTIONS), N)]):
        i = pt.axis(0)
        for k, name in enumerate(FUNCTIONS):  # unrolled when traced: one store per function
            y[k, i] = FUNCTIONS[name][0](x[i])

    return functions_int_input
