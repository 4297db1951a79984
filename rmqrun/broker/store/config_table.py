"""A persisted table of named config records with a data version (topics, subscription groups).

RocketMQ's TopicConfigManager and SubscriptionGroupManager share this shape: a map
from name to a config object, plus a ``dataVersion`` (timestamp, counter) bumped on
every change so the broker can tell the name server when its topic set changed.
Thread-safe: the broker loop mutates, the store's background thread flushes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from .json_file import JsonFile, JsonLoad

T = TypeVar("T")


@dataclass(frozen=True)
class DataVersion:
    timestamp: int
    counter: int

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, data: Any) -> "DataVersion":
        return cls(int(data["timestamp"]), int(data["counter"]))


class ConfigTable(Generic[T]):
    def __init__(
        self,
        path: Path,
        table_key: str,
        to_json: Callable[[T], dict[str, Any]],
        from_json: Callable[[dict[str, Any]], T],
        name_of: Callable[[T], str],
    ) -> None:
        self._file = JsonFile(path)
        self._table_key = table_key
        self._to_json = to_json
        self._from_json = from_json
        self._name_of = name_of
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        self._dirty = False
        self.data_version = DataVersion(int(time.time() * 1000), 0)

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> JsonLoad:
        """Read the file; returns the load outcome so the caller can report a corrupt file."""
        loaded = self._file.load(self._parse)
        items, version = loaded.data if loaded.data is not None else ({}, None)
        with self._lock:
            self._items = items
            if version is not None:
                self.data_version = version
            self._dirty = False
        return loaded

    def _parse(self, data: Any) -> tuple[dict[str, T], DataVersion | None]:
        items: dict[str, T] = {}
        for raw in data[self._table_key].values():
            item = self._from_json(raw)
            items[self._name_of(item)] = item
        version = DataVersion.from_json(data["dataVersion"]) if "dataVersion" in data else None
        return items, version

    def get(self, name: str) -> T | None:
        return self._items.get(name)

    def all(self) -> dict[str, T]:
        with self._lock:
            return dict(self._items)

    def put(self, item: T) -> None:
        with self._lock:
            self._items[self._name_of(item)] = item
            self._changed()

    def delete(self, name: str) -> bool:
        with self._lock:
            if self._items.pop(name, None) is None:
                return False
            self._changed()
            return True

    def _changed(self) -> None:
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)
        self._dirty = True

    def flush(self, *, force: bool = False) -> bool:
        """Save if anything changed since the last save; returns whether it wrote."""
        with self._lock:
            if not (self._dirty or force):
                return False
            payload = {
                self._table_key: {name: self._to_json(item) for name, item in self._items.items()},
                "dataVersion": self.data_version.to_json(),
            }
            self._dirty = False
        try:
            self._file.save(payload)
        except BaseException:
            self._dirty = True
            raise
        return True
