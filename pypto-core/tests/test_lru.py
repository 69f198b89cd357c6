"""The bounded caches of compiled programs: least recently used dropped first, safe from several threads."""

from __future__ import annotations

import threading

import pytest

from pypto._lru import LRUCache


def test_the_least_recently_used_entry_is_dropped_first():
    c: LRUCache[str, int] = LRUCache(2)
    c["a"] = 1
    c["b"] = 2
    assert c.get("a") == 1  # a is now the most recent
    c["c"] = 3
    assert "b" not in c and list(c) == ["a", "c"] and len(c) == 2
    c["a"] = 10  # replacing refreshes too
    c["d"] = 4
    assert list(c) == ["a", "d"] and c["a"] == 10
    assert c.get("b") is None and c.get("b", -1) == -1
    with pytest.raises(KeyError):
        c["b"]


def test_a_cache_of_nothing_is_refused():
    with pytest.raises(ValueError, match="maxsize must be at least 1, got 0"):
        LRUCache(0)


def test_eight_threads_never_see_a_wrong_value_and_the_bound_holds():
    c: LRUCache[int, int] = LRUCache(16)
    errors: list[str] = []
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        start.wait()
        for i in range(20_000):
            key = (i * 7919 + seed) % 64
            got = c.get(key)
            if got is not None and got != key * key:
                errors.append(f"{key} -> {got}")
            c[key] = key * key

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors[:5]
    assert len(c) == 16
