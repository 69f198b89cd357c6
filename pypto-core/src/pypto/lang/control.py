"""Control flow on traced values: the front ends' AST pass.

Both front ends trace: they call the user's function on symbolic values (a kernel's elements, a jit
function's arrays), so Python's own ``if``, ``and``, ``or`` and ``not`` would need a value's truth, which
tracing does not know. Before a function is first traced, :func:`rewrite` parses its source and turns
those constructs into calls of the functions below, which keep Python's meaning for concrete values
(a Python or NumPy bool, a shape) and build a select for traced ones:

* ``if c: ... else: ...`` becomes two local functions (the branches) over the variables either branch
  assigns, and ``x, y = cond(c, then, orelse, (x, y), ...)``. A concrete ``c`` runs one branch, as Python
  does; a traced ``c`` runs both (tracing each) and selects every variable they assign differently:
  ``pt.where(c, x_then, x_else)``. ``elif`` is an ``if`` in the ``else`` branch.
* in a sequential loop (``for t in pt.range(n)``, ``while``), a ``break`` or ``continue`` ending an ``if``'s
  branch becomes a flag the loop carries (:func:`_flagged`): the test kept in a variable, the rest of the step
  under ``if not test``, and after a ``break`` every later step under ``if live``, so the ifs are selects too;
* ``a and b``, ``a or b``, ``not a`` and ``a if c else b`` on traced values are the elementwise
  ``&``, ``|``, ``== False`` and ``pt.where`` (on booleans: a traced number ``x`` stands for ``x != 0``);
  on concrete ones they short-circuit as in Python.

A store in a branch on a traced condition writes only where the branch is taken: it becomes
``y[i] = where(c, v, y[i])`` (the element keeps its value elsewhere), and a scatter-add adds
``where(c, v, 0)``. A scatter max/min or unique store in such a branch, a branch that returns, breaks or
continues, and a ``while`` loop on a traced condition are a :class:`~pypto.errors.TracingError` naming the
line and what to write instead. Both branches of a
traced ``if`` are evaluated at every point (a select): an index read in a branch is bounds-checked even
where the branch is not taken.

The rewritten function is compiled from the original file's lines (tracebacks and error locations point at
the user's source) with the original's globals and closure cells; a function without readable source (typed
at a prompt, built by ``exec``) is traced as it is, and control flow on traced values in it stays an error.
"""

from __future__ import annotations

import ast
import builtins
import contextvars
import functools
import inspect
import itertools
import operator
import os
import sysconfig
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto.errors import SourceLoc, TracingError
from pypto.lang.source import function_tree

_RT = "__pt_control"  # the name the rewritten code reaches this module by (a closure cell of its own)
_PREFIX = "__pt_"  # names the pass introduces (never a user's variable)
_FLAG = "__ptflag_"  # variables the pass introduces that a loop carries (a break's flag)


# -- run time ---------------------------------------------------------------------------------------------------
class Undefined:
    """A variable with no value: unassigned before an ``if`` and by the branch that ran, or (``why``) assigned
    by one branch only of an ``if`` on a traced value. Using it raises; passing it along does not."""

    __slots__ = ("name", "why", "loc")
    _pt_undefined = True  # what to_node / the array layer's operands look for (no import of this module)

    def __init__(self, name: str, why: str | None = None, loc: SourceLoc | None = None):
        self.name = name
        self.why = why
        self.loc = loc

    def __repr__(self) -> str:
        return f"<undefined variable {self.name!r}>"

    def _fail(self, *_: Any, **__: Any) -> Any:
        if self.why is None:
            raise NameError(f"name {self.name!r} is not defined (it is assigned in a branch that did not run)")
        raise TracingError(f"'{self.name}' has no value here: {self.why}", self.loc,
                           f"give {self.name} a value before the if (or assign it in both branches)")  # fmt: skip

    __bool__ = __call__ = __getitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __float__ = __int__ = _fail

    def __getattr__(self, _name: str) -> Any:
        self._fail()


def local(scope: dict[str, Any], name: str) -> Any:
    """The value of ``name`` in ``scope`` (a ``locals()``), or :class:`Undefined`."""
    return scope[name] if name in scope else Undefined(name)


def traced(x: Any) -> bool:
    """Whether ``x`` is a value tracing does not know (a kernel expression, axis or dim, or a jit array)."""
    from pypto.lang.values import _Operators

    if getattr(type(x), "__pypto_array__", False):  # a jit array; a runtime scalar's value decides, as in
        return not x.weak  # Python (the program is then specific to it)
    return isinstance(x, _Operators)


def truth(x: Any) -> Any:
    """A traced value as a boolean: itself when it is one, else ``x != 0`` (Python's truth of a number)."""
    if getattr(type(x), "__pypto_array__", False):
        return x if x.dtype.name == "bool" else x != 0
    from pypto.lang.functions import _boolean
    from pypto.lang.values import ExprProxy

    if isinstance(x, ExprProxy) and _boolean(x.node):
        return x
    return x != 0


def and_(a: Any, rest: Callable[[], Any]) -> Any:
    """``a and rest()``: Python's when ``a`` is concrete, else the elementwise ``&`` of both truths."""
    if not traced(a):
        return a and rest()
    return truth(a) & truth(rest())


def or_(a: Any, rest: Callable[[], Any]) -> Any:
    """``a or rest()``: Python's when ``a`` is concrete, else the elementwise ``|`` of both truths."""
    if not traced(a):
        return a or rest()
    return truth(a) | truth(rest())


