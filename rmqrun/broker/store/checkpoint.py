"""The recovery checkpoint: how far the commit log and consume queues are known to be durable.

Written (atomically) by the checkpoint service after it has fsync'ed the commit log up
to ``commit_log_offset`` and every consume queue entry describing a record below it.
On open, records below that offset are trusted and consume queues only need checking
against ``queue_counts``; only what lies after it is re-validated and re-dispatched.
That keeps recovery proportional to the last checkpoint interval, not to the data.
A missing or inconsistent checkpoint simply means "scan everything from 0".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .json_file import JsonFile

VERSION = 1


@dataclass
class Checkpoint:
    #: A record boundary; every record below it is fsync'ed and in its consume queue.
    commit_log_offset: int = 0
    #: Start of the last record below ``commit_log_offset`` (-1: none), re-validated on open.
    last_record_pos: int = -1
    #: (topic, queue id) -> entries of that queue describing records below the offset.
    queue_counts: dict[tuple[str, int], int] = field(default_factory=dict)
    #: True when written by a clean close.
    clean: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "commitLogOffset": self.commit_log_offset,
            "lastRecordPos": self.last_record_pos,
            "clean": self.clean,
            "queues": [[t, q, n] for (t, q), n in sorted(self.queue_counts.items())],
        }

    @classmethod
    def from_json(cls, data: Any) -> "Checkpoint":
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError(f"unsupported checkpoint {str(data)[:80]!r}")
        counts: dict[tuple[str, int], int] = {}
        for topic, qid, count in data["queues"]:
            counts[(str(topic), int(qid))] = int(count)
        return cls(
            commit_log_offset=int(data["commitLogOffset"]),
            last_record_pos=int(data["lastRecordPos"]),
            queue_counts=counts,
            clean=bool(data.get("clean", False)),
        )


class CheckpointFile:
    def __init__(self, path: Path) -> None:
        # No backup: an older checkpoint is still a correct (just less useful) one, and a
        # missing one only costs a full scan.
        self._file = JsonFile(path, keep_backup=False)

    def load(self) -> tuple[Checkpoint | None, str | None]:
        loaded = self._file.load()
        if loaded.data is None:
            return None, loaded.problem
        try:
            return Checkpoint.from_json(loaded.data), None
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"unusable checkpoint: {exc}"

    def save(self, cp: Checkpoint) -> None:
        self._file.save(cp.to_json())

    def delete(self) -> None:
        self._file.path.unlink(missing_ok=True)
