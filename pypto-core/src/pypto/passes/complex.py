"""The ``complex_pairs`` pass: every complex value becomes two floats, its real and imaginary parts.

A complex64 tensor of shape ``(M, N)`` is stored as NumPy stores it, interleaved parts, which is a
float32 tensor of shape ``(M, N, 2)``: after this pass the kernel reads and writes that tensor, the
caller's arrays are viewed so (:class:`pypto.runtime.binding.Binder`: no copy), and a complex scalar
parameter ``w`` arrives as two, ``w_re`` and ``w_im``. Every expression is split into the expressions
of its two parts:

* ``z[i]`` reads ``z[i, 0]`` and ``z[i, 1]``; a store ``z[i] = v`` becomes two stores, which the ``fuse``
  pass puts back into one loop nest;
* ``+``, ``-``, ``*`` are the textbook formulas; a real operand is not widened (``x * z`` is two
  multiplications, as C99's rules for mixed real and complex operands have it);
* ``/`` is Smith's algorithm, NumPy's, which does not overflow where ``|b|**2`` would;
* ``abs`` is ``hypot(re, im)``, ``angle`` is ``atan2(im, re)``, ``exp``, ``log`` and ``sqrt`` follow NumPy
  (``exp`` of a value with a zero imaginary part keeps it exactly zero);
* ``reduce_sum`` sums each part, one sum per term of it: a complex matrix product is four real ones;
* ``==`` and ``!=`` compare both parts.

Nothing after this pass knows about complex numbers: every backend, the schedule and the reference
computes with floats. A part known to be zero (the imaginary part of a real operand) is not computed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from pypto.dtypes import INDEX, DType, bool_
from pypto.ir.affine import Affine
from pypto.ir.kernel import KernelIR, ScalarParam, Temp, TensorParam
from pypto.ir.names import NameGen, complex_part_names
from pypto.ir.nodes import (
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Scatter,
    Store,
    Unary,
    Where,
    loads,
    map_children,
    postorder,
)
from pypto.ir.ops import COMPLEX_PARTS

Part = Expr | None  # None: a part known to be exactly zero


def _needs_pass(k: KernelIR) -> bool:
    if any(p.dtype.is_complex for p in (*k.params, *k.temps)):
        return True
    return any(
        e.dtype.is_complex or (isinstance(e, Unary) and e.op in COMPLEX_PARTS)
        for s in (*k.stores, *k.scatters)
        for e in postorder(s)
    )


class _Split:
    """Splits expressions: :meth:`pair` for complex ones, :meth:`real` for real ones that may hold complex parts."""

    def __init__(self, tensors: set[str], scalars: dict[str, tuple[str, str]]):
        self.tensors = tensors
        self.scalars = scalars
        self.pairs: dict[int, tuple[Expr, Part, Expr]] = {}
        self.reals: dict[int, tuple[Expr, Expr]] = {}

    # -- building blocks over one part type ---------------------------------------------------------------
    @staticmethod
    def const(v: float, dt: DType) -> Expr:
        return Const(float(v), dtype=dt)

    @staticmethod
    def bin(op: str, a: Expr, b: Expr) -> Expr:
        return Binary(op, a, b, dtype=bool_ if op in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or") else a.dtype)

    def add(self, a: Part, b: Part) -> Part:
        if a is None:
            return b
        return a if b is None else self.bin("add", a, b)

    def sub(self, a: Part, b: Part) -> Part:
        if b is None:
            return a
        return Unary("neg", b, dtype=b.dtype) if a is None else self.bin("sub", a, b)

    def mul(self, a: Part, b: Part) -> Part:
        return None if a is None or b is None else self.bin("mul", a, b)

    def zero(self, p: Part, dt: DType) -> Expr:
        return self.const(0.0, dt) if p is None else p

    # -- complex expressions --------------------------------------------------------------------------------
    def pair(self, e: Expr) -> tuple[Expr, Part]:
        """The (real, imaginary) parts of ``e`` (of a real ``e``: itself and None)."""
        if not e.dtype.is_complex:
            return self.real(e), None
        hit = self.pairs.get(id(e))
        if hit is None:
            hit = (*self._pair(e), e)
            self.pairs[id(e)] = hit
        return hit[0], hit[1]

    def _pair(self, e: Expr) -> tuple[Expr, Part]:
        dt = e.dtype.part
        if isinstance(e, Load):
            re, im = (Load(e.tensor, (*e.index, Affine.constant(c)), dtype=dt, loc=e.loc) for c in (0, 1))
            return re, im
        if isinstance(e, Gather):  # the same computed indices, then the part
            index = tuple(self.real(ix) for ix in e.index)
            part = lambda c: Index(Affine.constant(c), dtype=INDEX, loc=e.loc)  # noqa: E731
            re, im = (Gather(e.tensor, (*index, part(c)), dtype=dt, loc=e.loc) for c in (0, 1))
            return re, im
        if isinstance(e, Const):
            v = complex(e.value)
            im = None if v.imag == 0 and math.copysign(1.0, v.imag) > 0 else self.const(v.imag, dt)
            return self.const(v.real, dt), im
        if isinstance(e, Scalar):
            re_name, im_name = self.scalars[e.name]
            return Scalar(re_name, dtype=dt, loc=e.loc), Scalar(im_name, dtype=dt, loc=e.loc)
        if isinstance(e, Cast):  # from a real type, or from the other complex type
            xr, xi = self.pair(e.x)
            conv = lambda p: p if p is None or p.dtype == dt else Cast(p, dtype=dt, loc=e.loc)  # noqa: E731
            return conv(xr), conv(xi)  # type: ignore[return-value]
        if isinstance(e, Where):
            c = self.real(e.cond)
            (ar, ai), (br, bi) = self.pair(e.a), self.pair(e.b)
            im = None if ai is None and bi is None else Where(c, self.zero(ai, dt), self.zero(bi, dt), dtype=dt)
            return Where(c, ar, br, dtype=dt), im
        if isinstance(e, Reduce):  # infer_types lets only sums of complex values through
            br, bi = self.pair(e.body)
            return self.sum_of(e, br), (None if bi is None else self.sum_of(e, bi))
        if isinstance(e, Scan):  # infer_types lets only running sums of complex values through (no combine)
            br, bi = self.pair(e.body)
            scan = lambda p: None if p is None else Scan(e.op, p, e.axis, e.reverse, dtype=dt, loc=e.loc)  # noqa: E731
            return scan(br), scan(bi)  # type: ignore[return-value]
        if isinstance(e, Binary):
            return self.binary(e.op, self.pair(e.a), self.pair(e.b), dt)
        if isinstance(e, Unary):
            return self.unary(e.op, *self.pair(e.x), dt)
        raise TypeError(f"complex_pairs: unexpected complex {type(e).__name__}")

    def sum_of(self, r: Reduce, part: Expr) -> Expr:
        """``r``'s sum of ``part``, one sum per term: a complex contraction's ``sum(ar*br - ai*bi)`` is two real
        contractions, which the schedule runs as matrix products, instead of one loop of mixed terms."""
        terms: list[tuple[bool, Expr]] = []

        def collect(e: Expr, positive: bool) -> None:
            if isinstance(e, Binary) and e.op in ("add", "sub"):
                collect(e.a, positive)
                collect(e.b, positive if e.op == "add" else not positive)
            elif isinstance(e, Unary) and e.op == "neg":
                collect(e.x, not positive)
            else:
                terms.append((positive, e))

        collect(part, True)
        total: Part = None
        for positive, t in sorted(terms, key=lambda pt: not pt[0]):  # a positive term first: no leading minus
            one = replace(r, body=t, dtype=t.dtype)
            total = self.add(total, one) if positive else self.sub(total, one)
        assert total is not None
        return total

    def binary(self, op: str, a: tuple[Expr, Part], b: tuple[Expr, Part], dt: DType) -> tuple[Expr, Part]:
        (ar, ai), (br, bi) = a, b
        if op == "add":
            return self.add(ar, br), self.add(ai, bi)  # type: ignore[return-value]
        if op == "sub":
            return self.sub(ar, br), self.sub(ai, bi)  # type: ignore[return-value]
        if op == "mul":
            return self.sub(self.mul(ar, br), self.mul(ai, bi)), self.add(self.mul(ar, bi), self.mul(ai, br))  # type: ignore[return-value]
        assert op == "div", op
        if bi is None:
            return self.bin("div", ar, br), (None if ai is None else self.bin("div", ai, br))
        # Smith's algorithm, as NumPy computes it: scale by the larger part of the divisor
        one = self.const(1.0, dt)
        abs_r, abs_i = Unary("abs", br, dtype=dt), Unary("abs", bi, dtype=dt)
        rat1 = self.bin("div", bi, br)  # |br| >= |bi|
        scl1 = self.bin("div", one, self.bin("add", br, self.bin("mul", bi, rat1)))
        re1 = self.bin("mul", self.add(ar, self.mul(ai, rat1)), scl1)  # type: ignore[arg-type]
        im1 = self.bin("mul", self.sub(ai, self.bin("mul", ar, rat1)), scl1)  # type: ignore[arg-type]
        rat2 = self.bin("div", br, bi)  # |br| < |bi|
        scl2 = self.bin("div", one, self.bin("add", bi, self.bin("mul", br, rat2)))
        re2 = self.bin("mul", self.add(self.bin("mul", ar, rat2), ai), scl2)  # type: ignore[arg-type]
        im2 = self.bin("mul", self.sub(self.mul(ai, rat2), ar), scl2)  # type: ignore[arg-type]
        # a zero divisor: each part divided by |br| (0): infinities and NaNs as NumPy gives them
        re0 = self.bin("div", ar, abs_r)
        im0 = self.bin("div", self.zero(ai, dt), abs_r)
        big, zero = self.bin("ge", abs_r, abs_i), self.bin("eq", abs_r, self.const(0.0, dt))
        pick = lambda z, p1, p2: Where(big, Where(zero, z, p1, dtype=dt), p2, dtype=dt)  # noqa: E731
        return pick(re0, re1, re2), pick(im0, im1, im2)

    def unary(self, op: str, xr: Expr, xi: Part, dt: DType) -> tuple[Expr, Part]:
        if op == "neg":
            return Unary("neg", xr, dtype=dt), (None if xi is None else Unary("neg", xi, dtype=dt))
        if op == "conj":
            return xr, (None if xi is None else Unary("neg", xi, dtype=dt))
        if op == "exp":  # e**re (cos im + i sin im); a zero imaginary part stays exactly zero (exp(inf + 0j))
            e = Unary("exp", xr, dtype=dt)
            if xi is None:
                return e, None
            zero, inf = self.const(0.0, dt), self.const(math.inf, dt)
            real_axis = self.bin("eq", xi, zero)
            re = Where(real_axis, e, self.bin("mul", e, Unary("cos", xi, dtype=dt)), dtype=dt)
            im = Where(real_axis, xi, self.bin("mul", e, Unary("sin", xi, dtype=dt)), dtype=dt)
            # C99 (and NumPy) at an infinite real part with an infinite or NaN imaginary one: inf + nan j, 0 + 0j
            odd = self.bin("ne", self.bin("sub", xi, xi), zero)
            to_zero = self.bin("and", odd, self.bin("eq", xr, Unary("neg", inf, dtype=dt)))
            to_inf = self.bin("and", odd, self.bin("eq", xr, inf))
            return Where(to_zero, zero, Where(to_inf, inf, re, dtype=dt), dtype=dt), Where(to_zero, zero, im, dtype=dt)
        if op == "log":  # log|z| + i angle(z)
            xi0 = self.zero(xi, dt)
            return Unary("log", self.bin("hypot", xr, xi0), dtype=dt), self.bin("atan2", xi0, xr)
        if op == "sqrt":  # the principal root, without overflow (C99's csqrt, NumPy's); -0j is below the cut
            xi0 = self.zero(xi, dt)
            zero, half, inf = self.const(0.0, dt), self.const(0.5, dt), self.const(math.inf, dt)
            ax = Unary("abs", xr, dtype=dt)
            t = Unary("sqrt", self.bin("mul", self.bin("add", ax, self.bin("hypot", xr, xi0)), half), dtype=dt)
            t2 = self.bin("add", t, t)
            neg = self.bin("lt", xr, zero)
            re = Where(neg, self.bin("div", Unary("abs", xi0, dtype=dt), t2), t, dtype=dt)
            below = self.bin(
                "or", self.bin("lt", xi0, zero), self.bin("lt", self.bin("div", self.const(1.0, dt), xi0), zero)
            )
            im = Where(neg, Where(below, Unary("neg", t, dtype=dt), t, dtype=dt), self.bin("div", xi0, t2), dtype=dt)
            at_zero = self.bin("eq", t, zero)  # sqrt(±0 ± 0j) = 0 ± 0j
            infinite = self.bin("eq", Unary("abs", xi0, dtype=dt), inf)  # sqrt(x ± inf j) = inf ± inf j
            re = Where(infinite, inf, Where(at_zero, zero, re, dtype=dt), dtype=dt)
            return re, Where(infinite, xi0, Where(at_zero, xi0, im, dtype=dt), dtype=dt)
        raise TypeError(f"complex_pairs: unexpected complex function {op}")

    # -- real expressions that may hold complex values ----------------------------------------------------------
    def real(self, e: Expr) -> Expr:
        hit = self.reals.get(id(e))
        if hit is None:
            hit = (self._real(e), e)
            self.reals[id(e)] = hit
        return hit[0]

    def _real(self, e: Expr) -> Expr:
        if isinstance(e, Unary) and (e.op in COMPLEX_PARTS or (e.op == "abs" and e.x.dtype.is_complex)):
            xr, xi = self.pair(e.x)
            dt = e.dtype
            if e.op == "real" or e.op == "conj":
                return xr
            if e.op == "imag":
                return self.zero(xi, dt)
            if e.op == "abs":
                return Unary("abs", xr, dtype=dt) if xi is None else self.bin("hypot", xr, xi)
            return self.bin("atan2", self.zero(xi, dt), xr)  # angle
        if isinstance(e, Binary) and e.a.dtype.is_complex:  # == and != (infer_types allows no other)
            (ar, ai), (br, bi) = self.pair(e.a), self.pair(e.b)
            dt = e.a.dtype.part
            same = e.op == "eq"
            parts = self.bin(e.op, ar, br), self.bin(e.op, self.zero(ai, dt), self.zero(bi, dt))
            return self.bin("and" if same else "or", *parts)
        if isinstance(e, Cast) and e.x.dtype.is_complex:  # to bool: nonzero
            xr, xi = self.pair(e.x)
            dt = e.x.dtype.part
            nz = self.bin("ne", xr, self.const(0.0, dt))
            return nz if xi is None else self.bin("or", nz, self.bin("ne", xi, self.const(0.0, dt)))
        return map_children(e, self.real)  # type: ignore[return-value]


def complex_pairs(k: KernelIR) -> KernelIR:
    """Complex tensors, parameters and values written as pairs of floats (see the module docstring)."""
    if not _needs_pass(k):
        return k
    tensors = {p.name for p in (*k.tensor_params, *k.temps) if p.dtype.is_complex}
    scalars = complex_part_names(k.params, k.dims)
    params: list = []
    for p in k.params:
        if not p.dtype.is_complex:
            params.append(p)
        elif isinstance(p, TensorParam):
            params.append(replace(p, dtype=p.dtype.part, shape=(*p.shape, Affine.constant(2))))
        else:
            params += [ScalarParam(n, p.dtype.part) for n in scalars[p.name]]
    temps = tuple(
        Temp(t.name, t.dtype.part, (*t.shape, Affine.constant(2))) if t.dtype.is_complex else t for t in k.temps
    )
    split = _Split(tensors, scalars)
    stores: list[Store] = []
    names = NameGen({p.name for p in (*k.params, *k.temps)} | set(k.dims))
    for s in k.stores:
        if s.tensor in tensors:
            re, im = split.pair(s.value)
            dt = re.dtype
            im = split.zero(im, dt)
            at = lambda c, index=s.index: (*index, Affine.constant(c))  # noqa: E731
            if any(n.tensor == s.tensor for n in loads(s.value)):
                # an in-place update (z[i] = z[i] * w[i]): both parts are computed from the old value, so the real
                # part waits in a temporary while the imaginary one is stored (the store after it would read it)
                buffer = k.buffer(s.tensor)
                held = Temp(names.fresh("_zre"), dt, tuple(buffer.shape))
                temps += (held,)
                stores.append(Store(held.name, s.index, re, loc=s.loc))
                stores.append(Store(s.tensor, at(1), im, loc=s.loc))
                stores.append(Store(s.tensor, at(0), Load(held.name, s.index, dtype=dt), loc=s.loc))
            else:
                stores += [Store(s.tensor, at(0), re, loc=s.loc), Store(s.tensor, at(1), im, loc=s.loc)]
        else:
            stores.append(Store(s.tensor, s.index, split.real(s.value), loc=s.loc))
    scatters: list[Scatter] = []
    for c in k.scatters:
        index = tuple(split.real(ix) for ix in c.index)
        if c.tensor in tensors:  # a complex scatter-add (or store): one per part
            re, im = split.pair(c.value)
            im = split.zero(im, re.dtype)
            part = lambda p, loc=c.loc: Index(Affine.constant(p), dtype=INDEX, loc=loc)  # noqa: E731
            scatters += [Scatter(c.tensor, (*index, part(p)), v, c.op, loc=c.loc) for p, v in ((0, re), (1, im))]
        else:
            scatters.append(Scatter(c.tensor, index, split.real(c.value), c.op, loc=c.loc))
    return k.replace(params=tuple(params), temps=temps, stores=tuple(stores), scatters=tuple(scatters))