def not_(a: Any) -> Any:
    """``not a``: Python's when ``a`` is concrete, else ``truth(a) == False``."""
    if not traced(a):
        return not a
    return truth(a) == False  # noqa: E712 - an elementwise comparison, not a truth test


def ifexp(c: Any, then: Callable[[], Any], orelse: Callable[[], Any]) -> Any:
    """``then() if c else orelse()``: Python's when ``c`` is concrete, else ``pt.where`` of both."""
    if not traced(c):
        return then() if c else orelse()
    return _select(truth(c), then(), orelse(), "the value of 'x if c else y'", None)


def cond(c: Any, then: Callable[..., tuple], orelse: Callable[..., tuple], values: tuple, names: Sequence[str],
         file: str, line: int) -> tuple:  # fmt: skip
    """An ``if`` statement: the branch ``c`` picks (concrete ``c``), or both branches traced and each variable
    either assigns selected by ``c``. ``values`` are the variables' values before the ``if``."""
    if not traced(c):
        return then(*values) if c else orelse(*values)
    loc = _loc(file, line)
    test = truth(c)
    tracer = _tracer()
    a, then_writes = _branch(tracer, then, values)
    b, else_writes = _branch(tracer, orelse, values)
    if any(then_writes) or any(else_writes):
        _masked_writes(tracer, test, then_writes, else_writes, loc)
    return tuple(_select(test, x, y, f"variable '{n}'", loc) for n, x, y in zip(names, a, b))


def _tracer() -> Any:
    from pypto.lang.context import active_tracer

    return active_tracer()


def _branch(tracer: Any, fn: Callable[..., tuple], values: tuple) -> tuple[tuple, tuple[list, list]]:
    """Trace one branch; its stores and scatters are taken out of the kernel's lists (put back masked)."""
    if tracer is None:
        return fn(*values), ([], [])
    s0, c0 = len(tracer.stores), len(tracer.scatters)
    out = fn(*values)
    stores, scatters = tracer.stores[s0:], tracer.scatters[c0:]
    del tracer.stores[s0:], tracer.scatters[c0:]
    return out, (stores, scatters)


def _both_branches(taken: Any, then_stores: list, else_stores: list) -> dict[tuple, Any]:
    """The elements both branches store once each, into tensors neither branch reads: stored once, the value
    ``where(c, then's, else's)`` (no read of the old value: the element is written on every path)."""
    from pypto.ir.nodes import Gather, Load, Where, postorder

    def count(stores: list) -> dict[tuple, list]:
        out: dict[tuple, list] = {}
        for s in stores:
            out.setdefault((s.tensor, s.index), []).append(s)
        return out

    then_by, else_by = count(then_stores), count(else_stores)
    read = {n.tensor for s in (*then_stores, *else_stores) for n in postorder(s.value) if isinstance(n, (Load, Gather))}
    return {
        key: Where(taken, then_by[key][0].value, else_by[key][0].value, loc=then_by[key][0].loc)
        for key in then_by.keys() & else_by.keys()
        if len(then_by[key]) == 1 and len(else_by[key]) == 1 and key[0] not in read
    }


def _masked_writes(tracer: Any, test: Any, then_writes: tuple[list, list], else_writes: tuple[list, list],
                   loc: SourceLoc) -> None:  # fmt: skip
    """A traced branch's stores, made to write only where it is taken: ``y[i] = where(c, v, y[i])`` (the element
    keeps its value elsewhere), and its scatter-adds to add ``where(c, v, 0)``: the stores of the if-branch, of
    the else-branch, then the scatters of each (a kernel's scatters run after its stores). An element both
    branches store (and neither reads) is one store of the selected value."""
    from dataclasses import replace

    from pypto.ir.nodes import Binary, Const, Load, Where
    from pypto.lang.values import to_node

    taken = to_node(test)
    branches = ((taken, then_writes), (Binary("eq", taken, Const(False), loc=loc), else_writes))
    merged = _both_branches(taken, then_writes[0], else_writes[0])
    for cond, (stores, _) in branches:  # the stores of both branches, then the scatters
        for s in stores:
            key = (s.tensor, s.index)
            if key in merged:  # stored by both branches: one store of the selected value, in the if-branch's place
                if cond is taken:
                    tracer.stores.append(replace(s, value=merged[key]))
                continue
            if tracer.scatters:
                raise TracingError(
                    f"a store into '{s.tensor}' in a branch follows a scatter; a kernel's scatters run after "
                    "its stores",
                    s.loc,
                    "write the stores first, then the scatters (or use two kernels)",
                )
            old = Load(s.tensor, s.index, loc=s.loc)
            tracer.stores.append(replace(s, value=Where(cond, s.value, old, loc=s.loc)))
    for cond, (_, scatters) in branches:
        for sc in scatters:
            if sc.op != "add":
                what = "pt.scatter(..., unique=True)" if sc.op == "set" else f"pt.scatter_{sc.op}"
                raise TracingError(
                    f"{what} inside an 'if' on a traced value: a branch's scatter-adds add 0 where the branch "
                    "is not taken, but this scatter has no such neutral value here",
                    sc.loc or loc,
                    f"select the value to scatter with pt.where and call {what} after the if",
                )
            tracer.scatters.append(replace(sc, value=Where(cond, sc.value, Const(0, weak=True), loc=sc.loc)))


