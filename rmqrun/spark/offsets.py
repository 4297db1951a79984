"""Offsets as the user writes them (options) and as Spark stores them (checkpoints).

The JSON format, for ``startingOffsets``/``endingOffsets`` and for the
streaming offsets Spark logs in ``checkpoint/offsets/N``, is a map from topic
to a map from ``"<brokerName>:<queueId>"`` to the queue offset (the offset of
the next message to read)::

    {"orders": {"broker-a:0": 120, "broker-a:1": 98}}

As in Spark's Kafka connector, ``-2`` means earliest and ``-1`` latest in an
option's map. Spark compares streaming offsets as JSON text, so what this
module emits always has its keys sorted (topics, then ``broker:queue`` keys as
strings) and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from rmqrun.model import MessageQueue
from rmqrun.spark.errors import OptionError

EARLIEST_SENTINEL = -2
LATEST_SENTINEL = -1


def queue_key(mq: MessageQueue) -> str:
    """The ``broker:queue`` key of one queue."""
    return f"{mq.broker_name}:{mq.queue_id}"


def parse_queue_key(topic: str, key: str) -> MessageQueue:
    broker, sep, qid = key.rpartition(":")
    if not sep or not broker or not qid.isdigit():
        raise ValueError(f"queue key {key!r} is not \"<brokerName>:<queueId>\"")
    return MessageQueue(topic, broker, int(qid))


@dataclass(frozen=True)
class OffsetSpec:
    """``earliest``, ``latest``, ``timestamp:<ms>``, an explicit per-queue map (``json``) or a per-queue
    map of timestamps (``timestamps``: option ...OffsetsByTimestamp; the queues it leaves out take
    ``fallback``; ``strategy`` says what a queue with no message at or after its time gets)."""

    kind: str                                   # earliest | latest | timestamp | json | timestamps
    timestamp_ms: int = 0
    offsets: tuple[tuple[MessageQueue, int], ...] = field(default=())
    fallback: "OffsetSpec | None" = None
    strategy: str = "error"                     # timestamps: error | latest

    def as_map(self) -> dict[MessageQueue, int]:
        return dict(self.offsets)


EARLIEST = OffsetSpec("earliest")
LATEST = OffsetSpec("latest")


def parse_offset_spec(raw: str, option: str, topics: Iterable[str] | None, *, allow_timestamp: bool) -> OffsetSpec:
    """Parse one offsets option; every error names ``option``."""
    text = raw.strip()
    low = text.lower()
    if low == "earliest":
        return EARLIEST
    if low == "latest":
        return LATEST
    if low.startswith("timestamp:"):
        if not allow_timestamp:
            raise OptionError(f"rocketmq source option {option}: timestamp:<ms> is not allowed here, got {raw!r}")
        ms = low.split(":", 1)[1].strip()
        if not ms.isdigit():
            raise OptionError(f"rocketmq source option {option}: timestamp:<ms> needs milliseconds since "
                              f"the epoch, got {raw!r}")
        return OffsetSpec("timestamp", timestamp_ms=int(ms))
    if not text.startswith("{"):
        raise OptionError(f"rocketmq source option {option} must be earliest, latest"
                          f"{', timestamp:<ms>' if allow_timestamp else ''} or a JSON map "
                          f"{{\"topic\": {{\"broker:queueId\": offset}}}}, got {raw!r}")
    return OffsetSpec("json", offsets=_queue_map(text, raw, option, topics, "offset",
                                                 "an integer >= 0 (or -2 earliest, -1 latest)", EARLIEST_SENTINEL))


def check_batch_sentinels(spec: OffsetSpec, option: str) -> None:
    """A batch query's JSON map may not start a queue at latest (-1) nor end one at earliest (-2): that queue
    would read nothing, which is never what was meant. The Kafka source refuses both for batch queries."""
    if spec.kind != "json":
        return
    refused, word = ((LATEST_SENTINEL, "latest (-1)") if option in ("startingOffsets", "--from")
                     else (EARLIEST_SENTINEL, "earliest (-2)"))
    for mq, off in spec.offsets:
        if off == refused:
            raise OptionError(f"rocketmq source option {option}: {mq.topic} {queue_key(mq)} can't be {word} for "
                              "batch queries (that queue would read nothing); give an offset, or -2/-1 where the "
                              "other end of the range is meant")


def parse_timestamp_map(raw: str, option: str, topics: Iterable[str] | None, *, fallback: OffsetSpec,
                        strategy: str) -> OffsetSpec:
    """Option ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``:
    ``{"topic": {"broker:queueId": epochMillis}}``."""
    text = raw.strip()
    if not text.startswith("{"):
        raise OptionError(f"rocketmq source option {option} must be a JSON map "
                          f"{{\"topic\": {{\"broker:queueId\": epochMillis}}}}, got {raw!r}")
    pairs = _queue_map(text, raw, option, topics, "timestamp", "milliseconds since the epoch (>= 0)", 0)
    return OffsetSpec("timestamps", offsets=pairs, fallback=fallback, strategy=strategy)


def _queue_map(text: str, raw: str, option: str, topics: Iterable[str] | None, what: str, want: str,
               lowest: int) -> tuple[tuple[MessageQueue, int], ...]:
    """``{"topic": {"broker:queueId": int}}`` checked: topics among ``topics`` (any with None), values >= lowest."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"rocketmq source option {option} is not valid JSON ({e.msg} at column {e.colno}): "
                          f"{raw!r}") from None
    wanted = None if topics is None else set(topics)
    pairs: list[tuple[MessageQueue, int]] = []
    if not isinstance(data, dict):
        raise OptionError(f"rocketmq source option {option} must be a JSON object "
                          f"{{\"topic\": {{\"broker:queueId\": {what}}}}}, got {raw!r}")
    for topic, queues in data.items():
        if wanted is not None and topic not in wanted:
            raise OptionError(f"rocketmq source option {option} names topic {topic!r}, which is not in option "
                              f"topic ({', '.join(sorted(wanted))})")
        if not isinstance(queues, dict):
            raise OptionError(f"rocketmq source option {option}: topic {topic!r} must map to an object "
                              f"{{\"broker:queueId\": {what}}}, got {queues!r}")
        for key, off in queues.items():
            try:
                mq = parse_queue_key(topic, key)
            except ValueError as e:
                raise OptionError(f"rocketmq source option {option}: {e}") from None
            if isinstance(off, bool) or not isinstance(off, int) or off < lowest:
                raise OptionError(f"rocketmq source option {option}: {what} of {topic} {key} must be {want}, "
                                  f"got {off!r}")
            pairs.append((mq, off))
    return tuple(sorted(pairs))


def encode(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """Per-queue offsets as the sorted JSON-ready dict Spark logs (insertion order is the text order)."""
    by_topic: dict[str, dict[str, int]] = {}
    for mq in sorted(offsets, key=lambda q: (q.topic, queue_key(q))):
        by_topic.setdefault(mq.topic, {})[queue_key(mq)] = int(offsets[mq])
    return {t: by_topic[t] for t in sorted(by_topic)}


def decode(data: Mapping[str, Mapping[str, int]]) -> dict[MessageQueue, int]:
    """The inverse of :func:`encode` (what Spark hands back from a checkpoint)."""
    out: dict[MessageQueue, int] = {}
    for topic, queues in data.items():
        for key, off in queues.items():
            out[parse_queue_key(topic, key)] = int(off)
    return out


def dumps(offsets: Mapping[MessageQueue, int]) -> str:
    """The JSON text of :func:`encode`, e.g. for logs and the README."""
    return json.dumps(encode(offsets), separators=(",", ":"))
