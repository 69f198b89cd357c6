"""The host side of SIMT code: which device kernels to launch, how many threads, which buffers.

The SIMT renderer (:mod:`pypto.targets.simt.render`) turns one loop-IR kernel into several device
kernels. It also produces a :class:`LaunchPlan`: the kernels in launch order, each with its
iteration extents as expressions of the dims and scalar arguments, and the device buffers the host
allocates (temporaries and scalars that live across kernels). Expressions are kept as Python source
text, so a plan is plain JSON (it travels in a compiled artifact's metadata) and is evaluated at
launch by one compiled function, without walking an IR.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pypto.ir.loops import Read, Var
from pypto.ir.nodes import Binary, Cast, Const, Expr, Unary, Where
from pypto.ir.ops import binary_symbols

MAP, GROUPS, SINGLE, TILES, COLUMNS = "map", "groups", "single", "tiles", "columns"


@dataclass(frozen=True)
class LocalBuffer:
    """Work-group (OpenCL ``__local``, CUDA ``__shared__``) memory a kernel needs, sized at launch.

    ``count`` is a host expression; ``per_thread`` buffers hold ``count`` elements per thread of
    the group (the reduction scratch), others ``count`` elements per group (a cached row).
    """

    name: str
    itemsize: int
    count: str = "1"
    per_thread: bool = False


@dataclass(frozen=True)
class KernelLaunch:
    """One device kernel of a plan.

    ``kind`` says how it is launched: ``map`` (one thread per point of ``extents``, dimension 0
    the innermost), ``groups`` (work-groups over the ``extents[0]`` iterations, the group's threads
    sharing the work of one iteration; a group takes iterations ``g, g + groups, ...``, so a host
    may launch fewer groups than iterations), ``single`` (one work-group), or ``tiles`` and ``columns``
    (work-groups of shape ``group``, as many as cover ``extents``: ``ceil(extents[d] / group[d])`` in
    dimension ``d``). ``hint`` is the number of
    elements a group's threads share (it picks the group size); ``serial`` kernels must run with
    one thread; ``prefix`` kernels may (their running values then take the steps in order). ``params`` names the kernel's arguments in order (buffers, scalars, dims; local
    buffers come last). ``cached`` names a variant of this kernel that keeps rows in local memory,
    used when ``local`` of that variant fits the device.
    """

    name: str
    kind: str
    params: tuple[str, ...]
    extents: tuple[str, ...] = ()
    hint: str | None = None
    serial: bool = False
    width: int = 1
    local: tuple[LocalBuffer, ...] = ()
    cached: KernelLaunch | None = None
    when: str | None = None
    group: tuple[int, ...] = ()  # tiles kernels: the work-group's shape (dimension 0 first)
    prefix: bool = False  # computes running values (pt.cumsum) as prefixes over its group (SimtRenderer.scan_loop)


@dataclass(frozen=True)
class DeviceBuffer:
    """A buffer the host allocates on the device for the kernels: ``count`` elements of ``dtype``."""

    name: str
    dtype: str
    count: str


@dataclass(frozen=True)
class LaunchPlan:
    """Everything the host needs to run a SIMT-rendered kernel (see the module docstring).

    ``inputs`` are the names the expressions may use (dims, then scalars, in loop-IR order);
    ``lets`` are values computed from them first, in order.
    """

    kernels: tuple[KernelLaunch, ...]
    buffers: tuple[DeviceBuffer, ...] = ()
    inputs: tuple[str, ...] = ()
    lets: tuple[tuple[str, str], ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The plan as JSON text (what a compiled artifact stores)."""
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str | Mapping[str, Any]) -> LaunchPlan:
        """The plan stored by :meth:`to_json` (text or already-parsed dict)."""
        d = json.loads(text) if isinstance(text, str) else dict(text)

        def kernel(k: Mapping[str, Any]) -> KernelLaunch:
            return KernelLaunch(
                k["name"], k["kind"], tuple(k["params"]), tuple(k["extents"]), k["hint"], k["serial"], k["width"],
                tuple(LocalBuffer(**b) for b in k["local"]), kernel(k["cached"]) if k["cached"] else None, k["when"],
                tuple(k.get("group", ())), bool(k.get("prefix", False)),
            )  # fmt: skip

        return LaunchPlan(
            tuple(kernel(k) for k in d["kernels"]),
            tuple(DeviceBuffer(**b) for b in d["buffers"]),
            tuple(d["inputs"]),
            tuple((n, e) for n, e in d["lets"]),
            d.get("meta", {}),
        )

    def sizer(self) -> Callable[[Sequence[Any]], Sizes]:
        """A compiled function: input values (in ``inputs`` order) → every size of the plan."""
        return compile_sizer(self)