def concrete(c: Any, file: str, line: int, what: str) -> Any:
    """The test of an ``if`` that the pass leaves as it is (a branch that returns, breaks or continues)."""
    if traced(c):
        raise TracingError(
            f"an 'if' on a traced value whose branch {what}: the branches of such an if become a select, "
            "and a select cannot leave the function or the loop",
            _loc(file, line),
            "assign the value in both branches and return (or store) it after the if, or use pt.where",
        )
    return c


def loop_test(c: Any, file: str, line: int) -> Any:
    """The test of a ``while`` loop the pass leaves as it is (one that breaks, continues, returns or has an
    ``else``): Python's for a concrete value, an error for a traced one."""
    if traced(c):
        raise TracingError(
            "a 'while' loop on a traced value whose body returns, or breaks or continues other than at the end "
            "of an if's branch, or that has an else: each element runs its own number of steps, and such a loop "
            "cannot stop one element's steps",
            _loc(file, line),
            "end an if's branch with the break ('if done: break'), or put the stopping condition in the while's "
            "test (while cond and n < max_iter:); select values with pt.where",
        )
    return c


def loop(it: Any, body: Callable[..., tuple], values: tuple, names: Sequence[str], target: str, file: str,
         line: int) -> tuple:  # fmt: skip
    """A ``for`` loop over ``pt.range(...)`` (anything else runs as Python's loop): the variables the body
    assigns, after the loop (:mod:`pypto.lang.sequential`)."""
    from pypto.lang.sequential import for_loop
    from pypto.lang.sequential import range as seq_range

    if not isinstance(it, seq_range):
        for v in it:
            values = body(v, *values)
        return values
    return for_loop(it, body, values, names, target, _loc(file, line), traced, Undefined)


def while_(test: Callable[..., Any], body: Callable[..., tuple], values: tuple, names: Sequence[str], file: str,
           line: int) -> tuple:  # fmt: skip
    """A ``while`` loop: Python's while the test is concrete; from the first traced test on, one sequential loop
    per element, up to the bound its test states (:func:`pypto.lang.sequential.while_loop`)."""
    while True:
        c = test(*values)
        if traced(c):
            break
        if not c:
            return values
        values = body(*values)
    from pypto.lang.sequential import while_loop

    return while_loop(test, body, values, names, _loc(file, line), traced, truth, Undefined)


_INPLACE = {"add": operator.iadd, "subtract": operator.isub, "multiply": operator.imul, "divide": operator.itruediv,
            "floor_divide": operator.ifloordiv, "remainder": operator.imod, "power": operator.ipow,
            "bitwise_and": operator.iand, "bitwise_or": operator.ior, "bitwise_xor": operator.ixor,
            "left_shift": operator.ilshift, "right_shift": operator.irshift, "matmul": operator.imatmul}  # fmt: skip
_AUGMENTED = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
              ast.FloorDiv: "floor_divide", ast.Mod: "remainder", ast.Pow: "power", ast.BitAnd: "bitwise_and",
              ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor", ast.LShift: "left_shift",
              ast.RShift: "right_shift", ast.MatMult: "matmul"}  # fmt: skip


def setitem(target: Any, key: Any, value: Any, op: str | None = None) -> Any:
    """``target[key] = value`` (``op`` None) or ``target[key] op= value`` in a jit function, where the pass
    rewrote it into ``target = setitem(target, key, value, op)``: a traced array (or a NumPy array given traced
    values) is updated functionally and the new array returned; anything else is updated in place, as Python
    does, and returned."""
    hook = getattr(type(target), "_pt_setitem", None)
    if hook is None and isinstance(target, np.ndarray):
        keys = key if isinstance(key, tuple) else (key,)
        hook = next((h for h in (getattr(type(x), "_pt_setitem", None) for x in (value, *keys)) if h), None)
    if hook is not None:
        out = hook(target, key, value, op)
        made = _made.get()
        if made is not None and out is not target:  # (the old array kept: its id stays its own)
            made.chain[id(target)] = (target, out)
        return out
    if op is None:
        target[key] = value
    else:
        target[key] = _INPLACE[op](target[key], value)
    return target


# -- updates made by the functions a jit function calls ----------------------------------------------------------
# NumPy code updates arrays in helpers (``def set_boundary(u): u[0] = 0``) and relies on the caller's array
# changing. When a helper's update reaches a traced array's __setitem__ (the helper is not rewritten), the jit
# function is traced again with its calls rewritten (:func:`rewrite`): the functions of the user's code it calls
# are rewritten too (their updates functional, their calls rewritten), each runs recording the updates it makes
# (:class:`_Updates`), and the newest value of each array it was given is bound, after the statement, to the
# caller's variable that passed it (:func:`latest`). An updated argument that is neither a variable nor a
# temporary (``f(u[1:-1])``: NumPy would write through the view; an array in a list) is an error.
class _Updates:
    """What one run of a rewritten function updated: ``chain`` maps an array's id to (the array, the array an
    update made of it) (the old one kept alive, so its id stays its own); ``given`` the newest values of the
    arrays the calls of the current statement were given, for :func:`latest`."""

    __slots__ = ("chain", "given")

    def __init__(self) -> None:
        self.chain: dict[int, tuple[Any, Any]] = {}
        self.given: dict[int, tuple[Any, Any]] = {}

    def newest(self, x: Any) -> Any:
        seen = 0
        while id(x) in self.chain and self.chain[id(x)][0] is x and seen <= len(self.chain):
            x, seen = self.chain[id(x)][1], seen + 1
        return x


