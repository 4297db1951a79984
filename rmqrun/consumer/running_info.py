"""What a push consumer tells an admin tool about itself (Java ``ConsumerRunningInfo``).

``mqadmin consumerStatus`` and RocketMQ Dashboard send GET_CONSUMER_RUNNING_INFO
through the broker and read the answer with Java's names: the ``PROP_*``
properties (``PROP_CONSUME_TYPE``, ``PROP_CONSUMEORDERLY``,
``PROP_THREADPOOL_CORE_SIZE``, ``PROP_CONSUMER_START_TIMESTAMP`` in epoch
milliseconds, ``PROP_NAMESERVER_ADDR``, ``PROP_CLIENT_VERSION``) plus the
consumer's settings under the ``DefaultMQPushConsumer`` field names, the
subscription set, one ProcessQueueInfo per assigned queue (``mqTable``) and one
ConsumeStatus per topic (``statusTable``: OK/failed TPS and response times over
the last minute, failed messages over the last hour, pull TPS and RT). A Java
tool that misses one of the PROP_ keys fails with a NullPointerException, so
they are always present.

Also here: the answer to CONSUME_MESSAGE_DIRECTLY (``ConsumeMessageDirectlyResult``),
built from the verdict the handler gave when the message was run through the pool.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.thread_dump import thread_dump
from rmqrun.model import MessageQueue, Status

CLIENT_VERSION = "V4_9_8"
MINUTE_S = 60.0
HOUR_S = 3600.0


@dataclass(slots=True)
class _Window:
    """Sum of values added within the last ``span`` seconds, kept in one-second buckets.

    Buckets, not one entry per ``add``: ``add`` runs for every pull and every
    consumed batch, and the hour-long window would otherwise hold an hour of
    events (millions at tens of thousands of messages per second: the
    supervisor's RSS grew for as long as it ran). With buckets a window holds at
    most ``span + 1`` entries; the edge of the window is exact to one second,
    finer than the per-minute TPS it feeds.
    """

    span: float
    events: deque[list[float]] = field(default_factory=deque)  # [whole second, sum of values in it]

    def add(self, value: float, now: float) -> None:
        second = float(int(now))
        if self.events and self.events[-1][0] == second:
            self.events[-1][1] += value
            return
        self.events.append([second, value])
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self.events and now - self.events[0][0] > self.span:
            self.events.popleft()

    def total(self, now: float) -> float:
        self._trim(now)
        return sum(v for _, v in self.events)


@dataclass(slots=True)
class TopicStatus:
    ok: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    failed: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    failed_hour: _Window = field(default_factory=lambda: _Window(HOUR_S))
    consume_ms: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    consume_calls: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    pulled: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    pull_ms: _Window = field(default_factory=lambda: _Window(MINUTE_S))
    pull_calls: _Window = field(default_factory=lambda: _Window(MINUTE_S))

    def to_json(self, now: float) -> dict[str, Any]:
        calls, pulls = self.consume_calls.total(now), self.pull_calls.total(now)
        return {
            "consumeFailedMsgs": int(self.failed_hour.total(now)),
            "consumeFailedTPS": self.failed.total(now) / MINUTE_S,
            "consumeOKTPS": self.ok.total(now) / MINUTE_S,
            "consumeRT": self.consume_ms.total(now) / calls if calls else 0.0,
            "pullRT": self.pull_ms.total(now) / pulls if pulls else 0.0,
            "pullTPS": self.pulled.total(now) / MINUTE_S,
        }


class ConsumeStatusTable:
    """Per-topic consume and pull statistics (Java ``ConsumerStatsManager``)."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicStatus] = {}

    def _of(self, topic: str) -> TopicStatus:
        # get first: setdefault's default would build eight windows on every pull and every job
        status = self._topics.get(topic)
        if status is None:
            status = self._topics[topic] = TopicStatus()
        return status

    def on_consumed(self, topic: str, result: JobResult, elapsed_s: float) -> None:
        now = time.monotonic()
        s = self._of(topic)
        verdicts = result.verdicts
        count = verdicts.count  # C-level counting: this runs once per job on the hot path
        ran = len(verdicts)
        ok = count(Status.SUCCESS)
        if ok == ran:  # the usual job: every message ran and succeeded, nothing else to count
            failed = 0
        else:
            ok += count(Status.COMMIT)
            failed = (count(Status.RECONSUME_LATER) + count(Status.SUSPEND) + count(Status.ROLLBACK)
                      + count(Status.UNDECODABLE))
            ran -= count(Status.NOT_RUN)
        s.ok.add(ok, now)
        if failed:  # a window's sum is the same without a zero added (the usual job fails nothing)
            s.failed.add(failed, now)
            s.failed_hour.add(failed, now)
        # Java's consumeRT times each listener call, one message by default (consumeMessageBatchMaxSize 1):
        # the worker's time on the job per message that ran; the wait for a free worker is not part of it
        spent = result.handler_seconds if result.handler_seconds is not None else elapsed_s
        if ran:
            s.consume_ms.add(spent * 1000, now)
            s.consume_calls.add(ran, now)

    def on_pulled(self, topic: str, count: int, elapsed_s: float) -> None:
        now = time.monotonic()
        s = self._of(topic)
        s.pulled.add(count, now)
        s.pull_ms.add(elapsed_s * 1000, now)
        s.pull_calls.add(1, now)

    def to_json(self, topics: list[str]) -> dict[str, Any]:
        now = time.monotonic()
        return {t: self._of(t).to_json(now) for t in sorted(topics)}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RunningConsumer(Protocol):
    """What :func:`running_info` reads of a push consumer (a protocol, so this module need not import it)."""

    config: ConsumerConfig
    executor: Any
    offset_store: Any
    table: Mapping[MessageQueue, Any]
    status: "ConsumeStatusTable"
    started_at_ms: int

    def subscribed_topics(self) -> list[str]: ...

    def subscription(self, topic: str) -> Any: ...


#: how an rmqrun consumer's ``messageListener`` property begins; its consume mode follows in parentheses
LISTENER = "rmqrun worker pool"


def consume_mode_of(properties: dict[str, Any]) -> str | None:
    """The consume mode an rmqrun client states in its running info (None: not an rmqrun client, or older)."""
    listener = str(properties.get("messageListener") or "")
    prefix = LISTENER + " ("
    return listener[len(prefix):-1] if listener.startswith(prefix) and listener.endswith(")") else None


def running_info(consumer: RunningConsumer, *, jstack: bool = False) -> dict[str, Any]:
    """The GET_CONSUMER_RUNNING_INFO body of ``consumer``, keys as the Java consumer writes them."""
    cfg = consumer.config
    workers = getattr(getattr(consumer.executor, "config", None), "workers", None)  # the pool's processes
    pool = str(workers if isinstance(workers, int) else 1)
    props = {
        "consumerGroup": cfg.group,
        "messageModel": cfg.message_model,
        "consumeFromWhere": cfg.consume_from_where,
        "consumeTimestamp": cfg.consume_timestamp,
        "allocateMessageQueueStrategy": cfg.allocate_strategy,
        "subscription": "{}",
        # rmqrun's consume mode rides in the listener's description (Java writes the listener object there), so
        # the property keys stay exactly Java's and ``rmqrun status`` can still say each client's mode
        "messageListener": f"{LISTENER} ({cfg.mode.description})",
        "offsetStore": type(consumer.offset_store).__name__,
        "consumeThreadMin": pool,
        "consumeThreadMax": pool,
        "adjustThreadPoolNumsThreshold": "100000",
        "consumeConcurrentlyMaxSpan": cfg.consume_concurrently_max_span,
        "pullThresholdForQueue": cfg.pull_threshold_for_queue,
        "pullThresholdSizeForQueue": cfg.pull_threshold_size_for_queue,
        "pullThresholdForTopic": cfg.pull_threshold_for_topic,
        "pullThresholdSizeForTopic": cfg.pull_threshold_size_for_topic,
        "pullInterval": cfg.pull_interval_ms,
        "consumeMessageBatchMaxSize": cfg.consume_message_batch_max_size,
        "pullBatchSize": cfg.pull_batch_size,
        "postSubscriptionWhenPull": cfg.post_subscription_when_pull,
        "unitMode": cfg.unit_name is not None,
        "maxReconsumeTimes": cfg.max_reconsume_times,
        "suspendCurrentQueueTimeMillis": cfg.suspend_current_queue_time_ms,
        "consumeTimeout": int(cfg.consume_timeout_minutes) if float(cfg.consume_timeout_minutes).is_integer()
        else cfg.consume_timeout_minutes,
        "awaitTerminationMillisWhenShutdown": 0,
        "log": "loguru",
        "defaultMQPushConsumerImpl": "rmqrun.consumer.push.PushConsumer",
        "PROP_NAMESERVER_ADDR": ";".join(str(cfg.namesrv).replace(",", ";").split(";")) + ";",
        "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
        "PROP_CONSUMEORDERLY": cfg.orderly,
        "PROP_THREADPOOL_CORE_SIZE": pool,
        "PROP_CONSUMER_START_TIMESTAMP": consumer.started_at_ms,
        "PROP_CLIENT_VERSION": CLIENT_VERSION,
    }
    # The supervisor's threads and asyncio tasks stand for Java's thread dump; fastjson puts it first.
    body: dict[str, Any] = {"jstack": thread_dump()} if jstack else {}
    body.update({
        "mqTable": {mq: req.pq.info(consumer.offset_store.read_memory(mq))
                    for mq, req in sorted(consumer.table.items())},
        "properties": {k: _text(v) for k, v in props.items()},
        "statusTable": consumer.status.to_json(consumer.subscribed_topics()),
        "subscriptionSet": [consumer.subscription(t).to_json() for t in consumer.subscribed_topics()],
    })
    return body


def consume_directly_result(result: JobResult | None, *, orderly: bool, auto_commit: bool, spent_ms: int,
                            error: str | None = None) -> dict[str, Any]:
    """``ConsumeMessageDirectlyResult`` for one message run through the handler."""
    if result is None or not result.verdicts:
        verdict_name = "CR_THROW_EXCEPTION"
    else:
        verdict_name = {
            Status.SUCCESS: "CR_SUCCESS", Status.COMMIT: "CR_COMMIT", Status.ROLLBACK: "CR_ROLLBACK",
            Status.RECONSUME_LATER: "CR_LATER", Status.SUSPEND: "CR_LATER",
        }.get(result.verdicts[0], "CR_THROW_EXCEPTION")
        error = error or result.error
    out: dict[str, Any] = {"autoCommit": auto_commit, "consumeResult": verdict_name, "order": orderly}
    if verdict_name == "CR_THROW_EXCEPTION" and error:
        out["remark"] = error
    out["spentTimeMills"] = spent_ms
    return out
