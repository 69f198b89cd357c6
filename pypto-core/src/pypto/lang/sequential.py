"""Sequential loops in a kernel: ``for t in pt.range(n)`` and ``while`` on a traced condition.

The AST pass (:mod:`pypto.lang.control`) turns such a loop into a call with its body as a function of the
loop variable and of the variables the body assigns. Here the body is traced once, on placeholders for
those variables' values at the start of a step (:class:`~pypto.ir.nodes.Carry`), and becomes one IR node
per carried variable: a :class:`~pypto.ir.nodes.Scan` with op :data:`~pypto.ir.ops.LOOP` along a new
axis of the kernel (one point per step, extent ``n``), whose combine function is the body:

* the body's parts that do not read a carried variable (``x[r, t]``, a coefficient ``a[r]``) are the step's
  values, computed at each point like any expression; the rest is the combine function over them and
  the carried values (arithmetic, functions and selects: the work done in order);
* the variables' values before the loop are the scan's ``init``; after the loop each variable is
  ``Reduce(LAST, scan, (t,))`` (its value after the last step, or before the loop when it runs no step);
* a store in the body at the loop's step (``y[r, t] = h``) stores the value the body computes at each
  step: one more component of the scan (a value computed from the carried ones, not carried itself);
  a store whose index does not mention the step keeps the last step's value, as Python's loop would.

A ``while`` loop on a traced condition runs, for each element, until its condition fails: a loop of as many
steps as its bound allows, each step ``state = where(cond(state), body(state), state)`` (once the condition
fails the state no longer changes, so neither does the condition). The bound is read from the condition: a
conjunct ``n < limit`` (or ``<=``) on a counter that starts at a Python int and grows by a positive Python
int each step, ``while pt.abs(z) < 2 and n < max_iter``. Without one the loop is a :class:`TracingError`.

The lowering runs the scan's steps in order, innermost, with the carried values in registers
(:mod:`pypto.passes.lower`); the reference backend runs a NumPy loop over the steps.
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from pypto.errors import SourceLoc, TracingError
from pypto.ir.affine import Affine
from pypto.ir.nodes import (
    Binary,
    Carry,
    Cast,
    Combine,
    Const,
    Expr,
    Index,
    Load,
    Reduce,
    Scalar,
    Scan,
    Store,
    Unary,
    Where,
    map_children,
    postorder,
)
from pypto.ir.ops import LAST, LOOP
from pypto.lang.context import active_tracer
from pypto.lang.location import user_loc
from pypto.lang.values import AffineValue, Axis, ExprProxy, IndexExpr, to_node


class range:  # noqa: N801 - pt.range, spelled as Python's
    """``pt.range(n)`` / ``pt.range(start, stop)``: the steps of a sequential loop in a kernel. Written as
    ``for t in pt.range(n):``, the body runs once per step, in order, for every point of the kernel's other
    axes, and variables it updates carry from one step to the next (``h = a * h + x[r, t]``: an IIR filter,
    an RNN cell). ``n`` is a Python int or a size (``pt.dim``, ``N - 1``). Outside a kernel, with ints, it is
    Python's ``range``."""

    __slots__ = ("start", "stop")

    def __init__(self, *args: Any):
        if len(args) not in (1, 2):
            raise TracingError(f"pt.range takes (stop) or (start, stop), got {len(args)} arguments", user_loc(),
                               "write pt.range(n) or pt.range(start, stop); the step is always 1")  # fmt: skip
        start, stop = (0, args[0]) if len(args) == 1 else args
        self.start = _bound(start, "start")
        self.stop = _bound(stop, "stop")

    def __repr__(self) -> str:
        return f"pt.range({self.start}, {self.stop})"

    def concrete(self) -> builtins.range | None:
        """Python's range when both bounds are numbers."""
        if self.start.is_const and self.stop.is_const:
            return builtins.range(self.start.const, self.stop.const)
        return None

    def __iter__(self) -> Any:
        r = self.concrete()
        if r is not None and active_tracer() is None:
            return iter(r)
        raise TracingError(
            f"{self!r} iterated outside a 'for' loop pypto rewrites: a sequential loop is written "
            "'for t in pt.range(n):' in a kernel whose source pypto can read; its body may break or continue "
            "only at the end of an if's branch ('if done: break'), and may not return",
            user_loc(),
            "write the loop as a for statement in the kernel's own source, with each break or continue the last "
            "statement of an if's branch; select updates with pt.where instead of returning",
        )


