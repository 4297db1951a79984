"""Java ``HashMap`` iteration order, so stored properties come out byte-identical.

The real broker keeps message properties in a ``java.util.HashMap`` and writes
them back (``messageProperties2String``) in that map's iteration order: the
CLUSTER property it adds, the WAIT it drops and the REAL_TOPIC/REAL_QID it adds
for delayed messages all land in hash-bucket order, not at the end. A consumer
does not care, but a byte-level comparison with the captured pull bodies does,
and so does anyone diffing our commit log against a real one.

:class:`JavaPropertyMap` is a small model of that map: a Python dict (which
keeps insertion order, and moves a key to the end when it is deleted and put
again, exactly like a HashMap bucket's linked list) plus the table capacity,
which only ever grows. Iteration sorts by bucket index, stably. Two HashMap
behaviours are modelled: doubling past the 0.75 load factor, and a bin of nine
entries resizing a table smaller than 64 instead of becoming a tree. The order
inside a treeified bin (nine colliding keys in a table of 64 or more) is not.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator

from rmqrun.protocol.java_order import DEFAULT_CAPACITY, spread_hash
from rmqrun.remoting.message_props import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, java_string_hash

_MIN_TREEIFY_CAPACITY = 64
_TREEIFY_THRESHOLD = 8


@lru_cache(maxsize=4096)
def _key_hash(key: str) -> int:
    """Spread hash of a property name; names repeat endlessly, so they are cached."""
    return spread_hash(java_string_hash(key))




class JavaPropertyMap:
    """A ``HashMap<String, String>`` of message properties, in Java's iteration order."""

    __slots__ = ("_items", "_capacity", "_hashes", "_bins")

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items: dict[str, str] = {}
        self._hashes: dict[str, int] = {}
        self._bins: dict[int, int] = {}  # entries per bucket at the current capacity
        self._capacity = 0  # lazily allocated, like the Java table
        for key, value in items:
            self.put(key, value)

    @classmethod
    def parse(cls, text: str | None) -> "JavaPropertyMap":
        """``MessageDecoder.string2messageProperties``: pairs with an empty name or an
        empty value are skipped, a trailing separator is fine, later duplicates win."""
        out = cls()
        if not text:
            return out
        for item in text.split(PROPERTY_SEPARATOR):
            if len(item) < 3:
                continue
            name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
            if sep and name and value:
                out.put(name, value)
        return out

    # ------------------------------------------------------------------ map operations

    def _bucket(self, key: str) -> int:
        return self._hashes[key] & (self._capacity - 1)

    def put(self, key: str, value: str) -> None:
        if key in self._items:
            self._items[key] = value  # a replaced value keeps its place
            return
        if self._capacity == 0:
            self._capacity = DEFAULT_CAPACITY
        h = _key_hash(key)
        self._hashes[key] = h
        self._items[key] = value
        index = h & (self._capacity - 1)
        count = self._bins.get(index, 0) + 1
        self._bins[index] = count
        if count > _TREEIFY_THRESHOLD and self._capacity < _MIN_TREEIFY_CAPACITY:
            self._resize()  # treeifyBin on a small table resizes instead
        if len(self._items) > self._capacity * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        self._capacity *= 2
        mask = self._capacity - 1
        bins: dict[int, int] = {}
        for h in self._hashes.values():
            bins[h & mask] = bins.get(h & mask, 0) + 1
        self._bins = bins

    def remove(self, key: str) -> str | None:
        h = self._hashes.pop(key, None)
        if h is not None:
            self._bins[h & (self._capacity - 1)] -= 1
        return self._items.pop(key, None)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._items.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def keys(self) -> list[str]:
        if not self._items:
            return []
        return sorted(self._items, key=self._bucket)  # sorted() is stable: bucket, then insertion

    def items(self) -> Iterator[tuple[str, str]]:
        for key in self.keys():
            yield key, self._items[key]

    def to_dict(self) -> dict[str, str]:
        return dict(self.items())

    def copy(self) -> "JavaPropertyMap":
        out = JavaPropertyMap()
        out._items = dict(self._items)
        out._hashes = dict(self._hashes)
        out._bins = dict(self._bins)
        out._capacity = self._capacity
        return out

    def to_string(self) -> str:
        """``messageProperties2String``: ``name\\x01value`` joined by ``\\x02``, no trailing separator."""
        return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in self.items())

    def __repr__(self) -> str:
        return f"JavaPropertyMap({self.to_dict()!r})"
