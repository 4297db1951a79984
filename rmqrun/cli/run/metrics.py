"""``GET /metrics`` in the Prometheus text format (0.0.4), and the health endpoints.

The exposition is built with ``prometheus_client`` (the Prometheus project's
own client), so the text format's rules (escaping, counter ``_total`` names,
histogram buckets, number formatting) are the reference implementation's,
not ours. Its metric classes are not used: every number is read at scrape
time by one custom collector from the supervisor's frozen snapshot
(:meth:`~rmqrun.supervisor.supervisor.Supervisor.snapshot`, built from the
engine's counters, its queue table, the rebalancer and the pool by the
supervisor, which owns them), so the consume path increments nothing extra,
nothing is counted twice and nothing has to be kept in sync. The collector
sits in a private registry with ``prometheus_client``'s own process, platform
and GC collectors (:func:`add_process_collectors`): ``process_*`` (the
supervisor's CPU, memory, open files, start time; the workers are other
processes), ``python_info`` and ``python_gc_*``, named as every Python
exporter names them, so the usual node and process dashboards and alerts apply.

The HTTP side stays a few lines of asyncio on the supervisor's loop rather
than ``prometheus_client``'s threaded server: the collector reads loop-owned
state, which only the loop may touch, a scrape is answered between two loop
turns and never blocks consumption, and a scrape that cannot be answered
(the loop is stuck) is itself the alarm. ``/healthz`` and ``/readyz``
(:mod:`rmqrun.cli.run.health`) are served on the same port.

Per-queue series carry ``group``, ``topic``, ``broker`` and ``queue_id`` labels, the
same as ``rmqrun exporter``'s (:mod:`rmqrun.cli.exporter.command`), so one alert rule
covers a group whether its lag comes from its consumers or from the broker. Lag is
the broker's max offset from the queue's latest pull answer minus the
group's committed offset (in memory, the value the next commit sends); a
queue without either yet has no lag sample rather than a made-up one. A
stale lag is never shown as a number: when the queue's broker has not
answered for ``ready_broker_timeout`` or its max offset is older than a long
poll explains, the queue has no lag and no broker-offset sample (the series
drops out, so ``absent()`` or a missing-data alert sees it) until the broker
answers again.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Iterator, Sequence

from loguru import logger
from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from rmqrun import __version__
from rmqrun.aio import wait_for
from rmqrun.cli.run.health import liveness, readiness
from rmqrun.supervisor.snapshot import HistogramSnapshot, PopSnapshot, QueueSnapshot

if TYPE_CHECKING:
    from rmqrun.supervisor.supervisor import Supervisor

#: the classic text format, which generate_latest writes (prometheus_client's own "latest" names a newer one)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
MAX_REQUEST_HEAD = 16 * 1024
READ_TIMEOUT = 5.0
PATHS = ("/metrics", "/healthz", "/readyz")

#: the labels of every per-queue series, here and in ``rmqrun exporter``
QUEUE_LABELS = ["group", "topic", "broker", "queue_id"]


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    """A counter family; ``name`` ends in ``_total`` as exposed (prometheus_client strips and re-adds it)."""
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class SupervisorCollector:
    """Builds every family from the supervisor's snapshot at each scrape (``Collector`` protocol)."""

    def __init__(self, supervisor: "Supervisor", started_at: float) -> None:
        self.supervisor = supervisor
        self.started_at = started_at

    def collect(self) -> Iterator[Metric]:
        snap = self.supervisor.snapshot()
        info = GaugeMetricFamily("rmqrun_info", "rmqrun version, consumer group and handler (always 1)",
                                 labels=["version", "group", "handler"])
        info.add_metric([__version__, snap.group, snap.handler], 1)
        yield info
        yield _gauge("rmqrun_start_time_seconds", "when this rmqrun process started, Unix time", self.started_at)
        # the same verdict as /readyz: 0 before the first rebalance, while draining, while the pool is wedged
        # and when no broker has answered for ready_broker_timeout (the alert `rmqrun_ready == 0` fires then)
        yield _gauge("rmqrun_ready", "1 while /readyz answers 200 (consuming, a broker answering, the pool "
                     "moving), else 0", int(self.supervisor.readiness().ok))
        yield _gauge("rmqrun_workers", "worker processes (slots) in the pool", snap.workers)
        yield _counter("rmqrun_worker_restarts_total",
                       "workers replaced after dying unexpectedly (crash, kill, hard time limit)", snap.restarts)
        yield _counter("rmqrun_worker_recycles_total",
                       "workers replaced after reaching max_messages_per_worker or max_memory_per_worker",
                       snap.recycles)
        yield _gauge("rmqrun_inflight_batches", "batches handed to workers and not finished", snap.inflight_batches)
        yield _gauge("rmqrun_waiting_batches", "batches waiting for room in a worker", snap.waiting_batches)
        busy = GaugeMetricFamily("rmqrun_worker_inflight_batches",
                                 "batches handed to each worker slot and not finished", labels=["worker"])
        for slot in snap.slots:
            busy.add_metric([str(slot.worker_id)], slot.in_flight)
        yield busy
        calls = GaugeMetricFamily("rmqrun_worker_inflight_calls", "handler calls in progress in each worker slot "
                                  "(up to worker_concurrency with worker_class threads or asyncio)", labels=["worker"])
        for slot in snap.slots:
            calls.add_metric([str(slot.worker_id)], slot.calls)
        yield calls
        if snap.trace_dropped is not None:
            yield _counter("rmqrun_trace_dropped_total", "message-trace records dropped because the trace buffer "
                           "was full (msg_trace; the messages themselves are consumed as usual)", snap.trace_dropped)
            yield _counter("rmqrun_trace_send_failures_total", "message-trace records in trace sends that failed",
                           snap.trace_send_failures or 0)
        consume = snap.consume
        if consume is None:
            return
        yield _counter("rmqrun_messages_consumed_total", "messages the handler consumed successfully",
                       consume.consumed)
        yield _counter("rmqrun_messages_failed_total",
                       "messages the handler failed (sent back for retry, suspended or dead-lettered)",
                       consume.failed)
        yield _counter("rmqrun_messages_undecodable_total",
                       "messages that did not decode (unknown compression, corrupt body, bad properties), sent to "
                       "the DLQ without reaching the handler", consume.undecodable)
        dead = CounterMetricFamily("rmqrun_messages_dead_lettered", "messages this process sent to %DLQ%<group>, "
                                   "by original topic and reason (max_reconsume, handler, undecodable)",
                                   labels=["group", "topic", "reason"])
        for topic, reason, n in consume.dead_lettered:
            dead.add_metric([snap.group, topic, reason], n)
        yield dead
        yield _counter("rmqrun_batches_total", "consume jobs finished (one pull batch each)", consume.jobs)
        yield _histogram("rmqrun_handler_seconds",
                         "handler time per message: a batch's time in its worker divided by its messages",
                         consume.handler_latency)
        yield _histogram("rmqrun_store_to_handler_seconds",
                         "per message, from the broker storing it to its worker beginning the batch that carries "
                         "it (backlog plus the wait for a free worker)", consume.store_to_handler)
        yield _counter("rmqrun_rebalances_total", "rebalances that changed this consumer's queues",
                       consume.rebalances)
        yield _counter("rmqrun_lock_losses_total", "orderly queues whose broker lock was lost",
                       consume.lock_losses)
        yield _gauge("rmqrun_assigned_queues", "message queues assigned to this consumer", len(consume.queues))
        yield from _queue_families(snap.group, consume.queues)
        if consume.pop is not None:
            yield from _pop_families(snap.group, consume.pop)