def _bound(v: Any, what: str) -> Affine:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return Affine.constant(int(v))
    if isinstance(v, AffineValue) and not v.affine.axis_set():
        return v.affine
    raise TracingError(
        f"pt.range: {what} must be a Python int or a size (pt.dim, or arithmetic on dims), got {v!r}",
        user_loc(3),
        "the number of steps is known when the kernel is called; a bound computed from data is a while loop "
        "on a traced condition",
    )


def _has_carry(e: Expr) -> bool:
    return any(isinstance(n, Carry) for n in postorder(e))


def _number(x: Any) -> bool:
    return isinstance(x, numbers.Number)


def _carriable(x: Any, traced: Callable[[Any], bool]) -> bool:
    return (traced(x) and not getattr(type(x), "__pypto_array__", False)) or (_number(x) and not isinstance(x, complex))


class _Loop:
    """One sequential loop being traced: its variables, axis and the tracer it records into."""

    def __init__(self, tracer: Any, values: tuple, names: Sequence[str], loc: SourceLoc,
                 traced: Callable[[Any], bool], undefined: Callable[[str, str], Any]) -> None:  # fmt: skip
        self.tracer = tracer
        self.values = values
        self.names = list(names)
        self.loc = loc
        self.undefined = undefined
        # the variables a step may carry: numbers and traced values (the rest is passed as it is)
        self.carried = [_carriable(v, traced) for v in values]
        self.inputs = tuple(
            ExprProxy(Carry(i, loc=loc)) if c else v for i, (v, c) in enumerate(zip(values, self.carried))
        )

    def trace(self, body: Callable[..., tuple], *first: Any) -> tuple[tuple, list[Store]]:
        """Run ``body`` on the placeholders; its stores are taken out of the kernel's list (placed by finish)."""
        tr = self.tracer
        s0, c0 = len(tr.stores), len(tr.scatters)
        outs = body(*first, *self.inputs)
        stores, scatters = tr.stores[s0:], tr.scatters[c0:]
        del tr.stores[s0:], tr.scatters[c0:]
        if scatters:
            raise TracingError(
                "a scatter inside a sequential loop: a kernel's scatters run after its stores, not step by step",
                scatters[0].loc or self.loc,
                "store each step's value (y[r, t] = v) in the loop and scatter from y in a second kernel",
            )
        return tuple(outs), stores

    def state(self, outs: tuple) -> list[int]:
        """The variables the body changes (the loop's state), checked."""
        state = []
        for i, (name, v, inp, out) in enumerate(zip(self.names, self.values, self.inputs, outs)):
            if not self.carried[i]:
                if out is v or getattr(type(v), "_pt_undefined", False):
                    continue  # unchanged, or a step's local (assigned in the body only: undefined after the loop)
                if not _same(out, v):
                    raise TracingError(
                        f"variable '{name}' changes in a sequential loop but is not a number or traced value "
                        f"({type(v).__name__}): a loop carries numbers and kernel values from step to step",
                        self.loc,
                        "carry numbers or traced values only; compute other things before the loop",
                    )
                continue
            if out is inp:
                continue
            if not _carriable(out, lambda x: isinstance(x, (ExprProxy, AffineValue))):
                raise TracingError(
                    f"variable '{name}' is {type(out).__name__} after a step of a sequential loop: a loop carries "
                    "numbers and kernel values",
                    self.loc,
                    "assign it a number or a traced value in the loop",
                )
            state.append(i)
        return state

    def finish(self, axis: int, extent: Affine, outs: tuple, stores: list[Store], state: list[int]) -> tuple:
        """Record the loop's stores, and return the variables' values after it."""
        slot = {i: j for j, i in enumerate(state)}

        def fixed(e: Expr) -> Expr:  # Carry of a variable the body does not change: its value before the loop
            if isinstance(e, Carry):
                j = slot.get(e.slot)
                return Carry(j, loc=e.loc) if j is not None else to_node(self.values[e.slot])
            return map_children(e, fixed)  # type: ignore[return-value]

        step = [fixed(to_node(outs[i])) for i in state]
        # a stored value that is a variable's new value is that variable; any other that reads the carried ones
        # (or is stored at every step into one element) is a value of its own, computed at each step
        stored = {id(s): fixed(s.value) for s in stores}
        carrying = [s for s in stores if (_has_carry(s.value) or not _at_step(s, axis)) and stored[id(s)] not in step]
        k = len(step) + len(carrying)
        exprs = step + [stored[id(s)] for s in carrying]
        elements: list[Expr] = []

        def split(e: Expr) -> Expr:  # the step's values: the largest parts without a carried value
            if not _has_carry(e):
                if isinstance(e, (Const, Scalar)):
                    return e
                if e not in elements:
                    elements.append(e)
                return Carry(k + elements.index(e), dtype=None, loc=e.loc)
            if isinstance(e, Carry):
                return e
            if not isinstance(e, (Binary, Where, Unary, Cast)):
                raise TracingError(
                    f"a sequential loop's carried value is read by {type(e).__name__.lower()}: a loop's body may "
                    "compute with its carried values through arithmetic, functions and selects only (a reduction, "
                    "an index or a nested loop over them is not supported yet)",
                    e.loc or self.loc,
                    "carry scalars per point: one recurrence per element of the kernel's other axes",
                )
            return map_children(e, split)  # type: ignore[return-value]

        exprs = [split(e) for e in exprs]
        if not elements:
            elements.append(Index(Affine.axis(axis), loc=self.loc))
        init = tuple(to_node(self.values[i]) for i in state) + tuple(Const(0, weak=True) for _ in carrying)
        for i, v in zip(state, init):
            if _has_carry(v):
                raise TracingError(
                    f"variable '{self.names[i]}' starts a sequential loop from another loop's carried value: "
                    "loops nested in a sequential loop's body are not supported yet",
                    self.loc,
                    "write the inner recurrence as its own loop after the outer one, or unroll it with range(n)",
                )
        combine = Combine(tuple(exprs))

        def scan(j: int) -> Scan:
            return Scan(LOOP, elements[0], axis, False, combine, tuple(elements[1:]), j, init, loc=self.loc)

        for s in stores:
            if stored[id(s)] in step:
                value: Expr = scan(step.index(stored[id(s)]))
            elif s in carrying:
                value = scan(len(step) + carrying.index(s))
            else:
                value = s.value
            if not _at_step(s, axis):  # overwritten at every step: the last step's value stays
                value = Reduce(LAST, value, (axis,), loc=s.loc)
                if not (extent.is_const and extent.const > 0):  # no step: the element is not written
                    ran = Binary("gt", Index(extent), Const(0, weak=True), loc=s.loc)
                    value = Where(ran, value, Load(s.tensor, s.index, loc=s.loc), loc=s.loc)
            self.tracer.record_store(s.tensor, s.index, value, s.loc)
        after = list(self.values)
        for i, (name, v, out) in enumerate(zip(self.names, self.values, outs)):
            if i in slot:
                after[i] = ExprProxy(Reduce(LAST, scan(slot[i]), (axis,), loc=self.loc))
            elif getattr(type(v), "_pt_undefined", False) and out is not v:
                after[i] = self.undefined(name, "it is assigned only inside a sequential loop (pt.range or a while "
                                          "on a traced value), which may run no step")  # fmt: skip
        return tuple(after)


