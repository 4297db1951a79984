"""The knobs of the message store, in one dataclass with its own validation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import StoreError

MIB = 1024 * 1024

#: RocketMQ's default ``messageDelayLevel`` (store/.../MessageStoreConfig.java); used only to
#: recompute the tags code (= delivery time) of SCHEDULE_TOPIC_XXXX records when a consume
#: queue has to be rebuilt from the commit log.
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_DELAY_TOKEN = re.compile(r"^(\d+)([smhd])$")
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s 10s ..."`` to milliseconds per level (level N is item N-1); rejects junk loudly."""
    out: list[int] = []
    for token in spec.split():
        m = _DELAY_TOKEN.match(token)
        if not m:
            raise ValueError(f"delay level {token!r} in {spec!r} is not <number><s|m|h|d>")
        out.append(int(m.group(1)) * _UNITS_MS[m.group(2)])
    if not out:
        raise ValueError("message_delay_levels must name at least one level")
    return out


def delete_hours(spec: str) -> set[int]:
    """``"04"`` or ``"04;16"`` to the hours of the day it names; rejects junk loudly."""
    hours: set[int] = set()
    for token in str(spec).split(";"):
        token = token.strip()
        if not token.isdigit() or not 0 <= int(token) <= 23:
            raise StoreError(f"delete_when={spec!r}: {token!r} is not an hour 00-23 (several: '04;16')")
        hours.add(int(token))
    return hours


class FlushMode(str, Enum):
    """When commit-log bytes are fsync'ed.

    SYNC: ``put_sync`` waits for a (group-committed) fsync, like RocketMQ SYNC_FLUSH.
    ASYNC: a background thread fsyncs every ``flush_interval_ms``; ``put_sync`` does not
    wait, like RocketMQ ASYNC_FLUSH (a crash may lose the last interval of writes).
    """

    SYNC = "sync"
    ASYNC = "async"


#: The store's own knobs, for tests and tools: not broker settings (getBrokerConfig, make_config) as the rest are.
STORE_ONLY = frozenset({"flush_interval_ms", "checkpoint_interval_ms", "config_flush_interval_ms",
                        "stamp_store_timestamp", "verify_consume_queues", "recover_full_scan",
                        "delete_files_batch_max"})


@dataclass(frozen=True)
class StoreConfig:
    """Store settings. Defaults follow RocketMQ where it has one (see each comment)."""

    #: Size of one commit-log segment file. RocketMQ 4.9.8 uses 1 GiB; 256 MiB suits an
    #: embedded broker. Changing it for an existing data directory is refused on open.
    segment_size: int = 256 * MIB
    #: Entries per consume-queue segment file (RocketMQ: 300,000 entries of 20 bytes).
    consume_queue_entries_per_file: int = 300_000
    #: Largest accepted record, header included (RocketMQ maxMessageSize: 4 MiB).
    max_message_size: int = 4 * MIB
    flush_mode: FlushMode = FlushMode.ASYNC
    #: Period of the background commit-log fsync (RocketMQ flushIntervalCommitLog: 500 ms).
    flush_interval_ms: int = 500
    #: Period of consume-queue fsync + checkpoint (RocketMQ flushIntervalConsumeQueue: 1 s).
    checkpoint_interval_ms: int = 1000
    #: Period of the JSON stores' flush (consumer offsets, topics, subscription groups).
    config_flush_interval_ms: int = 5000
    #: If true the store writes the current time into STORETIMESTAMP at append (under the
    #: append lock, so store times never go backwards in the log). Tests turn it off to
    #: control timestamps.
    stamp_store_timestamp: bool = True
    #: Structural check of every consume queue on open (offsets increasing, in bounds).
    #: Costs one sequential read of 20 bytes per stored message.
    verify_consume_queues: bool = True
    #: Ignore the checkpoint and re-validate the whole commit log on open.
    recover_full_scan: bool = False
    message_delay_levels: str = DEFAULT_DELAY_LEVELS

    # -- retention (RocketMQ MessageStoreConfig; see retention.py) --------------------
    #: Commit-log files last written longer ago than this are deleted (fileReservedTime, 72 h).
    file_reserved_hours: float = 72
    #: Hours of the day (``"04"``, or several as ``"04;16"``) when expired files are deleted
    #: (deleteWhen, "04").
    delete_when: str = "04"
    #: Above this disk use (percent of the data directory's file system) expired files
    #: are deleted at once, whatever the hour (diskMaxUsedSpaceRatio, 75).
    disk_max_used_space_ratio: int = 75
    #: Above this disk use even unexpired files are deleted, oldest first, never the one
    #: being written, until use is back at or under it (diskSpaceCleanForciblyRatio, 0.85).
    disk_space_clean_forcibly_ratio: int = 85
    #: Above this disk use the store is marked *disk full* and refuses every write (sends
    #: are answered SERVICE_NOT_AVAILABLE) until use is back at or under
    #: ``disk_space_clean_forcibly_ratio`` (RocketMQ 4.9's diskSpaceWarningLevelRatio, 0.90).
    disk_space_warning_level_ratio: int = 90
    #: Period of the retention check (cleanResourceInterval, 10 s).
    clean_resource_interval_ms: int = 10_000
    #: Most commit-log files deleted by one check (DELETE_FILES_BATCH_MAX, 10).
    delete_files_batch_max: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.flush_mode, str) and not isinstance(self.flush_mode, FlushMode):
            object.__setattr__(self, "flush_mode", FlushMode(self.flush_mode))
        if self.max_message_size < 128:
            raise StoreError(f"max_message_size={self.max_message_size} is too small (min 128)")
        # A record must fit in a segment with room left for the 8-byte end-of-segment marker.
        if self.segment_size < self.max_message_size + 8:
            raise StoreError(
                f"segment_size={self.segment_size} must be >= max_message_size + 8 "
                f"({self.max_message_size + 8})"
            )
        if self.consume_queue_entries_per_file < 1:
            raise StoreError("consume_queue_entries_per_file must be >= 1")
        parse_delay_levels(self.message_delay_levels)
        delete_hours(self.delete_when)
        if self.file_reserved_hours <= 0:
            raise StoreError(f"file_reserved_hours must be > 0, got {self.file_reserved_hours}")
        for name in ("disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio",
                     "disk_space_warning_level_ratio"):
            if not 10 <= getattr(self, name) <= 95:
                raise StoreError(f"{name} must be a percentage between 10 and 95, got {getattr(self, name)}")
        if self.delete_files_batch_max < 1:
            raise StoreError(f"delete_files_batch_max must be >= 1, got {self.delete_files_batch_max}")
        for name in ("flush_interval_ms", "checkpoint_interval_ms", "config_flush_interval_ms",
                     "clean_resource_interval_ms"):
            if getattr(self, name) <= 0:
                raise StoreError(f"{name} must be > 0, got {getattr(self, name)}")
