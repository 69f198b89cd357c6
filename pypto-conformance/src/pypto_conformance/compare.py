"""Comparing a backend's output with the NumPy reference, with errors a person can read.

Floats: NaN must be NaN, an infinity the same infinity, finite values within ``atol + rtol*|want|``
(plus an optional per-element ``allowance``). Complex numbers: each part so, ``|want|`` the magnitude of the
complex value (a part that cancels to near zero is held to the precision of the whole number). Integers and booleans must be equal. The result
carries the largest absolute and relative errors seen, for the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tolerances import Tolerance

_SHOWN = 3  # offending elements quoted in a message


@dataclass
class LargestErrors:
    """The largest absolute and relative errors seen so far (None until something was compared)."""

    max_abs: float | None = None
    max_rel: float | None = None

    def absorb(self, max_abs: float | None, max_rel: float | None) -> None:
        """Keep the larger of what was seen and ``max_abs`` / ``max_rel``."""
        if max_abs is not None:
            self.max_abs = max_abs if self.max_abs is None else max(self.max_abs, max_abs)
        if max_rel is not None:
            self.max_rel = max_rel if self.max_rel is None else max(self.max_rel, max_rel)


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing one output array."""

    output: str
    ok: bool
    max_abs: float | None = None
    max_rel: float | None = None
    problem: str = ""


def _fmt(v: object) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.9g}"
    return repr(v.item() if isinstance(v, np.generic) else v)


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _examples(kind: str, where: np.ndarray, got: np.ndarray, want: np.ndarray, order: np.ndarray | None = None) -> str:
    flat = np.flatnonzero(where)
    if order is not None:  # worst first
        flat = flat[np.argsort(-order.ravel()[flat], kind="stable")]
    shown = ", ".join(
        f"at {_index(f, want.shape)} got {_fmt(got.ravel()[f])}, expected {_fmt(want.ravel()[f])}"
        for f in flat[:_SHOWN]
    )
    more = f" (and {flat.size - _SHOWN} more)" if flat.size > _SHOWN else ""
    return f"{flat.size} {kind}: {shown}{more}"


def _error_stats(err: np.ndarray, ref: np.ndarray, where: np.ndarray) -> tuple[float | None, float | None]:
    """Largest absolute and relative error over ``where`` (``where=`` keeps 16M-element outputs cheap)."""
    if not where.any():
        return None, None
    max_abs = float(np.max(err, where=where, initial=0.0))
    nonzero = where & (ref != 0)
    if not nonzero.any():
        return max_abs, (0.0 if max_abs == 0 else None)
    with np.errstate(all="ignore"):
        rel = err / np.abs(ref)
    return max_abs, float(np.max(rel, where=nonzero, initial=0.0))


def compare_arrays(
    output: str,
    got: np.ndarray,
    want: np.ndarray,
    tol: Tolerance,
    *,
    allowance: np.ndarray | None = None,
    checked: np.ndarray | None = None,
) -> Comparison:
    """Compare ``got`` with ``want`` under ``tol``.

    ``allowance`` (broadcastable to the shape) is added to the allowed absolute error per element;
    elements where ``checked`` is false are not compared (the fuzzer's ambiguous elements).
    """
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Comparison(output, False, problem=f"output '{output}' has shape {got.shape}, expected {want.shape}")
    if want.size == 0:
        return Comparison(output, True)
    mask = np.ones(want.shape, bool) if checked is None else np.broadcast_to(np.asarray(checked, bool), want.shape)
    total = int(mask.sum())
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        return _compare_exact(output, got, want, mask, total)
    if want.dtype.kind == "c":
        if got.dtype.kind != "c":
            return Comparison(output, False, problem=f"output '{output}' is {got.dtype}, expected a complex array")
        with np.errstate(all="ignore"):
            magnitude = np.abs(want.astype(np.complex128))
        scale = tol.rtol * np.where(np.isfinite(magnitude), magnitude, 0.0)
        extra = scale if allowance is None else scale + np.broadcast_to(np.asarray(allowance, np.float64), want.shape)
        parts = [_compare_float(f"{output}.{p}", getattr(got, p), getattr(want, p), tol, mask, total, extra)
                 for p in ("real", "imag")]  # fmt: skip
        worst = LargestErrors()
        for c in parts:
            worst.absorb(c.max_abs, c.max_rel)
        bad = [c.problem for c in parts if not c.ok]
        return Comparison(output, not bad, worst.max_abs, worst.max_rel, "; ".join(bad))
    return _compare_float(output, got, want, tol, mask, total, allowance)


def _compare_exact(output: str, got: np.ndarray, want: np.ndarray, mask: np.ndarray, total: int) -> Comparison:
    g, w = got.astype(np.int64), want.astype(np.int64)
    err = np.abs(g - w).astype(np.float64)
    max_abs, max_rel = _error_stats(err, w.astype(np.float64), mask)
    bad = (g != w) & mask
    if not bad.any():
        return Comparison(output, True, max_abs, max_rel)
    text = _examples("elements differ", bad, got, want)
    return Comparison(output, False, max_abs, max_rel, f"output '{output}': {text} (of {total}; must be exact)")


def _compare_float(
    output: str,
    got: np.ndarray,
    want: np.ndarray,
    tol: Tolerance,
    mask: np.ndarray,
    total: int,
    allowance: np.ndarray | None,
) -> Comparison:
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    inf_any = (np.isinf(g) | np.isinf(w)) & ~nan_g & ~nan_w
    finite = np.isfinite(g) & np.isfinite(w) & mask
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(g - w), 0.0)
        allowed = tol.atol + tol.rtol * np.abs(np.where(finite, w, 0.0))
        if allowance is not None:
            allowed = allowed + np.broadcast_to(np.asarray(allowance, np.float64), w.shape)
    max_abs, max_rel = _error_stats(err, w, finite)
    problems = []
    nan_bad = (nan_g != nan_w) & mask
    if nan_bad.any():
        problems.append(_examples("NaN mismatches", nan_bad, got, want))
    inf_bad = inf_any & (g != w) & mask
    if inf_bad.any():
        problems.append(_examples("infinity mismatches", inf_bad, got, want))
    value_bad = finite & (err > allowed)
    if value_bad.any():
        ratio = np.where(value_bad, err / np.where(allowed > 0, allowed, np.finfo(np.float64).tiny), 0.0)
        problems.append(_examples("values outside tolerance", value_bad, got, want, order=ratio))
    if not problems:
        return Comparison(output, True, max_abs, max_rel)
    limits = f"rtol={tol.rtol:g} atol={tol.atol:g}" + (" + per-element error bound" if allowance is not None else "")
    text = "; ".join(problems)
    return Comparison(output, False, max_abs, max_rel, f"output '{output}': {text} (of {total}; {limits})")
