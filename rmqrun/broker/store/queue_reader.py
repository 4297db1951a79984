"""Reads through a consume queue: pull batches and searches by store time.

A pull walks consume-queue entries from the requested offset, skips those the
filter rejects, stops when the batch is full, then reads the chosen records from
the commit log with one ``pread`` per span of records close together (records of one
queue written together sit next to each other; records sent to several queues in turn
lie a few KiB apart, and reading the other queues' bytes between them costs less than
a read per record), and hands back memoryview slices of that buffer: no per-message
copies.

Each record's seal is checked and removed in that buffer (see :mod:`.record`): a
record whose CRC does not match is never served. Like RocketMQ's ``getMessage``
with an unreadable entry, it is skipped (logged as an error) and the pull goes on
past it; a pull that found only such records is MESSAGE_WAS_REMOVING.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable, Literal

from loguru import logger

from .commit_log import CommitLog
from .consume_queue import ConsumeQueue, iter_entries
from .record import unseal_span
from .results import GetMessageStatus as S
from .results import GetResult

#: RocketMQ scans at most max(16000 bytes of consume queue, maxMsgNums entries) per pull.
MIN_SCAN_ENTRIES = 16000 // 20
#: RocketMQ maxTransferBytesOnMessageInMemory (256 KiB).
DEFAULT_MAX_BYTES = 256 * 1024
#: A queue's next record at most this many bytes past the end of the one before is read with it, the bytes between
#: (other queues' records) read through: one read() costs as much as copying some 30 KiB from the page cache, and
#: a queue's records usually lie a few KiB apart (producers spread their sends over the queues).
SPAN_GAP = 16 * 1024
#: The most one read spans (a pull's records are at most DEFAULT_MAX_BYTES; this bounds the gaps read through).
SPAN_MAX = 1024 * 1024

Accept = Callable[[int], bool]
Boundary = Literal["lower", "upper"]


def get_messages(
    log: CommitLog,
    cq: ConsumeQueue | None,
    offset: int,
    max_msgs: int,
    max_bytes: int,
    accept: Accept | None,
) -> GetResult:
    """Mirror of ``DefaultMessageStore.getMessage`` (4.9.8) for a master broker."""
    if cq is None or cq.max_offset == 0:
        return GetResult(S.NO_MESSAGE_IN_QUEUE, [], 0, 0, 0)
    lo, hi = cq.min_offset, cq.max_offset
    if offset < lo:
        return GetResult(S.OFFSET_TOO_SMALL, [], lo, lo, hi)
    if offset == hi:
        return GetResult(S.OFFSET_OVERFLOW_ONE, [], offset, lo, hi)
    if offset > hi:
        return GetResult(S.OFFSET_OVERFLOW_BADLY, [], hi, lo, hi)

    end = min(hi, offset + max(MIN_SCAN_ENTRIES, max_msgs))
    picked: list[tuple[int, int]] = []
    total = 0
    index = offset
    full = False
    # First the batch and the entry after it (which tells that the batch is full): without a filter that is all a
    # pull reads, 33 entries rather than the 800 of the scan (a 16 KiB read per pull). Only a filter that
    # skips entries (or a segment's end) makes it go on, reading the rest of the scan at once.
    chunk = max_msgs + 1
    while index < end and not full:
        data = cq.read_entries(index, min(end - index, chunk))
        chunk = end - offset
        if not data:
            break
        for phys, size, tags in iter_entries(data):
            # Same order as isTheBatchFull: a full batch stops before this entry (which
            # the next pull starts from); at least one message is always taken.
            if picked and (len(picked) >= max_msgs or total + size > max_bytes):
                full = True
                break
            index += 1
            if accept is not None and not accept(tags):
                continue
            picked.append((phys, size))
            total += size
    if index == offset and not picked:
        return GetResult(S.OFFSET_FOUND_NULL, [], offset, lo, hi)
    records = _read_runs(log, picked)
    if records:
        status = S.FOUND
    else:
        status = S.MESSAGE_WAS_REMOVING if picked else S.NO_MATCHED_MESSAGE
    return GetResult(status, records, index, lo, hi)


def _read_runs(log: CommitLog, picked: list[tuple[int, int]]) -> list[bytes | memoryview]:
    """The records ``picked`` (position, size), in order, with one read per span: records of the segment at most
    :data:`SPAN_GAP` apart, the bytes between them read through (see the module docstring)."""
    records: list[bytes | memoryview] = []
    n = len(picked)
    segment_size = log.segment_size
    i = 0
    while i < n:
        start, size = picked[i]
        end = start + size
        limit = min(start - start % segment_size + segment_size, start + SPAN_MAX)  # records never cross a segment
        j = i + 1
        while j < n:
            pos, size = picked[j]
            if pos + size > limit or pos < end or pos - end > SPAN_GAP:
                break
            end = pos + size
            j += 1
        buf = log.read_served(start, end - start)
        # every record checked and unsealed where it lies in the span: one call per span, not one per run of
        # back-to-back records (records of queues sent to in turn are each a run of one)
        for pos in unseal_span(buf, picked[i:j], records, start):
            logger.error("commit log record at {} fails its CRC or names another position: not served", pos)
        i = j
    return records


def store_time_at(log: CommitLog, cq: ConsumeQueue | None, offset: int) -> int:
    if cq is None or not cq.min_offset <= offset < cq.max_offset:
        return -1
    entry = cq.entry(offset)
    if entry is None:
        return -1
    return log.store_timestamp_at(entry.commit_log_offset, entry.size)


class _TimeView:
    """Sequence view of a queue's store times for ``bisect`` (one disk probe per access)."""

    def __init__(self, log: CommitLog, cq: ConsumeQueue) -> None:
        self.log, self.cq = log, cq

    def __len__(self) -> int:
        return self.cq.max_offset

    def __getitem__(self, offset: int) -> int:
        return store_time_at(self.log, self.cq, offset)


def search_offset_by_timestamp(log: CommitLog, cq: ConsumeQueue | None, ts_ms: int, boundary: Boundary) -> int:
    """Offset of the message at ``ts_ms``, with RocketMQ 5.x ``BoundaryType`` semantics.

    ``lower``: the first offset whose store time is >= ts (max offset if every message
    is older). ``upper``: the last offset whose store time is <= ts (min offset if every
    message is newer). An empty queue gives 0. Store times are non-decreasing along a
    queue because the store stamps them under the append lock.
    """
    if boundary not in ("lower", "upper"):
        raise ValueError(f"boundary must be 'lower' or 'upper', not {boundary!r}")
    if cq is None or cq.max_offset == 0:
        return 0
    times = _TimeView(log, cq)
    lo, hi = cq.min_offset, cq.max_offset
    if boundary == "lower":
        return bisect_left(times, ts_ms, lo, hi)
    return max(lo, bisect_right(times, ts_ms, lo, hi) - 1)
