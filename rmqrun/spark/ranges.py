"""Which queues, from which offset to which: the planning both the data source and ``rmqrun spark`` need.

Everything here runs where Spark plans a query (or in any plain process) with
one :class:`~rmqrun.pull.PullConsumer`; nothing here imports pyspark, so the
``rmqrun spark`` runner can plan its ranges with the same code:

* :func:`open_consumer` connects and turns "name server does not answer" into
  an error naming option ``namesrv``;
* :func:`list_queues` lists the readable queues of the topics (a topic that
  does not exist: an error naming option ``topic``);
* :func:`resolve` turns an :class:`~rmqrun.spark.offsets.OffsetSpec` into one
  offset per queue (``earliest`` = the queue's min offset, ``latest`` = its max
  offset, ``timestamp:<ms>`` = the first message stored at or after it);
* :func:`plan_ranges` checks ``end >= start`` per queue and splits large
  ranges into :class:`QueueRange` pieces (``minPartitions``,
  ``maxRecordsPerPartition``);
* :func:`pack` gives a batch read's small queues to one task together, so a
  small backlog is not paid for with a task start per queue.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from rmqrun.model import MessageQueue
from rmqrun.spark.errors import OptionError, SourceError
from rmqrun.spark.offsets import EARLIEST, EARLIEST_SENTINEL, LATEST_SENTINEL, OffsetSpec, queue_key

if TYPE_CHECKING:
    from rmqrun.remoting.security import ClientSecurity


@dataclass(frozen=True, order=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: what one Spark partition reads."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start


def open_consumer(namesrv: str, *, group: str | None = None, timeout: float = 10.0,  # type: ignore[no-untyped-def]
                  namespace: str | None = None, security: "ClientSecurity | None" = None):
    """A started :class:`~rmqrun.pull.PullConsumer`; a bad address names option ``namesrv``."""
    from rmqrun.pull import PullConsumer

    kwargs = {"group": group} if group else {}
    try:
        return PullConsumer(namesrv, timeout=timeout, namespace=namespace, security=security,  # type: ignore[arg-type]
                            **kwargs).start()
    except ValueError as e:
        raise OptionError(f"rocketmq option namesrv: {e}") from None


def list_queues(consumer, topics: Iterable[str]) -> list[MessageQueue]:  # type: ignore[no-untyped-def]
    """The readable queues of every topic, sorted."""
    from rmqrun.client.errors import NameServerUnavailableError
    from rmqrun.pull import TopicNotFoundError
    from rmqrun.remoting.errors import RemotingError

    out: list[MessageQueue] = []
    for topic in topics:
        try:
            out.extend(consumer.fetch_subscribe_message_queues(topic))
        except TopicNotFoundError as e:
            raise SourceError(f"rocketmq option topic: topic {topic!r} does not exist ({e})") from None
        except (NameServerUnavailableError, RemotingError, OSError, TimeoutError) as e:
            raise SourceError(f"rocketmq option namesrv: name server {consumer.namesrv} did not answer "
                              f"({type(e).__name__}: {e})") from None
    return sorted(out)


def resolve(consumer, queues: Iterable[MessageQueue], spec: OffsetSpec, option: str) -> dict[MessageQueue, int]:  # type: ignore[no-untyped-def]
    """One concrete offset per queue for ``spec`` (queues a JSON map leaves out: earliest for a
    start, latest for an end). A JSON map naming a queue that does not exist is an error."""
    queues = list(queues)
    explicit = spec.as_map() if spec.kind in ("json", "timestamps") else {}
    if spec.kind == "timestamps":
        option = option.replace("Offsets", "OffsetsByTimestamp") if "ByTimestamp" not in option else option
    unknown = sorted(set(explicit) - set(queues))
    if unknown:
        names = ", ".join(f"{q.topic} {queue_key(q)}" for q in unknown)
        raise OptionError(f"rocketmq source option {option} names queue(s) that do not exist: {names}")
    if spec.kind == "timestamps":
        rest = [mq for mq in queues if mq not in explicit]
        out = resolve(consumer, rest, spec.fallback or EARLIEST, option.replace("ByTimestamp", "")) if rest else {}
        for mq, ts in explicit.items():
            out[mq] = _by_timestamp(consumer, mq, ts, spec.strategy, option)
        return {mq: out[mq] for mq in queues}
    out: dict[MessageQueue, int] = {}
    for mq in queues:
        if spec.kind == "earliest":
            out[mq] = consumer.min_offset(mq)
        elif spec.kind == "latest":
            out[mq] = consumer.max_offset(mq)
        elif spec.kind == "timestamp":
            out[mq] = first_stored_since(consumer, mq, spec.timestamp_ms)
        else:
            off = explicit.get(mq, EARLIEST_SENTINEL if option == "startingOffsets" else LATEST_SENTINEL)
            if off == EARLIEST_SENTINEL:
                off = consumer.min_offset(mq)
            elif off == LATEST_SENTINEL:
                off = consumer.max_offset(mq)
            elif mq in explicit:
                top = consumer.max_offset(mq)
                if off > top:
                    raise OptionError(f"rocketmq source option {option}: offset {off} of {mq.topic} "
                                      f"{queue_key(mq)} is past the queue's end (max offset {top})")
            out[mq] = off
    return out


def _by_timestamp(consumer, mq: MessageQueue, ts: int, strategy: str, option: str) -> int:  # type: ignore[no-untyped-def]
    """The first offset stored at or after ``ts``; with none, the queue's max offset (strategy latest,
    always for an end) or an error (strategy error, the Kafka source's default for a start)."""
    found = first_stored_at_or_after(consumer, mq, ts)
    if found is not None:
        return found
    if strategy == "latest":
        return consumer.max_offset(mq)
    raise OptionError(f"rocketmq source option {option}: {mq.topic} {queue_key(mq)} has no message stored at or "
                      f"after {ts} (set option startingOffsetsByTimestampStrategy=latest to start at its end)")


def first_stored_since(consumer, mq: MessageQueue, timestamp_ms: int) -> int:  # type: ignore[no-untyped-def]
    """The offset of the first message stored at or after ``timestamp_ms`` (the queue's max offset if none)."""
    found = first_stored_at_or_after(consumer, mq, timestamp_ms)
    return consumer.max_offset(mq) if found is None else found


def first_stored_at_or_after(consumer, mq: MessageQueue, timestamp_ms: int) -> int | None:  # type: ignore[no-untyped-def]
    """The offset of the first message stored at or after ``timestamp_ms``, None if there is none.

    The broker's ``searchOffset`` (SEARCH_OFFSET_BY_TIMESTAMP) answers the *nearest* message, which
    may be older (the last one for a time past the end), so older messages are skipped here.
    """
    from rmqrun.pull import PullStatus

    top = consumer.max_offset(mq)
    offset = max(consumer.search_offset(mq, timestamp_ms), consumer.min_offset(mq))
    while offset < top:
        res = consumer.pull(mq, "*", offset, max_nums=min(32, top - offset))
        if res.status is not PullStatus.FOUND or not res.messages:
            break
        for msg in res.messages:
            if msg.store_timestamp >= timestamp_ms:
                return msg.queue_offset
        offset = res.next_begin_offset
    return None


def matching_topics(consumer, pattern: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Option subscribePattern: the name server's topics whose whole name matches ``pattern``, sorted."""
    from rmqrun.client.errors import NameServerUnavailableError
    from rmqrun.remoting.errors import RemotingError

    regex = re.compile(pattern)
    try:
        names = consumer.fetch_topic_list()
    except (NameServerUnavailableError, RemotingError, OSError, TimeoutError) as e:
        raise SourceError(f"rocketmq option subscribePattern: the topic list of name server {consumer.namesrv} "
                          f"could not be read ({type(e).__name__}: {e})") from None
    return [t for t in names if regex.fullmatch(t)]


def source_queues(consumer, topics: tuple[str, ...], pattern: str | None) -> list[MessageQueue]:  # type: ignore[no-untyped-def]
    """The queues a source reads now: those of option topic, or of every topic matching subscribePattern
    (listed again at each call, so topics created since are picked up; one deleted meanwhile is skipped)."""
    if pattern is None:
        return list_queues(consumer, topics)
    from rmqrun.pull import TopicNotFoundError

    out: list[MessageQueue] = []
    for topic in matching_topics(consumer, pattern):
        try:
            out.extend(consumer.fetch_subscribe_message_queues(topic))
        except TopicNotFoundError:
            continue
    return sorted(out)


def check_order(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> None:
    """``endingOffsets`` before ``startingOffsets`` on some queue: an error naming both."""
    bad = [(mq, start[mq], end[mq]) for mq in sorted(start) if mq in end and end[mq] < start[mq]]
    if bad:
        detail = "; ".join(f"{mq.topic} {queue_key(mq)}: start {s} > end {e}" for mq, s, e in bad)
        raise OptionError(f"rocketmq source option endingOffsets is before startingOffsets: {detail}")


def split(ranges: Iterable[QueueRange], *, min_partitions: int | None = None,
          max_records: int | None = None) -> list[QueueRange]:
    """Split ranges so each holds at most ``max_records`` offsets and there are at least
    ``min_partitions`` pieces where the data allows (the largest ranges are split first,
    as Spark's Kafka source does); empty ranges are dropped."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records:
        pieces = [p for r in pieces for p in _cut(r, math.ceil(r.size / max_records))]
    if min_partitions and pieces and len(pieces) < min_partitions:
        total = sum(r.size for r in pieces)
        pieces = [p for r in pieces for p in _cut(r, (r.size * min_partitions) // total)]
        while len(pieces) < min_partitions:      # rounding left a few short: halve the largest
            largest = max(pieces, key=lambda p: (p.size, p))
            if largest.size < 2:
                break
            pieces.remove(largest)
            pieces.extend(_cut(largest, 2))
    return sorted(pieces)


def _cut(r: QueueRange, n: int) -> list[QueueRange]:
    n = max(1, min(n, r.size))
    bounds = [r.start + (r.size * i) // n for i in range(n + 1)]
    return [QueueRange(r.topic, r.broker, r.queue_id, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def plan_ranges(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int], *,
                min_partitions: int | None = None, max_records: int | None = None) -> list[QueueRange]:
    """The pieces to read for per-queue ``[start, end)`` (queues only in ``end`` start at 0)."""
    check_order(start, end)
    ranges = [QueueRange(mq.topic, mq.broker_name, mq.queue_id, start.get(mq, 0), end[mq]) for mq in sorted(end)]
    return split(ranges, min_partitions=min_partitions, max_records=max_records)


def plan_batch(consumer, topics: Iterable[str], starting: OffsetSpec, ending: OffsetSpec, *,  # type: ignore[no-untyped-def]
               min_partitions: int | None = None, max_records: int | None = None,
               pattern: str | None = None) -> list[QueueRange]:
    """Resolve ``starting``/``ending`` on the brokers and plan the pieces of a batch read."""
    queues = source_queues(consumer, tuple(topics), pattern)
    start = resolve(consumer, queues, starting, "startingOffsets")
    end = resolve(consumer, queues, ending, "endingOffsets")
    return plan_ranges(start, end, min_partitions=min_partitions, max_records=max_records)


#: a batch read's task is given whole queue ranges until it holds at least this many offsets (see :func:`pack`)
MIN_RECORDS_PER_TASK = 16_384


def pack(pieces: Iterable[QueueRange], min_records: int = MIN_RECORDS_PER_TASK) -> list[tuple[QueueRange, ...]]:
    """Consecutive pieces (in order) grouped so each group holds at least ``min_records`` offsets where
    the data allows; a piece that holds that many already stays alone, and none is ever split or dropped.

    Why: every Spark task costs a launch, a Python worker's hand-shake and the time to its first Arrow
    batch (0.1-0.3 s measured on 2 cores, the time to read several thousand messages), so a backlog of
    a few queues of ten thousand messages spent as much starting tasks as reading. Spark's own file
    source packs small files into a partition the same way (an open cost per file).
    """
    groups: list[tuple[QueueRange, ...]] = []
    current: list[QueueRange] = []
    size = 0
    for p in pieces:
        current.append(p)
        size += p.size
        if size >= min_records:
            groups.append(tuple(current))
            current, size = [], 0
    if current:
        groups.append(tuple(current))
    return groups


def share_limit(start: dict[MessageQueue, int], latest: dict[MessageQueue, int], max_rows: int) -> dict[MessageQueue, int]:
    """Ends that read at most ``max_rows`` offsets in all, shared in proportion to each queue's backlog."""
    backlog = {mq: max(0, latest[mq] - start.get(mq, 0)) for mq in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    grant = {mq: (n * max_rows) // total for mq, n in backlog.items()}
    left = max_rows - sum(grant.values())
    for mq in sorted(backlog, key=lambda q: (-(backlog[q] - grant[q]), q)):
        if left <= 0:
            break
        if backlog[mq] > grant[mq]:
            grant[mq] += 1
            left -= 1
    return {mq: start.get(mq, 0) + grant[mq] for mq in latest}
