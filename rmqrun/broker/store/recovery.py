"""Bring the commit log and consume queues back to a consistent state on open.

After a crash the commit log may end with a torn record, and consume queues (flushed
lazily) may lack entries, hold torn entries, or hold entries for records that never
became durable. Recovery makes them agree again:

1. Check the checkpoint: its last record must still be valid and end at its offset C.
   If not (or there is none), trust nothing: every consume queue is rebuilt from 0.
2. Check each consume queue against the checkpoint: at least the checkpointed number
   of entries, structurally sane (offsets increasing, below C), and a few entries
   sampled against the commit log. A queue failing that is rebuilt from 0.
3. Scan the commit log: from its first file (0 unless retention deleted the head; a
   rebuilt queue then starts at its first surviving record's queue offset and its
   min offset is corrected by the store) if anything is rebuilt (records below C are trusted,
   so their CRC is skipped and only rebuilt queues are fed), else from C. Every
   record is validated (see :mod:`log_scanner`: structure, position, and the whole-
   record CRC of sealed records, so a torn tail is cut wherever it is torn: header,
   body, topic or properties) and must carry the next queue offset
   of its queue; the first record that does not is where the valid log ends.
4. Truncate the commit log there, and set every consume queue to exactly the entries
   for records in the valid log (rewritten from the scan, trimmed, or deleted).

The result: entry N of every queue points at a valid record whose QUEUEOFFSET is N,
and every valid record has its entry.
"""

from __future__ import annotations

from loguru import logger

from dataclasses import dataclass, field

from .checkpoint import Checkpoint
from .commit_log import CommitLog
from .consume_queue import ENTRY_SIZE, ConsumeQueue, iter_entries, pack_entry
from .errors import RecordFormatError
from .log_scanner import LogScanner, ScannedRecord
from .queue_table import QueueTable, topic_name_problem
from .record import MIN_RECORD_SIZE, check_body_crc, is_sealed, parse_header, parse_properties, read_blank, stored_problem
from .tags_code import TagsCodeFn


_FLUSH_BYTES = 1 << 20  # write rebuilt entries out in 1 MiB chunks: memory stays bounded
_OLD_ENTRIES_MAX = 65536  # old entries kept to reuse caller-given tags codes
_SAMPLES = 16
QueueKey = tuple[str, int]


