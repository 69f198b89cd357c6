"""The ``cpu-simd`` target's ``while_lanes`` pass: per-point ``while`` loops run side by side in SIMD lanes.

A ``while`` on a per-element condition (the Mandelbrot escape loop, Newton iterations with a ``break``) lowers to
one serial loop of steps per point, its step under ``if (cond)`` (:mod:`pypto.passes.lower`): scalar code, one
point after another. When those points are the iterations of a loop (an inner serial one, or the parallel one:
its blocks of points then go to the threads)::

    for j in a..b:
        var s = init(j) ...
        for step in 0..S:
            let v = f(j) ...                    (values that do not read the state)
            if cond(s, v):
                let ... ; s = next(s, v) ...
        out[.., j] = g(s) ...

the pass runs ``L`` points at a time (two vectors of the state's widest type): their states in small arrays (and
the step's values that do not change from step to step, computed once), each step one vector loop over the lanes that updates every lane where its condition holds
(``s[l] = where(cond, next, s)``) and notes whether any lane still runs; the steps stop doing work once none
does. A lane past the end of the loop recomputes its last point and stores nothing. Each point takes exactly the
steps it took alone (the same operations in the same order): results are bit for bit the scalar loop's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pypto import dtypes
from pypto.dtypes import int32, int64
from pypto.ir.loops import Alloc, Assign, Block, Declare, If, Let, Loop, LoopKernel, Read, Stmt, Var, Write, walk
from pypto.ir.names import NameGen
from pypto.ir.nodes import Binary, Cast, Const, Expr, Where, children
from pypto.targets.machine import host_cpu


def _flat(s: Stmt) -> list[Stmt]:
    return [x for b in s.body for x in _flat(b)] if isinstance(s, Block) else [s]


def _reads(e: Expr, names: set[str]) -> bool:
    """Whether ``e`` reads any of ``names`` (in the indices of its buffer reads too)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Var) and n.name in names:
            return True
        stack.extend(children(n))
        if isinstance(n, Read):
            stack.extend(n.index)
    return False


_POINT_LOOPS = ("serial", "vector", "parallel", "parallel_vector")  # (a parallel one: its blocks on threads)


class _Form:
    """The parts of a point loop whose steps are a while loop's (see the module docstring), or why not."""

    def __init__(self, loop: Loop):
        self.ok = False
        body = _flat(loop.body)
        k = next((i for i, s in enumerate(body) if isinstance(s, Loop)), None)
        if k is None or loop.kind not in _POINT_LOOPS or loop.reductions or loop.scans:
            return
        self.inits = body[:k]
        self.steps: Loop = body[k]  # type: ignore[assignment]
        self.tail = body[k + 1 :]
        if not all(isinstance(s, Declare) for s in self.inits) or not self.inits:
            return
        self.state = {s.name: s.dtype for s in self.inits}  # type: ignore[union-attr]
        if any(_reads(s.init, set(self.state)) for s in self.inits):  # type: ignore[union-attr]
            return  # (a state started from another's value: the lanes keep them in arrays, not variables)
        if any(dt.is_half or dt.is_complex for dt in self.state.values()):
            return
        if not all(isinstance(s, (Let, Write)) for s in self.tail):
            return
        if any(isinstance(s, Write) and s.buffer in self._written_before() for s in self.tail):
            return
        steps = self.steps
        inner = _flat(steps.body)
        if steps.kind != "serial" or steps.reductions or steps.scans or not inner or not isinstance(inner[-1], If):
            return
        self.values, guard = inner[:-1], inner[-1]
        if guard.orelse is not None or not all(isinstance(s, Let) for s in self.values):  # type: ignore[union-attr]
            return
        names = set(self.state)
        if any(_reads(s.value, names) for s in self.values):  # type: ignore[union-attr]
            return
        self.cond = guard.cond  # type: ignore[union-attr]
        self.update = _flat(guard.then)  # type: ignore[union-attr]
        if not all(isinstance(s, (Let, Assign)) for s in self.update):
            return
        if any(isinstance(s, Assign) and s.name not in names for s in self.update):
            return
        if any(_reads(b, names | {steps.var, loop.var}) for b in (steps.start, steps.stop)):
            return
        self.ok = True

    def _written_before(self) -> set[str]:
        return {s.buffer for s in walk(Block(tuple(self.inits))) if isinstance(s, Write)}