@dataclass(frozen=True)
class Sizes:
    """A plan evaluated for one call: buffer element counts and, per kernel, whether it runs, its
    extents, its hint and the element counts of its local buffers (of its cached variant if any)."""

    buffers: tuple[int, ...]
    active: tuple[bool, ...]
    extents: tuple[tuple[int, ...], ...]
    hints: tuple[int | None, ...]
    local: tuple[tuple[int, ...], ...]


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``): group and block sizes."""
    return 1 << max(0, int(n) - 1).bit_length()


def pow2_at_most(n: int) -> int:
    """The largest power of two <= ``n`` (1 for ``n <= 1``): a device limit rounded down."""
    return 1 << (max(1, int(n)).bit_length() - 1)


def _fdiv(a: int, b: int) -> int:
    """Floor division as the generated code does it: by zero gives 0 instead of raising."""
    return a // b if b else 0


def _fmod(a: int, b: int) -> int:
    return a % b if b else 0


def _div(a: float, b: float) -> float:
    """True division as IEEE floats do it: by zero gives an infinity or NaN instead of raising."""
    try:
        return a / b
    except ZeroDivisionError:
        return math.copysign(math.inf, a) * math.copysign(1.0, b) if a and a == a else math.nan


_PY_INFIX = binary_symbols(c_infix=True)  # the host's Python spells these as C does


class HostExpressionError(ValueError):
    """An expression the host cannot evaluate (it reads device memory or a device-side value)."""


def py_expr(e: Expr, names: Mapping[str, str]) -> str:
    """``e`` as Python source over the host values ``names`` (loop-IR name → Python name)."""
    if isinstance(e, Const):
        v = e.value
        return repr(bool(v)) if isinstance(v, bool) else repr(v)
    if isinstance(e, Var):
        if e.name not in names:
            raise HostExpressionError(f"'{e.name}' is not known on the host")
        return names[e.name]
    if isinstance(e, Read):
        raise HostExpressionError(f"reads device buffer '{e.buffer}'")
    if isinstance(e, Cast):
        x = py_expr(e.x, names)
        dt = e.dtype
        assert dt is not None
        return f"float({x})" if dt.is_float else f"bool({x})" if dt.is_bool else f"int({x})"
    if isinstance(e, Where):
        return f"({py_expr(e.a, names)} if {py_expr(e.cond, names)} else {py_expr(e.b, names)})"
    if isinstance(e, Unary):
        if e.op == "neg":
            return f"(-{py_expr(e.x, names)})"
        if e.op == "abs":
            return f"abs({py_expr(e.x, names)})"
        raise HostExpressionError(f"unary '{e.op}' on the host")
    if isinstance(e, Binary):
        a, b = py_expr(e.a, names), py_expr(e.b, names)
        if e.op in _PY_INFIX:
            return f"({a} {_PY_INFIX[e.op]} {b})"
        if e.op == "floordiv" and e.dtype is not None and e.dtype.is_int:
            return f"_fdiv({a}, {b})"
        if e.op == "mod" and e.dtype is not None and e.dtype.is_int:
            return f"_fmod({a}, {b})"
        if e.op == "div":
            return f"_div({a}, {b})"
        if e.op in ("maximum", "minimum"):
            return f"{'max' if e.op == 'maximum' else 'min'}({a}, {b})"
        raise HostExpressionError(f"binary '{e.op}' on the host")
    raise HostExpressionError(f"{type(e).__name__} on the host")


def compile_sizer(plan: LaunchPlan) -> Callable[[Sequence[Any]], Sizes]:
    """The function :meth:`LaunchPlan.sizer` returns (generated once per plan)."""
    lines = ["def sizes(values):"]
    if plan.inputs:
        unpack = ", ".join(host_names(plan.inputs).values())
        lines.append(f"    {unpack}{',' if len(plan.inputs) == 1 else ''} = values")
    for name, e in plan.lets:
        lines.append(f"    {host_names([name])[name]} = {e}")
    counts = ", ".join(f"max(int({b.count}), 0)" for b in plan.buffers)
    extents, hints, local, active = [], [], [], []
    for k in plan.kernels:
        active.append(f"bool({k.when})" if k.when else "True")
        extents.append("(" + "".join(f"max(int({x}), 0), " for x in k.extents) + ")")
        hints.append(f"int({k.hint})" if k.hint else "None")
        chosen = k.cached or k
        local.append("(" + "".join(f"max(int({b.count}), 0), " for b in chosen.local) + ")")
    lines.append(f"    return _Sizes(({counts}{',' if len(plan.buffers) == 1 else ''}), "
                 f"({''.join(x + ', ' for x in active)}), "
                 f"({''.join(x + ', ' for x in extents)}), ({''.join(h + ', ' for h in hints)}), "
                 f"({''.join(x + ', ' for x in local)}))")  # fmt: skip

    scope: dict[str, Any] = {"_fdiv": _fdiv, "_fmod": _fmod, "_div": _div, "_Sizes": Sizes}
    exec(compile("\n".join(lines), f"<pypto launch plan {plan.meta.get('kernel', '')}>", "exec"), scope)
    return scope["sizes"]


def host_names(names: Sequence[str]) -> dict[str, str]:
    """Python identifiers for loop-IR names (a dim may be called like a Python keyword)."""
    return {n: f"v_{n}" for n in names}


class HostNames(dict):
    """Loop-IR name -> host (Python) name, remembering the names :func:`py_expr` looked up in ``used``: which
    host values (dims, scalars, host lets) the expressions printed with it need."""

    def __init__(self, names: Mapping[str, str]):
        super().__init__(names)
        self.used: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.used.add(name)
        return super().__getitem__(name)


__all__ = [
    "MAP", "GROUPS", "SINGLE", "LocalBuffer", "KernelLaunch", "DeviceBuffer", "LaunchPlan", "Sizes",
    "py_expr", "compile_sizer", "host_names", "HostNames", "HostExpressionError",
]  # fmt: skip