_made: contextvars.ContextVar[_Updates | None] = contextvars.ContextVar("pypto_updates", default=None)


def latest(x: Any) -> Any:
    """``x``'s newest value after the calls of a statement: the value a called function's update gave it."""
    made = _made.get()
    if made is None or id(x) not in made.given:
        return x
    old, new = made.given.pop(id(x))
    return new if old is x else x


# what an argument of a call is, for an update the called function makes of it
VARIABLE, TEMPORARY, OTHER = "variable", "temporary", "other"


def callee(fn: Any, positional: tuple[str, ...], keywords: tuple[tuple[str, str], ...], file: str,
           line: int) -> Any:  # fmt: skip
    """``fn`` as a jit function calls it where its calls are rewritten: a function of the user's own code is
    rewritten like the jit function (its updates functional, its calls rewritten) and run recording what it
    updated; ``positional``/``keywords``: what each argument is (:data:`VARIABLE` of the caller, rebound after
    the statement; a :data:`TEMPORARY`; :data:`OTHER`, whose update is an error). Anything else is ``fn``."""
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(func, types.FunctionType) or not _own_code(func):
        return fn
    new = rewrite(func, updates=True, calls=True)
    if new is func:
        return fn
    if isinstance(fn, types.MethodType):
        new = types.MethodType(new, fn.__self__)
    kinds = dict(keywords)

    def run(*args: Any, **kwargs: Any) -> Any:
        outer, made = _made.get(), _Updates()
        token = _made.set(made)
        try:
            out = new(*args, **kwargs)
        finally:
            _made.reset(token)
        if made.chain:
            given = [(f"argument {k + 1}", v, positional[k] if k < len(positional) else OTHER)
                     for k, v in enumerate(args)]  # fmt: skip
            given += [(f"argument {k}=", v, kinds.get(k, OTHER)) for k, v in kwargs.items()]
            for what, value, kind in given:
                _written_back(func, what, value, kind, made, outer, _loc(file, line))
        return out

    return run


def _written_back(fn: Callable, what: str, value: Any, kind: str, made: _Updates, outer: _Updates | None,
                  loc: SourceLoc) -> None:  # fmt: skip
    """An argument ``fn`` was given, after the call: its newest value recorded for the caller's variable."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    new = made.newest(value)
    if new is value and not any(made.newest(v) is not v for v in items):
        return
    if kind == TEMPORARY and new is not value:
        return
    if kind != VARIABLE or new is value:
        raise TracingError(
            f"{fn.__name__}() updates its {what} in place, which is not a variable of the caller (a view such "
            "as u[1:-1], an attribute, or an array inside a container): the update cannot be written back, as "
            "NumPy would",
            loc,
            f"pass the array in a variable and update the part inside {fn.__name__}, or return the updated "
            "array and assign it",
        )
    if outer is not None:
        outer.chain[id(value)] = outer.given[id(value)] = (value, new)


_LIBRARIES = frozenset({"pypto", "numpy", "scipy", "torch", "jax", "jaxlib", "dask", "distributed", "pandas",
                        "sklearn", "numba", "ml_dtypes", "cupy", "pyopencl", "cffi", "pluggy", "hypothesis", "pytest",
                        "_pytest", "builtins"})  # fmt: skip
"""Packages whose functions are never rewritten (array libraries and pypto's own): they do not update the arrays
a jit function gives them through ``x[idx] = v``, and their code is not the user's to trace as written."""


def _own_code(fn: types.FunctionType) -> bool:
    """A function of the user's code, installed or not: not of the array libraries (:data:`_LIBRARIES`) and not
    of the standard library."""
    if (fn.__module__ or "").split(".")[0] in _LIBRARIES:
        return False
    path = os.path.realpath(fn.__code__.co_filename)
    installed = any(part in ("site-packages", "dist-packages") for part in path.split(os.sep))
    return installed or not path.startswith(_standard_library())


@functools.cache
def _standard_library() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if k in paths}))


def inplace(target: Any, value: Any, op: str) -> Any:
    """``target op= value`` on a variable of a jit function: Python's, and where ``target`` is a traced array
    the new array is recorded as its update (NumPy changes the array in place: a function's caller sees it)."""
    out = _INPLACE[op](target, value)
    made = _made.get()
    if made is not None and out is not target and getattr(type(target), "_pt_setitem", None) is not None:
        made.chain[id(target)] = (target, out)
    return out


def _slice(lower: Any, upper: Any, step: Any) -> slice:
    return slice(lower, upper, step)


def _select(c: Any, x: Any, y: Any, what: str, loc: SourceLoc | None) -> Any:
    if x is y:
        return x
    if isinstance(x, Undefined) or isinstance(y, Undefined):  # an error where it is used (a loop's variable
        name = (x if isinstance(x, Undefined) else y).name  # inside a branch may never be)
        return Undefined(name, "it is assigned in only one branch of an 'if' on a traced value and had no value "
                         "before it", loc)  # fmt: skip
    if traced(x) or traced(y) or (_number(x) and _number(y)):
        from pypto.lang.functions import where

        return where(c, x, y)
    try:
        same = bool(x == y)
    except Exception:  # noqa: BLE001 - anything that cannot say it is equal is not
        same = False
    if same:
        return x
    raise TracingError(
        f"the {what} differs between the branches of an 'if' on a traced value and is not a number or "
        f"traced value ({type(x).__name__} and {type(y).__name__}): the branches' results are selected "
        "element by element",
        loc,
        "select numbers or traced values only; compute other things outside the if",
    )


