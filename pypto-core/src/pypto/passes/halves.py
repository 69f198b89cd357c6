"""The ``half_compute`` pass: 16-bit floats are stored in 16 bits and computed in float32.

float16 and bfloat16 are storage types. Every value read from a tensor of those types is widened to
float32 where it is loaded, arithmetic, functions and reductions run in float32 (reductions therefore
accumulate in float32), and a value is rounded to its 16-bit type once, where it is stored (round to
nearest even; float16 overflows to ±inf, NaN stays NaN). An explicit ``pt.cast(x, pt.float16)`` in the
middle of an expression rounds there too. This is what PyTorch's CPU kernels do; NumPy rounds after
every operation instead, so a chain of operations may differ from NumPy by a few units in the last place
of the 16-bit type (the tolerances of the precision guide).

The types the user sees do not change: ``x + y`` of two float16 arrays is a float16 array. Only the
expressions of the kernel change, after ``infer_types``:

* ``load x[i]`` of a 16-bit ``x`` becomes ``cast(load x[i], float32)``;
* every other 16-bit expression (arithmetic, functions, constants, reductions) becomes float32; a 16-bit
  scalar parameter too: its value, rounded to its type by the call, arrives as a float32;
* ``cast(e, float16)`` becomes ``cast(cast(e, float16), float32)``: the rounding stays where it was asked;
* a store into a 16-bit tensor stores ``cast(value, that type)``.

Printers then meet 16-bit types only in those casts, and spell them (``(_Float16)``, bit operations for
bfloat16, ``vstore_half``) in one place each.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import float32
from pypto.ir.kernel import KernelIR
from pypto.ir.nodes import Cast, Combine, Expr, Gather, Load, Node, Scan, Store, postorder, transform


def _widen(n: Node) -> Node | None:
    dt = getattr(n, "dtype", None)
    if isinstance(n, Scan) and n.combine is not None:  # the combine function runs in float32 too (its 16-bit parts,
        exprs = tuple(transform(x, _widen) for x in n.combine.exprs)  # whatever the component's own type)
        if exprs == n.combine.exprs and not dt.is_half:  # type: ignore[union-attr]
            return None
        return replace(n, combine=Combine(exprs), dtype=float32 if dt.is_half else dt)  # type: ignore[arg-type, union-attr]
    if dt is None or not dt.is_half:
        return None
    if isinstance(n, (Load, Gather)):
        return Cast(n, dtype=float32, loc=n.loc)
    if isinstance(n, Cast):
        return Cast(n, dtype=float32, loc=n.loc)  # its operand is float32 already: it rounds, then widens
    return replace(n, dtype=float32)


def half_compute(k: KernelIR) -> KernelIR:
    """16-bit floats computed in float32, rounded once on store (see the module docstring)."""
    halves = {
        p.name: p.dtype for p in (*k.params, *k.temps) if getattr(p, "dtype", None) is not None and p.dtype.is_half
    }
    if not halves and not any(
        isinstance(n, Cast) and n.dtype.is_half for s in (*k.stores, *k.scatters) for n in postorder(s)
    ):
        return k
    memo: dict = {}
    stores = []
    for s in k.stores:
        v: Expr = transform(s.value, _widen, memo)  # type: ignore[assignment]
        if s.tensor in halves:
            rounded = isinstance(v, Cast) and isinstance(v.x, Cast) and v.x.dtype == halves[s.tensor]
            v = v.x if rounded else Cast(v, dtype=halves[s.tensor], loc=s.loc)  # type: ignore[attr-defined]
        stores.append(Store(s.tensor, s.index, v, loc=s.loc))
    # a scatter's value stays in float32: the lowering combines it with the widened element and rounds once
    scatters = tuple(transform(c, _widen, memo) for c in k.scatters)
    return k.replace(stores=tuple(stores), scatters=scatters)