def _histogram(name: str, doc: str, hist: HistogramSnapshot) -> HistogramMetricFamily:
    buckets: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip(hist.bounds, hist.counts):
        running += n
        buckets.append((floatToGoString(bound), running))
    buckets.append(("+Inf", hist.count))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=hist.total)


def _queue_families(group: str, queues: Sequence[QueueSnapshot]) -> list[GaugeMetricFamily]:
    inflight = GaugeMetricFamily("rmqrun_queue_inflight_messages",
                                 "messages pulled from the queue and not finished yet (cached in its process queue)",
                                 labels=QUEUE_LABELS)
    lag = GaugeMetricFamily("rmqrun_queue_lag_messages",
                            "broker max offset (from the latest pull) minus the committed consumer offset",
                            labels=QUEUE_LABELS)
    high = GaugeMetricFamily("rmqrun_queue_broker_offset", "the queue's max offset in the latest pull answer",
                             labels=QUEUE_LABELS)
    committed = GaugeMetricFamily("rmqrun_queue_consumer_offset",
                                  "the group's consumer offset as this process holds it", labels=QUEUE_LABELS)
    oldest = GaugeMetricFamily("rmqrun_queue_oldest_unfinished_offset",
                               "offset of the queue's oldest message not finished yet (the committed offset stops "
                               "there: a stuck key or queue)", labels=QUEUE_LABELS)
    oldest_age = GaugeMetricFamily("rmqrun_queue_oldest_unfinished_age_seconds",
                                   "how long ago the broker stored the queue's oldest unfinished message",
                                   labels=QUEUE_LABELS)
    for q in queues:
        # the user's topic names: the namespace is the cluster's spelling, not the user's
        labels = [group, q.topic, q.mq.broker_name, str(q.mq.queue_id)]
        inflight.add_metric(labels, q.inflight_messages)
        if q.oldest_unfinished is not None:
            oldest.add_metric(labels, q.oldest_unfinished[0])
            if q.oldest_unfinished[1] is not None:
                oldest_age.add_metric(labels, q.oldest_unfinished[1])
        if q.consumer_offset is not None:
            committed.add_metric(labels, q.consumer_offset)
        if q.broker_offset is not None:
            high.add_metric(labels, q.broker_offset)
        if q.lag is not None:
            lag.add_metric(labels, q.lag)
    return [inflight, lag, high, committed, oldest, oldest_age]


