"""One consume queue: a dense array of 20-byte entries for one (topic, queue id).

Entry N (at byte 20*N) is ``(commitLogOffset int64, size int32, tagsCode int64)`` of
the queue's N-th message, exactly RocketMQ's ConsumeQueue unit. The array lives in
segment files of ``entries_per_file`` entries (RocketMQ: 300,000 = 6,000,000 bytes),
under ``consumequeue/<topic>/<queueId>/``. Segments rather than one file per queue
because the segment machinery already exists for the commit log and because
retention is then "unlink the head files and raise the min offset", as in RocketMQ
(see :mod:`.retention`): once the commit log's head files are gone, the queue's
files whose every entry points below the log's new minimum are deleted, and the
queue's min offset becomes its first entry still pointing into the log (it may sit
inside the first remaining file). Queues are flushed lazily: recovery can always
rebuild them from the commit log.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .disk import REAL_DISK, DiskLike
from .segmented_file import SegmentedFile

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20


@dataclass(frozen=True, slots=True)
class QueueEntry:
    commit_log_offset: int
    size: int
    tags_code: int


def pack_entry(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return ENTRY.pack(commit_log_offset, size, tags_code)


def iter_entries(data: bytes) -> Iterator[tuple[int, int, int]]:
    usable = len(data) - len(data) % ENTRY_SIZE
    return ENTRY.iter_unpack(memoryview(data)[:usable])


class ConsumeQueue:
    def __init__(self, root: Path, topic: str, queue_id: int, entries_per_file: int,
                 disk: DiskLike = REAL_DISK) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file = SegmentedFile(root / topic / str(queue_id), entries_per_file * ENTRY_SIZE, disk)
        #: Number of entries = the next offset to be written (RocketMQ's max offset).
        self.max_offset = 0
        #: Set on append, cleared when the checkpoint service picks the queue up for fsync.
        self.dirty = False
        #: First entry that still points into the commit log (RocketMQ's minLogicOffset / 20);
        #: raised by :meth:`correct_min_offset` after retention, never below the first file.
        self.min_logic_offset = 0

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.queue_id)

    @property
    def min_offset(self) -> int:
        return max(self.file.start // ENTRY_SIZE, self.min_logic_offset)

    def correct_min_offset(self, log_min: int) -> None:
        """Raise the min offset to the first entry whose record starts at or after ``log_min``.

        Entries are ordered by commit-log position, so that is a binary search; when
        every entry points below ``log_min`` the queue is logically empty (min = max).
        """
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            data = self.file.read(mid * ENTRY_SIZE, ENTRY_SIZE)
            phys = ENTRY.unpack(data)[0] if len(data) == ENTRY_SIZE else -1
            if phys < log_min:
                lo = mid + 1
            else:
                hi = mid
        self.min_logic_offset = lo

    def delete_files_below(self, log_min: int) -> int:
        """Delete head files whose last entry points below ``log_min`` (never the last file).

        Returns how many files went; then raises the min offset (:meth:`correct_min_offset`).
        """
        segments = self.file.segments
        count = 0
        for seg in segments[:-1]:
            last = self.file.read(seg.start + self.file.segment_size - ENTRY_SIZE, ENTRY_SIZE)
            if len(last) < ENTRY_SIZE or ENTRY.unpack(last)[0] >= log_min:
                break
            count += 1
        dropped = len(self.file.drop_head(count)) if count else 0
        self.correct_min_offset(log_min)
        return dropped

    def load(self) -> list[Path]:
        """Find the segment files; returns unusable ones (misaligned, after a gap, short).

        Entries are dense, so every segment but the last must be completely full.
        """
        unusable = self.file.load()
        for seg in self.file.segments[:-1]:
            if self.file.file_size(seg) != self.file.segment_size:
                unusable.append(seg.path)
        self.max_offset = self.file.end_of_files() // ENTRY_SIZE
        return unusable

    def append(self, entries: bytes | bytearray, count: int) -> None:
        """Append ``count`` packed entries (may span a segment boundary)."""
        pos = self.max_offset * ENTRY_SIZE
        seg_size = self.file.segment_size
        if pos % seg_size + len(entries) <= seg_size:  # the usual case: one write
            self.file.write(pos, (entries,))
            self.max_offset += count
            self.dirty = True
            return
        view = memoryview(entries)
        while view:
            room = seg_size - pos % seg_size
            chunk = view[:room]
            self.file.write(pos, [chunk])
            pos += len(chunk)
            view = view[len(chunk):]
        self.max_offset += count
        self.dirty = True

    def read_entries(self, offset: int, count: int) -> bytes:
        """Up to ``count`` packed entries from ``offset``, never past one segment's end."""
        count = min(count, self.max_offset - offset)
        if count <= 0 or offset < self.min_offset:
            return b""
        return self.file.read(offset * ENTRY_SIZE, count * ENTRY_SIZE)

    def entry(self, offset: int) -> QueueEntry | None:
        data = self.read_entries(offset, 1)
        if len(data) < ENTRY_SIZE:
            return None
        return QueueEntry(*ENTRY.unpack(data))

    def truncate(self, count: int) -> None:
        self.file.truncate(count * ENTRY_SIZE)
        self.max_offset = count
        self.min_logic_offset = min(self.min_logic_offset, count)

    def sync(self) -> None:
        self.file.sync(self.max_offset * ENTRY_SIZE)

    def close(self) -> None:
        self.file.close()

    def destroy(self) -> None:
        self.file.destroy()
        self.max_offset = 0
        try:
            self.file.directory.parent.rmdir()  # the topic directory, if now empty
        except OSError:
            pass
