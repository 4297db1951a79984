"""MessageStore: the embedded broker's durable storage, one object per data directory.

Layout under ``data_dir``::

    commitlog/<20-digit offset>                  records of every queue, sealed with a whole-record
                                                 CRC (commit_log.py, record.py)
    consumequeue/<topic>/<qid>/<20-digit offset> 20-byte index entries (consume_queue.py)
    checkpoint.json                              recovery starting point (checkpoint.py)
    meta.json                                    segment sizes the files were written with
    config/consumerOffset.json, topics.json, subscriptionGroup.json
    lock                                         flock'ed while open: one process per directory

Writes take one lock (the normal caller is a single asyncio thread, so it is never
contended) and go straight to the page cache with ``pwrite``; durability comes from
the flusher thread (group commit in SYNC mode, periodic in ASYNC mode); consume
queues and the checkpoint are fsync'ed by a second background thread.

Old commit-log files go by RocketMQ's retention rules, consume queues following (a
background check, see :mod:`.retention`); a data directory that cannot be used is a
:class:`DataDirError` naming it. A write that fails for lack of space is rolled back
(the log and the queue cut to where they were before it: nothing of it stays, and
nothing acknowledged before it is touched) and answered :class:`NoSpaceError`; the
store then waits for space like a disk read above its warning ratio, instead of
refusing writes until reopened as after any other I/O error. Segment files are
written through one :class:`~.disk.Disk` (``disk=``, a seam for tests).

Every record leaves the store (pull, view, send-back) exactly as RocketMQ stores it;
on disk its PHYSICALOFFSET holds a seal instead (see :mod:`.record` for why there,
and how directories written before seals keep working).
"""

from __future__ import annotations

from loguru import logger

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from .background import PeriodicTasks
from .checkpoint import Checkpoint, CheckpointFile
from .commit_log import CommitLog
from .config import FlushMode, StoreConfig
from .consume_queue import ConsumeQueue, QueueEntry, iter_entries, pack_entry
from .consumer_offsets import ConsumerOffsetStore
from .segment_space import check_first_segment_fits
from .disk import REAL_DISK, DiskLike, is_no_space
from .errors import (DataDirError, DiskFullError, MessageTooLargeError, NoSpaceError, RecordFormatError,
                     StoreClosedError, StoreError, StoreIOError, StoreLockedError)
from .flusher import CommitLogFlusher
from .json_file import JsonFile
from .log_scanner import LogScanner
from .queue_reader import DEFAULT_MAX_BYTES, Accept, Boundary, get_messages, search_offset_by_timestamp, store_time_at
from .queue_table import QueueTable, topic_name_problem
from .record import STORE_TIMESTAMP_PROBE, RecordHeader, check_body_crc, parse_header, read_store_timestamp
from .recovery import Recovery, RecoveryReport
from .results import GetResult, PutResult
from .retention import DiskUsage, Retention, RetentionListener, RetentionReport
from .subscription_groups import SubscriptionGroupStore
from .tags_code import TagsCodeFn, make_tags_code_fn
from .topic_configs import TopicConfigStore


#: While a write that found no space holds the disk-full mark, refused writes ask retention to
#: check again at most this often (seconds).
NO_SPACE_RECHECK_S = 1.0

#: Called after every successful put with (topic, queue id, new max offset); used by
#: the broker to wake long-polling pulls. Runs in the putting thread: keep it cheap.
ArrivalListener = Callable[[str, int, int], None]


