"""Symbolic sizes while a ``@pt.jit(dims=...)`` function is traced.

A symbolic axis of an argument has a :class:`Size` in its traced shape instead of an int: the size of
this call, and which of the signature's symbolic sizes it is. The array layer passes Sizes on
wherever a shape only moves them (broadcasting, transposes, reductions, contractions, reshapes that
keep the axis whole), and the lowering turns them into the kernel's dims. Anything that needs the
*value* — arithmetic (``x.shape[0] // 2``), a comparison with a number, ``range(n)``, a slice
``x[1:]`` of the axis, a reshape that merges it — gets the value and records that it did
(:func:`depends`). A trace that recorded something is not shape-generic: the function is compiled
for each shape instead, and the warning says what needed the value. The program of one trace is
therefore generic or specialised by construction; it is not found by comparing traces.

Sizes are never 0 or 1 (those stay static: broadcasting depends on them), and two symbolic sizes of
one signature are equal exactly when they are the same size: comparisons with 0, 1 and other Sizes
are decided without the value.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

_RECORD: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("pypto_symbolic_trace", default=None)


def depends(reason: str) -> None:
    """Record, in the symbolic trace under way (if any), that the program needs a size's value."""
    record = _RECORD.get()
    if record is not None and reason not in record:
        record.append(reason)


@contextlib.contextmanager
def symbolic_trace() -> Iterator[list[str]]:
    """A scope in which uses of a :class:`Size`'s value are recorded; yields the list of reasons."""
    record: list[str] = []
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


class Size:
    """The ``index``-th symbolic size of a signature (``name`` its dim), ``value`` at the traced call."""

    __slots__ = ("value", "index", "name")

    def __init__(self, value: int, index: int, name: str):
        assert value > 1
        self.value = value
        self.index = index
        self.name = name

    # -- uses that need the value ------------------------------------------------------------------------------
    def __index__(self) -> int:
        depends(f"size {self.name} used as a number (range, an index, a NumPy shape)")
        return self.value

    __int__ = __index__

    def __float__(self) -> float:
        depends(f"size {self.name} used as a number")
        return float(self.value)

    def _arith(self, other: Any, op: Any, reflected: bool = False) -> Any:
        if not isinstance(other, (int, Size)) or isinstance(other, bool):
            return NotImplemented
        depends(f"arithmetic on size {self.name}")
        a, b = self.value, value(other)
        return op(b, a) if reflected else op(a, b)

    def __add__(self, other: Any) -> Any:
        return self if other == 0 and type(other) is int else self._arith(other, int.__add__)

    def __radd__(self, other: Any) -> Any:
        return self if other == 0 and type(other) is int else self._arith(other, int.__add__, True)

    def __mul__(self, other: Any) -> Any:
        return self if other == 1 and type(other) is int else self._arith(other, int.__mul__)

    def __rmul__(self, other: Any) -> Any:
        return self if other == 1 and type(other) is int else self._arith(other, int.__mul__, True)

    def __sub__(self, other: Any) -> Any:
        return self._arith(other, int.__sub__)

    def __rsub__(self, other: Any) -> Any:
        return self._arith(other, int.__sub__, True)

    def __floordiv__(self, other: Any) -> Any:
        return self._arith(other, int.__floordiv__)

    def __rfloordiv__(self, other: Any) -> Any:
        return self._arith(other, int.__floordiv__, True)

    def __mod__(self, other: Any) -> Any:
        return self._arith(other, int.__mod__)

    def __rmod__(self, other: Any) -> Any:
        return self._arith(other, int.__mod__, True)

    def __truediv__(self, other: Any) -> Any:
        return self._arith(other, int.__truediv__)

    def __rtruediv__(self, other: Any) -> Any:
        return self._arith(other, int.__truediv__, True)

    def __pow__(self, other: Any) -> Any:
        return self._arith(other, int.__pow__)

    def __neg__(self) -> int:
        depends(f"arithmetic on size {self.name}")
        return -self.value

    # -- comparisons: decided without the value where the signature decides them -----------------------------
    def _compare(self, other: Any) -> int | None:
        """-1, 0 or 1 where the order of ``self`` and ``other`` holds for every call of the signature."""
        if isinstance(other, Size):
            return 0 if other.index == self.index else None
        if isinstance(other, int) and not isinstance(other, bool) and other <= 1:
            return 1
        return None

    def _order(self, other: Any, test: Any) -> Any:
        if not isinstance(other, (int, Size)) or isinstance(other, bool):
            return NotImplemented
        known = self._compare(other)
        if known is not None:
            return test(known, 0)
        depends(f"size {self.name} compared with {other}")
        return test(self.value, value(other))

    def __eq__(self, other: Any) -> Any:
        return self._order(other, int.__eq__)

    def __ne__(self, other: Any) -> Any:
        return self._order(other, int.__ne__)

    def __lt__(self, other: Any) -> Any:
        return self._order(other, int.__lt__)

    def __le__(self, other: Any) -> Any:
        return self._order(other, int.__le__)

    def __gt__(self, other: Any) -> Any:
        return self._order(other, int.__gt__)

    def __ge__(self, other: Any) -> Any:
        return self._order(other, int.__ge__)

    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def same(a: Any, b: Any) -> bool:
    """Whether two sizes are the same for every call: equal ints, or the same symbolic size."""
    if isinstance(a, Size) or isinstance(b, Size):
        return isinstance(a, Size) and isinstance(b, Size) and a.index == b.index
    return bool(a == b)


def factors(shape: tuple[Any, ...]) -> tuple[tuple[int, ...], int]:
    """A shape's product as its symbolic sizes (their indices, sorted) and the product of its static sizes."""
    syms = tuple(sorted(s.index for s in shape if isinstance(s, Size)))
    static = 1
    for s in shape:
        if not isinstance(s, Size):
            static *= int(s)
    return syms, static


def value(n: Any) -> int:
    """A size's value at the traced call (without recording a use)."""
    return n.value if isinstance(n, Size) else int(n)


def has_sizes(x: Any) -> bool:
    """Whether a Size appears anywhere inside ``x`` (dataclass fields, tuples, lists, dicts)."""
    seen: set[int] = set()
    stack = [x]
    while stack:
        v = stack.pop()
        if isinstance(v, Size):
            return True
        if isinstance(v, (str, bytes, int, float, bool, type(None))) or id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (tuple, list, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif hasattr(v, "__dataclass_fields__"):
            stack.extend(getattr(v, f) for f in v.__dataclass_fields__)
        elif hasattr(v, "__slots__"):
            stack.extend(getattr(v, f) for f in v.__slots__ if hasattr(v, f))
    return False
