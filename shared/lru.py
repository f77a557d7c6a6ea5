"""A dict bounded by entry count that forgets the least recently used entry first (pure).

Every bounded memory in the mesh (session caches, pins, closed-session sets, memo tables) is one
of these, so "how much does this remember, and what goes first" has a single answer. Reading with
`get` leaves the order alone; `put` and `touch` make an entry the most recent. `capacity` may be
changed at any time; it is applied at the next `put`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    __slots__ = ("capacity", "_entries")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value, without making it recent."""
        return self._entries.get(key, default)

    def touch(self, key: K) -> V | None:
        """Make the entry the most recent; its value, or None when absent."""
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Set the entry as the most recent; the (key, value) pairs evicted to stay in capacity."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        evicted = []
        while len(self._entries) > self.capacity:
            evicted.append(self._entries.popitem(last=False))
        return evicted

    def pop(self, key: K, default: V | None = None) -> V | None:
        return self._entries.pop(key, default)

    def oldest(self) -> tuple[K, V] | None:
        """The least recent (key, value), left in place; None when empty (for age-based expiry)."""
        return next(iter(self._entries.items()), None)

    def __getitem__(self, key: K) -> V:
        return self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        """Keys, least recent first."""
        return iter(self._entries)

    def items(self):
        return self._entries.items()

    def values(self):
        return self._entries.values()
