"""Fresh names for variables a pass introduces."""

from __future__ import annotations


class NameGen:
    """Hands out names ``base1``, ``base2`` ... that are not in ``taken`` (and records them there)."""

    def __init__(self, taken: set[str]):
        self.taken = taken
        self.counter = 0

    def fresh(self, base: str) -> str:
        while True:
            self.counter += 1
            name = f"{base}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def complex_part_names(params: tuple, dims: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """The names of the two scalar parameters each complex scalar parameter becomes (``w``: ``w_re``, ``w_im``,
    or fresh names where those are taken); what a binder passing arguments by name needs."""
    gen = NameGen({p.name for p in params} | set(dims))
    out: dict[str, tuple[str, str]] = {}
    for p in params:
        if p.dtype.is_complex and not hasattr(p, "shape"):
            names = tuple(n if n not in gen.taken else gen.fresh(n) for n in (f"{p.name}_re", f"{p.name}_im"))
            gen.taken.update(names)
            out[p.name] = names  # type: ignore[assignment]
    return out
