"""What ``put`` and ``get`` return."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, slots=True)
class PutResult:
    queue_offset: int
    commit_log_offset: int
    size: int
    #: STORETIMESTAMP as written (the store stamps it unless ``stamp_store_timestamp`` is off).
    store_timestamp: int = 0

    @property
    def end_offset(self) -> int:
        """Commit-log offset just past the record: what must be flushed for it to be durable."""
        return self.commit_log_offset + self.size


class GetMessageStatus(str, Enum):
    """RocketMQ's ``GetMessageStatus``; the broker maps it to a pull response code.

    4.9.8 ``PullMessageProcessor``: FOUND -> SUCCESS; NO_MATCHED_MESSAGE and
    MESSAGE_WAS_REMOVING -> PULL_RETRY_IMMEDIATELY; OFFSET_FOUND_NULL and
    OFFSET_OVERFLOW_ONE -> PULL_NOT_FOUND; OFFSET_OVERFLOW_BADLY and OFFSET_TOO_SMALL
    -> PULL_OFFSET_MOVED; NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE ->
    PULL_OFFSET_MOVED if the requested offset != 0, else PULL_NOT_FOUND.

    This store never returns NO_MATCHED_LOGIC_QUEUE: like RocketMQ (whose
    ``findConsumeQueue`` creates missing queues) an unknown queue is an empty one.
    """

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    status: GetMessageStatus
    #: Whole stored records, in queue order, ready to be concatenated into a pull body.
    #: Usually memoryviews over one buffer per contiguous run read from disk.
    records: list[bytes | memoryview] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0

    @property
    def message_count(self) -> int:
        return len(self.records)

    @property
    def total_size(self) -> int:
        return sum(len(r) for r in self.records)
