"""The append-only commit log: every record of every queue, back to back, in segments.

A record never straddles two segments. When the next record does not fit (with room
left for the 8-byte marker), the rest of the segment is claimed by a BLANK marker
(RocketMQ's ``BLANK_MAGIC_CODE`` with total size = bytes left) and writing resumes at
the next segment's start. So a record's position is its identity: the
PHYSICALOFFSET field inside it and the offset stored in consume queues, message ids
and send-back requests all name the same byte.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from .config import StoreConfig
from .disk import REAL_DISK, DiskLike
from .errors import RecordFormatError
from .record import (
    BLANK_HEADER_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    STORE_TIMESTAMP_PROBE,
    RecordHeader,
    blank_marker,
    parse_header,
    patch_int64,
    read_int32,
    read_store_timestamp,
    seal,
    store_timestamp_pos,
    stored_problem,
    unseal,
)
from .segmented_file import SegmentedFile


class CommitLog:
    """Appends (under the store's put lock) and random reads of stored-message records."""

    def __init__(self, directory: Path, config: StoreConfig, disk: DiskLike = REAL_DISK) -> None:
        self.config = config
        self.file = SegmentedFile(directory, config.segment_size, disk)
        #: Next append position. Every byte below it is fully written (maybe not fsync'ed).
        self.write_pos = 0
        #: Start of the last record below ``write_pos`` (-1: none), kept for the checkpoint.
        self.last_record_pos = -1
        self._last_store_ts = 0

    @property
    def segment_size(self) -> int:
        return self.config.segment_size

    @property
    def min_offset(self) -> int:
        return self.file.start

    # -- append ----------------------------------------------------------------------
    def append(self, records: Sequence[bytearray], headers: Sequence[RecordHeader],
               first_queue_offset: int) -> tuple[list[int], int | None]:
        """Patch and write ``records`` (queue offsets ``first_queue_offset``, +1, ...).

        Returns the position of each record and the store timestamp written into them
        (None when stamping is off). Records landing in the same segment go out in a
        single ``pwritev``, sealed (see :mod:`.record`); once written, the caller's
        bytearrays get their PHYSICALOFFSET back. The caller holds the put lock.
        """
        positions: list[int] = []
        store_ts = self._now_ms() if self.config.stamp_store_timestamp else None
        try:
            self._append_sealed(records, headers, first_queue_offset, positions, store_ts)
        finally:
            for rec, p in zip(records, positions):
                unseal(rec, 0, p)
        if positions:
            self.write_pos = positions[-1] + len(records[-1])
            self.last_record_pos = positions[-1]
        return positions, store_ts

    def _append_sealed(self, records: Sequence[bytearray], headers: Sequence[RecordHeader], first_queue_offset: int,
                       positions: list[int], store_ts: int | None) -> None:
        pending: list[bytearray] = []
        pending_pos = pos = self.write_pos
        for i, (rec, hdr) in enumerate(zip(records, headers)):
            seg_end = self.file.segment_start(pos) + self.segment_size
            if pos + len(rec) + BLANK_HEADER_SIZE > seg_end:
                if pending:
                    self.file.write(pending_pos, pending)
                    pending = []
                self.file.write(pos, [blank_marker(seg_end - pos)])
                pos = pending_pos = seg_end
            patch_int64(rec, QUEUE_OFFSET_POS, first_queue_offset + i)
            patch_int64(rec, PHYSICAL_OFFSET_POS, pos)
            if store_ts is not None:
                patch_int64(rec, store_timestamp_pos(hdr.sysflag), store_ts)
            seal(rec, pos)
            pending.append(rec)
            positions.append(pos)
            pos += len(rec)
        if pending:
            self.file.write(pending_pos, pending)

    def _now_ms(self) -> int:
        # Never go backwards inside the log, so binary search by store time stays valid
        # even if the wall clock steps back.
        now = time.time_ns() // 1_000_000
        if now < self._last_store_ts:
            now = self._last_store_ts
        self._last_store_ts = now
        return now

    def seed_store_time(self, store_ts: int) -> None:
        self._last_store_ts = max(self._last_store_ts, store_ts)

    # -- reads -----------------------------------------------------------------------
    def read(self, pos: int, size: int) -> bytes:
        """Raw bytes ``[pos, pos+size)`` (one segment; callers pass record-aligned ranges)."""
        if pos < self.min_offset or pos + size > self.write_pos:
            return b""
        return self.file.read(pos, size)

    def read_served(self, pos: int, size: int) -> bytearray:
        """Like :meth:`read`, into a buffer the caller may patch (to unseal records)."""
        if pos < self.min_offset or pos + size > self.write_pos:
            return bytearray()
        return self.file.read_into(pos, size)

    def read_record(self, pos: int, size: int | None = None) -> bytes | None:
        """The whole record at ``pos`` as a client sees it, or None if no valid record starts there.

        Positions come from clients (send-back, view by id), so the record is checked:
        in range, a message magic code, the seal's CRC (or, for a record written before
        seals, PHYSICALOFFSET equal to ``pos``).
        """
        if pos < self.min_offset or pos + 8 > self.write_pos:
            return None
        if size is None:
            head = self.file.read(pos, 8)
            if len(head) < 8:
                return None
            size = read_int32(head, 0)
        if size <= 0 or pos + size > self.write_pos:
            return None
        data = self.file.read_into(pos, size)
        try:
            hdr = parse_header(data)
        except RecordFormatError:
            return None
        if hdr.total_size != size or stored_problem(data, 0, size, pos) is not None:
            return None
        unseal(data, 0, pos)
        return bytes(data)

    def store_timestamp_at(self, pos: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``pos`` (-1 if unreadable)."""
        data = self.read(pos, min(size, STORE_TIMESTAMP_PROBE))
        if len(data) < STORE_TIMESTAMP_PROBE and len(data) < size:
            return -1
        if read_int32(data, 4) & 0xFFFFFFFF not in (MAGIC_V1, MAGIC_V2):
            return -1
        return read_store_timestamp(data)

    # -- lifecycle -------------------------------------------------------------------
    def truncate(self, pos: int, last_record_pos: int) -> None:
        # write_pos first: the flusher reads it after the file's truncate count, so a sync
        # that could still see the old end also sees the truncate and claims nothing past it.
        self.write_pos = pos
        self.last_record_pos = last_record_pos
        self.file.truncate(pos)

    def close(self) -> None:
        self.file.close()
