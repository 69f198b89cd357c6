"""A bounded mapping that forgets the least recently used entry first (compiled programs, generated kernels).

Compiled kernels hold native code; a cache of them that only grows would hold a long-running process's
memory without bound. Entries dropped here are freed once nothing else refers to them (see
:mod:`pypto.targets.cpu.loader`); asked for again, they are rebuilt from pypto's disk cache (a load, not a
compilation). Lookups and insertions are safe from several threads (each is one ``OrderedDict`` step).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``maxsize`` entries: a hit makes an entry the most recent, and inserting into a full cache
    drops the least recently used one."""

    def __init__(self, maxsize: int):
        if maxsize < 1:
            raise ValueError(f"LRUCache: maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        data = self._data
        try:
            value = data[key]
        except KeyError:
            return default
        try:
            data.move_to_end(key)
        except KeyError:  # dropped by another thread in between: still a valid result
            pass
        return value

    def __setitem__(self, key: K, value: V) -> None:
        data = self._data
        data[key] = value
        data.move_to_end(key)
        while len(data) > self.maxsize:
            try:
                data.popitem(last=False)
            except KeyError:
                break

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)  # type: ignore[arg-type]
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._data))

    def values(self) -> list[V]:
        return list(self._data.values())

    def clear(self) -> None:
        self._data.clear()


_MISSING = object()
