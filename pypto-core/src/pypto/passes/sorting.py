"""Lowering a sort nest (``pt.sort``, ``pt.argsort``, ``pt.topk``): the loop IR that orders each row.

A nest whose stores each store one :class:`~pypto.ir.nodes.Sort` whole (``materialize`` sees to it; the values
and the positions of one ``pt.topk`` share the nest) becomes, for every point of its other axes (the outermost
on threads), code over a row of scratch, written with the loop IR's plain statements so that every backend runs
it with no code of its own:

* **radix sort** (rows of at least :data:`RADIX_MIN` values, and a ``pt.topk`` that keeps many of them): each
  value becomes an unsigned key whose bits order as the values do (a float's bits with the sign bit flipped, all
  of them for a negative one; both zeros one key, NaN the largest; every bit flipped for ``descending``), one
  read of the row counts the keys' digits (8 or 11 bits: :data:`RADIX_DIGITS`) for every pass, then each pass
  moves the keys (and the positions) to their digit's next slot, least significant digit first; a pass whose
  digit is the same for the whole row is skipped. Each pass keeps the order of equal digits, so equal keys keep
  their positions (stable). The values
  come back from the keys; zeros and NaNs, whose keys lose a sign or a payload, are then written again from
  the row in their order, so the result is the row's own bits. A row of ``n`` costs about ``n`` moves per
  pass, whatever its order (a comparison sort ``n log n`` compares). The keys are a float's bits: the loop
  IR's :class:`~pypto.ir.nodes.Bitcast`;
* **merge sort** (shorter rows and a ``pt.topk`` of them): the row's values and their positions
  are copied into the first half of a scratch row, each pair of neighbours in order, then merged bottom-up in
  runs of 2, 4, 8 ... between the two halves. Each merge works from both ends at once: the front takes the
  left run's next value unless the right run's is strictly before it, the back takes the right run's last
  value unless it is strictly before the left run's, so equal values keep their order (stable), and the two
  ends are two independent chains of dependent steps (a merge step waits for the compare before it);
* **selection** (``pt.topk`` of at most :data:`SELECT_MAX` values): the row is read once, the ``k`` best
  values so far kept in order in scratch; a value that beats the last kept one is inserted (its place counted
  without a branch, the kept values after it moved up one), so a row of ``n`` costs about ``n`` compares plus
  ``k log(n / k)`` insertions for random data.

"Before" is the order of ``np.sort`` (ascending, NaN last) or its exact reverse (``descending``: NaN first, as
``torch.topk``); ties are broken by position either way. The result is the same bits on every backend and
for any thread count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pypto import dtypes
from pypto.dtypes import DType
from pypto.ir.int64 import add as _add
from pypto.ir.int64 import i64 as _i64
from pypto.ir.int64 import maximum as _max
from pypto.ir.int64 import minimum as _min
from pypto.ir.int64 import mul as _mul
from pypto.ir.int64 import sub as _sub
from pypto.ir.kernel import Group
from pypto.ir.loops import Alloc, Assign, Block, Comment, Declare, If, Let, Loop, Read, Stmt, Var, Write
from pypto.ir.nodes import Binary, Bitcast, Cast, Const, Expr, Sort, Where

I64 = dtypes.int64
BOOL = dtypes.bool_
SELECT_MAX = 64
"""``pt.topk`` keeps the values by selection (one read of the row, insertions into a sorted list of k) up to
this many, by merge sort beyond: an insertion moves up to k values, so a large k pays k per value that beats
the last one kept."""
MERGE_PASSES = 64  # an upper bound on the passes of a merge sort (rows of up to 2**64 values)
RADIX_DIGITS: dict[int, tuple[tuple[int, int], ...]] = {
    8: ((64, 8),),
    16: ((64, 8),),
    32: ((64, 8), (2048, 11)),
    64: ((64, 8), (1024, 11)),
}
"""The radix sorts by the width of the keys: ``(the fewest values a row has, the bits of a digit)``, each used up
to the next one's start. Rows of fewer than 64 values are merge sorted. A pass clears and scans ``2**bits``
counters, so short rows take 8-bit digits, long ones 11-bit (three passes over 32-bit keys instead of four).
Measured on rows of float32 / float64 (2 threads, 4M values): 8 bits faster up to 1024 / 512 values (128
values: 18 ms against 43 with 11 bits; merge sort 92), 11 bits beyond (4096 float32: 8.4 ms against 9.9)."""
RADIX_MIN = min(least for choices in RADIX_DIGITS.values() for least, _ in choices)
U32 = dtypes.uint32
COUNT = dtypes.int32  # the radix counters (half the cache of int64): rows of up to RADIX_MAX values
RADIX_MAX = 2**31 - 1


def _uint(bits: int) -> DType:
    return {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}[bits]


def _v(name: str, dt: DType = I64) -> Var:
    return Var(name, dtype=dt)


def _b(op: str, a: Expr, b: Expr) -> Expr:
    """A comparison (bool) or an operator on ``a``'s type (logic of booleans, int64 arithmetic)."""
    return Binary(op, a, b, dtype=BOOL if op in ("lt", "le", "gt", "ge", "eq", "ne") else a.dtype)