def _at_step(s: Store, axis: int) -> bool:
    return any(axis in ix.axis_set() for ix in s.index)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - anything that cannot say it is equal is not
        return False


def for_loop(seq: range, body: Callable[..., tuple], values: tuple, names: Sequence[str], target: str,
             loc: SourceLoc, traced: Callable[[Any], bool], undefined: Callable[[str, str], Any]) -> tuple:  # fmt: skip
    """``for target in seq: body`` in a kernel: the loop's variables after it."""
    tracer = active_tracer()
    r = seq.concrete()
    if tracer is None:
        if r is None:
            raise TracingError(f"{seq!r}: a loop over a symbolic size outside a kernel", loc,
                               "in @pt.jit, loop over a Python range (unrolled) or use pt.associative_scan")  # fmt: skip
        for v in r:
            values = body(v, *values)
        return values
    extent = seq.stop - seq.start
    axis = tracer.loop_axis(target, extent, repr(seq), loc)
    step = Axis(axis) if seq.start == Affine.constant(0) else IndexExpr(Affine.axis(axis) + seq.start)
    lp = _Loop(tracer, values, names, loc, traced, undefined)
    outs, stores = lp.trace(body, step)
    return lp.finish(axis, extent, outs, stores, lp.state(outs))


def while_loop(test: Callable[..., Any], body: Callable[..., tuple], values: tuple, names: Sequence[str],
               loc: SourceLoc, traced: Callable[[Any], bool], truth: Callable[[Any], Any],
               undefined: Callable[[str, str], Any]) -> tuple:  # fmt: skip
    """``while test: body`` on a traced condition in a kernel (module docstring)."""
    tracer = active_tracer()
    if tracer is None:
        raise TracingError("a 'while' loop on a traced array: @pt.jit functions trace whole arrays, whose "
                           "elements would need different numbers of steps", loc,
                           "write the loop in a @pt.kernel (one loop per element), or bound it with a Python "
                           "range and select the update with pt.where")  # fmt: skip
    lp = _Loop(tracer, values, names, loc, traced, undefined)
    cond = to_node(truth(test(*lp.inputs)))
    outs, stores = lp.trace(body)
    if stores:
        raise TracingError(
            "a store inside a 'while' loop on a traced condition: each element runs its own number of steps",
            stores[0].loc or loc,
            "carry the value in a variable and store it after the loop",
        )
    bound = _bound_steps(cond, outs, lp)
    if bound is None:
        raise TracingError(
            "a 'while' loop on a traced condition needs a bound on its steps: each element runs until its "
            "condition fails, in one loop of at most that many steps",
            loc,
            "count the steps and bound them in the condition: n = 0 before the loop, 'while <cond> and n < "
            "max_iter:', n += 1 in the body (max_iter a Python int)",
        )
    steps, counter = bound
    state = lp.state(outs)
    if steps == 0 or not state:
        return values
    # within that many steps the counter's own test holds while the rest does: the step tests the rest only
    cond = _without(cond, counter)
    selected = list(outs)
    for i in state:
        if cond is not None:
            selected[i] = ExprProxy(Where(cond, to_node(outs[i]), Carry(i, loc=loc), loc=loc))
    axis = tracer.loop_axis("step", Affine.constant(steps), f"the bound of the while loop ({steps} steps)", loc)
    return lp.finish(axis, Affine.constant(steps), tuple(selected), [], state)


