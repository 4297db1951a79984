"""Persisted consumer offsets: group -> topic -> queue id -> next offset to consume.

RocketMQ keeps them in ``consumerOffset.json`` keyed ``topic@group``; here the nesting
is explicit. Commits arrive on every pull and every 5 s per client, so they only
mark the table dirty; the store's background thread saves it periodically and on
close (RocketMQ: flushConsumerOffsetInterval, 5 s). A crash can therefore roll
offsets back by one interval, which at-least-once consumers tolerate.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .json_file import JsonFile, JsonLoad

#: what :meth:`ConsumerOffsetStore.queue_offsets` gives for a topic without stored offsets
_NONE: Mapping[int, int] = MappingProxyType({})

VERSION = 1


class ConsumerOffsetStore:
    FILE_NAME = "consumerOffset.json"

    def __init__(self, path: Path) -> None:
        self._file = JsonFile(path)
        self._table: dict[str, dict[str, dict[int, int]]] = {}
        self._lock = threading.Lock()
        self._dirty = False

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> JsonLoad:
        loaded = self._file.load(self._parse)
        with self._lock:
            self._table = loaded.data if loaded.data is not None else {}
            self._dirty = False
        return loaded

    @staticmethod
    def _parse(data: Any) -> dict[str, dict[str, dict[int, int]]]:
        table: dict[str, dict[str, dict[int, int]]] = {}
        for group, topics in data["offsetTable"].items():
            for topic, queues in topics.items():
                table.setdefault(str(group), {})[str(topic)] = {int(q): int(o) for q, o in queues.items()}
        return table

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            queues = self._table.setdefault(group, {}).setdefault(topic, {})
            if queues.get(queue_id) != offset:
                queues[queue_id] = offset
                self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The stored offset, or None (the broker answers QUERY_NOT_FOUND)."""
        return self._table.get(group, {}).get(topic, {}).get(queue_id)

    def queue_offsets(self, group: str, topic: str) -> Mapping[int, int]:
        """The group's stored offsets of ``topic`` by queue, the live table (read it, never change it): a pop
        reads every queue's offset of one topic, and one look-up serves them all. Empty when none is stored."""
        return self._table.get(group, {}).get(topic, _NONE)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return dict(self._table.get(group, {}).get(topic, {}))

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._table)

    def topics_of(self, group: str) -> list[str]:
        with self._lock:
            return sorted(self._table.get(group, {}))

    def groups_of_topic(self, topic: str) -> list[str]:
        with self._lock:
            return sorted(g for g, topics in self._table.items() if topic in topics)

    def remove_group(self, group: str, topic: str | None = None) -> bool:
        with self._lock:
            topics = self._table.get(group)
            if topics is None:
                return False
            if topic is None:
                del self._table[group]
            elif topics.pop(topic, None) is None:
                return False
            elif not topics:
                del self._table[group]
            self._dirty = True
            return True

    def flush(self, *, force: bool = False) -> bool:
        with self._lock:
            if not (self._dirty or force):
                return False
            payload = {
                "version": VERSION,
                "offsetTable": {
                    g: {t: {str(q): o for q, o in sorted(qs.items())} for t, qs in topics.items()}
                    for g, topics in self._table.items()
                },
            }
            self._dirty = False
        try:
            self._file.save(payload)
        except BaseException:
            self._dirty = True
            raise
        return True