def _number(x: Any) -> bool:
    import numbers

    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def _loc(file: str, line: int) -> SourceLoc:
    import linecache

    return SourceLoc(file, line, linecache.getline(file, line).rstrip())


# -- the rewrite ----------------------------------------------------------------------------------------------
class _Assigned(ast.NodeVisitor):
    """The names a block of statements assigns in its own scope (not inside nested functions or classes)."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store) and not node.id.startswith(_PREFIX):
            self.names[node.id] = None

    def _scope(self, node: Any) -> None:
        if not node.name.startswith(_PREFIX):
            self.names[node.name] = None  # the def itself binds its name; its body is another scope

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass

    def _comprehension(self, node: Any) -> None:  # its variables are its own; only a walrus leaks (rare)
        pass

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for a in node.names:
            self.names[(a.asname or a.name).split(".")[0]] = None

    visit_ImportFrom = visit_Import


def _assigned(stmts: list[ast.stmt]) -> list[str]:
    v = _Assigned()
    for s in stmts:
        v.visit(s)
    return list(v.names)


class _Escapes(ast.NodeVisitor):
    """Whether a block leaves its function or loop (``return``, ``break``, ``continue``, ``yield``)."""

    def __init__(self) -> None:
        self.what: str | None = None
        self.loops = 0

    def visit_Return(self, node: ast.AST) -> None:
        self.what = self.what or "returns"

    def visit_Yield(self, node: ast.AST) -> None:
        self.what = self.what or "yields"

    visit_YieldFrom = visit_Await = visit_Yield

    def visit_Break(self, node: ast.AST) -> None:
        if not self.loops:
            self.what = self.what or "breaks out of a loop"

    def visit_Continue(self, node: ast.AST) -> None:
        if not self.loops:
            self.what = self.what or "continues a loop"

    def visit_Global(self, node: ast.AST) -> None:
        self.what = self.what or "declares a global or nonlocal name"

    visit_Nonlocal = visit_Global

    def _loop(self, node: Any) -> None:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_For = visit_While = visit_AsyncFor = _loop

    def _scope(self, node: Any) -> None:
        pass

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scope


def _escapes(stmts: list[ast.stmt]) -> str | None:
    v = _Escapes()
    for s in stmts:
        v.visit(s)
    return v.what


def _rt(attr: str) -> ast.Attribute:
    return ast.Attribute(ast.Name(_RT, ast.Load()), attr, ast.Load())


def _def(name: str, args: ast.arguments, body: list[ast.stmt]) -> ast.FunctionDef:
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None)


def _thunk(e: ast.expr) -> ast.Lambda:
    return ast.Lambda(ast.arguments([], [], None, [], [], None, []), e)


_BUILTINS = frozenset(dir(builtins))


def _helper(func: ast.expr) -> bool:
    """A call of what may be a function of the user's (not a builtin, not ``pt.range``, not the pass's own):
    :func:`callee` decides when it runs."""
    if isinstance(func, ast.Name):
        return func.id not in _BUILTINS and not func.id.startswith(_PREFIX)
    return (
        isinstance(func, ast.Attribute)
        and func.attr != "range"
        and not (isinstance(func.value, ast.Name) and func.value.id == _RT)
    )


class _Rewriter(ast.NodeTransformer):
    def __init__(self, file: str, local: frozenset[str] | None = None, calls: bool = False) -> None:
        self.file = file
        self.count = itertools.count()
        self.local = local  # a jit function's local variables: x[idx] = v on one becomes a functional update
        self.calls = calls  # calls of the user's functions: rewritten (their updates written back: callee)
        self.rebound: set[str] | None = None  # the caller's variables the calls of this statement are given

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if not self.calls or self.local is None or not _helper(node.func):
            return node
        given = list(itertools.takewhile(lambda a: not isinstance(a, ast.Starred), node.args))
        positional = tuple(self._argument(a) for a in given)
        keywords = tuple((k.arg, self._argument(k.value)) for k in node.keywords if k.arg is not None)
        where = [ast.Constant(positional), ast.Constant(keywords), ast.Constant(self.file), ast.Constant(node.lineno)]
        node.func = ast.copy_location(ast.Call(_rt("callee"), [node.func, *where], []), node.func)
        return node

    def _argument(self, e: ast.expr) -> str:
        """What an argument is, for an update the called function makes of it (:func:`callee`)."""
        if isinstance(e, ast.Name) and self.local is not None and e.id in self.local and self.rebound is not None:
            self.rebound.add(e.id)
            return VARIABLE
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Constant)):
            return TEMPORARY
        return OTHER

    def _rebinding(self, node: ast.stmt, visit: Callable[[Any], Any]) -> Any:
        """A simple statement: its calls' variables rebound to their newest values after it (calls mode)."""
        outer, self.rebound = self.rebound, (set() if self.calls and self.local is not None else None)
        try:
            out = visit(node)
        finally:
            names, self.rebound = self.rebound, outer
        if not names or isinstance(node, ast.Return):
            return out
        again = [ast.Assign([ast.Name(n, ast.Store())], ast.Call(_rt("latest"), [ast.Name(n, ast.Load())], []))
                 for n in sorted(names)]  # fmt: skip
        return self._place([*_listed(out), *again], node)

    def visit_Expr(self, node: ast.Expr) -> Any:
        return self._rebinding(node, self.generic_visit)

    def visit_Return(self, node: ast.Return) -> Any:
        return self._rebinding(node, self.generic_visit)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self._rebinding(node, self.generic_visit)

    def _updated(self, target: ast.expr) -> str | None:
        """The variable ``target`` (``x[idx]``) updates, where it is one of the function's own locals."""
        if self.local is None or not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
            return None
        return target.value.id if target.value.id in self.local else None

    def _update(self, target: ast.Subscript, value: ast.expr, op: str | None) -> ast.stmt:
        name = target.value.id  # type: ignore[attr-defined]
        call = ast.Call(_rt("setitem"), [ast.Name(name, ast.Load()), _key(target.slice), value, ast.Constant(op)], [])
        return ast.Assign([ast.Name(name, ast.Store())], call)

    def visit_Assign(self, node: ast.Assign) -> Any:
        return self._rebinding(node, self._assign)

    def _assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        if not any(self._updated(t) for t in node.targets):
            return node
        if len(node.targets) == 1:
            return self._place([self._update(node.targets[0], node.value, None)], node)  # type: ignore[arg-type]
        k = next(self.count)  # a = b[i] = v: v once, then each target in turn (Python's order)
        tmp = f"{_PREFIX}value{k}"
        out: list[ast.stmt] = [ast.Assign([ast.Name(tmp, ast.Store())], node.value)]
        for t in node.targets:
            value = ast.Name(tmp, ast.Load())
            out.append(self._update(t, value, None) if self._updated(t) else ast.Assign([t], value))  # type: ignore[arg-type]
        return self._place(out, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        return self._rebinding(node, self._augmented)

    def _augmented(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        if self.calls and isinstance(node.target, ast.Name) and self.local and node.target.id in self.local:
            name = node.target.id  # u *= 2 in a function: the caller's array changes too (inplace)
            call = ast.Call(_rt("inplace"), [ast.Name(name, ast.Load()), node.value,
                                             ast.Constant(_AUGMENTED[type(node.op)])], [])  # fmt: skip
            return self._place([ast.Assign([ast.Name(name, ast.Store())], call)], node)
        if not self._updated(node.target):
            return node
        return self._place([self._update(node.target, node.value, _AUGMENTED[type(node.op)])], node)  # type: ignore[arg-type]

    def _own_scope(self, node: Any) -> Any:  # a function or class the user wrote inside: its variables are its own
        local, rebound, self.local, self.rebound = self.local, self.rebound, None, None
        self.generic_visit(node)
        self.local, self.rebound = local, rebound
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _own_scope

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        out = node.values[-1]
        for v in reversed(node.values[:-1]):  # a and b and c: and_(a, lambda: and_(b, lambda: c))
            out = ast.Call(_rt(fn), [v, _thunk(out)], [])
        return ast.copy_location(out, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(_rt("not_"), [node.operand], []), node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        self.generic_visit(node)
        call = ast.Call(_rt("ifexp"), [node.test, _thunk(node.body), _thunk(node.orelse)], [])
        return ast.copy_location(call, node)

    def _unescaped(self, node: ast.For | ast.While) -> list[ast.stmt]:
        """A loop whose body breaks or continues under ifs (:func:`_flagged`), rewritten with flags before the ifs
        inside are: the statements to put before the loop (the flag's first value)."""
        if node.orelse or _escapes(node.body) is None:
            return []
        k = next(self.count)
        flag = f"{_FLAG}live{k}"  # (carried by the loop as the user's variables are: not the pass's _PREFIX)
        flagged = _flagged(node.body, flag, f"{_FLAG}stop{k}_")
        if flagged is None:
            return []
        body, live = flagged
        if not live:  # (continue only)
            node.body = body
            return []
        node.body = [ast.If(ast.Name(flag, ast.Load()), body, [])]
        if isinstance(node, ast.While):  # the loop's test: its own, and the flag (the bound stays a conjunct)
            node.test = ast.BoolOp(ast.And(), [node.test, ast.Name(flag, ast.Load())])
        init = ast.Assign([ast.Name(flag, ast.Store())], ast.Constant(True))
        for n in ast.walk(ast.Module([init, *node.body], [])):
            if isinstance(n, (ast.stmt, ast.expr)):
                ast.copy_location(n, node)
        return [init]

    def visit_While(self, node: ast.While) -> Any:
        before = self._unescaped(node)
        if before:
            return [*before, *_listed(self.visit_While(node))]
        self.generic_visit(node)
        where = [ast.Constant(self.file), ast.Constant(node.lineno)]
        if node.orelse or _escapes(node.body) is not None:  # left as Python's, its test checked to be concrete
            node.test = ast.copy_location(ast.Call(_rt("loop_test"), [node.test, *where], []), node.test)
            return node
        k = next(self.count)
        names = _assigned(node.body)
        params = ast.arguments([], [ast.arg(n) for n in names], None, [], [], None, [])
        test = _def(f"{_PREFIX}test{k}", params, [ast.Return(node.test)])
        body = _def(f"{_PREFIX}body{k}", params, [*node.body, _result(names)])
        call = ast.Call(_rt("while_"), [ast.Name(test.name, ast.Load()), ast.Name(body.name, ast.Load()),
                                        _values(names), ast.Constant(tuple(names)), *where], [])  # fmt: skip
        return self._place([test, body, _assign(names, call)], node)

    def visit_For(self, node: ast.For) -> Any:
        before = self._unescaped(node) if _sequential(node) else []
        if before:
            return [*before, *_listed(self.visit_For(node))]
        self.generic_visit(node)
        if not _sequential(node) or node.orelse or _escapes(node.body) is not None:
            return node  # Python's loop (pt.range refuses to be iterated there, saying why)
        k = next(self.count)
        target = node.target.id  # type: ignore[attr-defined]
        names = [n for n in _assigned(node.body) if n != target]
        params = ast.arguments([], [ast.arg(target), *(ast.arg(n) for n in names)], None, [], [], None, [])
        body = _def(f"{_PREFIX}loop{k}", params, [*node.body, _result(names)])
        where = [ast.Constant(self.file), ast.Constant(node.lineno)]
        call = ast.Call(_rt("loop"), [node.iter, ast.Name(body.name, ast.Load()), _values(names),
                                      ast.Constant(tuple(names)), ast.Constant(target), *where], [])  # fmt: skip
        return self._place([body, _assign(names, call)], node)

    @staticmethod
    def _place(stmts: list[ast.stmt], node: ast.stmt) -> list[ast.stmt]:
        for s in stmts:
            ast.copy_location(s, node)
        return stmts

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)  # the ifs inside first
        where = [ast.Constant(self.file), ast.Constant(node.lineno)]
        what = _escapes(node.body) or _escapes(node.orelse)
        if what is not None:  # left as Python's if, its test checked to be concrete
            node.test = ast.copy_location(ast.Call(_rt("concrete"), [node.test, *where, ast.Constant(what)], []),
                                          node.test)  # fmt: skip
            return node
        k = next(self.count)
        names = _assigned(node.body) + [n for n in _assigned(node.orelse) if n not in _assigned(node.body)]
        params = ast.arguments([], [ast.arg(n) for n in names], None, [], [], None, [])
        then = _def(f"{_PREFIX}then{k}", params, [*node.body, _result(names)])
        orelse = _def(f"{_PREFIX}else{k}", params, [*node.orelse, _result(names)])
        call = ast.Call(_rt("cond"), [node.test, ast.Name(then.name, ast.Load()), ast.Name(orelse.name, ast.Load()),
                                      _values(names), ast.Constant(tuple(names)), *where], [])  # fmt: skip
        return self._place([then, orelse, _assign(names, call)], node)


def _listed(x: Any) -> list[ast.stmt]:
    return x if isinstance(x, list) else [x]


def _flagged(body: list[ast.stmt], live: str, stop: str) -> tuple[list[ast.stmt], bool] | None:
    """A loop body that breaks or continues at the end of an ``if`` branch, as statements that do not: the test
    is kept in a variable (``stop``, numbered), the branch runs, a ``break`` sets ``live`` to its negation (the
    loop's later steps run under ``if live``), and the statements after the ``if`` run under ``if not stop``.
    A bare ``break`` or ``continue`` ends the step there. Returns the new body and whether it breaks, or None
    for an escape elsewhere (a return, or a break not last in its branch): the loop then stays Python's."""
    out: list[ast.stmt] = []
    breaks = False
    count = itertools.count()
    for k, st in enumerate(body):
        rest = body[k + 1 :]
        if isinstance(st, (ast.Break, ast.Continue)):
            if isinstance(st, ast.Break):
                out.append(ast.Assign([ast.Name(live, ast.Store())], ast.Constant(False)))
            return out, breaks or isinstance(st, ast.Break)
        what = _escapes([st])
        if what is None:
            out.append(st)
            continue
        if not isinstance(st, ast.If) or _escapes(st.orelse) is not None or not st.body:
            return None
        last = st.body[-1]
        if not isinstance(last, (ast.Break, ast.Continue)) or _escapes(st.body[:-1]) is not None:
            return None
        name = f"{stop}{next(count)}"
        out.append(ast.Assign([ast.Name(name, ast.Store())], st.test))
        if st.body[:-1] or st.orelse:
            out.append(ast.If(ast.Name(name, ast.Load()), st.body[:-1] or [ast.Pass()], st.orelse))
        if isinstance(last, ast.Break):
            breaks = True
            out.append(ast.Assign([ast.Name(live, ast.Store())], ast.UnaryOp(ast.Not(), ast.Name(name, ast.Load()))))
        after = _flagged(rest, live, f"{name}_")
        if after is None:
            return None
        if after[0]:
            out.append(ast.If(ast.UnaryOp(ast.Not(), ast.Name(name, ast.Load())), after[0], []))
        return out, breaks or after[1]
    return out, breaks


def _key(e: ast.expr) -> ast.expr:
    """An index (``1:-1, ::2, i``) as an expression: slices become ``slice(...)`` calls."""
    if isinstance(e, ast.Slice):
        none = ast.Constant(None)
        return ast.Call(_rt("_slice"), [e.lower or none, e.upper or none, e.step or none], [])
    if isinstance(e, ast.Tuple):
        return ast.Tuple([_key(x) for x in e.elts], ast.Load())
    return e


def _sequential(node: ast.For) -> bool:
    """A ``for`` over ``<module>.range(...)`` (``pt.range``) to a plain name: rewritten as a sequential loop."""
    it = node.iter
    return (isinstance(node.target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr == "range")  # fmt: skip


def _result(names: list[str]) -> ast.Return:
    return ast.Return(ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()))


def _values(names: list[str]) -> ast.Tuple:
    scope = ast.Call(ast.Name("locals", ast.Load()), [], [])
    return ast.Tuple([ast.Call(_rt("local"), [scope, ast.Constant(n)], []) for n in names], ast.Load())


def _assign(names: list[str], call: ast.expr) -> ast.stmt:
    if names:
        return ast.Assign([ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())], call)
    return ast.Expr(call)


def _controls(tree: ast.AST, updates: bool, calls: bool = False) -> bool:
    return any(isinstance(n, (ast.If, ast.While, ast.BoolOp, ast.IfExp)) or (isinstance(n, ast.UnaryOp) and
               isinstance(n.op, ast.Not)) or (isinstance(n, ast.For) and _sequential(n)) or
               (updates and any(isinstance(t, ast.Subscript) for t in _targets(n))) or
               (calls and isinstance(n, ast.Call) and _helper(n.func))
               for n in ast.walk(tree))  # fmt: skip


def _targets(n: ast.AST) -> list[ast.expr]:
    if isinstance(n, ast.Assign):
        return n.targets
    return [n.target] if isinstance(n, ast.AugAssign) else []


_cache: dict[tuple[bool, bool], weakref.WeakKeyDictionary[Any, Callable]] = {}


def rewrite(fn: Callable, updates: bool = False, calls: bool = False) -> Callable:
    """``fn`` with its control flow made traceable (module docstring); ``fn`` itself where there is nothing
    to rewrite or its source cannot be read. ``updates`` (the jit front end): ``x[idx] = v`` and
    ``x[idx] += v`` on a local variable become ``x = setitem(x, idx, v, op)`` (a functional update of a traced
    array, Python's own for anything else), and a function the jit function calls that updates an array it is
    given makes the trace run again with ``calls``: the calls of the user's functions rewritten too
    (:func:`callee`). Cached per function."""
    code = getattr(fn, "__code__", None)
    if code is None or not isinstance(fn, types.FunctionType):
        return fn
    cache = _cache.setdefault((updates, calls), weakref.WeakKeyDictionary())
    try:
        return cache[fn]
    except KeyError:
        pass
    except TypeError:  # not weakly referable
        return fn
    out = _rewrite(fn, updates, calls) or fn
    if updates and not calls:
        out = _retrying(fn, out)
    cache[fn] = out
    return out


def _retrying(fn: types.FunctionType, first: Callable) -> Callable:
    """``first`` (``fn`` rewritten without its calls), traced again with its calls rewritten where a function it
    calls updates a traced array (:class:`~pypto.array.graph.UnrewrittenUpdate` from the array's
    ``__setitem__``)."""
    from pypto.array.graph import UnrewrittenUpdate

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        try:
            return first(*args, **kwargs)
        except UnrewrittenUpdate:
            again = rewrite(fn, updates=True, calls=True)
            if again is fn:
                raise
        token = _made.set(_Updates())
        try:
            return again(*args, **kwargs)
        finally:
            _made.reset(token)

    return traced


def _rewrite(fn: types.FunctionType, updates: bool, calls: bool) -> Callable | None:
    code = fn.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) or (
        "super" in code.co_names  # super() needs the class cell only a class body makes
    ):
        return None
    try:
        tree = function_tree(fn)
    except (OSError, TypeError, SyntaxError):
        return None
    func = tree.body[0] if isinstance(tree, ast.Module) and tree.body else None
    if not isinstance(func, ast.FunctionDef) or func.name != code.co_name or not _controls(func, updates, calls):
        return None  # a lambda, or nothing to rewrite
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    func.decorator_list = []
    # annotations and defaults were evaluated where the function was defined: the original's are kept
    for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs, func.args.vararg, func.args.kwarg):
        if a is not None:
            a.annotation = None
    func.returns = None
    func.args.defaults = []
    func.args.kw_defaults = [None] * len(func.args.kwonlyargs)
    local = frozenset(code.co_varnames + code.co_cellvars) if updates else None
    func.body = _Rewriter(code.co_filename, local, calls).visit(ast.Module(func.body, [])).body
    free = [*code.co_freevars, _RT]
    maker = _def(f"{_PREFIX}make", ast.arguments([], [ast.arg(n) for n in free], None, [], [], None, []),
                 [func, ast.Return(ast.Name(func.name, ast.Load()))])  # fmt: skip
    module = ast.Module([maker], [])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, code.co_filename, "exec", dont_inherit=True)
    except SyntaxError:  # pragma: no cover - the pass produced invalid code: trace the original
        return None
    namespace: dict[str, Any] = {}
    exec(compiled, fn.__globals__, namespace)  # noqa: S102 - the user's own function, rewritten
    made = namespace[maker.name](*[None] * len(free))
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    cells[_RT] = types.CellType(_module())
    new = types.FunctionType(made.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in made.__code__.co_freevars))  # fmt: skip
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = fn.__annotations__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__wrapped__ = fn  # type: ignore[attr-defined]
    return new


def _module() -> types.ModuleType:
    import sys

    return sys.modules[__name__]
