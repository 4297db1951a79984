"""Which groups lose messages when retention deletes files, said at WARNING the moment it happens.

Above ``disk_space_clean_forcibly_ratio`` retention deletes files whether they
expired or not, and messages no group had consumed go with them. That used to
be an INFO line naming files; the group heard of it (a WARNING) only when it
next pulled, which for a stopped consumer may be days later. Now, as the
consume queues follow the commit log's new minimum, each group whose committed
offset of a queue is below that queue's new min offset is named at once, with
the topic, the queues and how many messages it will never see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from loguru import logger

#: queues named per group in one line; the rest are counted
SHOWN_QUEUES = 8


class _Queue(Protocol):
    """What is read of a consume queue."""

    @property
    def key(self) -> tuple[str, int]: ...
    @property
    def min_offset(self) -> int: ...


class OffsetsLike(Protocol):
    """What is read of the consumer offset store."""

    def groups_of_topic(self, topic: str) -> list[str]: ...
    def query(self, group: str, topic: str, queue_id: int) -> int | None: ...


@dataclass(frozen=True)
class QueueLoss:
    group: str
    topic: str
    queue_id: int
    #: first offset deleted unconsumed (the group's committed offset, or the old min if higher)
    first: int
    #: the queue's new min offset: where the group continues
    new_min: int

    @property
    def count(self) -> int:
        return self.new_min - self.first


def losses(before: dict[tuple[str, int], int], queues: Iterable[_Queue], offsets: OffsetsLike) -> list[QueueLoss]:
    """Per group and queue whose min offset moved: the messages deleted before the group consumed them."""
    out: list[QueueLoss] = []
    for cq in queues:
        old = before.get(cq.key)
        new = cq.min_offset
        if old is None or new <= old:
            continue
        topic, qid = cq.key
        for group in offsets.groups_of_topic(topic):
            committed = offsets.query(group, topic, qid)
            if committed is None or committed >= new:
                continue
            out.append(QueueLoss(group, topic, qid, max(committed, old), new))
    return out


def report(found: list[QueueLoss], why: str) -> None:
    """One WARNING line per group that lost messages."""
    by_group: dict[str, list[QueueLoss]] = {}
    for loss in found:
        by_group.setdefault(loss.group, []).append(loss)
    for group, items in sorted(by_group.items()):
        items.sort(key=lambda x: (x.topic, x.queue_id))
        shown = ", ".join(f"{x.topic} queue {x.queue_id}: {x.count} (offsets {x.first}..{x.new_min - 1})"
                          for x in items[:SHOWN_QUEUES])
        more = f", and {len(items) - SHOWN_QUEUES} more queue(s)" if len(items) > SHOWN_QUEUES else ""
        logger.warning("retention deleted {} message(s) group {} had not consumed ({}): {}{}; it continues at each "
                       "queue's new min offset", sum(x.count for x in items), group, why, shown, more)