def _pop_families(group: str, pop: PopSnapshot) -> Iterator[Metric]:
    """POP mode: acks, delays, extensions and the un-acked messages per assignment."""
    yield _counter("rmqrun_pop_messages_popped_total", "messages popped from the broker", pop.popped)
    yield _counter("rmqrun_pop_acks_total", "popped messages acknowledged (ACK_MESSAGE)", pop.acks)
    yield _counter("rmqrun_pop_nacks_total", "failed messages given back with the POP retry delay "
                   "(CHANGE_MESSAGE_INVISIBLETIME)", pop.nacks)
    yield _counter("rmqrun_pop_invisible_extensions_total", "invisibility extended for a handler call still "
                   "running", pop.extensions)
    yield _counter("rmqrun_pop_invisible_extension_failures_total", "extensions the broker refused or that failed",
                   pop.extension_failures)
    yield _counter("rmqrun_pop_expired_total", "popped messages whose invisibility lapsed before their handler "
                   "call (left to the broker to hand out again)", pop.expired)
    yield _counter("rmqrun_pop_revived_total", "messages popped from the POP retry topic (handed out again after a "
                   "failure or a lapsed invisibility)", pop.revived)
    yield _counter("rmqrun_pop_ack_failures_total", "acks the broker refused or that failed", pop.ack_failures)
    yield _gauge("rmqrun_pop_unacked_messages", "messages popped and not acknowledged yet", pop.unacked)
    unacked = GaugeMetricFamily("rmqrun_pop_assignment_unacked_messages", "messages popped for the assignment and "
                                "not acknowledged yet (queue_id -1: every queue)", labels=QUEUE_LABELS)
    for mq, topic, n in pop.assignments:
        unacked.add_metric([group, topic, mq.broker_name, str(mq.queue_id)], n)
    yield unacked


def add_process_collectors(registry: CollectorRegistry) -> CollectorRegistry:
    """``process_*``, ``python_info`` and ``python_gc_*``: the collectors ``prometheus_client`` puts in its
    default registry, which rmqrun does not use (a private one keeps other libraries' metrics out)."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    return registry


def registry_for(supervisor: "Supervisor", started_at: float) -> CollectorRegistry:
    """A private registry: rmqrun's collector and the process collectors."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SupervisorCollector(supervisor, started_at))  # type: ignore[arg-type]
    return add_process_collectors(registry)


class MetricsHttpServer:
    """``GET /metrics`` and :attr:`paths` (and ``HEAD``) on ``host:port``; anything else: 404 or 405.

    The HTTP side shared by ``rmqrun run`` and ``rmqrun exporter``; a subclass answers its health paths.
    """

    paths: tuple[str, ...] = ("/metrics",)

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("metrics on http://{}:{}/metrics (health: {})", self.host, self.port,
                    ", ".join(self._health_paths) or "none")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def body(self) -> bytes:
        return generate_latest(self.registry)

    @property
    def _health_paths(self) -> list[str]:
        return [p for p in self.paths if p != "/metrics"]

    def answer(self, path: str) -> tuple[str, bytes, str]:
        """(status line, body, content type) for a GET of one of :attr:`paths`."""
        return "200 OK", self.body(), CONTENT_TYPE

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            extra, ctype = "", TEXT
            if method not in ("GET", "HEAD"):
                status, body, extra = "405 Method Not Allowed", b"only GET\n", "Allow: GET, HEAD\r\n"
            elif path not in self.paths:
                where = " and ".join(self._health_paths)
                status, body = "404 Not Found", f"metrics are at /metrics, health at {where}\n".encode()
            else:
                status, body, ctype = self.answer(path)
            head_out = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        f"{extra}Connection: close\r\n\r\n").encode("latin-1")
            writer.write(head_out if method == "HEAD" else head_out + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            pass
        except Exception:
            logger.exception("metrics request failed")
        finally:
            writer.close()


class MetricsServer(MetricsHttpServer):
    """``rmqrun run``'s endpoint: the supervisor's metrics, ``/healthz`` and ``/readyz``."""

    paths = PATHS

    def __init__(self, supervisor: "Supervisor", host: str = "127.0.0.1", port: int = 0) -> None:
        self.supervisor = supervisor
        self.started_at = time.time()
        super().__init__(registry_for(supervisor, self.started_at), host, port)

    def answer(self, path: str) -> tuple[str, bytes, str]:
        if path == "/metrics":
            return super().answer(path)
        ok, reason = liveness(self.supervisor) if path == "/healthz" else readiness(self.supervisor)
        return ("200 OK" if ok else "503 Service Unavailable"), (reason + "\n").encode("utf-8"), TEXT