def _lanes(loop: Loop, form: _Form, fresh: Callable[[str], str]) -> Stmt:
    """The point loop ``loop`` over blocks of ``L`` lanes (module docstring)."""
    widest = max(dt.itemsize for dt in form.state.values())
    n_lanes = 2 * host_cpu().lanes(widest)
    L = Const(n_lanes, dtype=int64)
    i64 = int64
    b, j0, cnt, lane, go = fresh("_lb"), fresh("_j0"), fresh("_lanes"), fresh("_l"), fresh("_running")
    arrays = {name: fresh(f"{name}_lanes") for name in form.state}
    lv = Var(lane, dtype=i64)
    count = Binary("sub", loop.stop, loop.start, dtype=i64)
    blocks = Binary("floordiv", Binary("add", count, Const(n_lanes - 1, dtype=i64), dtype=i64), L, dtype=i64)
    j0v = Var(j0, dtype=i64)
    last = Binary("sub", loop.stop, Const(1, dtype=i64), dtype=i64)
    point = Let(loop.var, Binary("minimum", Binary("add", j0v, lv, dtype=i64), last, dtype=i64))

    def load_state() -> list[Stmt]:
        return [Let(name, Read(arrays[name], (lv,), dtype=dt)) for name, dt in form.state.items()]

    # the step's values that do not change from step to step: once (the same for every lane) or once per lane
    once: list[Stmt] = []
    per_lane: dict[str, Let] = {}
    each: list[Stmt] = []
    moving = {form.steps.var}
    for v in form.values:
        assert isinstance(v, Let)
        if _reads(v.value, moving):
            each.append(v)
            moving.add(v.name)
        elif _reads(v.value, {loop.var, *per_lane}):
            per_lane[v.name] = v
        else:
            once.append(v)
    kept = {name: fresh(f"{name}_lanes") for name in per_lane}
    # the states' first values (and the values kept per lane), one per lane
    init: list[Stmt] = [point, *per_lane.values()]
    init += [Write(arrays[s.name], (lv,), s.init) for s in form.inits]  # type: ignore[union-attr]
    init += [Write(kept[name], (lv,), Var(name, dtype=v.value.dtype)) for name, v in per_lane.items()]
    first = Loop(lane, Const(0, dtype=i64), L, Block(tuple(init)), "vector")
    # one step of every lane: the update where the lane's condition holds; whether any lane still runs
    c = fresh("_go")
    step: list[Stmt] = [point, *(Let(n, Read(kept[n], (lv,), dtype=v.value.dtype)) for n, v in per_lane.items())]
    step += [*each, *load_state(), Let(c, form.cond)]
    cv = Var(c, dtype=dtypes.bool_)
    new: dict[str, Expr] = {}
    for s in form.update:
        if isinstance(s, Let):
            step.append(s)
        else:
            new[s.name] = s.value  # type: ignore[union-attr]
    for name, dt in form.state.items():
        if name in new:
            step.append(Write(arrays[name], (lv,), Where(cv, new[name], Var(name, dtype=dt), dtype=dt)))
    step.append(Assign(go, Binary("maximum", Var(go, dtype=int32), Cast(cv, dtype=int32), dtype=int32)))
    lanes_step = Loop(lane, Const(0, dtype=i64), L, Block(tuple(step)), "vector", reductions=((go, "max"),))
    running = Binary("ne", Var(go, dtype=int32), Const(0, dtype=int32), dtype=dtypes.bool_)
    body = Block((Assign(go, Const(0, dtype=int32)), lanes_step))
    steps = replace(form.steps, body=If(running, body))
    # the points' results, lane by lane, for the lanes inside the loop
    exact = Let(loop.var, Binary("add", j0v, lv, dtype=i64))
    tail = Loop(lane, Const(0, dtype=i64), Var(cnt, dtype=i64), Block((exact, *load_state(), *form.tail)), "vector")
    inner: Stmt = Block((first, Declare(go, int32, Const(1, dtype=int32)), steps, tail))
    for name, dt in form.state.items():
        inner = Alloc(arrays[name], dt, (L,), inner, local=True)
    for name, v in per_lane.items():
        inner = Alloc(kept[name], v.value.dtype, (L,), inner, local=True)  # type: ignore[arg-type]
    start = Binary("add", loop.start, Binary("mul", Var(b, dtype=i64), L, dtype=i64), dtype=i64)
    rest = Binary("sub", loop.stop, j0v, dtype=i64)
    block = Block((Let(j0, start), Let(cnt, Binary("minimum", L, rest, dtype=i64)), *once, inner))
    if loop.kind.startswith("parallel"):  # the blocks of points on threads, as the points were
        return replace(loop, var=b, start=Const(0, dtype=i64), stop=blocks, body=block, kind="parallel")
    return Loop(b, Const(0, dtype=i64), blocks, block, "serial")


def _names(k: LoopKernel) -> set[str]:
    out: set[str] = {a.name for a in k.args}
    for s in walk(k.body):
        for attr in ("name", "var", "buffer"):
            v = getattr(s, attr, None)
            if isinstance(v, str):
                out.add(v)
    return out


def while_lanes(k: LoopKernel) -> LoopKernel:
    """Run the per-point while loops of inner serial loops in SIMD lanes (see the module docstring)."""
    fresh = NameGen(_names(k)).fresh

    def go(s: Stmt) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(go(b) for b in s.body))
        if isinstance(s, Loop):
            if s.kind in _POINT_LOOPS:
                form = _Form(s)
                if form.ok:
                    return _lanes(s, form, fresh)
            return replace(s, body=go(s.body))
        if isinstance(s, Alloc):
            return replace(s, body=go(s.body))
        if isinstance(s, If):
            return replace(s, then=go(s.then), orelse=None if s.orelse is None else go(s.orelse))
        return s

    return replace(k, body=go(k.body))


__all__ = ["while_lanes"]