@dataclass
class RecoveryReport:
    checkpoint_used: bool
    scanned_from: int
    commit_log_end: int
    truncated_bytes: int
    records_scanned: int
    #: Why the scan stopped before the end of the data (None: clean end).
    problem: str | None = None
    rebuilt_queues: list[QueueKey] = field(default_factory=list)
    #: queue -> (entries before, entries after), for queues whose length changed.
    resized_queues: dict[QueueKey, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class _Feed:
    """Entries being (re)written into one queue from ``base`` on."""

    def __init__(self, cq: ConsumeQueue, base: int, old: bytes) -> None:
        self.cq = cq
        self.base = base
        self.next = base
        self.written = base
        self.buf = bytearray()
        self.old = old
        self.before = cq.max_offset

    def old_tags(self, index: int, pos: int, size: int) -> int | None:
        start = (index - self.base) * ENTRY_SIZE
        if start + ENTRY_SIZE > len(self.old):
            return None
        phys, sz, tags = next(iter_entries(self.old[start : start + ENTRY_SIZE]))
        return tags if (phys, sz) == (pos, size) else None

    def add(self, entry: bytes) -> None:
        self.buf += entry
        self.next += 1
        if len(self.buf) >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            write_entries(self.cq, self.written, self.buf)
            self.written = self.next
            self.buf = bytearray()


def write_entries(cq: ConsumeQueue, offset: int, entries: bytes | bytearray) -> None:
    """Write packed entries at ``offset`` without moving ``max_offset`` (recovery only)."""
    pos = offset * ENTRY_SIZE
    view = memoryview(entries)
    seg_size = cq.file.segment_size
    while view:
        chunk = view[: seg_size - pos % seg_size]
        cq.file.write(pos, [chunk])
        pos += len(chunk)
        view = view[len(chunk):]


class Recovery:
    def __init__(self, log_: CommitLog, queues: QueueTable, tags_fn: TagsCodeFn, *, verify_queues: bool) -> None:
        self.log = log_
        self.queues = queues
        self.tags_fn = tags_fn
        self.verify_queues = verify_queues

    def run(self, cp: Checkpoint | None, *, unusable_queues: list[QueueKey]) -> RecoveryReport:
        data_end = self.log.file.end_of_files()
        self.log.write_pos = data_end  # lets checks read anything present on disk
        notes: list[str] = []
        if cp is not None:
            why = self._checkpoint_problem(cp, data_end)
            if why:
                notes.append(f"checkpoint ignored: {why}")
                cp = None
        rebuild: set[QueueKey] = set()
        if cp is None:
            for cq in self.queues:
                self.queues.remove(cq)
            counts: dict[QueueKey, int] = {}
            c_off, last_rec = 0, -1
        else:
            counts = dict(cp.queue_counts)
            c_off, last_rec = cp.commit_log_offset, cp.last_record_pos
            for key in unusable_queues:
                notes.append(f"queue {key} has misaligned or gapped segment files")
                rebuild.add(key)
            rebuild |= self._check_queues(counts, c_off, notes, skip=rebuild)
        for key in rebuild:
            cq = self.queues.get(*key)
            if cq is not None:
                self.queues.remove(cq)
        # After retention the log no longer starts at 0: a full scan starts at its head.
        start = self.log.min_offset if (cp is None or rebuild) else c_off
        scanner = LogScanner(self.log, start, verify_from=c_off)
        feeds: dict[QueueKey, _Feed] = {}
        scanned = self._scan(scanner, c_off, counts, rebuild, feeds, full=cp is None)
        end = scanner.end
        if scanner.last_record_pos >= 0:
            last_rec = scanner.last_record_pos
        elif end < c_off or cp is None:
            last_rec = -1
        report = RecoveryReport(
            checkpoint_used=cp is not None,
            scanned_from=start,
            commit_log_end=end,
            truncated_bytes=max(0, data_end - end),
            records_scanned=scanned,
            problem=scanner.problem,
            rebuilt_queues=sorted(rebuild) if cp is not None else sorted(feeds),
            notes=notes,
        )
        self._settle_queues(feeds, counts, end, c_off, report)
        segments = self.log.file.segments
        if end != data_end or (segments and segments[-1].start > end):
            self.log.truncate(end, last_rec)
        else:
            self.log.write_pos, self.log.last_record_pos = end, last_rec
        self.log.file.sync(end)
        for cq in self.queues:
            cq.sync()
        if report.problem or report.truncated_bytes:
            logger.warning("commit log recovered to {} (dropped {} bytes): {}", end, report.truncated_bytes, report.problem)
        return report

    # -- step 1 ----------------------------------------------------------------------
    def _checkpoint_problem(self, cp: Checkpoint, data_end: int) -> str | None:
        c_off, last = cp.commit_log_offset, cp.last_record_pos
        # The log may end with an end-of-segment marker and no next file yet: then the
        # checkpoint sits at the end of that segment, beyond the last byte on disk.
        last_seg_end = self.log.file.segment_start(max(data_end - 1, 0)) + self.log.segment_size
        beyond = c_off > data_end and c_off != last_seg_end
        if beyond or (c_off < self.log.min_offset and c_off != 0):
            return f"offset {c_off} is outside the commit log [{self.log.min_offset}, {data_end}]"
        if last < 0:
            return None if c_off == self.log.min_offset else f"no last record but offset {c_off}"
        head = self.log.file.read(last, 8)
        if len(head) < 8:
            return f"last record {last} is missing"
        size = int.from_bytes(head[:4], "big", signed=True)
        data = self.log.file.read(last, size) if size >= MIN_RECORD_SIZE else b""
        try:
            hdr = parse_header(data)
        except RecordFormatError as exc:
            return f"last record {last} is invalid: {exc}"
        problem = stored_problem(data, 0, hdr.total_size, last)
        if problem or (not is_sealed(hdr.physical_offset) and not check_body_crc(data, 0, hdr)):
            return f"last record {last} fails its checks: {problem or 'body CRC mismatch'}"
        rec_end = last + hdr.total_size
        if rec_end == c_off:
            return None
        seg_end = self.log.file.segment_start(last) + self.log.segment_size
        blank = read_blank(self.log.file.read(rec_end, 8), 0)
        if c_off == seg_end and blank == seg_end - rec_end:
            return None
        return f"last record {last} ends at {rec_end}, not at {c_off}"

    # -- step 2 ----------------------------------------------------------------------
    def _check_queues(
        self, counts: dict[QueueKey, int], c_off: int, notes: list[str], skip: set[QueueKey]
    ) -> set[QueueKey]:
        bad: set[QueueKey] = set()
        for key, count in counts.items():
            cq = self.queues.get(*key)
            if count == 0 or key in skip:
                continue
            if cq is None:
                notes.append(f"queue {key} is missing")
                bad.add(key)
                continue
            why = self._queue_problem(cq, count, c_off)
            if why:
                notes.append(f"queue {key}: {why}")
                bad.add(key)
        return bad

    def _queue_problem(self, cq: ConsumeQueue, count: int, c_off: int) -> str | None:
        if cq.max_offset < count:
            return f"has {cq.max_offset} entries, checkpoint says {count}"
        if self.verify_queues:
            prev_end = -1
            offset = cq.min_offset
            while offset < count:
                data = cq.read_entries(offset, min(count - offset, 65536))
                if len(data) < ENTRY_SIZE:
                    return f"cannot read entry {offset}"
                for phys, size, _tags in iter_entries(data):
                    if phys < prev_end or size < MIN_RECORD_SIZE or phys + size > c_off:
                        return f"entry {offset} ({phys}, {size}) is out of order or out of range"
                    prev_end = phys + size
                    offset += 1
        step = max(1, count // _SAMPLES)
        lo = cq.min_offset  # entries below it point at commit-log files retention deleted
        if lo >= count:
            return None
        for n in sorted({lo, count - 1, *range(lo, count, step)}):
            entry = cq.entry(n)
            if entry is None:
                return f"entry {n} unreadable"
            data = self.log.file.read(entry.commit_log_offset, entry.size)
            try:
                hdr = parse_header(data)
            except RecordFormatError as exc:
                return f"entry {n} points at no record: {exc}"
            if (hdr.topic, hdr.queue_id, hdr.queue_offset, hdr.total_size) != (
                cq.topic, cq.queue_id, n, entry.size
            ):
                return f"entry {n} points at a record of {hdr.topic}/{hdr.queue_id} offset {hdr.queue_offset}"
            # Position only: these records are below the checkpoint, trusted (their CRC is
            # checked when they are read).
            problem = stored_problem(data, 0, hdr.total_size, entry.commit_log_offset, check_crc=False)
            if problem:
                return f"entry {n} points at a bad record: {problem}"
        return None

    # -- step 3 ----------------------------------------------------------------------
    def _scan(
        self,
        scanner: LogScanner,
        c_off: int,
        counts: dict[QueueKey, int],
        rebuild: set[QueueKey],
        feeds: dict[QueueKey, _Feed],
        *,
        full: bool,
    ) -> int:
        scanned = 0
        for rec in scanner:
            h = rec.header
            key = (h.topic, h.queue_id)
            trusted = rec.pos < c_off
            if trusted and key not in rebuild:
                continue
            feed = feeds.get(key)
            if feed is None:
                problem = topic_name_problem(h.topic)
                if problem or h.queue_id < 0:
                    scanner.stop_at(rec.pos, f"record at {rec.pos}: {problem or 'negative queue id'}")
                    break
                if full or key in rebuild:
                    # A rebuilt queue starts where its first surviving record says (0 unless
                    # retention deleted the log's head).
                    base = h.queue_offset if self.log.min_offset > 0 else 0
                else:
                    base = counts.get(key, 0)
                feed = feeds[key] = self._new_feed(key, base)
            if h.queue_offset != feed.next:
                scanner.stop_at(
                    rec.pos,
                    f"record at {rec.pos} has queue offset {h.queue_offset}, {h.topic}/{h.queue_id} expects {feed.next}",
                )
                break
            feed.add(pack_entry(rec.pos, h.total_size, self._tags(feed, rec)))
            scanned += 1
        return scanned

    def _new_feed(self, key: QueueKey, base: int) -> _Feed:
        cq = self.queues.get_or_create(*key)
        old = cq.read_entries(base, _OLD_ENTRIES_MAX) if cq.max_offset > base else b""
        return _Feed(cq, base, old)

    def _tags(self, feed: _Feed, rec: ScannedRecord) -> int:
        h = rec.header
        tags = feed.old_tags(feed.next, rec.pos, h.total_size)
        if tags is not None:
            return tags
        start = rec.off + h.properties_pos
        props = parse_properties(rec.buf[start : start + h.properties_len])
        return self.tags_fn(h.topic, props, h.store_timestamp)

    # -- step 4 ----------------------------------------------------------------------
    def _settle_queues(
        self, feeds: dict[QueueKey, _Feed], counts: dict[QueueKey, int], end: int, c_off: int, report: RecoveryReport
    ) -> None:
        for key, feed in feeds.items():
            feed.flush()
            before = feed.before
            feed.cq.truncate(feed.next)
            if before != feed.next:
                report.resized_queues[key] = (before, feed.next)
        for cq in self.queues:
            if cq.key in feeds:
                continue
            keep = counts.get(cq.key, 0)
            if end < c_off and keep:
                keep = self._entries_below(cq, keep, end)
            before = cq.max_offset
            if keep == 0:
                self.queues.remove(cq)
            elif before != keep:
                cq.truncate(keep)
            if before != keep:
                report.resized_queues[cq.key] = (before, keep)

    @staticmethod
    def _entries_below(cq: ConsumeQueue, count: int, end: int) -> int:
        """How many of the first ``count`` entries describe records wholly below ``end``."""
        lo, hi = min(cq.min_offset, count), count  # entries below the min point at deleted files
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            if e is not None and e.commit_log_offset + e.size <= end:
                lo = mid + 1
            else:
                hi = mid
        return lo
