"""A read-only picture of a running supervisor, for ``/metrics``, ``/healthz`` and ``/readyz``.

The CLI's endpoints used to walk the supervisor's live objects themselves
(``sup.executor.pool``, ``engine.rebalancer``, the engine's queue table),
which tied the command line to how the pool, the executor and the push
consumer happen to keep their state. A snapshot is built here, by the part
that owns those objects, in one pass between two loop turns (the objects are
loop-owned: only the loop may read them), and is frozen: a scrape renders
what it was given and cannot change anything.

:func:`health_of` reads only what readiness needs (the phase, the brokers'
latest answer, how many queues are assigned), so a probe pays for no queue
walk; :func:`snapshot_of` reads everything the metrics show. The pool is
read through its public members only (``size``, ``restarts``, ``recycles``,
``workers()``). The functions take the supervisor untyped (``Any``): it
imports this module for :meth:`Supervisor.snapshot`, and a type-only import
back would be a cycle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rmqrun.consumer.oldest import oldest_unfinished
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    """What ``/readyz`` decides on. ``last_broker_answer`` is None without a consumer (monotonic seconds)."""

    phase: str
    phase_detail: str
    last_broker_answer: float | None
    assigned_queues: int


@dataclass(frozen=True, slots=True)
class WorkerSlot:
    """One worker process that new batches of its slot go to, with the batches it holds."""

    worker_id: int
    in_flight: int


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """The handler-time histogram: per-bucket counts (not cumulative; the last is above every bound)."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float
    count: int


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """One assigned queue. ``topic`` is the user's name (the namespace taken off); an offset is None
    while not known yet (no pull answer, nothing committed)."""

    mq: MessageQueue
    topic: str
    inflight_messages: int
    broker_offset: int | None
    consumer_offset: int | None
    #: (offset, seconds since it was stored, None when unknown) of the oldest unfinished message, if any
    oldest_unfinished: tuple[int, float | None] | None

    @property
    def lag(self) -> int | None:
        if self.broker_offset is None or self.consumer_offset is None:
            return None
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(frozen=True, slots=True)
class ConsumeSnapshot:
    """The push consumer's counters and its queues, sorted by queue."""

    consumed: int
    failed: int
    undecodable: int
    jobs: int
    handler_latency: HistogramSnapshot
    #: per message, from the broker storing it to its worker beginning the job that carries it
    store_to_handler: HistogramSnapshot
    rebalances: int
    lock_losses: int
    queues: tuple[QueueSnapshot, ...]


@dataclass(frozen=True, slots=True)
class SupervisorSnapshot:
    group: str
    handler: str
    ready: bool
    health: HealthSnapshot
    #: worker slots in the pool
    workers: int
    restarts: int
    recycles: int
    inflight_batches: int
    waiting_batches: int
    #: the current process of each slot
    slots: tuple[WorkerSlot, ...]
    #: None until the consumer has started
    consume: ConsumeSnapshot | None


def health_of(supervisor: Any) -> HealthSnapshot:
    """The supervisor's phase and its brokers' latest answer, and nothing else."""
    engine = supervisor.engine
    if engine is None:
        return HealthSnapshot(supervisor.phase, supervisor.phase_detail, None, 0)
    return HealthSnapshot(supervisor.phase, supervisor.phase_detail, engine.instance.broker.last_answer,
                          len(engine.table))


def _queues(engine: Any, now_ms: int) -> tuple[QueueSnapshot, ...]:
    namespace = engine.config.namespace
    out = []
    for mq, req in sorted(engine.table.items()):
        done = engine.offset_store.read_memory(mq)
        high = req.broker_max_offset
        out.append(QueueSnapshot(mq, unwrap(namespace, mq.topic), req.pq.msg_count,
                                 high if high >= 0 else None, done if done >= 0 else None,
                                 oldest_unfinished(req.pq, now_ms)))
    return tuple(out)


def _histogram_of(hist: Any) -> HistogramSnapshot:
    return HistogramSnapshot(tuple(hist.bounds), tuple(hist.counts), hist.total, hist.count)


def _consume_of(engine: Any) -> ConsumeSnapshot:
    stats = engine.stats
    return ConsumeSnapshot(
        stats.consumed, stats.failed, stats.undecodable, stats.jobs, _histogram_of(stats.handler_latency),
        _histogram_of(stats.store_to_handler), engine.rebalancer.rebalances, engine.rebalancer.lock_losses,
        _queues(engine, int(time.time() * 1000)))


def snapshot_of(supervisor: Any) -> SupervisorSnapshot:
    """Everything the metrics show, read in one go on the supervisor's loop."""
    settings = supervisor.settings
    executor = supervisor.executor
    pool = executor.pool
    slots = tuple(WorkerSlot(s.worker_id, s.in_flight) for s in pool.workers() if s.current)
    engine = supervisor.engine
    return SupervisorSnapshot(
        settings.consumer.group, settings.pool.handler, supervisor.ready, health_of(supervisor), pool.size,
        pool.restarts, pool.recycles, executor.in_flight, executor.waiting, slots,
        None if engine is None else _consume_of(engine))
