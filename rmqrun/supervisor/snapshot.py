"""A read-only picture of a running supervisor, for ``/metrics``, ``/healthz`` and ``/readyz``.

The CLI's endpoints used to walk the supervisor's live objects themselves
(``sup.executor.pool``, ``engine.rebalancer``, the engine's queue table),
which tied the command line to how the pool, the executor and the push
consumer happen to keep their state. A snapshot is built here, by the part
that owns those objects, in one pass between two loop turns (the objects are
loop-owned: only the loop may read them), and is frozen: a scrape renders
what it was given and cannot change anything.

:func:`health_of` reads only what health and readiness need (the phase, the
brokers' latest answer, how many queues are assigned, how the pool moves), so
a probe pays for no queue walk; :func:`snapshot_of` reads everything the metrics show, and
:func:`status_of` only what the run log's status line prints (no sort, no histogram, no oldest message,
no call ages), since that line may come every 0.1 s. The pool is
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
    """What ``/healthz`` and ``/readyz`` decide on (:mod:`rmqrun.supervisor.health`).

    ``last_broker_answer`` is None without a consumer (monotonic seconds). ``call_ages`` are how long each
    handler call in progress has run; ``stalled_for`` how long work has waited (batches not in a call yet)
    with no batch finishing, None when nothing waits."""

    phase: str
    phase_detail: str
    last_broker_answer: float | None
    assigned_queues: int
    workers: int = 0
    call_ages: tuple[float, ...] = ()
    queued_batches: int = 0
    stalled_for: float | None = None
    #: workers that cannot take work (not responding, or in a long handler call), and of those not responding
    stuck_workers: int = 0
    not_responding: int = 0


@dataclass(frozen=True, slots=True)
class WorkerSlot:
    """One worker process that new batches of its slot go to, with the batches it holds."""

    worker_id: int
    in_flight: int
    #: handler calls in progress in it now (several at once with the threads / asyncio worker classes)
    calls: int = 0


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
    #: None also when the last one known is not current (its broker is quiet, the queue not pulled lately):
    #: a stale lag is never shown as a number
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
class PopSnapshot:
    """POP mode (``consume_mode: pop``): the counters of :class:`~rmqrun.consumer.pop_consume.PopStats` and,
    per assignment (queue id -1: every queue of the topic on that broker), the messages popped and not acked."""

    popped: int
    acks: int
    nacks: int
    extensions: int
    extension_failures: int
    expired: int
    revived: int
    ack_failures: int
    #: (queue, the user's topic, un-acked messages), sorted by queue
    assignments: tuple[tuple[MessageQueue, str, int], ...] = ()

    @property
    def unacked(self) -> int:
        return sum(n for _, _, n in self.assignments)


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
    #: (topic, reason, messages) sent to the group's DLQ, sorted (:class:`~rmqrun.consumer.dead_letters.DeadLetters`)
    dead_lettered: tuple[tuple[str, str, int], ...] = ()
    #: None in pull mode
    pop: PopSnapshot | None = None


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """What the run log's status line prints (:mod:`rmqrun.supervisor.status_line`), and nothing else.

    A full :class:`SupervisorSnapshot` sorts the queues, reads each one's oldest unfinished
    message, copies two histograms and walks every batch in flight for its call age: about
    a millisecond of the supervisor's CPU, which a status line every 0.1 s (how the
    benchmarks follow a drain) made 10 ms per second, half the supervisor's CPU per message
    while 2 workers run 1 ms handlers. The line needs none of it."""

    consumed: int
    failed: int
    #: each assigned queue's lag (None while not known), in no particular order
    lags: tuple[int | None, ...]
    inflight_batches: int
    workers: int
    not_responding: int = 0
    pop: PopSnapshot | None = None


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
    #: message tracing (msg_trace): trace records dropped on a full buffer, and in sends that failed;
    #: None when tracing is off
    trace_dropped: int | None = None
    trace_send_failures: int | None = None


def health_of(supervisor: Any) -> HealthSnapshot:
    """The supervisor's phase, its brokers' latest answer and how its pool moves, and nothing else."""
    engine = supervisor.engine
    executor = supervisor.executor
    load = executor.load(time.monotonic())
    last = None if engine is None else engine.instance.broker.last_answer
    assigned = 0 if engine is None else len(engine.table) + len(getattr(engine, "pop_table", ()))
    return HealthSnapshot(supervisor.phase, supervisor.phase_detail, last, assigned, executor.pool.size, load.call_ages,
                          load.queued, load.stalled_for, load.stuck, load.not_responding)


def _current(engine: Any, req: Any, quiet_s: float, now: float) -> bool:
    """Whether a queue's broker max offset is a current number, so a lag computed from it is one.

    Not when its broker has not answered anything for ``quiet_s`` (``ready_broker_timeout``: the broker
    is gone, the number is a memory), nor when the offset is older than a long poll can explain (the queue
    is not pulled, and flow control refreshes it every few seconds, see the puller)."""
    if req.broker_max_offset < 0:
        return False
    cfg = engine.config
    addr = engine.instance.broker_address(req.mq.broker_name)
    heard = engine.instance.broker.answered_at.get(addr, 0.0) if addr is not None else 0.0
    polled = max(quiet_s, cfg.broker_suspend_max_time_ms / 1000 + 5.0) + cfg.pull_interval_ms / 1000
    return now - heard <= quiet_s and now - req.broker_max_offset_at <= polled


def _queues(engine: Any, now_ms: int, quiet_s: float) -> tuple[QueueSnapshot, ...]:
    namespace = engine.config.namespace
    now = time.monotonic()
    out = []
    for mq, req in sorted(engine.table.items()):
        done = engine.offset_store.read_memory(mq)
        high = req.broker_max_offset if _current(engine, req, quiet_s, now) else None
        out.append(QueueSnapshot(mq, unwrap(namespace, mq.topic), req.pq.msg_count,
                                 high, done if done >= 0 else None, oldest_unfinished(req.pq, now_ms)))
    return tuple(out)


def _histogram_of(hist: Any) -> HistogramSnapshot:
    return HistogramSnapshot(tuple(hist.bounds), tuple(hist.counts), hist.total, hist.count)


def _consume_of(engine: Any, quiet_s: float) -> ConsumeSnapshot:
    stats = engine.stats
    return ConsumeSnapshot(
        stats.consumed, stats.failed, stats.undecodable, stats.jobs, _histogram_of(stats.handler_latency),
        _histogram_of(stats.store_to_handler), engine.rebalancer.rebalances, engine.rebalancer.lock_losses,
        _queues(engine, int(time.time() * 1000), quiet_s),
        tuple(sorted((topic, reason, n) for (topic, reason), n in engine.dead_letters.counts.items())),
        _pop_of(engine))


def _pop_of(engine: Any) -> PopSnapshot | None:
    stats = getattr(engine, "pop_stats", None)
    if stats is None:
        return None
    namespace = engine.config.namespace
    assignments = tuple((mq, unwrap(namespace, mq.topic), req.pq.wait_ack_count)
                        for mq, req in sorted(engine.pop_table.items()))
    return PopSnapshot(stats.popped, stats.acks, stats.nacks, stats.extensions, stats.extension_failures,
                       stats.expired, stats.revived, stats.ack_failures, assignments)


def snapshot_of(supervisor: Any) -> SupervisorSnapshot:
    """Everything the metrics show, read in one go on the supervisor's loop."""
    settings = supervisor.settings
    executor = supervisor.executor
    pool = executor.pool
    slots = tuple(WorkerSlot(s.worker_id, s.in_flight, s.calls) for s in pool.workers() if s.current)
    engine = supervisor.engine
    tracer = supervisor.tracing.dispatcher if supervisor.tracing is not None else None
    return SupervisorSnapshot(
        settings.consumer.group, settings.pool.worker.handler, supervisor.ready, health_of(supervisor), pool.size,
        pool.restarts, pool.recycles, executor.in_flight, executor.waiting, slots,
        None if engine is None else _consume_of(engine, supervisor.health_limits.ready_broker_timeout),
        None if tracer is None else tracer.dropped, None if tracer is None else tracer.send_failures)


def status_of(supervisor: Any) -> StatusSnapshot:
    """The status line's figures, read in one go on the supervisor's loop (see :class:`StatusSnapshot`)."""
    executor = supervisor.executor
    pool = executor.pool
    liveness = executor.liveness
    not_responding = len(liveness.stuck & set(pool.worker_ids)) if liveness.stuck else 0
    engine = supervisor.engine
    if engine is None:
        return StatusSnapshot(0, 0, (), executor.in_flight, pool.size, not_responding)
    quiet_s = supervisor.health_limits.ready_broker_timeout
    now = time.monotonic()
    read_memory = engine.offset_store.read_memory
    lags: list[int | None] = []
    for mq, req in engine.table.items():  # the lag as QueueSnapshot.lag gives it
        done = read_memory(mq)
        current = done >= 0 and _current(engine, req, quiet_s, now)
        lags.append(max(0, req.broker_max_offset - done) if current else None)
    stats = engine.stats
    return StatusSnapshot(stats.consumed, stats.failed, tuple(lags), executor.in_flight, pool.size,
                          not_responding, _pop_of(engine))
