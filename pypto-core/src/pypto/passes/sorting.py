"""Lowering a sort nest (``pt.sort``, ``pt.argsort``, ``pt.topk``): the loop IR that orders each row.

A nest whose stores each store one :class:`~pypto.ir.nodes.Sort` whole (``materialize`` sees to it; the values
and the positions of one ``pt.topk`` share the nest) becomes, for every point of its other axes (the outermost
on threads), code over a row of scratch, written with the loop IR's plain statements so that every backend runs
it with no code of its own:

* **merge sort** (every sort, and a ``pt.topk`` that keeps many values): the row's values and their positions
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
from pypto.ir.nodes import Binary, Cast, Const, Expr, Sort, Where

I64 = dtypes.int64
BOOL = dtypes.bool_
SELECT_MAX = 64
"""``pt.topk`` keeps the values by selection (one read of the row, insertions into a sorted list of k) up to
this many, by merge sort beyond: an insertion moves up to k values, so a large k pays k per value that beats
the last one kept."""
MERGE_PASSES = 64  # an upper bound on the passes of a merge sort (rows of up to 2**64 values)


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
        s, m = self.sort, self.m
        static = isinstance(m, Const)
        select_only = s.top and static and m.value <= SELECT_MAX  # type: ignore[attr-defined]
        keys, idx = self.fresh("_keys"), self.fresh("_pos")
        order = "descending" if s.descending else "ascending"
        head = f"sort along {self.axis_name(s.axis)} ({order}, stable): "
        if select_only:  # a few values known at compile time: a row of k of scratch
            shape_row: tuple[Expr, ...] = (m,)
            self.slot: tuple[Expr, ...] = ()
            body = self.select(keys, idx) + self.results(keys, idx)
            algo = f"selection of {m.value} (insertions)"  # type: ignore[attr-defined]
        else:
            shape_row = (_i64(2), self.n)
            merge = self.merge(keys, idx)
            self.slot = (_v(self.src),)
            merged = merge + self.results(keys, idx)
            algo = "merge sort, runs doubling"
            body = merged
            if s.top and not static:  # k known at the call only: selection when it is small
                self.slot = (_i64(0),)
                selected = self.select(keys, idx) + self.results(keys, idx)
                body = [If(_b("le", m, _i64(SELECT_MAX)), Block(tuple(selected)), Block(tuple(merged)))]
                algo = f"selection of k (insertions) when k <= {SELECT_MAX}, else merge sort, runs doubling"
        nest: Stmt = Block(tuple(body))
        points: Expr = _i64(1)
        for a in self.outer:
            points = _mul(points, self.extent(a))
        work = _mul(_mul(points, self.n), _i64(16))
        parallel = self.g.parallel
        for a in reversed(self.outer):
            kind = "parallel" if a == parallel else "serial"
            nest = Loop(self.env[a], _i64(0), self.extent(a), nest, kind, (), work if kind == "parallel" else None)
        outer_shape = tuple(self.extent(a) for a in self.outer)
        stmt: Stmt = nest
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

    # -- selection (pt.topk of a few) -------------------------------------------------------------------
    def select(self, keys: str, idx: str) -> list[Stmt]:
        row, kdt, m = (*self.row(), *self.slot), self.kdt, self.m
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
    def results(self, keys: str, idx: str) -> list[Stmt]:
        """Each store at every position of the results' axis, the sort read from the scratch row."""
        row = self.row()
        c = self.fresh(self.axis_name(self.sort.out))
        env = {**self.env, self.sort.out: c}
        half = self.slot
        writes: list[Stmt] = []
        for store, node in zip(self.g.stores, self.sorts):
            buf, dt = (keys, self.kdt) if node.which == "values" else (idx, I64)
            known = {node: Read(buf, (*row, *half, _v(c)), dtype=dt)}
            index = tuple(self.index(ix, env) for ix in store.index)
            writes.append(Write(store.tensor, index, self.value(store.value, env, known)))
        return [Loop(c, _i64(0), self.m, Block(tuple(writes)), "serial")]


__all__ = ["SortNest", "SELECT_MAX", "before"]
