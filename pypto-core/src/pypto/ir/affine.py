"""Integer affine expressions over iteration axes and symbolic dimensions.

Indices (``x[i + 1]``, ``x[N - 1 - i]``) and shape entries (``(N + 2,)``) are affine: a constant plus
integer multiples of axes and dimensions. Keeping them in this normal form makes bounds checks,
stride computation and equality tests exact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _merge(a: tuple, b: tuple, scale: int) -> tuple:
    out = dict(a)
    for k, c in b:
        out[k] = out.get(k, 0) + scale * c
    return tuple(sorted((k, c) for k, c in out.items() if c != 0))


@dataclass(frozen=True)
class Affine:
    """``const + Σ coeff·axis + Σ coeff·dim``; axes are numbered like ``pt.axis(k)``, dims named."""

    axes: tuple[tuple[int, int], ...] = ()
    dims: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def constant(value: int) -> Affine:
        return Affine((), (), int(value))

    @staticmethod
    def axis(index: int) -> Affine:
        return Affine(((index, 1),), (), 0)

    @staticmethod
    def dim(name: str) -> Affine:
        return Affine((), ((name, 1),), 0)

    def __add__(self, other: Affine | int) -> Affine:
        if isinstance(other, int):
            return Affine(self.axes, self.dims, self.const + other)
        return Affine(_merge(self.axes, other.axes, 1), _merge(self.dims, other.dims, 1), self.const + other.const)

    def __sub__(self, other: Affine | int) -> Affine:
        if isinstance(other, int):
            return Affine(self.axes, self.dims, self.const - other)
        return Affine(_merge(self.axes, other.axes, -1), _merge(self.dims, other.dims, -1), self.const - other.const)

    def scale(self, k: int) -> Affine:
        if k == 0:
            return Affine()
        return Affine(tuple((a, c * k) for a, c in self.axes), tuple((d, c * k) for d, c in self.dims), self.const * k)

    @property
    def is_const(self) -> bool:
        return not self.axes and not self.dims

    @property
    def has_axes(self) -> bool:
        return bool(self.axes)

    def plain_axis(self) -> int | None:
        """The axis index if this is exactly ``axis`` (coefficient 1, nothing else), else None."""
        if len(self.axes) == 1 and not self.dims and self.const == 0 and self.axes[0][1] == 1:
            return self.axes[0][0]
        return None

    def plain_dim(self) -> str | None:
        if len(self.dims) == 1 and not self.axes and self.const == 0 and self.dims[0][1] == 1:
            return self.dims[0][0]
        return None

    def axis_set(self) -> frozenset[int]:
        return frozenset(a for a, _ in self.axes)

    def dim_set(self) -> frozenset[str]:
        return frozenset(d for d, _ in self.dims)

    def coeff(self, axis: int) -> int:
        for a, c in self.axes:
            if a == axis:
                return c
        return 0

    def without_axes(self) -> Affine:
        return Affine((), self.dims, self.const)

    def substitute_axes(self, mapping: Mapping[int, Affine]) -> Affine:
        out = Affine((), self.dims, self.const)
        for a, c in self.axes:
            out = out + (mapping[a].scale(c) if a in mapping else Affine(((a, c),), (), 0))
        return out

    def evaluate(self, dims: Mapping[str, int], axes: Mapping[int, int] | None = None) -> int:
        v = self.const
        for d, c in self.dims:
            v += c * dims[d]
        for a, c in self.axes:
            v += c * (axes or {})[a]
        return v

    def format(self, axis_name: Callable[[int], str] = lambda k: f"axis{k}") -> str:
        parts: list[str] = []
        for name, c in [(axis_name(a), c) for a, c in self.axes] + list(self.dims):
            term = name if abs(c) == 1 else f"{abs(c)}*{name}"
            if not parts:
                parts.append(term if c > 0 else f"-{term}")
            else:
                parts.append(f"+ {term}" if c > 0 else f"- {term}")
        if self.const or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"+ {self.const}" if self.const > 0 else f"- {-self.const}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.format()
