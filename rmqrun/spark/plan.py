"""The driver's plan of a backfill: which queues, from which offset to which.

Queues and offsets are resolved on the driver with one
:class:`~rmqrun.pull.PullConsumer` before Spark starts, so a topic that does
not exist, a silent name server or ``--to`` before ``--from`` are one clear
error and no JVM is started. The offset resolution and the splitting into
partitions are the data source's (:mod:`rmqrun.spark.ranges`), so the
``rocketmq`` source and ``rmqrun spark`` read exactly the same ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.spark.backfill import Bound
from rmqrun.spark.offsets import EARLIEST, LATEST, OffsetSpec, queue_key
from rmqrun.spark.ranges import QueueRange, resolve, split


#: the longest range one Spark partition gets by default
MAX_RECORDS_PER_PARTITION = 50_000


class PlanError(RmqrunError):
    """The brokers cannot be asked (name server silent) or the topic is not there: a runtime error (exit 1)."""


@dataclass(frozen=True)
class Plan:
    """Per-queue ``[start, end)``; ``total`` offsets to cover."""

    queues: list[MessageQueue]
    start: dict[MessageQueue, int]
    end: dict[MessageQueue, int]

    @property
    def total(self) -> int:
        return sum(max(0, self.end[mq] - self.start[mq]) for mq in self.queues)

    def ranges(self, partitions: int, max_records: int | None = MAX_RECORDS_PER_PARTITION) -> list[QueueRange]:
        """At least ``partitions`` pieces where the data allows, none longer than ``max_records`` offsets
        (progress is reported a finished partition at a time, so a huge partition would stall it)."""
        whole = [QueueRange(mq.topic, mq.broker_name, mq.queue_id, self.start[mq], self.end[mq]) for mq in self.queues]
        return split(whole, min_partitions=partitions, max_records=max_records)


def _spec(bound: Bound, option: str, queues: list[MessageQueue], consumer: Any) -> OffsetSpec:
    if bound.kind == "earliest":
        return EARLIEST
    if bound.kind == "latest":
        return LATEST
    if bound.kind == "time":
        return OffsetSpec("timestamp", timestamp_ms=bound.value)
    if bound.kind == "json":
        return bound.spec
    # one offset for every queue, kept inside each queue's stored range
    pairs = []
    for mq in queues:
        low, high = consumer.min_offset(mq), consumer.max_offset(mq)
        pairs.append((mq, min(max(bound.value, low), high)))
    return OffsetSpec("json", offsets=tuple(pairs))


def list_queues(consumer: Any, topic: str) -> list[MessageQueue]:
    from rmqrun.client.errors import NameServerUnavailableError
    from rmqrun.pull import TopicNotFoundError
    from rmqrun.remoting.errors import RemotingError

    try:
        return sorted(consumer.fetch_subscribe_message_queues(topic))
    except TopicNotFoundError:
        raise PlanError(f"--topic {topic!r}: the topic does not exist (name server {consumer.namesrv} has no "
                        f"route for it)") from None
    except (NameServerUnavailableError, RemotingError, OSError, TimeoutError) as exc:
        raise PlanError(f"--namesrv {consumer.namesrv}: the name server did not answer "
                        f"({type(exc).__name__}: {exc})") from None


def make_plan(consumer: Any, topic: str, start: Bound, end: Bound) -> Plan:
    """Resolve ``--from`` / ``--to`` on the brokers; ConfigError when ``--to`` is before ``--from``."""
    from rmqrun.spark.errors import OptionError

    queues = list_queues(consumer, topic)
    try:
        first = resolve(consumer, queues, _spec(start, "--from", queues, consumer), "startingOffsets")
        last = resolve(consumer, queues, _spec(end, "--to", queues, consumer), "endingOffsets")
    except OptionError as exc:
        raise ConfigError(str(exc).replace("rocketmq source option startingOffsets", "--from")
                          .replace("rocketmq source option endingOffsets", "--to")) from None
    bad = [mq for mq in queues if last[mq] < first[mq]]
    if bad:
        detail = "; ".join(f"{queue_key(mq)}: from {first[mq]}, to {last[mq]}" for mq in bad)
        raise ConfigError(f"--to {end.describe()} is before --from {start.describe()} on {len(bad)} queue(s): "
                          f"{detail}")
    return Plan(queues, first, last)
