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
