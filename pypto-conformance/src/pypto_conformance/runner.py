"""Running one catalogue case for one dtype on one backend, at every size the case lists."""

from __future__ import annotations

import inspect
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pypto as pt

from .cases.spec import Case, generate_inputs, kernel_params
from .cases.values import floating
from .compare import LargestErrors, compare_arrays
from .tolerances import Tolerance

# Outputs start out holding values no correct kernel produces, so an element the backend never
# writes is reported instead of passing by luck. Booleans start as the negated expected value.
UNWRITTEN = {"f": -7.25e33, "i": -123456789, "h": -30000.0, "c": complex(-7.25e33, 7.25e33)}  # "h": 16-bit floats

ToleranceFor = Callable[[str], Tolerance]


@dataclass
class Outcome(LargestErrors):
    """What running a case (or a fuzz campaign) found."""

    ok: bool = True
    message: str = ""
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def describe_dims(dims: Mapping[str, int]) -> str:
    """``M=7, N=127``, or ``static shapes`` when the kernel has no symbolic dims."""
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "static shapes"


def describe_exception(e: BaseException, limit: int = 800) -> str:
    """``Type: message`` on one paragraph, shortened to ``limit`` characters."""
    text = f"{type(e).__name__}: {e}".strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


_DATA: OrderedDict[tuple, tuple[dict[str, Any], dict[str, np.ndarray]]] = OrderedDict()
_DATA_SLOTS = 4  # inputs and references are reused across backends; the 16M case makes this small


