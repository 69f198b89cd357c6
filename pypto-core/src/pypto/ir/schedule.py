"""Schedules as data: what the ``schedule`` pass decides for each loop nest, and the user's hints.

:class:`NestSchedule` is the decision for one nest (a :class:`~pypto.ir.kernel.Group`): its access
pattern, loop order, parallel and vector loops, tile sizes per axis, the register tile of a
contraction, the operands packed and the loops unrolled. ``kernel.ir("schedule")`` prints it; lowering and the target
passes apply it. :class:`Schedule` holds a user's hints (``@pt.tile``, ``pt.kernel(schedule=...)``),
which override the pass's choices and are part of the cache key through the code they change.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pypto.errors import ScheduleError

PATTERNS = ("map", "transpose", "rows", "columns", "contraction", "full-reduction", "scan", "column-scan", "sort")
"""The access patterns a nest is classified as:

* ``map``: elementwise or broadcast stores; the innermost loop walks every operand contiguously.
* ``transpose``: like ``map``, but an input is read a whole row apart at every step of the innermost
  loop: walked in square tiles that stay in L1.
* ``rows``: reductions along the innermost (contiguous) axis, such as a softmax row.
* ``columns``: reductions down columns (``y[j] = reduce(x[i, j], axis=i)``): rows are walked in
  blocks, each column's partial results kept in a vector.
* ``contraction``: ``f(reduce_sum(a[.., i, k] * b[.., k, j], axis=k))``: packed panels and register
  tiles.
* ``full-reduction``: no loops left: the reduction is split into fixed blocks.
* ``scan``: a running reduction (``pt.cumsum``) carried along the innermost loop, which runs in order (never
  vectorised); the outermost loop, another axis, runs on threads.
* ``column-scan``: a ``scan`` down columns (``pt.cumsum(x, axis=0)``, a loop over the rows of each column): its
  innermost loop reads a row apart at every step; a CPU walks the rows along blocks of columns instead, each
  column's running value kept in a vector (``block_columns``).
* ``sort``: a sort (``pt.sort``, ``pt.argsort``, ``pt.topk``): each point of the other axes orders its row in
  scratch; the outermost of those axes runs on threads.