class MessageStore:
    def __init__(self, data_dir: str | os.PathLike[str], config: StoreConfig | None = None, *,
                 tags_code_fn: TagsCodeFn | None = None, disk: DiskLike | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.config = config or StoreConfig()
        #: Recomputes a tags code when recovery rebuilds a consume queue; the default is
        #: RocketMQ's rule (hash of TAGS; delivery time for SCHEDULE_TOPIC_XXXX).
        self.tags_code_fn = tags_code_fn or make_tags_code_fn(self.config.message_delay_levels)
        #: Where segment files are opened, written and deleted, and disk use is read (the real ``os`` calls).
        self.disk = disk or REAL_DISK
        self._log = CommitLog(self.data_dir / "commitlog", self.config, self.disk)
        self._queues = QueueTable(self.data_dir / "consumequeue", self.config.consume_queue_entries_per_file,
                                  self.disk)
        self._checkpoint_file = CheckpointFile(self.data_dir / "checkpoint.json")
        self._put_lock = threading.Lock()
        self._flusher: CommitLogFlusher | None = None
        self._tasks: PeriodicTasks | None = None
        self._lock_fd: int | None = None
        self._failed: BaseException | None = None
        self._space_checked = -NO_SPACE_RECHECK_S
        self._known_topics: set[str] = set()
        self._last_checkpoint: Checkpoint | None = None
        self.arrival_listeners: list[ArrivalListener] = []
        #: Deletes old files (retention.py); its ``disk_usage`` and ``listeners`` are public.
        self.retention = Retention(self._log, self._queues, self.config, self.data_dir, self._put_lock, self.disk)
        config_dir = self.data_dir / "config"
        self.consumer_offsets = ConsumerOffsetStore(config_dir / ConsumerOffsetStore.FILE_NAME)
        self.retention.consumer_offsets = self.consumer_offsets
        self.topic_configs = TopicConfigStore(config_dir / TopicConfigStore.FILE_NAME)
        self.subscription_groups = SubscriptionGroupStore(config_dir / SubscriptionGroupStore.FILE_NAME)
        #: Filled by open(): what recovery did, and problems found in the JSON stores.
        self.recovery: RecoveryReport | None = None
        self.config_problems: list[str] = []

    # -- lifecycle -------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._flusher is not None

    def open(self) -> "MessageStore":
        if self.is_open:
            return self
        self._prepare_dir()
        self._take_dir_lock()
        try:
            try:
                self._open_locked()
            except StoreError:
                raise
            except OSError as exc:  # e.g. ENOSPC writing meta.json or the checkpoint
                raise DataDirError(self.data_dir, _os_reason(exc)) from exc
        except BaseException:
            self._log.close()
            self._queues.close()
            self._release_dir_lock()
            raise
        return self

    def _open_locked(self) -> None:
        rebuild_queues = self._check_meta()
        unusable = self._log.file.load()
        if not self._log.file.segments:  # a fresh directory: its disk must hold one segment (segment_space.py)
            check_first_segment_fits(self.data_dir, self.config.segment_size, self.config.max_message_size,
                                     self.disk.statvfs)
        if unusable:
            raise StoreError(f"commit log files {[p.name for p in unusable]} are misaligned or after a gap; "
                             f"is segment_size={self.config.segment_size} right?")
        _, bad_queues = self._queues.discover()
        cp, cp_problem = (None, None) if rebuild_queues else self._checkpoint_file.load()
        if self.config.recover_full_scan:
            cp = None
        self._correct_min_offsets()  # after retention, entries below the log's head are not checked
        recovery = Recovery(self._log, self._queues, self.tags_code_fn, verify_queues=self.config.verify_consume_queues)
        self.recovery = recovery.run(cp, unusable_queues=bad_queues)
        self._correct_min_offsets()
        self.retention.followed_min = self._log.min_offset
        # One retention check before the first write (the checkpoint below): a broker
        # stopped by a full disk can then start again if old files may go.
        self.retention.run()
        if cp_problem:
            self.recovery.notes.insert(0, cp_problem)
        self._seed_store_time()
        for cq in self._queues:
            cq.close()  # descriptors reopen on demand: only queues in use hold one
        self._write_checkpoint(clean=False)
        for store in (self.consumer_offsets, self.topic_configs, self.subscription_groups):
            loaded = store.load()
            if loaded.problem:
                self.config_problems.append(f"{store.path.name}: {loaded.problem}")
        self._flusher = CommitLogFlusher(self._log.file, lambda: self._log.write_pos,
                                         self.config.flush_interval_ms / 1000)
        self._flusher.start()
        self._tasks = PeriodicTasks("store-maintenance", where=str(self.data_dir))
        self._tasks.add("checkpoint", self.config.checkpoint_interval_ms / 1000, self._checkpoint)
        self._tasks.add("config-flush", self.config.config_flush_interval_ms / 1000, self.flush_configs)
        self._tasks.add("retention", self.config.clean_resource_interval_ms / 1000, self.clean_expired_files)
        self._tasks.start()

    def close(self) -> None:
        """Flush everything (commit log, consume queues, checkpoint, JSON stores) and release files.

        On a full disk the small files (checkpoint, offsets, configs) may not be saved:
        every step is still tried and the files released, then one :class:`DataDirError`
        says what was not saved. Nothing acknowledged depends on them: the commit log is
        flushed first, and the next open recovers from it.
        """
        if not self.is_open:
            return
        assert self._tasks is not None and self._flusher is not None
        self._tasks.stop()
        self._tasks = None
        self._flusher.stop()
        failed = self._flusher.error or self._failed
        self._flusher = None
        unsaved: list[tuple[str, OSError]] = []
        try:
            if failed is None:
                with self._put_lock:  # a put racing with close is synced here, not lost
                    self._log.file.sync(self._log.write_pos)
                for cq in self._queues:
                    cq.sync()
                try:
                    self._write_checkpoint(clean=True)
                except OSError as exc:
                    unsaved.append(("the checkpoint (the next open recovers from the commit log)", exc))
            try:
                self.flush_configs()
            except OSError as exc:
                unsaved.append(("consumer offsets or configs (consumers may get messages again)", exc))
        finally:
            self._log.close()
            self._queues.close()
            self._release_dir_lock()
        if unsaved:
            what = "; ".join(f"{name}: {_os_reason(exc)}" for name, exc in unsaved)
            raise DataDirError(self.data_dir, f"closed, but could not save {what}") from unsaved[0][1]

    def __enter__(self) -> "MessageStore":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepare_dir(self) -> None:
        """Create the data directory; refuse one that is a file or not writable, naming it."""
        d = self.data_dir
        if d.exists() and not d.is_dir():
            raise DataDirError(d, "exists but is not a directory")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(d, f"cannot be created: {_os_reason(exc)}") from exc
        if not os.access(d, os.W_OK | os.X_OK):
            raise DataDirError(d, "is not writable by this user")

    def _take_dir_lock(self) -> None:
        try:
            fd = os.open(self.data_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise DataDirError(self.data_dir, f"cannot create its lock file: {_os_reason(exc)}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(self.data_dir) from None
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _correct_min_offsets(self) -> None:
        log_min = self._log.min_offset
        if log_min > 0:
            for cq in self._queues:
                cq.correct_min_offset(log_min)

    def _check_meta(self) -> bool:
        """Refuse a segment size the log was not written with; returns True if queues must be rebuilt."""
        meta_file = JsonFile(self.data_dir / "meta.json", keep_backup=False)
        meta = meta_file.load().data or {}
        want = {"segmentSize": self.config.segment_size,
                "consumeQueueEntriesPerFile": self.config.consume_queue_entries_per_file}
        have_seg = meta.get("segmentSize")
        if have_seg is not None and have_seg != self.config.segment_size:
            raise StoreError(f"{self.data_dir} was written with segment_size={have_seg}, "
                             f"config says {self.config.segment_size}")
        rebuild = meta.get("consumeQueueEntriesPerFile", want["consumeQueueEntriesPerFile"]) != \
            want["consumeQueueEntriesPerFile"]
        if meta != want:
            meta_file.save(want)
        return rebuild

    def _seed_store_time(self) -> None:
        last = self._log.last_record_pos
        if last >= 0:
            self._log.seed_store_time(read_store_timestamp(self._log.file.read(last, STORE_TIMESTAMP_PROBE)))

    # -- writes ----------------------------------------------------------------------
    def put(self, topic: str, queue_id: int, record: bytearray, tags_code: int) -> PutResult:
        """Append one record; see :meth:`put_many`."""
        return self.put_many(topic, queue_id, [record], [tags_code])[0]

    def put_many(self, topic: str, queue_id: int, records: Sequence[bytearray],
                 tags_codes: Sequence[int]) -> list[PutResult]:
        """Append records to one queue with consecutive queue offsets, in one write per segment.

        Each record must be a complete stored-message record of ``topic``/``queue_id``
        with a correct BODYCRC (recovery trusts exactly what is checked here). The
        store patches QUEUEOFFSET, PHYSICALOFFSET and (unless disabled) STORETIMESTAMP
        in the caller's bytearrays. Returns once the bytes are in the page cache; use
        :meth:`put_sync` / :meth:`flush_to` for durability.
        """
        if len(records) != len(tags_codes):
            raise ValueError(f"{len(records)} records but {len(tags_codes)} tags codes")
        if not records:
            return []
        headers = [self._check_record(topic, queue_id, r) for r in records]
        with self._put_lock:
            self._check_writable()
            cq = self._queues.get_or_create(topic, queue_id)
            first = cq.max_offset
            log_end, log_last = self._log.write_pos, self._log.last_record_pos
            try:
                positions, store_ts = self._log.append(records, headers, first)
                cq.append(b"".join(pack_entry(p, len(r), t) for p, r, t in zip(positions, records, tags_codes)),
                          len(records))
            except OSError as exc:
                if is_no_space(exc) and self._roll_back(cq, first, log_end, log_last, exc):
                    raise self._no_space(exc) from exc
                # The log and the queue may now disagree; only recovery (reopen) may fix that.
                self._failed = exc
                logger.error("store write failed, refusing further writes until reopened: {}", exc)
                raise StoreIOError(f"store write failed: {exc}") from exc
            max_offset = cq.max_offset
        for listener in self.arrival_listeners:
            listener(topic, queue_id, max_offset)
        return [
            PutResult(first + i, p, len(r), h.store_timestamp if store_ts is None else store_ts)
            for i, (p, r, h) in enumerate(zip(positions, records, headers))
        ]

    async def put_sync(self, topic: str, queue_id: int, record: bytearray, tags_code: int) -> PutResult:
        """:meth:`put`, then in SYNC flush mode wait until the record is fsync'ed.

        In ASYNC mode it returns right away, like RocketMQ ASYNC_FLUSH (the background
        flush makes it durable within ``flush_interval_ms``).
        """
        result = self.put(topic, queue_id, record, tags_code)
        if self.config.flush_mode is FlushMode.SYNC:
            await self.flush_to(result.end_offset)
        return result

    async def put_many_sync(self, topic: str, queue_id: int, records: Sequence[bytearray],
                            tags_codes: Sequence[int]) -> list[PutResult]:
        results = self.put_many(topic, queue_id, records, tags_codes)
        if results and self.config.flush_mode is FlushMode.SYNC:
            await self.flush_to(results[-1].end_offset)
        return results

    async def flush_to(self, offset: int) -> None:
        """Wait until every commit-log byte below ``offset`` is fsync'ed (any flush mode)."""
        await self._open_flusher().wait_for(offset)

    def flush(self, timeout: float | None = None) -> None:
        """Blocking: fsync everything written so far (for threads and scripts)."""
        self._open_flusher().wait_blocking(self._log.write_pos, timeout)

    def set_commit_log_fsync(self, fsync: Callable[[int], None] | None) -> None:
        """Replace the call that makes a commit-log file durable (None: ``os.fdatasync``).

        The seam through which tests check that nothing waiting on durability (a
        SYNC-flush send's answer) runs before the fsync returns, or after it fails.
        """
        self._log.file.fsync = fsync

    def _open_flusher(self) -> CommitLogFlusher:
        if self._flusher is None:
            raise StoreClosedError("store is not open")
        return self._flusher

    def _check_writable(self) -> None:
        flusher = self._open_flusher()
        failed = self._failed or flusher.error
        if failed is not None:
            raise StoreIOError(f"store is fenced after an I/O error ({failed}); reopen it to recover")
        if self.retention.disk_full:
            if self.retention.no_space:
                self._recheck_space()
                raise NoSpaceError(self.data_dir, self.retention.last_used, self.config.disk_space_warning_level_ratio,
                                   "a write failed: no space left")
            raise DiskFullError(self.data_dir, self.retention.last_used,
                                self.config.disk_space_warning_level_ratio)

    def _recheck_space(self) -> None:
        """Have retention check now (at most once a second) while a write that found no space holds
        the mark: writes then resume within about a second of space coming back, not a whole
        ``clean_resource_interval_ms`` later."""
        now = time.monotonic()
        if self._tasks is not None and now - self._space_checked >= NO_SPACE_RECHECK_S:
            self._space_checked = now
            self._tasks.run_soon("retention")

    def _roll_back(self, cq: ConsumeQueue, queue_end: int, log_end: int, log_last: int, cause: OSError) -> bool:
        """Undo a put that failed for lack of space: the commit log and the queue go back to
        where they were before it (a torn record, a blank marker, a new empty file: all cut).
        False if even that failed (the store is then fenced as after any I/O error)."""
        try:
            self._log.truncate(log_end, log_last)
            cq.truncate(queue_end)
        except OSError as exc:
            logger.error("rolling back a write that failed ({}) failed too: {}", cause, exc)
            return False
        return True

    def _no_space(self, exc: OSError) -> NoSpaceError:
        """Hold the disk-full mark after a write failed for lack of space, and have retention check now."""
        self.retention.note_no_space()
        self._recheck_space()
        return NoSpaceError(self.data_dir, self.retention.last_used, self.config.disk_space_warning_level_ratio,
                            exc.strerror or str(exc))

    def _check_record(self, topic: str, queue_id: int, record: bytearray) -> RecordHeader:
        if len(record) > self.config.max_message_size:
            raise MessageTooLargeError(len(record), self.config.max_message_size)
        if not isinstance(record, bytearray):
            raise TypeError(f"record must be a bytearray (the store patches it), not {type(record).__name__}")
        if topic not in self._known_topics:
            problem = topic_name_problem(topic)
            if problem:
                raise RecordFormatError(problem)
            self._known_topics.add(topic)
        if queue_id < 0:
            raise RecordFormatError(f"queue id {queue_id} is negative")
        header = parse_header(record)
        if header.total_size != len(record):
            raise RecordFormatError(f"TOTALSIZE says {header.total_size} but the record has {len(record)} bytes")
        if header.topic != topic or header.queue_id != queue_id:
            raise RecordFormatError(f"record is for {header.topic}/{header.queue_id}, put to {topic}/{queue_id}")
        if not check_body_crc(record, 0, header):
            raise RecordFormatError("BODYCRC does not match the body (expected crc32(body) & 0x7FFFFFFF)")
        return header

    # -- reads -----------------------------------------------------------------------
    def get(self, topic: str, queue_id: int, offset: int, max_msgs: int, max_bytes: int = DEFAULT_MAX_BYTES,
            accept: Accept | None = None) -> GetResult:
        """Up to ``max_msgs`` records from ``offset`` (RocketMQ ``getMessage`` semantics).

        ``accept(tags_code)`` filters by the consume-queue tags code; rejected entries
        are skipped but still advance ``next_begin_offset``. At least one record is
        returned even if it alone exceeds ``max_bytes``.
        """
        return get_messages(self._log, self._queues.get(topic, queue_id), offset, max_msgs, max_bytes, accept)

    def read_at(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The record starting at ``commit_log_offset`` (None if there is none)."""
        return self._log.read_record(commit_log_offset, size)

    def scan_records(self, start: int, end: int) -> Iterator[tuple[int, RecordHeader, bytes, int]]:
        """Valid records whose position is in [start, end): (position, header, buffer, offset in buffer).

        For derived indexes (:mod:`key_index`); stops early at anything recovery would not accept.
        """
        scanner = LogScanner(self._log, start, verify_from=2**63 - 1)
        for rec in scanner:
            if rec.pos + rec.header.total_size > end:
                return
            yield rec.pos, rec.header, rec.buf, rec.off

    def delete_topic_queues(self, topic: str) -> int:
        """Destroy every consume queue of ``topic`` (DELETE_TOPIC_IN_BROKER); returns how many."""
        doomed = [cq for cq in self._queues if cq.key[0] == topic]
        for cq in doomed:
            self._queues.remove(cq)  # closes it and deletes its files
        self._known_topics.discard(topic)
        return len(doomed)

    def queue_entries(self, topic: str, queue_id: int, offset: int, count: int) -> list[QueueEntry] | None:
        """Up to ``count`` consume-queue entries from ``offset``, within one file as Java's ``getIndexBuffer``
        (``mqadmin queryCq``); None when the queue does not exist."""
        cq = self._queues.get(topic, queue_id)
        if cq is None:
            return None
        return [QueueEntry(*e) for e in iter_entries(cq.read_entries(offset, count))]

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def offset_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(:meth:`min_offset`, :meth:`max_offset`) with one look-up of the queue (an ack checks both)."""
        cq = self._queues.get(topic, queue_id)
        return (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def store_time_at(self, topic: str, queue_id: int, offset: int) -> int:
        """STORETIMESTAMP (ms) of the message at ``offset``, -1 if there is none."""
        return store_time_at(self._log, self._queues.get(topic, queue_id), offset)

    def search_offset_by_timestamp(self, topic: str, queue_id: int, ts_ms: int,
                                   boundary: Boundary = "lower") -> int:
        return search_offset_by_timestamp(self._log, self._queues.get(topic, queue_id), ts_ms, boundary)

    def earliest_store_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the first message of a queue, or of the whole log without arguments; -1 if none."""
        if topic is not None:
            return self.store_time_at(topic, queue_id or 0, self.min_offset(topic, queue_id or 0))
        if self._log.write_pos <= self._log.min_offset:
            return -1
        return self._log.store_timestamp_at(self._log.min_offset, STORE_TIMESTAMP_PROBE)

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue id) that has a consume queue."""
        return sorted(self._queues.keys())

    @property
    def commit_log_min_offset(self) -> int:
        return self._log.min_offset

    @property
    def commit_log_max_offset(self) -> int:
        """Where the next record will be written."""
        return self._log.write_pos

    @property
    def commit_log_cuts(self) -> int:
        """How many times the commit log's tail was cut (recovery, a write rolled back for lack of
        space): derived indexes that read the log without the put lock start again when it changes."""
        return self._log.file.truncations

    @property
    def flushed_offset(self) -> int:
        """Every commit-log byte below this is fsync'ed."""
        return self._log.file.synced_pos

    # -- retention -------------------------------------------------------------------
    def clean_expired_files(self, now: float | None = None) -> RetentionReport | None:
        """One retention check (runs every ``clean_resource_interval_ms``; callable directly).

        ``now`` (epoch seconds) stands for the clock in tests. None when the store is
        fenced after an I/O error (nothing is deleted then).
        """
        if self._failed is not None or (self._flusher is not None and self._flusher.error is not None):
            return None
        return self.retention.run(now)

    def set_disk_usage(self, fn: DiskUsage | None) -> None:
        """Replace the disk-use reading retention decides on (None: the store's :class:`~.disk.Disk`'s)."""
        self.retention.disk_usage = fn or self.retention.real_disk_usage

    @property
    def disk_full(self) -> bool:
        """The last retention check found the disk above ``disk_space_warning_level_ratio``:
        writes are refused until it is back at or under ``disk_space_clean_forcibly_ratio``."""
        return self.retention.disk_full

    def disk_used(self) -> float:
        """A fresh disk-use reading (0.0-1.0) of the data directory, through the same seam
        retention decides on (``set_disk_usage``)."""
        return self.retention.disk_usage(self.data_dir)

    def add_retention_listener(self, listener: RetentionListener) -> None:
        """Call ``listener(new_commit_log_min_offset)`` after retention deleted commit-log files."""
        self.retention.listeners.append(listener)

    # -- background ------------------------------------------------------------------
    def _checkpoint(self) -> None:
        flusher = self._flusher
        if flusher is None or flusher.error is not None or self._failed is not None:
            return
        with self._put_lock:
            offset, last = self._log.write_pos, self._log.last_record_pos
            counts = {cq.key: cq.max_offset for cq in self._queues if cq.max_offset}
            dirty = [cq for cq in self._queues if cq.dirty]
            for cq in dirty:
                cq.dirty = False
        prev = self._last_checkpoint
        if prev is not None and prev.commit_log_offset == offset and not dirty:
            return
        flusher.wait_blocking(offset)
        try:
            for cq in dirty:
                cq.sync()
        except BaseException:
            for cq in dirty:
                cq.dirty = True
            raise
        self._save_checkpoint(Checkpoint(offset, last, counts))

    def _write_checkpoint(self, *, clean: bool) -> None:
        counts = {cq.key: cq.max_offset for cq in self._queues if cq.max_offset}
        self._save_checkpoint(Checkpoint(self._log.write_pos, self._log.last_record_pos, counts, clean))

    def _save_checkpoint(self, cp: Checkpoint) -> None:
        self._checkpoint_file.save(cp)
        self._last_checkpoint = cp

    def flush_configs(self) -> None:
        """Save the JSON stores that changed (also runs periodically and on close)."""
        for store in (self.consumer_offsets, self.topic_configs, self.subscription_groups):
            store.flush()


def _os_reason(exc: OSError) -> str:
    """``strerror`` plus the file when the error names one ("No space left on device (meta.json)")."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({exc.filename})" if exc.filename else reason