def _as_int(b: Expr) -> Expr:
    return Cast(b, dtype=I64)


def before(a: Expr, b: Expr, descending: bool) -> Expr:
    """Whether value ``a`` comes strictly before value ``b``: ascending with NaN last (``np.sort``), or the
    reverse with NaN first (``descending``); booleans compare as integers. For floats, with two compares and no
    branch: ascending ``not (b <= a) and a == a`` (a NaN ``a`` comes before nothing, a number before a NaN ``b``),
    descending ``not (a <= b) and b == b``."""
    dt = a.dtype
    assert dt is not None
    if dt.is_bool:
        a, b = Cast(a, dtype=dtypes.int32), Cast(b, dtype=dtypes.int32)
    if not dt.is_float:
        return _b("lt", b, a) if descending else _b("lt", a, b)
    first, second = (a, b) if descending else (b, a)  # before = not (first <= second) and (the other) is a number
    number = b if descending else a
    after_or_equal = _b("le", first, second)
    return _b("and", _b("xor", after_or_equal, Const(True, dtype=BOOL)), _b("eq", number, number))


class SortNest:
    """The loop IR of one sort nest (module docstring). ``fresh`` names locals; ``extent(axis)`` and
    ``affine(ix, env)`` give int64 expressions of sizes and indices; ``value(e, env, known)`` lowers an
    expression at the loop variables ``env`` (axis -> name), ``known`` mapping nodes to computed values."""

    def __init__(
        self,
        g: Group,
        sorts: list[Sort],
        fresh: Callable[[str], str],
        extent: Callable[[int], Expr],
        index: Callable[[object, dict[int, str]], Expr],
        value: Callable[[Expr, dict[int, str], dict], Expr],
        axis_name: Callable[[int], str],
    ):
        self.g, self.fresh, self.extent, self.index, self.value = g, fresh, extent, index, value
        self.sort = sorts[0]
        self.sorts = sorts
        self.axis_name = axis_name
        self.outer = [a for a in g.loops if a != self.sort.out]
        self.env = {a: fresh(axis_name(a)) for a in self.outer}
        self.want_idx = any(c.which == "indices" for c in sorts)
        assert self.sort.body.dtype is not None
        self.kdt: DType = self.sort.body.dtype
        self.n = extent(self.sort.axis)
        self.m = extent(self.sort.out)

    def row(self) -> tuple[Expr, ...]:
        return tuple(_v(self.env[a]) for a in self.outer)

    def lower(self) -> list[Stmt]:
        s, m, n = self.sort, self.m, self.n
        static = isinstance(m, Const)
        select_only = s.top and static and m.value <= SELECT_MAX  # type: ignore[attr-defined]
        keys, idx = self.fresh("_keys"), self.fresh("_pos")
        order = "descending" if s.descending else "ascending"
        head = f"sort along {self.axis_name(s.axis)} ({order}, stable): "
        allocs: list[tuple[str, DType, tuple[Expr, ...]]] = []
        if select_only:  # a few values known at compile time: a row of k of scratch
            shape_row: tuple[Expr, ...] = (m,)
            body = self.select(keys, idx, ()) + self.results({"values": (keys, ()), "indices": (idx, ())})
            algo = f"selection of {m.value} (insertions)"  # type: ignore[attr-defined]
        else:
            shape_row = (_i64(2), n)
            merged = self.merge(keys, idx)
            src = (_v(self.src),)
            merged += self.results({"values": (keys, src), "indices": (idx, src)})
            body, algo = merged, "merge sort, runs doubling"
            if self.kdt.is_bool or self.kdt.is_int or self.kdt.is_float:  # the radix sorts, by row length
                rkeys, counts = self.fresh("_radix"), self.fresh("_counts")
                t = self.keyed()[0]
                kt, w = self.key_consts(t)[:2]
                largest = max(-(-w // bits) << bits for _, bits in RADIX_DIGITS[w])
                allocs = [(rkeys, kt, (_i64(2), n)), (counts, COUNT, (_i64(largest),))]
                upper = _i64(RADIX_MAX)
                for least, bits in reversed(RADIX_DIGITS[w]):  # (each choice wraps those for longer rows)
                    sorted_ = self.radix(rkeys, counts, idx, bits)
                    at = (_v(self.src),)
                    sorted_ += self.results({"values": (rkeys, at), "indices": (idx, at)}, decode=self.decoded)
                    name = f"radix sort, {self.passes} pass{'es' if self.passes > 1 else ''} of {bits} bits"
                    if isinstance(n, Const):
                        if least <= n.value <= upper.value:  # type: ignore[attr-defined]
                            body, algo = sorted_, name
                    else:
                        fits = _b("and", _b("ge", n, _i64(least)), _b("le", n, upper))
                        body = [If(fits, Block(tuple(sorted_)), Block(tuple(body)))]
                        algo = f"{name} for rows of {least} to {upper.value} values, else {algo}"  # type: ignore[attr-defined]
                    upper = _i64(least - 1)
            if s.top and not static:  # k known at the call only: selection when it is small
                selected = self.select(keys, idx, (_i64(0),))
                selected += self.results({"values": (keys, (_i64(0),)), "indices": (idx, (_i64(0),))})
                body = [If(_b("le", m, _i64(SELECT_MAX)), Block(tuple(selected)), Block(tuple(body)))]
                algo = f"selection of k (insertions) when k <= {SELECT_MAX}, else {algo}"
        nest: Stmt = Block(tuple(body))
        points: Expr = _i64(1)
        for a in self.outer:
            points = _mul(points, self.extent(a))
        work = _mul(_mul(points, self.n), _i64(16))
        parallel = self.g.parallel
        for a in reversed(self.outer):
            kind = "parallel" if a == parallel else "serial"
            nest = Loop(self.env[a], _i64(0), self.extent(a), nest, kind, (), work if kind == "parallel" else None)
        if not self.outer:  # one row: a loop of one point all the same, which a device runs on one thread
            nest = Loop(self.fresh("_row"), _i64(0), _i64(1), nest, "parallel", (), work)
        # the schedule on the outermost loop (inside the scratch) for the targets: a SIMT device orders each row on
        # a thread of its own (pypto.targets.simt.launch)
        nest = replace(nest, schedule=self.g.schedule)
        outer_shape = tuple(self.extent(a) for a in self.outer)
        stmt: Stmt = nest
        for name_, dt, shape in reversed(allocs):
            stmt = Alloc(name_, dt, outer_shape + shape, stmt)
        if self.want_idx:
            stmt = Alloc(idx, I64, outer_shape + shape_row, stmt)
        stmt = Alloc(keys, self.kdt, outer_shape + shape_row, stmt)
        return [Comment(head + algo), stmt]

    # -- reading the row -----------------------------------------------------------------------------
    def element(self, j: str) -> Expr:
        """The row's value at position ``j`` (its body lowered with the sort's axis at ``j``)."""
        return self.value(self.sort.body, {**self.env, self.sort.axis: j}, {})

    # -- merge sort --------------------------------------------------------------------------------------
    def merge(self, keys: str, idx: str) -> list[Stmt]:
        """Pairs ordered while the row is copied in, then runs of 2, 4 ... merged from both ends at once (two
        independent chains of dependent steps instead of one)."""
        row, n, kdt, desc = self.row(), self.n, self.kdt, self.sort.descending
        width, src, p = self.fresh("_width"), self.fresh("_src"), self.fresh("_pass")
        self.src = src
        w, sv = _v(width), _v(src)
        dst = _sub(_i64(1), sv)

        def put(half: Expr, at: Expr, value: Expr, pos: Expr) -> list[Stmt]:
            out: list[Stmt] = [Write(keys, (*row, half, at), value)]
            if self.want_idx:
                out.append(Write(idx, (*row, half, at), pos))
            return out

        def key(at: Expr) -> Expr:
            return Read(keys, (*row, sv, at), dtype=kdt)

        def pos(at: Expr) -> Expr:
            return Read(idx, (*row, sv, at), dtype=I64)

        # 1. the row copied in, each pair (2q, 2q + 1) in order (the second first only when strictly before)
        q, j0, j1, a, b_, swap = (self.fresh(x) for x in ("_q", "_j", "_j", "_a", "_b", "_swap"))
        av, bv, sw = _v(a, kdt), _v(b_, kdt), _v(swap, BOOL)
        pair = [
            Let(j0, _mul(_v(q), _i64(2))),
            Let(j1, _add(_v(j0), _i64(1))),
            Let(a, self.element(j0)),
            Let(b_, self.element(j1)),
            Let(swap, before(bv, av, desc)),
            *put(_i64(0), _v(j0), Where(sw, bv, av, dtype=kdt), Where(sw, _v(j1), _v(j0), dtype=I64)),
            *put(_i64(0), _v(j1), Where(sw, av, bv, dtype=kdt), Where(sw, _v(j0), _v(j1), dtype=I64)),
        ]
        half_n = _b("floordiv", n, _i64(2))
        last = self.fresh("_j")
        odd = If(_b("eq", _b("mod", n, _i64(2)), _i64(1)), Block((
            Let(last, _sub(n, _i64(1))),
            *put(_i64(0), _v(last), self.element(last), _v(last)),
        )))  # fmt: skip
        # 2. the merges: the front takes the left run's value unless the right's is strictly before it; the back
        # takes the right run's last unless it is strictly before the left's (equal values keep their order)
        b, lo, mid, hi, size, steps = (self.fresh(x) for x in ("_pair", "_lo", "_mid", "_hi", "_n", "_steps"))
        i_, j_, ib, jb, t = (self.fresh(x) for x in ("_i", "_k", "_ib", "_kb", "_t"))
        lov, midv, hiv = _v(lo), _v(mid), _v(hi)

        def front(out: Expr) -> list[Stmt]:
            ki, kj, right, sel = self.fresh("_a"), self.fresh("_b"), self.fresh("_right"), self.fresh("_at")
            at_i, at_j = _min(_v(i_), _sub(midv, _i64(1))), _min(_v(j_), _sub(hiv, _i64(1)))
            rv = _v(right, BOOL)
            take = _b("and", _b("lt", _v(j_), hiv),
                      _b("or", _b("ge", _v(i_), midv), before(_v(kj, kdt), _v(ki, kdt), desc)))  # fmt: skip
            return [
                Let(ki, key(at_i)),
                Let(kj, key(at_j)),
                Let(right, take),
                Let(sel, Where(rv, at_j, at_i, dtype=I64)),  # (an index chosen: no branch on the values)
                *put(dst, out, key(_v(sel)), pos(_v(sel)) if self.want_idx else _i64(0)),
                Assign(j_, _add(_v(j_), _as_int(rv))),
                Assign(i_, _sub(_add(_v(i_), _i64(1)), _as_int(rv))),
            ]  # fmt: skip

        def back(out: Expr) -> list[Stmt]:
            ki, kj, left, sel = self.fresh("_a"), self.fresh("_b"), self.fresh("_left"), self.fresh("_at")
            at_i, at_j = _max(_v(ib), lov), _max(_v(jb), lov)  # (jb >= mid - 1 >= lo: always in the row)
            lv = _v(left, BOOL)
            take = _b("and", _b("ge", _v(ib), lov),
                      _b("or", _b("lt", _v(jb), midv), before(_v(kj, kdt), _v(ki, kdt), desc)))  # fmt: skip
            return [
                Let(ki, key(at_i)),
                Let(kj, key(at_j)),
                Let(left, take),
                Let(sel, Where(lv, at_i, at_j, dtype=I64)),
                *put(dst, out, key(_v(sel)), pos(_v(sel)) if self.want_idx else _i64(0)),
                Assign(ib, _sub(_v(ib), _as_int(lv))),
                Assign(jb, _add(_sub(_v(jb), _i64(1)), _as_int(lv))),
            ]  # fmt: skip

        two_w = _mul(w, _i64(2))
        steps_v = _v(steps)
        merge_pair = Block((
            Let(lo, _mul(_v(b), two_w)),
            Let(mid, _min(_add(lov, w), n)),
            Let(hi, _min(_add(lov, two_w), n)),
            Let(size, _sub(hiv, lov)),
            Let(steps, _b("floordiv", _v(size), _i64(2))),
            Declare(i_, I64, lov),
            Declare(j_, I64, midv),
            Declare(ib, I64, _sub(midv, _i64(1))),
            Declare(jb, I64, _sub(hiv, _i64(1))),
            Loop(t, _i64(0), steps_v, Block((*front(_add(lov, _v(t))), *back(_sub(_sub(hiv, _i64(1)), _v(t))))),
                 "serial"),
            If(_b("eq", _b("mod", _v(size), _i64(2)), _i64(1)), Block(tuple(front(_add(lov, steps_v))))),
        ))  # fmt: skip
        npairs = self.fresh("_pairs")
        one_pass = If(_b("lt", w, n), Block((
            Let(npairs, _b("floordiv", _add(n, _sub(two_w, _i64(1))), two_w)),
            Loop(b, _i64(0), _v(npairs), merge_pair, "serial"),
            Assign(width, two_w),
            Assign(src, dst),
        )))  # fmt: skip
        return [
            Loop(q, _i64(0), half_n, Block(tuple(pair)), "serial"),
            odd,
            Declare(width, I64, _i64(2)),
            Declare(src, I64, _i64(0)),
            Loop(p, _i64(0), _i64(MERGE_PASSES), one_pass, "serial"),
        ]

    # -- radix sort ---------------------------------------------------------------------------------------
    def keyed(self) -> tuple[DType, Callable[[str], Expr]]:
        """The type whose bits are the keys and the row's value of that type at a position: a 16-bit float the
        compiler widened to float32 (pypto.passes.halves) is keyed by its own 16 bits (two passes, not four)."""
        body = self.sort.body
        if isinstance(body, Cast) and body.x.dtype is not None and body.x.dtype.is_half and self.kdt == dtypes.float32:
            inner = body.x
            return inner.dtype, lambda j: self.value(inner, {**self.env, self.sort.axis: j}, {})  # type: ignore[return-value]
        return self.kdt, self.element

    def keyed_key_type(self) -> DType:
        return self.key_consts(self.keyed()[0])[0]

    def key_consts(self, t: DType) -> tuple[DType, int, Const, Const]:
        """The keys' type (uint32 up to 32 bits, int64 for 64: every backend has both), the bits that order, the
        sign bit among them and all of them set."""
        w = 8 if t.is_bool else t.bits
        if w == 64:
            return I64, w, Const(-(2**63), dtype=I64), Const(-1, dtype=I64)
        return U32, w, Const(2 ** (w - 1), dtype=U32), Const(2**w - 1, dtype=U32)

    def key(self, x: Expr, t: DType, exact: bool = False) -> Expr:
        """The key of value ``x`` (of type ``t``): its bits as an unsigned number that orders as the values do. The
        ``exact`` key of a float keeps a zero's sign and a NaN's bits (:meth:`unkey` gives them back), which
        the sorted key does not: both zeros are one key there and every NaN the largest."""
        kt, w, sign, ones = self.key_consts(t)
        if t.is_float:
            if w == 64:
                u: Expr = Bitcast(x, dtype=I64)
                negative = _b("lt", u, Const(0, dtype=I64))
            else:
                u = Bitcast(x, dtype=_uint(w))
                u = u if w == 32 else Cast(u, dtype=U32)
                negative = _b("ge", u, sign)
            # every bit flipped for a negative number, the sign bit for a positive one; with arithmetic, not a
            # select (a compiler turns that into a branch on the sign, mispredicted for half the values)
            k = _b("xor", u, _b("add", sign, _b("mul", Cast(negative, dtype=kt), _b("sub", ones, sign))))
            if not exact:
                xf = Cast(x, dtype=dtypes.float32) if t.is_half else x
                zero = Const(0.0, dtype=xf.dtype)
                k = Where(_b("eq", xf, zero), sign, k, dtype=kt)  # both zeros one key (+0.0's)
                k = Where(_b("ne", xf, xf), ones, k, dtype=kt)  # NaN after everything
        elif t.is_int and not t.is_unsigned:
            k = _b("xor", x if kt == I64 else Cast(x, dtype=U32), sign)  # (above its w bits: never read)
        elif t == dtypes.uint64:
            k = Bitcast(x, dtype=I64)
        else:
            k = Cast(x, dtype=U32)
        return _b("xor", k, ones) if self.sort.descending else k

    def decoded(self, k: Expr) -> Expr:
        """The sorted value whose exact key is ``k``, of the sort's type."""
        t = self.keyed()[0]
        v = self.unkey(k, t)
        return v if t == self.kdt else Cast(v, dtype=self.kdt)

    def unkey(self, k: Expr, t: DType) -> Expr:
        """The value of type ``t`` whose (exact) key is ``k``."""
        kt, w, sign, ones = self.key_consts(t)
        if self.sort.descending:
            k = _b("xor", k, ones)
        if t.is_float:
            positive = _b("lt", k, Const(0, dtype=I64)) if kt == I64 else _b("ge", k, sign)
            u = _b("xor", k, _b("sub", ones, _b("mul", Cast(positive, dtype=kt), _b("sub", ones, sign))))
            if w < 32:
                u = Cast(u, dtype=_uint(w))
            return Bitcast(u, dtype=t)
        if t.is_int and not t.is_unsigned:
            u = _b("xor", k, sign)
            return u if t == I64 else Cast(u, dtype=t)
        if t == dtypes.uint64:
            return Bitcast(k, dtype=t)
        return Cast(k, dtype=t)

    def radix(self, rkeys: str, counts: str, idx: str, bits: int) -> list[Stmt]:
        """Least significant digit first; the keys into ``rkeys[row, src]`` (exact ones: :meth:`decoded`), the
        positions into ``idx[row, src]`` (module docstring)."""
        row, n = self.row(), self.n
        t, at_ = self.keyed()
        kt, w, sign, ones = self.key_consts(t)
        self.passes = -(-w // bits)
        self.src = src = self.fresh("_src")
        mask = Const((1 << bits) - 1, dtype=kt)
        want_vals = any(c.which == "values" for c in self.sorts)
        fix = want_vals and t.is_float  # zeros and NaN written again from the row

        def digit(k: Expr, p: int) -> Expr:
            shift = bits * p
            if kt != I64:  # unsigned: a division by a power of two is a shift
                d = _b("floordiv", k, Const(1 << shift, dtype=kt)) if p else k
                return _add(_i64(p << bits), _as_int(_b("and", d, mask)))
            # int64 keys (every backend has them; not every one uint64): the digit's bits masked first, so the
            # floor division divides a number known not to be negative (C compilers make it a shift; the
            # signed floor division of the key itself measured 2.4x slower); the sign bit, in the last digit,
            # by a comparison
            top = min(bits, 63 - shift)
            d = _b("and", k, Const(((1 << top) - 1) << shift, dtype=I64))
            d = _b("floordiv", d, Const(1 << shift, dtype=I64)) if p else d
            if top < bits:
                d = _add(d, _mul(Cast(_b("lt", k, Const(0, dtype=I64)), dtype=I64), _i64(1 << top)))
            return _add(_i64(p << bits), d)

        def count(at: Expr) -> Stmt:
            return Write(counts, (*row, at), _b("add", Read(counts, (*row, at), dtype=COUNT), Const(1, dtype=COUNT)))

        j, x, k, c0 = self.fresh("_j"), self.fresh("_x"), self.fresh("_key"), self.fresh("_c")
        low, specials, nans = self.fresh("_low"), self.fresh("_specials"), self.fresh("_nans")
        xv, kv = _v(x, t), _v(k, kt)
        # 1. the counters cleared; the keys written, each pass's byte counted
        out: list[Stmt] = [Loop(c0, _i64(0), _i64(self.passes << bits), Write(counts, (*row, _v(c0)), Const(0, dtype=COUNT)),
                                "serial")]  # fmt: skip
        step: list[Stmt] = [Let(x, at_(j)), Let(k, self.key(xv, t)), Write(rkeys, (*row, _i64(0), _v(j)), kv)]
        if self.want_idx:
            step.append(Write(idx, (*row, _i64(0), _v(j)), _v(j)))
        step += [count(digit(kv, p)) for p in range(self.passes)]
        if fix:  # (only zeros and NaNs have the keys of +0.0 and of NaN)
            zero_key, nan_key = (_b("xor", sign, ones), Const(0, dtype=kt)) if self.sort.descending else (sign, ones)
            out.append(Declare(specials, I64, _i64(0)))
            step.append(Assign(specials, _add(_v(specials), _as_int(_b("or", _b("eq", kv, zero_key),
                                                                          _b("eq", kv, nan_key))))))  # fmt: skip
        out.append(Loop(j, _i64(0), n, Block(tuple(step)), "serial"))
        # 2. the passes: the counts to first slots, then each key to its byte's next slot (a pass whose byte is
        # the same for the whole row moves nothing: skipped)
        sv = _v(src)
        for p in range(self.passes):
            first, run, d, cnt, j2, k2, at, o = (
                self.fresh(x_) for x_ in ("_first", "_run", "_d", "_count", "_j", "_key", "_at", "_to")
            )
            k2v = _v(k2, kt)
            move: list[Stmt] = [
                Let(k2, Read(rkeys, (*row, sv, _v(j2)), dtype=kt)),
                Let(at, digit(k2v, p)),
                Let(o, Cast(Read(counts, (*row, _v(at)), dtype=COUNT), dtype=I64)),
                Write(counts, (*row, _v(at)), Cast(_add(_v(o), _i64(1)), dtype=COUNT)),
                Write(rkeys, (*row, _sub(_i64(1), sv), _v(o)), k2v),
            ]
            if self.want_idx:
                move.append(Write(idx, (*row, _sub(_i64(1), sv), _v(o)), Read(idx, (*row, sv, _v(j2)), dtype=I64)))
            base = _i64(p << bits)
            one_pass = Block((
                Declare(run, I64, _i64(0)),
                Loop(d, _i64(0), _i64(1 << bits), Block((
                    Let(cnt, Cast(Read(counts, (*row, _add(base, _v(d))), dtype=COUNT), dtype=I64)),
                    Write(counts, (*row, _add(base, _v(d))), Cast(_v(run), dtype=COUNT)),
                    Assign(run, _add(_v(run), _v(cnt))),
                )), "serial"),
                Loop(j2, _i64(0), n, Block(tuple(move)), "serial"),
                Assign(src, _sub(_i64(1), sv)),
            ))  # fmt: skip
            out += [
                Let(first, digit(Read(rkeys, (*row, sv, _i64(0)), dtype=kt), p)),
                If(_b("ne", Cast(Read(counts, (*row, _v(first)), dtype=COUNT), dtype=I64), n), one_pass),
            ]
        # 3. the zeros' and NaNs' keys again, from the row in its order: their exact keys (the values come back
        # from the keys as the results are stored)
        if fix:
            j4, x4, z, q = self.fresh("_j"), self.fresh("_x"), self.fresh("_z"), self.fresh("_q")
            x4v = _v(x4, t)
            xf = Cast(x4v, dtype=dtypes.float32) if t.is_half else x4v
            zero = Const(0.0, dtype=xf.dtype)
            if self.sort.descending:  # NaN first, then the positive numbers, the zeros
                z0, q0 = _add(_v(nans), _v(low)), _i64(0)
            else:  # the negative numbers, the zeros ... NaN last
                z0, q0 = _v(low), _sub(n, _v(nans))
            j5, x5 = self.fresh("_j"), self.fresh("_x")
            x5v = _v(x5, t)
            x5f = Cast(x5v, dtype=dtypes.float32) if t.is_half else x5v

            def put(at: str) -> Block:
                return Block((Write(rkeys, (*row, sv, _v(at)), self.key(x4v, t, exact=True)),
                              Assign(at, _add(_v(at), _i64(1)))))  # fmt: skip

            again = Block((
                Declare(low, I64, _i64(0)),
                Declare(nans, I64, _i64(0)),
                Loop(j5, _i64(0), n, Block((
                    Let(x5, at_(j5)),
                    Assign(low, _add(_v(low), _as_int(_b("gt" if self.sort.descending else "lt", x5f, zero)))),
                    Assign(nans, _add(_v(nans), _as_int(_b("ne", x5f, x5f)))),
                )), "serial"),
                Declare(z, I64, z0),
                Declare(q, I64, q0),
                Loop(j4, _i64(0), n, Block((
                    Let(x4, at_(j4)),
                    If(_b("eq", xf, zero), put(z)),
                    If(_b("ne", xf, xf), put(q)),
                )), "serial"),
            ))  # fmt: skip
            out.append(If(_b("gt", _v(specials), _i64(0)), again))
        return [Declare(src, I64, _i64(0)), If(_b("gt", n, _i64(0)), Block(tuple(out)))]

    # -- selection (pt.topk of a few) -------------------------------------------------------------------
    def select(self, keys: str, idx: str, slot: tuple[Expr, ...]) -> list[Stmt]:
        row, kdt, m = (*self.row(), *slot), self.kdt, self.m
        if isinstance(m, Const) and m.value == 0:
            return []
        j, held, x, pos, top, t, t2, worst = (
            self.fresh(n) for n in ("_j", "_held", "_x", "_at", "_top", "_t", "_t", "_worst")
        )
        last = _sub(m, _i64(1))
        xv, wv = _v(x, kdt), _v(worst, kdt)
        # the new value's place: after every kept value it does not come before (a prefix: the kept values are
        # in order), counted without a branch; then the kept values from there on move up one (the last one
        # kept drops out once k are held)
        not_before = _b("xor", before(xv, Read(keys, (*row, _v(t)), dtype=kdt), self.sort.descending),
                        Const(True, dtype=BOOL))  # fmt: skip
        to = _sub(_v(top), _v(t2))  # the slots from the top down
        shift: list[Stmt] = [Write(keys, (*row, to), Read(keys, (*row, _sub(to, _i64(1))), dtype=kdt))]
        if self.want_idx:
            shift.append(Write(idx, (*row, to), Read(idx, (*row, _sub(to, _i64(1))), dtype=I64)))
        place: list[Stmt] = [Write(keys, (*row, _v(pos)), xv)]
        if self.want_idx:
            place.append(Write(idx, (*row, _v(pos)), _v(j)))
        insert = Block((
            Declare(pos, I64, _i64(0)),
            Loop(t, _i64(0), _v(held), Assign(pos, _add(_v(pos), _as_int(not_before))), "serial"),
            Let(top, _min(_v(held), last)),
            Loop(t2, _i64(0), _sub(_v(top), _v(pos)), Block(tuple(shift)), "serial"),
            *place,
            Assign(held, _min(_add(_v(held), _i64(1)), m)),
            Assign(worst, Read(keys, (*row, last), dtype=kdt)),  # (the last kept value, once k are held)
        ))  # fmt: skip
        # a value is kept while fewer than k are, then when it comes before the last one kept
        beats = _b("or", _b("lt", _v(held), m), before(xv, wv, self.sort.descending))
        loop: Stmt = Loop(j, _i64(0), self.n, Block((Let(x, self.element(j)), If(beats, insert))), "serial")
        if not isinstance(m, Const):  # (k = 0 keeps nothing)
            loop = If(_b("gt", m, _i64(0)), loop)
        zero = Const(False if kdt.is_bool else 0.0 if kdt.is_float else 0, dtype=kdt)
        return [Declare(held, I64, _i64(0)), Declare(worst, kdt, zero), loop]

    # -- the stores ---------------------------------------------------------------------------------------
    def results(
        self, rows: dict[str, tuple[str, tuple[Expr, ...]]], decode: Callable[[Expr], Expr] | None = None
    ) -> list[Stmt]:
        """Each store at every position of the results' axis, the sort read from the scratch row ``rows[which]``
        (a buffer and the index of the row's half in it, if any); ``decode`` gives a value from a radix sort's key."""
        row = self.row()
        c = self.fresh(self.axis_name(self.sort.out))
        env = {**self.env, self.sort.out: c}
        writes: list[Stmt] = []
        for store, node in zip(self.g.stores, self.sorts):
            buf, half = rows[node.which]
            if node.which == "values" and decode is not None:
                known = {node: decode(Read(buf, (*row, *half, _v(c)), dtype=self.keyed_key_type()))}
            else:
                dt = self.kdt if node.which == "values" else I64
                known = {node: Read(buf, (*row, *half, _v(c)), dtype=dt)}
            index = tuple(self.index(ix, env) for ix in store.index)
            writes.append(Write(store.tensor, index, self.value(store.value, env, known)))
        return [Loop(c, _i64(0), self.m, Block(tuple(writes)), "serial")]


__all__ = ["SortNest", "SELECT_MAX", "RADIX_MIN", "before"]
