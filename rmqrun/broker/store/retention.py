"""Retention: delete old commit-log files, then let the consume queues follow.

The rules are RocketMQ's (``CleanCommitLogService`` / ``CleanConsumeQueueService`` of
``DefaultMessageStore``, defaults from ``MessageStoreConfig``), so an operator's
expectations carry over:

* A commit-log file is *expired* when it was last written more than
  ``file_reserved_hours`` ago (72). Expired files are deleted only at one of the
  ``delete_when`` hours ("04"), or at once whatever the hour when the data
  directory's file system is more than ``disk_max_used_space_ratio`` percent used
  (75). Above ``disk_space_clean_forcibly_ratio`` (85) files go even unexpired,
  oldest first. Deletion always starts at the head and stops at the first file
  that must stay, takes at most ``delete_files_batch_max`` files per check (10),
  and never touches the file being written.
* Then every consume queue drops its head files whose entries all point below the
  commit log's new minimum, and its min offset moves to its first entry that still
  points into the log. Listeners (the key index, the broker) hear the new minimum.

Disk full: above ``disk_space_warning_level_ratio`` (90) the store is marked *disk
full* and refuses writes (:class:`~.errors.DiskFullError`; the broker answers sends
SERVICE_NOT_AVAILABLE) while retention deletes the oldest files; the mark is lifted
once use is back at or under ``disk_space_clean_forcibly_ratio`` (85), not before, so a
disk hovering near the limit does not flap. This is RocketMQ's running-flags rule
(``isSpaceToDelete`` marks DISK_FULL above 0.90 and clears it at or under 0.85).

Readers never see a deleted file: the commit log refuses positions below its
minimum, a pull below a queue's min offset is OFFSET_TOO_SMALL (PULL_OFFSET_MOVED
on the wire, with the new min as the next offset), and descriptors of deleted
files stay open until the next deletion so reads in flight complete.
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
from .queue_table import QueueTable

#: Reads the used share (0.0-1.0) of the file system holding a directory. A seam for tests.
DiskUsage = Callable[[Path], float]
#: Told the commit log's new minimum offset after files were deleted.
RetentionListener = Callable[[int], None]


def disk_used_ratio(path: Path) -> float:
    """The used share of the file system holding ``path``, as RocketMQ measures it.

    Used blocks over used + available-to-users blocks (blocks reserved for root count
    as unavailable, so a disk a non-root broker can no longer write to reads 100%),
    rounded *up* to a whole percent: the same figure a Java broker on this disk would
    compare with its ratios.
    """
    st = os.statvfs(path)
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    if entire <= 0:
        return 0.0
    return -(-used * 100 // entire) / 100


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
                 lock: threading.Lock) -> None:
        self.log = log
        self.queues = queues
        self.config = config
        self.data_dir = data_dir
        self._lock = lock  # the store's put lock: segment lists change only under it
        self._hours = delete_hours(config.delete_when)
        self.disk_usage: DiskUsage = disk_used_ratio
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
            for _ in range(rounds):
                batch = self._delete_commit_log(now, forced=False)
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
        if reason is not None:
            report.deleted_commit_log_files = self._delete_commit_log(now, forced=reason == "forced")
        report.deleted_queue_files = self.follow()
        report.commit_log_min_offset = self.log.min_offset
        return report

    def follow(self) -> int:
        """Make the consume queues (and listeners) follow the commit log's minimum; returns files deleted."""
        log_min = self.log.min_offset
        if log_min <= self.followed_min:
            return 0
        deleted = 0
        for cq in self.queues:
            with self._lock:
                deleted += cq.delete_files_below(log_min)
        self.followed_min = log_min
        for listener in self.listeners:
            try:
                listener(log_min)
            except Exception:
                logger.opt(exception=True).error("retention listener failed")
        return deleted

    def _delete_commit_log(self, now: float, *, forced: bool) -> list[str]:
        reserved_s = self.config.file_reserved_hours * 3600
        file = self.log.file
        count = 0
        segments = file.segments
        for seg in segments[:-1][: self.config.delete_files_batch_max]:
            if not forced and os.stat(seg.path).st_mtime + reserved_s > now:
                break
            count += 1
        if not count:
            return []
        with self._lock:
            dropped = file.drop_head(count)
        names = [seg.path.name for seg in dropped]
        logger.info("retention deleted commit log file(s) {} ({}); commit log now starts at {}", names,
                    "disk above " + str(self.config.disk_space_clean_forcibly_ratio) + "%, unexpired files too"
                    if forced else f"older than {self.config.file_reserved_hours:g} h", self.log.min_offset)
        return names

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