def reference_args(case: Case, inputs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The inputs the case's reference asks for by name (outputs are what it returns)."""
    params = inspect.signature(case.reference).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return list(inputs.items())
    return [(k, v) for k, v in inputs.items() if k in params]


def case_data(case: Case, dtype: str, index: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Inputs and expected outputs for size ``index`` of ``case`` (deterministic, cached)."""
    key = (id(case), case.name, dtype, index)
    hit = _DATA.get(key)
    if hit is not None:
        _DATA.move_to_end(key)
        return hit
    fn = case.build(dtype)
    dims = case.sizes[index]
    rng = np.random.default_rng(zlib.crc32(f"{case.name}/{dtype}/{index}".encode()))
    params = {p.name: p for p in kernel_params(fn)}
    with np.errstate(all="ignore"):  # edge values overflow on purpose (1e39 as float32 is inf)
        inputs = generate_inputs(case, fn, dims, rng)
        raw = case.reference(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in reference_args(case, inputs)}
        )
        expected = {}
        for name, value in raw.items():
            p = params.get(name)
            if p is None or p.shape is None:
                raise ValueError(f"case '{case.name}': the reference returns '{name}', not a tensor parameter")
            shape = p.concrete_shape(dims)
            want = np.asarray(value).astype(p.dtype)
            if want.shape != shape and want.size == int(np.prod(shape)):
                want = want.reshape(shape)  # a full reduction computed as a scalar
            if want.shape != shape:
                raise ValueError(f"case '{case.name}': reference '{name}' has shape {want.shape}, expected {shape}")
            expected[name] = want
    for name in list(inputs):
        if name in expected and name not in case.inplace:
            del inputs[name]  # a pure output: allocated fresh for each call
    _DATA[key] = (inputs, expected)
    while len(_DATA) > _DATA_SLOTS:
        _DATA.popitem(last=False)
    return inputs, expected


def fresh_output(want: np.ndarray) -> np.ndarray:
    """An aligned output array pre-filled so that unwritten elements show up."""
    out = pt.empty(want.shape, want.dtype)
    if want.dtype.kind == "b":
        np.logical_not(want, out=out)
    elif want.dtype.kind in "iu" and want.dtype.itemsize < 4 or want.dtype.kind == "u":  # a value near a bound
        info = np.iinfo(want.dtype)
        out.fill(info.min + 77 if want.dtype.kind == "i" else info.max - 77)
    else:
        out.fill(UNWRITTEN["h" if want.dtype.itemsize == 2 and floating(want.dtype) else want.dtype.kind])
    return out


def call_kernel(kernel: Callable[..., Any], args: Mapping[str, Any]) -> str | None:
    """Call the kernel; a description of what it raised, or None.

    A backend never skips a result by raising: pytest's skip and xfail exceptions raised from
    inside a kernel are failures like any other exception.
    """
    try:
        kernel(**args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        return "the kernel raised " + describe_exception(e)
    return None


def run_case(case: Case, dtype: str, backend: str, tolerance_for: ToleranceFor) -> Outcome:
    """Run ``case`` for ``dtype`` on ``backend`` at every size; compare with the NumPy reference."""
    outcome = Outcome(ok=True)
    kernel = pt.kernel(executor=backend, **case.options)(case.build(dtype))
    problems: list[tuple[str, str]] = []
    for index, dims in enumerate(case.sizes):
        inputs, expected = case_data(case, dtype, index)
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
        for name, want in expected.items():
            if name not in case.inplace:
                args[name] = fresh_output(want)
        where = describe_dims(dims)
        raised = call_kernel(kernel, args)
        if raised is not None:
            problems.append((where, raised))
            continue
        for name, want in expected.items():
            tol = tolerance_for(want.dtype.name)
            outcome.tolerances[want.dtype.name] = tol
            cmp = compare_arrays(name, args[name], want, tol)
            outcome.absorb(cmp.max_abs, cmp.max_rel)
            if not cmp.ok:
                problems.append((where, cmp.problem))
    if problems:
        outcome.ok = False
        outcome.message = f"case '{case.name}' [{dtype}] on backend '{backend}' disagrees with NumPy:\n" + "\n".join(
            f"  - {p}" for p in group_problems(problems)
        )
    return outcome


def group_problems(problems: list[tuple[str, str]]) -> list[str]:
    """``where: problem`` lines, one per distinct problem (a compile error is not repeated per size)."""
    by_text: dict[str, list[str]] = {}
    for where, text in problems:
        by_text.setdefault(text, []).append(where)
    return [f"{'; '.join(wheres)}: {text}" for text, wheres in by_text.items()]


def array_inputs(case: Any, dtype: str, index: int) -> list[np.ndarray]:
    """The inputs of size ``index`` of an array case, in argument order (deterministic)."""
    rng = np.random.default_rng(zlib.crc32(f"{case.name}/{dtype}/{index}".encode()))
    out = []
    for name, shape in case.shapes[index].items():
        if name in getattr(case, "indices", {}):  # an index array: valid int64 indices, negative ones included
            ref, axis = case.indices[name]
            n = case.shapes[index][ref][axis]
            out.append(rng.integers(-n, n, shape).astype(np.int64))
        elif np.dtype(dtype).kind == "c":
            out.append((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype))
        elif name in case.positive:
            out.append(rng.uniform(0.1, 2.0, shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def array_reference(case: Any, inputs: list[np.ndarray]) -> tuple:
    """The NumPy reference of an array case on float64 (complex128) copies of its inputs, as a tuple."""
    with np.errstate(all="ignore"):
        want = case.reference(*(x if x.dtype.kind in "iu" else x.astype(np.complex128 if x.dtype.kind == "c" else
                                                                         np.float64) for x in inputs))  # fmt: skip
    return want if isinstance(want, tuple) else (want,)


def expected_as(w: Any, dtype: str) -> np.ndarray:
    """A reference result rounded to the case's ``dtype`` (to its part type when the result is real: ``abs(z)``)."""
    w = np.asarray(w)
    return w.astype(dtype if w.dtype.kind == "c" else np.zeros((), dtype).real.dtype)


def run_array_case(case: Any, dtype: str, backend: str, tolerance_for: Callable[..., Tolerance]) -> Outcome:
    """Run an array case (a ``@pt.jit`` program) for ``dtype`` on ``backend`` at every size."""
    outcome = Outcome(ok=True)
    fn = pt.jit(case.fn, executor=backend, dims=case.dims)
    problems: list[tuple[str, str]] = []
    for index, shapes in enumerate(case.shapes):
        inputs = array_inputs(case, dtype, index)
        where = ", ".join(f"{k}{list(v)}" for k, v in shapes.items())
        expected = array_reference(case, inputs)
        try:
            got = fn(*(x.copy() for x in inputs))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            problems.append((where, "the program raised " + describe_exception(e)))
            continue
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(expected):
            problems.append((where, f"{len(got)} results, the reference has {len(expected)}"))
            continue
        for k, (g, w) in enumerate(zip(got, expected)):
            tol = tolerance_for(dtype, case.functions)
            outcome.tolerances[dtype] = tol
            want = expected_as(w, dtype)
            if g.shape != want.shape:
                problems.append((where, f"result {k} has shape {g.shape}, the reference {want.shape}"))
                continue
            cmp = compare_arrays(f"result {k}", g, want, tol)
            outcome.absorb(cmp.max_abs, cmp.max_rel)
            if not cmp.ok:
                problems.append((where, cmp.problem))
    if problems:
        outcome.ok = False
        outcome.message = f"array case '{case.name}' [{dtype}] on backend '{backend}' disagrees with NumPy:\n" + (
            "\n".join(f"  - {p}" for p in group_problems(problems))
        )
    return outcome


def _finite_differences(f: Callable[..., float], args: list[np.ndarray], k: int, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f`` with respect to ``args[k]`` (float64); of a complex ``args[k]``,
    ``df/dx - i df/dy`` (JAX's convention)."""
    x = args[k]
    out = np.zeros_like(x)
    for step, weight in ((eps, 1.0), (1j * eps, -1j)) if x.dtype.kind == "c" else ((eps, 1.0),):
        for idx in np.ndindex(x.shape):
            hi, lo = x.copy(), x.copy()
            hi[idx] += step
            lo[idx] -= step
            out[idx] += weight * (f(*args[:k], hi, *args[k + 1 :]) - f(*args[:k], lo, *args[k + 1 :])) / (2 * eps)
    return out


def run_gradient_case(case: Any, dtype: str, backend: str) -> Outcome:
    """``pt.grad`` of a gradient case on ``backend`` against finite differences of its NumPy reference."""
    from .cases.gradients import RELATIVE

    outcome = Outcome(ok=True)
    inputs = array_inputs(case, dtype, 0)
    names = list(case.shapes[0])
    wide = [x.astype(np.complex128 if x.dtype.kind == "c" else np.float64) for x in inputs]
    problems: list[tuple[str, str]] = []
    try:
        fn = pt.grad(pt.jit(case.fn, executor=backend), argnums=tuple(range(len(inputs))))
        grads = fn(*(x.copy() for x in inputs))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        problems.append(("all inputs", "the gradient raised " + describe_exception(e)))
        grads = ()
    rel = RELATIVE[dtype]
    for k, g in enumerate(grads):
        want = _finite_differences(case.reference, wide, k)
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        err = float(np.abs(np.asarray(g, want.dtype) - want).max(initial=0.0))
        outcome.absorb(err, err / scale)
        if g.shape != want.shape or g.dtype != np.dtype(dtype):
            problems.append((names[k], f"gradient {g.dtype}{list(g.shape)}, expected {dtype}{list(want.shape)}"))
        elif not err <= rel * scale:
            problems.append((names[k], f"max |error| {err:.3g} > {rel:g} x {scale:.3g} (finite differences)"))
    if problems:
        outcome.ok = False
        outcome.message = f"gradient case '{case.name}' [{dtype}] on backend '{backend}' disagrees:\n" + "\n".join(
            f"  - d/d{where}: {what}" for where, what in problems
        )
    return outcome
