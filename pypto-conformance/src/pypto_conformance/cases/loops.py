"""Sequential loops: ``for t in pt.range(n)`` carrying variables from step to step along a row, and ``while`` on a
per-element condition, against the same loops run by NumPy over whole columns at once.

Kernel annotations are evaluated when the factory runs: no ``from __future__ import annotations`` here.
"""

import numpy as np

import pypto as pt

from .spec import FLOATS, INTS, SIZES_1D, SIZES_2D, M, N, case
from .values import by_kind, normal, span, with_specials


def _recurrence_ref(x, a):
    """``h = a * h + x[r, t]`` (integers: ``h = (h + x[r, t]) // 2``) from ``h = 1``, every step's value, the last,
    and how many steps had a positive value; the floats in float64."""
    wide = np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.int64
    xs, av = x.astype(wide), a.astype(wide)
    h = np.ones(x.shape[0], wide)
    n = np.zeros(x.shape[0], np.int32)
    y = np.zeros(x.shape, wide)
    for t in range(x.shape[1]):
        h = av * h + xs[:, t] if wide is np.float64 else (h + xs[:, t]) // 2
        n += h > 0
        y[:, t] = h
    return {"y": y, "last": h, "n": n}


@case(
    dtypes=("float32", "float64", *INTS),
    sizes=SIZES_2D,
    values={"x": by_kind(normal(), normal(int_range=1000)), "a": span(-0.9, 0.9)},
    reference=_recurrence_ref,
)
def recurrence(dt):
    """A recurrence along each row in one kernel: ``for t in pt.range(N)`` with the variables it updates carried
    from step to step (a linear filter; a halving average of integers), each step's value stored, the value after
    the last step, and a counter; no step (``N`` = 0) leaves the values from before the loop."""
    integer = dt.is_int

    def recurrence(x: pt.Tensor[dt, (M, N)], a: pt.Tensor[dt, (M,)], y: pt.Tensor[dt, (M, N)],
                   last: pt.Tensor[dt, (M,)], n: pt.Tensor[pt.int32, (M,)]):  # fmt: skip
        r = pt.axis(0)
        h = pt.cast(1, dt)
        count = 0
        for t in pt.range(N):
            if integer:  # (a Python flag: decided while tracing)
                h = (h + x[r, t]) // 2
            else:
                h = a[r] * h + x[r, t]
            if h > 0:
                count = count + 1
            y[r, t] = h
        last[r] = h
        n[r] = count

    return recurrence


LIMIT = 60


def _halving_ref(x):
    v = x.astype(np.float64)
    n = np.zeros(x.shape, np.int32)
    for _ in range(LIMIT):
        go = (np.abs(v) > 1.0) & (n < LIMIT)
        v = np.where(go, v * 0.5, v)
        n += go
    return {"v": v, "n": n}


@case(dtypes=FLOATS, sizes=SIZES_1D, values={"x": with_specials(normal(1e6), 0.1)}, reference=_halving_ref)
def while_loop(dt):
    """``while`` on a per-element condition with a bound on its steps (``and n < LIMIT``): each element halves
    until it is at most 1 in magnitude, in its own number of steps; NaN stops at once, an infinity runs to the
    bound. Halving is exact: every backend gives the same bits."""

    def while_loop(x: pt.Tensor[dt, (N,)], v: pt.Tensor[dt, (N,)], n: pt.Tensor[pt.int32, (N,)]):
        i = pt.axis(0)
        value, k = x[i], 0
        while pt.abs(value) > 1.0 and k < LIMIT:
            value = value * 0.5
            k += 1
        v[i] = value
        n[i] = k

    return while_loop


def _break_ref(x, y):
    """The loop of ``loop_break`` over whole columns at once: a mask of the rows still running."""
    wide = np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.int64
    xs = x.astype(wide)
    live = np.ones(x.shape[0], bool)
    h = np.zeros(x.shape[0], wide)
    n = np.zeros(x.shape[0], np.int32)
    y = y.astype(wide)
    for t in range(x.shape[1]):
        skip = xs[:, t] < 0  # continue
        step = live & ~skip
        h = np.where(step, h + xs[:, t], h)
        y[:, t] = np.where(step, h, y[:, t])
        n += step
        live &= ~(step & (h > 4 * (1 if wide is np.float64 else 100)))  # break
    return {"y": y, "last": h, "n": n}


@case(
    dtypes=("float32", "float64", *INTS),
    sizes=SIZES_2D,
    values={"x": by_kind(normal(), normal(int_range=1000)), "y": by_kind(normal(), normal(int_range=1000))},
    reference=_break_ref,
    inplace=("y",),
)
def loop_break(dt):
    """``continue`` and ``break`` ending an if's branch in a ``for t in pt.range(N)`` loop: negative values are
    skipped, each row stops once its running sum passes a limit (its own step), the steps before it stored in
    ``y``, its other elements left as they were."""
    limit = 4.0 if dt.is_float else 400

    def loop_break(x: pt.Tensor[dt, (M, N)], y: pt.Tensor[dt, (M, N)], last: pt.Tensor[dt, (M,)],
                   n: pt.Tensor[pt.int32, (M,)]):  # fmt: skip
        r = pt.axis(0)
        h = pt.cast(0, dt)
        count = 0
        for t in pt.range(N):
            if x[r, t] < 0:
                continue
            h = h + x[r, t]
            y[r, t] = h
            count = count + 1
            if h > limit:
                break
        last[r] = h
        n[r] = count

    return loop_break


@case(dtypes=FLOATS, sizes=SIZES_2D, values={"x": with_specials(normal(1e6), 0.1)}, reference=_halving_ref)
def while_loop_2d(dt):
    """The ``while`` of ``while_loop`` at every point of a 2-D array: the loops of a row's points side by side
    (the C backends run them in SIMD lanes, a block of points at a time); each point its own steps."""

    def while_loop_2d(x: pt.Tensor[dt, (M, N)], v: pt.Tensor[dt, (M, N)], n: pt.Tensor[pt.int32, (M, N)]):
        i, j = pt.axis(0), pt.axis(1)
        value, k = x[i, j], 0
        while pt.abs(value) > 1.0 and k < LIMIT:
            value = value * 0.5
            k += 1
        v[i, j] = value
        n[i, j] = k

    return while_loop_2d