def _without(cond: Expr, part: Expr) -> Expr | None:
    """``cond`` (a conjunction) without its conjunct ``part``; None when nothing is left."""
    if cond is part:
        return None
    if isinstance(cond, Binary) and cond.op == "and":
        a, b = _without(cond.a, part), _without(cond.b, part)
        if a is None or b is None:
            return a if b is None else b
        return cond if (a is cond.a and b is cond.b) else Binary("and", a, b, loc=cond.loc)
    return cond


def _bound_steps(cond: Expr, outs: tuple, lp: _Loop) -> tuple[int, Expr] | None:
    """The most steps a while loop can run and the conjunct that says so: ``n < limit`` / ``n <= limit`` in its
    condition on a counter ``n`` (a Python int before the loop, ``n + c`` after each step, ``c`` a positive
    Python int); None without one."""
    conjuncts, stack = [], [cond]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op == "and":
            stack += [e.a, e.b]
        else:
            conjuncts.append(e)
    best = None
    for e in conjuncts:
        if not isinstance(e, Binary) or e.op not in ("lt", "le", "gt", "ge"):
            continue
        op, a, b = e.op, e.a, e.b
        if op in ("gt", "ge"):  # limit > n
            op, a, b = {"gt": "lt", "ge": "le"}[op], b, a
        if not (isinstance(a, Carry) and isinstance(b, Const) and isinstance(b.value, int)):
            continue
        start = _least_int(lp.values[a.slot])
        if start is None:
            continue
        grow = _increment(to_node(outs[a.slot]) if lp.carried[a.slot] else None, a.slot)
        if grow is None:
            continue
        span = b.value - int(start)
        n = math.ceil(span / grow) if op == "lt" else span // grow + 1
        n = max(0, n)
        if best is None or n < best[0]:
            best = (n, e)
    return best


def _least_int(v: Any) -> int | None:
    """The least value a counter can start a while loop's traced steps with: a Python int, or a select of such
    (after Python's first steps of a loop with a ``break``, ``n`` is ``where(stop, 0, 1)``); None otherwise."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    e = v.node if isinstance(v, ExprProxy) else v
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Where):
        a, b = _least_int(e.a), _least_int(e.b)
        return None if a is None or b is None else builtins.min(a, b)
    return None


def _increment(e: Expr | None, slot: int) -> int | None:
    """``c`` when ``e`` is ``Carry(slot) + c`` with ``c`` a positive Python int, or that increment under a
    condition, the counter unchanged otherwise (a body after a ``break``'s test runs under one: a step that
    does not count is one whose flag ends the loop)."""
    if isinstance(e, Where) and isinstance(e.b, Carry) and e.b.slot == slot:
        return _increment(e.a, slot)
    if not isinstance(e, Binary) or e.op != "add":
        return None
    for x, c in ((e.a, e.b), (e.b, e.a)):
        if isinstance(x, Carry) and x.slot == slot and isinstance(c, Const) and isinstance(c.value, int) and \
                not isinstance(c.value, bool) and c.value > 0:  # fmt: skip
            return c.value
    return None
