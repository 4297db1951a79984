"""All consume queues of the store, found on disk under ``consumequeue/<topic>/<queueId>/``."""

from __future__ import annotations

from loguru import logger

import shutil
import threading
from pathlib import Path
from typing import Iterator

from .consume_queue import ConsumeQueue
from .disk import REAL_DISK, DiskLike


_MAX_TOPIC_LEN = 127  # RocketMQ's limit for V1 records (TOPIC length is a byte)


def topic_name_problem(topic: str) -> str | None:
    """Why ``topic`` cannot name a directory, or None. Stricter names are the broker's call."""
    if not topic:
        return "topic is empty"
    if topic in (".", "..") or "/" in topic or "\x00" in topic:
        return f"topic {topic!r} cannot be a directory name"
    if len(topic.encode("utf-8")) > 255:
        return f"topic {topic!r} is longer than 255 bytes"
    return None


class QueueTable:
    def __init__(self, root: Path, entries_per_file: int, disk: DiskLike = REAL_DISK) -> None:
        self.root = Path(root)
        self.entries_per_file = entries_per_file
        self.disk = disk
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._create_lock = threading.Lock()

    def discover(self) -> tuple[list[ConsumeQueue], list[tuple[str, int]]]:
        """Load every queue directory. Returns the queues and the keys of unusable ones.

        A queue with misaligned or gapped segment files is unusable (recovery rebuilds it).
        """
        found: list[ConsumeQueue] = []
        bad: list[tuple[str, int]] = []
        if not self.root.is_dir():
            return found, bad
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not (qdir.is_dir() and qdir.name.isdigit()) or topic_name_problem(topic_dir.name):
                    logger.warning("ignoring unexpected path {}", qdir)
                    continue
                cq = ConsumeQueue(self.root, topic_dir.name, int(qdir.name), self.entries_per_file, self.disk)
                if cq.load():
                    bad.append(cq.key)
                self._queues[cq.key] = cq
                found.append(cq)
        return found, bad

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            with self._create_lock:
                cq = self._queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(self.root, topic, queue_id, self.entries_per_file, self.disk)
                    self._queues[cq.key] = cq
        return cq

    def remove(self, cq: ConsumeQueue) -> None:
        """Delete a queue's files and forget it (recovery only)."""
        self._queues.pop(cq.key, None)
        cq.close()
        shutil.rmtree(cq.file.directory, ignore_errors=True)
        try:
            cq.file.directory.parent.rmdir()
        except OSError:
            pass

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self._queues.values()))

    def __len__(self) -> int:
        return len(self._queues)

    def keys(self) -> list[tuple[str, int]]:
        return list(self._queues)

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
