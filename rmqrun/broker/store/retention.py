"""Retention: delete old commit-log files, then let the consume queues follow.

The rules are RocketMQ's (``CleanCommitLogService`` / ``CleanConsumeQueueService`` of
``DefaultMessageStore``, defaults from ``MessageStoreConfig``), so an operator's
expectations carry over:

* A commit-log file is *expired* when it was last written more than
  ``file_reserved_hours`` ago (72). Expired files are deleted only at one of the
  ``delete_when`` hours ("04"), or at once whatever the hour when the data
  directory's file system is more than ``disk_max_used_space_ratio`` percent used
  (75). Above ``disk_space_clean_forcibly_ratio`` (85) files go even unexpired,
  oldest first, one at a time with the disk read again after each, until use is
  back at or under that ratio: only what brings it there goes (RocketMQ deletes a
  whole batch). Deletion always starts at the head and stops at the first file
  that must stay, takes at most ``delete_files_batch_max`` files per check (10),
  and never touches the file being written. A deleted file's descriptor is closed
  as soon as no read holds it (:mod:`.segmented_file`), so its space is free for
  the next reading, as ``df`` sees it.
* Then every consume queue drops its head files whose entries all point below the
  commit log's new minimum, and its min offset moves to its first entry that still
  points into the log. Listeners (the key index, the broker) hear the new minimum.

Disk full: above ``disk_space_warning_level_ratio`` (90) the store is marked *disk
full* and refuses writes (:class:`~.errors.DiskFullError`; the broker answers sends
SERVICE_NOT_AVAILABLE) while retention deletes the oldest files; the mark is lifted
once use is back at or under ``disk_space_clean_forcibly_ratio`` (85), not before, so a
disk hovering near the limit does not flap. This is RocketMQ's running-flags rule
(``isSpaceToDelete`` marks DISK_FULL above 0.90 and clears it at or under 0.85).
A disk that fills between two checks makes a write fail with ENOSPC first: the
store rolls that write back and sets the same mark at once (:meth:`Retention.note_no_space`),
and the next check (run right away) frees space and lifts it by the same rule.

Consumers that asked for messages retention had already deleted are told the new
minimum and continue there; those messages are counted (:meth:`Retention.count_skipped`).

Readers never see a deleted file: the commit log refuses positions below its
minimum, a pull below a queue's min offset is OFFSET_TOO_SMALL (PULL_OFFSET_MOVED
on the wire, with the new min as the next offset), and a read in flight on a
deleted file completes on it before its descriptor is closed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from loguru import logger

from .commit_log import CommitLog
from .config import StoreConfig, delete_hours
from .disk import REAL_DISK, DiskLike, StatVfs, used_ratio
from .queue_table import QueueTable
from .retention_loss import OffsetsLike, losses, report
from .segment_space import FencedReport

#: Reads the used share (0.0-1.0) of the file system holding a directory. A seam for tests.
DiskUsage = Callable[[Path], float]
#: Told the commit log's new minimum offset after files were deleted.
RetentionListener = Callable[[int], None]
#: How long a forced deletion waits for reads in flight on a deleted file before reading
#: the disk again (a read holds a file for one pread; this is a bound, not a pause).
RELEASE_WAIT_S = 1.0


def disk_used_ratio(path: Path, statvfs: Callable[[Path], StatVfs] | None = None) -> float:
    """The used share of the file system holding ``path``, as RocketMQ and ``df`` measure it
    (:func:`~.disk.used_ratio`): the same figure a Java broker on this disk would compare
    with its ratios."""
    return used_ratio((statvfs or os.statvfs)(path))


@dataclass
class RetentionReport:
    """What one check did (returned for tests and the admin code)."""

    disk_used: float
    reason: str | None  # "time", "disk", "forced" or None (nothing was due)
    deleted_commit_log_files: list[str] = field(default_factory=list)
    deleted_queue_files: int = 0
    commit_log_min_offset: int = 0


class Retention:
    def __init__(self, log: CommitLog, queues: QueueTable, config: StoreConfig, data_dir: Path,
                 lock: threading.Lock, disk: DiskLike = REAL_DISK) -> None:
        self.log = log
        self.queues = queues
        self.config = config
        self.data_dir = data_dir
        self._lock = lock  # the store's put lock: segment lists change only under it
        self._hours = delete_hours(config.delete_when)
        self.disk = disk
        self.disk_usage: DiskUsage = self.real_disk_usage
        self.listeners: list[RetentionListener] = []
        #: The commit-log minimum the consume queues (and listeners) have caught up with.
        self.followed_min = log.min_offset
        self._disk_state = "ok"
        #: True while the disk is above ``disk_space_warning_level_ratio`` (and until it is
        #: back at or under ``disk_space_clean_forcibly_ratio``): the store refuses writes.
        self.disk_full = False
        #: The last disk-use reading (0.0-1.0), for the answers that quote it.
        self.last_used = 0.0
        #: One deletion at a time: a check counts the files to drop before it takes the put lock, so the
        #: periodic check and an operator's (:meth:`delete_expired_now`) must not interleave.
        self._run_lock = threading.Lock()
        #: The disk-full mark was set by a write failing for lack of space (not by a reading).
        self.no_space = False
        #: Messages consumers asked for after retention had deleted them (they continue
        #: at the queue's new minimum), since the store opened; see :meth:`count_skipped`.
        self.skipped_messages = 0
        self._skipped_to: dict[tuple[str, str, int], int] = {}
        #: the groups' committed offsets (set by the store once it has them): a deletion names at once each
        #: group that loses messages it had not consumed (retention_loss.py)
        self.consumer_offsets: OffsetsLike | None = None
        #: why the files about to go are deleted, for that line
        self._why = "expired"
        #: a line every minute while writes are refused for lack of space (segment_space.py)
        self._fenced = FencedReport()

    def real_disk_usage(self, path: Path) -> float:
        """The disk-use reading of ``path`` through the store's :class:`~.disk.Disk`."""
        return disk_used_ratio(path, self.disk.statvfs)

    def run(self, now: float | None = None) -> RetentionReport:
        """One check: delete what is due (see the module docstring)."""
        with self._run_lock:
            return self._run(now)

    def delete_expired_now(self, now: float | None = None, rounds: int = 20) -> list[str]:
        """Java's ``executeDeleteFilesManually`` (``mqadmin deleteExpiredCommitLog``): expired files go now,
        whatever the hour, up to ``rounds`` batches; unexpired ones stay. Returns the deleted files' names."""
        now = time.time() if now is None else now
        deleted: list[str] = []
        with self._run_lock:
            self._why = f"expired (older than {self.config.file_reserved_hours:g} h), deleted on request"
            for _ in range(rounds):
                batch = self._delete_commit_log(now)
                if not batch:
                    break
                deleted += batch
            self.follow()
        return deleted

    def _run(self, now: float | None) -> RetentionReport:
        now = time.time() if now is None else now
        used = self.disk_usage(self.data_dir)
        self.last_used = used
        state = self._note_disk_state(used)
        if state == "forced":
            reason: str | None = "forced"
        elif state == "over":
            reason = "disk"
        elif time.localtime(now).tm_hour in self._hours:
            reason = "time"
        else:
            reason = None
        report = RetentionReport(used, reason)
        self._why = (f"unexpired: the disk was above disk_space_clean_forcibly_ratio "
                     f"{self.config.disk_space_clean_forcibly_ratio}%" if reason == "forced"
                     else f"older than {self.config.file_reserved_hours:g} h, file_reserved_hours")
        if reason == "forced":
            report.deleted_commit_log_files = self._delete_forced()
        elif reason is not None:
            report.deleted_commit_log_files = self._delete_commit_log(now)
        report.deleted_queue_files = self.follow()
        report.commit_log_min_offset = self.log.min_offset
        self._fenced.note(self.disk_full, time.monotonic(), self.data_dir, self.last_used,
                          len(self.log.file.segments), self.config.segment_size)
        return report

    def follow(self) -> int:
        """Make the consume queues (and listeners) follow the commit log's minimum; returns files deleted."""
        log_min = self.log.min_offset
        if log_min <= self.followed_min:
            return 0
        deleted = 0
        before = {cq.key: cq.min_offset for cq in self.queues}
        for cq in self.queues:
            with self._lock:
                deleted += cq.delete_files_below(log_min)
        self.followed_min = log_min
        if self.consumer_offsets is not None:
            report(losses(before, self.queues, self.consumer_offsets), self._why)
        for listener in self.listeners:
            try:
                listener(log_min)
            except Exception:
                logger.opt(exception=True).error("retention listener failed")
        return deleted

    def _delete_commit_log(self, now: float) -> list[str]:
        """Expired files from the head (at the delete hour, or with the disk above its max ratio)."""
        reserved_s = self.config.file_reserved_hours * 3600
        file = self.log.file
        count = 0
        segments = file.segments
        for seg in segments[:-1][: self.config.delete_files_batch_max]:
            if os.stat(seg.path).st_mtime + reserved_s > now:
                break
            count += 1
        if not count:
            return []
        with self._lock:
            dropped = file.drop_head(count)
        names = [seg.path.name for seg in dropped]
        logger.info("retention deleted commit log file(s) {} (older than {:g} h); commit log now starts at {}",
                    names, self.config.file_reserved_hours, self.log.min_offset)
        return names

    def _delete_forced(self) -> list[str]:
        """Oldest files first, expired or not, one at a time, until the disk reads at or under
        ``disk_space_clean_forcibly_ratio`` again: each file's space is free (its descriptor
        closed) before the next reading, so a file that already brought use under goes alone."""
        file = self.log.file
        limit = self.config.disk_space_clean_forcibly_ratio
        names: list[str] = []
        while len(names) < self.config.delete_files_batch_max:
            with self._lock:
                dropped = file.drop_head(1)
            if not dropped:
                break
            names.append(dropped[0].path.name)
            if not file.wait_released(dropped, RELEASE_WAIT_S):
                logger.warning("a read still holds deleted commit log file {} after {:g} s; its space is not free "
                               "yet", dropped[0].path, RELEASE_WAIT_S)
            self.last_used = self.disk_usage(self.data_dir)
            if self.last_used <= limit / 100:
                break
        if names:
            logger.warning("retention deleted commit log file(s) {} (disk above {}%, unexpired files too); disk now "
                        "{:.0%} used; commit log now starts at {}", names, limit, self.last_used, self.log.min_offset)
            self._note_disk_state(self.last_used)
        return names

    def note_no_space(self) -> None:
        """A write failed for lack of space before a check saw the disk fill (the store rolled it
        back): set the disk-full mark now. The next check deletes what it must and lifts the mark
        by the usual rule (at or under ``disk_space_clean_forcibly_ratio``)."""
        try:
            self.last_used = self.disk_usage(self.data_dir)
        except OSError:
            self.last_used = 1.0
        if not self.disk_full:
            logger.error("disk of {} is full (a write failed: no space left, {:.0%} used): the store refuses writes "
                         "(sends are answered SERVICE_NOT_AVAILABLE) until retention or the operator brings use at or "
                         "under {}%; nothing acknowledged was lost", self.data_dir, self.last_used,
                         self.config.disk_space_clean_forcibly_ratio)
        self.disk_full = True
        self.no_space = True

    def count_skipped(self, group: str, topic: str, queue_id: int, requested: int, new_min: int) -> int:
        """Count (and log) the messages ``group`` asked for from ``requested`` that retention
        deleted before it got them: it continues at ``new_min``. Each message is counted once
        per group however often the old offset is asked again. Returns how many were new."""
        key = (group, topic, queue_id)
        start = max(requested, self._skipped_to.get(key, 0))
        if new_min <= start:
            return 0
        self._skipped_to[key] = new_min
        skipped = new_min - start
        self.skipped_messages += skipped
        logger.warning("retention deleted {} message(s) of {} queue {} (offsets {}..{}) before group {} consumed "
                       "them; it continues at {} ({} skipped since the store opened)", skipped, topic, queue_id,
                       start, new_min - 1, group, new_min, self.skipped_messages)
        return skipped

    def _note_disk_state(self, used: float) -> str:
        """Classify the reading, set or clear the disk-full mark (hysteresis between the
        warning and forcible ratios), and log one line when either changed, naming the
        directory: a disk that stays full is not reported at every check."""
        cfg = self.config
        if used > cfg.disk_space_clean_forcibly_ratio / 100:
            state = "forced"
        elif used > cfg.disk_max_used_space_ratio / 100:
            state = "over"
        else:
            state = "ok"
        full = used > cfg.disk_space_warning_level_ratio / 100 or (
            self.disk_full and used > cfg.disk_space_clean_forcibly_ratio / 100)
        if not full:
            self.no_space = False
        if state == self._disk_state and full == self.disk_full:
            return state
        cleaning = {"forced": "deleting the oldest commit log files now",
                    "over": "deleting expired commit log files now",
                    "ok": "retention waits for delete_when again"}[state]
        if full and not self.disk_full:
            logger.error("disk of {} is {:.0%} used (above disk_space_warning_level_ratio {}%): the store refuses "
                         "writes (sends are answered SERVICE_NOT_AVAILABLE) until use is back at or under {}%; {}",
                         self.data_dir, used, cfg.disk_space_warning_level_ratio,
                         cfg.disk_space_clean_forcibly_ratio, cleaning)
        elif self.disk_full and not full:
            logger.info("disk of {} back to {:.0%} used: the store accepts writes again; {}", self.data_dir, used,
                        cleaning)
        elif state == "ok":
            logger.info("disk of {} back to {:.0%} used: {}", self.data_dir, used, cleaning)
        else:
            logger.warning("disk of {} is {:.0%} used (above {}%): {}", self.data_dir, used,
                           cfg.disk_space_clean_forcibly_ratio if state == "forced" else cfg.disk_max_used_space_ratio,
                           cleaning)
        self._disk_state = state
        self.disk_full = full
        return state