"""


@dataclass(frozen=True)
class NestSchedule:
    """The schedule of one loop nest (axes are axis indices of the kernel)."""

    pattern: str
    order: tuple[int, ...]  # loops, outer to inner
    parallel: int | None  # axis whose loop runs on threads (the outermost), None: serial
    vector: int | None  # axis whose loop is vectorised (the innermost)
    tiles: tuple[tuple[int, int], ...] = ()  # (axis, points per tile) for the tiled axes
    register: tuple[int, int] | None = None  # contractions: rows x columns of the register tile
    pack: tuple[str, ...] = ()  # operands packed into contiguous panels
    unroll: tuple[tuple[int, int], ...] = ()  # (axis, copies of the body) for the unrolled loops
    hinted: tuple[str, ...] = ()  # which decisions came from the user's hints
    # contractions: (rows, columns per task, points of the reduction per block) used instead of the tiles
    # when the factor with the row axis has at most that many rows at run time (see ``block_contractions``)
    few_rows: tuple[int, int, int] | None = None

    def tile(self, axis: int) -> int | None:
        for a, n in self.tiles:
            if a == axis:
                return n
        return None

    def describe(self, name) -> str:
        """One line: ``name`` maps an axis index to its name."""
        parts = [self.pattern]
        if self.order:
            parts.append(f"order=({', '.join(name(a) for a in self.order)})")
        parts.append(f"parallel={name(self.parallel) if self.parallel is not None else 'none'}")
        if self.vector is not None:
            parts.append(f"vector={name(self.vector)}")
        if self.tiles:
            parts.append("tile(" + ", ".join(f"{name(a)}={n}" for a, n in self.tiles) + ")")
        if self.register is not None:
            parts.append(f"register={self.register[0]}x{self.register[1]}")
        if self.pack:
            parts.append(f"pack=({', '.join(self.pack)})")
        if self.unroll:
            parts.append("unroll(" + ", ".join(f"{name(a)}={n}" for a, n in self.unroll) + ")")
        if self.few_rows is not None and self.order:
            rows, nc, kc = self.few_rows
            i, j = self.order[-2], self.order[-1]
            parts.append(f"few_rows({name(i)}<={rows}: {name(j)}={nc}, reduction={kc})")
        if self.hinted:
            parts.append(f"hinted=({', '.join(self.hinted)})")
        return " ".join(parts)


def _positive(value: object, param: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ScheduleError(
            f"{param} must be a positive integer ({what}), got {value!r}",
            param=param,
            expected="a positive int",
            got=value,
            fix=f"pass a whole number of points, e.g. {param}=64",
        )
    return int(value)


def _axis_name(value: object, param: str) -> str:
    if not isinstance(value, str) or not value.isidentifier():
        raise ScheduleError(
            f"{param} must name an axis of the kernel (a variable given pt.axis), got {value!r}",
            param=param,
            expected="an axis name such as 'i'",
            got=value,
        )
    return value


@dataclass(frozen=True, init=False)
class Schedule:
    """Hints that override the ``schedule`` pass's choices for a kernel's loop nests.

    * ``tile``: points per tile for named axes (``{"i": 64, "j": 256}``); ``size`` sets every axis a
      nest tiles that ``tile`` does not name. What a tile means depends on the nest's pattern (see
      ``docs/performance.md``): rows/columns per block of a contraction, the sides of a transpose's
      tiles, rows and columns per block of a column reduction, the sides of a map nest's tiles.
    * ``order``: loop order, outer to inner, of the nests over exactly these axes without reductions.
    * ``parallel``: the axis whose loop runs on threads (it must be a nest's outermost loop), or
      ``False`` to run every nest on one thread.
    * ``register``: ``(rows, columns)`` of a contraction's register tile.

    Values are checked here (types) and against the kernel when it is compiled (axis names, sizes a
    pattern accepts): a bad hint is a :class:`~pypto.errors.ScheduleError` naming it.
    """

    tile: tuple[tuple[str, int], ...]
    size: int | None
    order: tuple[str, ...] | None
    parallel: str | bool | None
    register: tuple[int, int] | None

    def __init__(
        self,
        *,
        tile: Mapping[str, int] | None = None,
        size: int | None = None,
        order: Sequence[str] | None = None,
        parallel: str | bool | None = None,
        register: tuple[int, int] | None = None,
    ):
        if tile is not None and not isinstance(tile, Mapping):
            raise ScheduleError(
                f"schedule tile must map axis names to sizes, got {tile!r}",
                param="tile",
                expected="a dict such as {'i': 64, 'j': 256}",
                got=tile,
            )
        tiles = tuple(
            sorted(
                (_axis_name(a, "tile"), _positive(n, f"tile[{a!r}]", "points per tile"))
                for a, n in (tile or {}).items()
            )
        )
        if size is not None:
            size = _positive(size, "size", "points per tile of every tiled axis")
        if order is not None:
            if isinstance(order, str) or not isinstance(order, Sequence):
                raise ScheduleError(
                    f"schedule order must be a sequence of axis names, outer to inner, got {order!r}",
                    param="order",
                    expected="a tuple such as ('j', 'i')",
                    got=order,
                )
            order = tuple(_axis_name(a, "order") for a in order)
            if len(set(order)) != len(order):
                raise ScheduleError(
                    f"schedule order names an axis twice: {order!r}", param="order", expected="distinct axes", got=order
                )
        if parallel is not None and parallel is not False:
            parallel = _axis_name(parallel, "parallel")
        if register is not None:
            if not isinstance(register, Sequence) or isinstance(register, str) or len(register) != 2:
                raise ScheduleError(
                    f"schedule register must be (rows, columns) of a contraction's register tile, got {register!r}",
                    param="register",
                    expected="a pair such as (8, 32)",
                    got=register,
                )
            register = (
                _positive(register[0], "register[0]", "rows of the register tile"),
                _positive(register[1], "register[1]", "columns of the register tile"),
            )
        object.__setattr__(self, "tile", tiles)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "parallel", parallel)
        object.__setattr__(self, "register", register)

    @classmethod
    def of(cls, value: object) -> Schedule:
        """``value`` as a :class:`Schedule`: one already, or a dict of its keyword arguments."""
        if isinstance(value, Schedule):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"tile", "size", "order", "parallel", "register"}
            if unknown:
                raise ScheduleError(
                    f"schedule has unknown keys {sorted(unknown)}; known: tile, size, order, parallel, register",
                    param="schedule",
                    expected="keys tile, size, order, parallel, register",
                    got=value,
                )
            return cls(**value)
        raise ScheduleError(
            f"schedule must be a pt.Schedule or a dict of its arguments, got {value!r}",
            param="schedule",
            expected="pt.Schedule(tile={...}, order=..., parallel=..., register=...)",
            got=value,
        )

    def merged(self, other: Schedule) -> Schedule:
        """These hints with ``other``'s laid over them (``other`` wins where both set a value)."""
        return Schedule(
            tile={**dict(self.tile), **dict(other.tile)},
            size=other.size if other.size is not None else self.size,
            order=other.order if other.order is not None else self.order,
            parallel=other.parallel if other.parallel is not None else self.parallel,
            register=other.register if other.register is not None else self.register,
        )

    def tile_of(self, axis: str) -> int | None:
        for a, n in self.tile:
            if a == axis:
                return n
        return self.size

    @property
    def empty(self) -> bool:
        return (
            not self.tile
            and self.size is None
            and self.order is None
            and self.parallel is None
            and self.register is None
        )

    def __repr__(self) -> str:
        parts = []
        if self.tile:
            parts.append(f"tile={dict(self.tile)!r}")
        for f in ("size", "order", "parallel", "register"):
            v = getattr(self, f)
            if v is not None:
                parts.append(f"{f}={v!r}")
        return f"Schedule({', '.join(parts)})"


__all__ = ["NestSchedule", "Schedule", "PATTERNS"]
