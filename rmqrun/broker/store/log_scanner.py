"""Walk the commit log record by record, stopping at the first thing that is not a valid record.

Recovery uses it to find where the valid log ends and to re-dispatch records into
consume queues. Validity of a record at position P: a V1/V2 magic code, a total size
that fits in what is left of the segment, variable-length fields adding up to that
size, and then either a seal (see :mod:`record`) whose CRC over the whole record at P
matches, or (records written before the checksum existed) PHYSICALOFFSET == P and a
matching body CRC. CRCs are checked from ``verify_from`` on. A BLANK marker must claim
exactly the rest of its segment and is followed by the next segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .commit_log import CommitLog
from .errors import RecordFormatError
from .record import (BLANK_HEADER_SIZE, MIN_RECORD_SIZE, RecordHeader, check_body_crc, is_sealed, parse_header,
                     read_blank, read_int32, stored_problem)

_WINDOW = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ScannedRecord:
    pos: int
    header: RecordHeader
    #: The record is ``buf[off : off + header.total_size]``.
    buf: bytes
    off: int


class LogScanner:
    """Iterate valid records from ``start``; afterwards ``end`` and ``problem`` tell why it stopped.

    ``end`` is the offset just past the valid prefix (where the next record would go);
    ``problem`` is None when the scan reached the end of the data cleanly. Records
    before ``verify_from`` are trusted (already fsync'ed and checkpointed), so their
    CRCs are not recomputed.
    """

    def __init__(self, log: CommitLog, start: int, verify_from: int) -> None:
        self.log = log
        self.start = start
        self.verify_from = verify_from
        self.end = start
        self.last_record_pos = -1
        self.problem: str | None = None

    def __iter__(self) -> Iterator[ScannedRecord]:
        f = self.log.file
        size = f.segment_size
        pos = self.start
        while True:
            seg = f.find(pos)
            if seg is None:
                self.end = pos
                return
            seg_end = seg.start + size
            data_end = seg.start + f.file_size(seg)
            is_last = seg is f.segments[-1]
            buf = f.read(pos, _WINDOW)
            off = 0
            while True:
                avail = len(buf) - off
                if pos >= data_end:
                    self.end = pos
                    if not is_last:
                        self.problem = f"segment {seg.start} ends at {pos} without an end-of-segment marker"
                    return
                if avail < BLANK_HEADER_SIZE and pos + avail < data_end:
                    break  # window exhausted: read the next one at pos
                blank = read_blank(buf, off)
                if blank is not None:
                    if blank != seg_end - pos:
                        return self._stop(pos, f"end-of-segment marker at {pos} claims {blank} bytes, {seg_end - pos} left")
                    pos = seg_end
                    break
                if avail < BLANK_HEADER_SIZE:
                    return self._stop(pos, f"{avail} stray bytes at the end of the log")
                total = read_int32(buf, off)
                if total < MIN_RECORD_SIZE or total > seg_end - pos:
                    return self._stop(pos, f"record at {pos} has impossible size {total}")
                if total > avail:
                    if pos + total > data_end:
                        return self._stop(pos, f"record at {pos} of {total} bytes is cut off at {data_end}")
                    if off:
                        break  # re-read a window starting at this record
                    buf, off = f.read(pos, total), 0
                try:
                    header = parse_header(buf, off, limit=seg_end - pos)
                except RecordFormatError as exc:
                    return self._stop(pos, f"record at {pos}: {exc}")
                verify = pos >= self.verify_from
                problem = stored_problem(buf, off, total, pos, check_crc=verify)
                if problem:
                    return self._stop(pos, problem)
                if verify and not is_sealed(header.physical_offset) and not check_body_crc(buf, off, header):
                    return self._stop(pos, f"record at {pos}: body CRC mismatch")
                yield ScannedRecord(pos, header, buf, off)
                self.last_record_pos = pos
                pos += total
                off += total
                self.end = pos

    def _stop(self, pos: int, problem: str) -> None:
        self.end = pos
        self.problem = problem
        return None

    def stop_at(self, pos: int, problem: str) -> None:
        """Called by a consumer of the iteration that rejects the record at ``pos``."""
        self._stop(pos, problem)
