"""An optional ``GET /metrics`` endpoint in the Prometheus text format (0.0.4), no dependency.

The numbers are read from the supervisor's live objects at scrape time (the
engine's :class:`~rmqrun.consumer.push.ConsumeStats`, its queue table, the
rebalancer and the pool), so nothing is counted twice and nothing has to be
kept in sync. The server is a few lines of asyncio on the supervisor's loop:
a scrape is answered between two loop turns and never blocks consumption; a
scrape that cannot be answered (the loop is stuck) is itself the alarm.

Per-queue series carry ``topic``, ``broker`` and ``queue_id`` labels. Lag is
the broker's max offset from the queue's latest pull answer minus the
group's committed offset (in memory, the value the next commit sends); a
queue without either yet has no lag sample rather than a made-up one.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from loguru import logger

from rmqrun import __version__

if TYPE_CHECKING:
    from rmqrun.supervisor.supervisor import Supervisor

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_REQUEST_HEAD = 16 * 1024
READ_TIMEOUT = 5.0


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


@dataclass
class Family:
    """One metric family: its HELP and TYPE lines and its samples."""

    name: str
    kind: str  # counter, gauge, histogram
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> "Family":
        self.samples.append((self.name + suffix, labels, value))
        return self

    def render(self) -> str:
        lines = [f"# HELP {self.name} {_escape(self.help)}", f"# TYPE {self.name} {self.kind}"]
        for name, labels, value in self.samples:
            label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            lines.append(f"{name}{{{label_text}}} {_number(value)}" if labels else f"{name} {_number(value)}")
        return "\n".join(lines)


def collect(supervisor: "Supervisor", started_at: float) -> list[Family]:
    """Every family, from the supervisor's current state."""
    settings = supervisor.settings
    executor = supervisor.executor
    pool = executor.pool
    engine = supervisor.engine
    f = Family
    info = f("rmqrun_info", "gauge", "rmqrun version, consumer group and handler (always 1)")
    info.add(1, version=__version__, group=settings.consumer.group, handler=settings.pool.handler)
    out = [
        info,
        f("rmqrun_start_time_seconds", "gauge", "when this rmqrun process started, Unix time").add(started_at),
        f("rmqrun_ready", "gauge", "1 once the consumer has started (READY=1), else 0").add(int(supervisor.ready)),
        f("rmqrun_workers", "gauge", "worker processes (slots) in the pool").add(pool.size),
        f("rmqrun_worker_restarts_total", "counter",
          "workers replaced after dying unexpectedly (crash, kill, hard time limit)").add(pool.restarts),
        f("rmqrun_worker_recycles_total", "counter",
          "workers replaced after reaching max_messages_per_worker or max_memory_per_worker").add(pool.recycles),
        f("rmqrun_inflight_batches", "gauge", "batches handed to workers and not finished").add(executor.in_flight),
        f("rmqrun_waiting_batches", "gauge", "batches waiting for room in a worker").add(executor.waiting),
    ]
    busy = f("rmqrun_worker_inflight_batches", "gauge", "batches handed to each worker slot and not finished")
    for status in pool.workers():
        if status.current:
            busy.add(status.in_flight, worker=str(status.worker_id))
    out.append(busy)
    if engine is None:
        return out
    stats = engine.stats
    out += [
        f("rmqrun_messages_consumed_total", "counter", "messages the handler consumed successfully")
        .add(stats.consumed),
        f("rmqrun_messages_failed_total", "counter",
          "messages the handler failed (sent back for retry, suspended or dead-lettered)").add(stats.failed),
        f("rmqrun_messages_undecodable_total", "counter",
          "messages that did not decode (unknown compression, corrupt body, bad properties), sent to the DLQ "
          "without reaching the handler").add(stats.undecodable),
        f("rmqrun_batches_total", "counter", "consume jobs finished (one pull batch each)").add(stats.jobs),
        _histogram(stats.handler_latency),
        f("rmqrun_rebalances_total", "counter", "rebalances that changed this consumer's queues")
        .add(engine.rebalancer.rebalances),
        f("rmqrun_lock_losses_total", "counter", "orderly queues whose broker lock was lost")
        .add(engine.rebalancer.lock_losses),
        f("rmqrun_assigned_queues", "gauge", "message queues assigned to this consumer").add(len(engine.table)),
    ]
    out += _queue_families(engine)
    return out


def _histogram(hist) -> Family:  # type: ignore[no-untyped-def]
    fam = Family("rmqrun_handler_seconds", "histogram",
                 "handler time per message: a batch's time in its worker divided by its messages")
    running = 0
    for bound, n in zip(hist.bounds, hist.counts):
        running += n
        fam.add(running, "_bucket", le=_number(float(bound)))
    fam.add(hist.count, "_bucket", le="+Inf")
    fam.add(hist.total, "_sum")
    fam.add(hist.count, "_count")
    return fam


def _queue_families(engine) -> list[Family]:  # type: ignore[no-untyped-def]
    inflight = Family("rmqrun_queue_inflight_messages", "gauge",
                      "messages pulled from the queue and not finished yet (cached in its process queue)")
    lag = Family("rmqrun_queue_lag_messages", "gauge",
                 "broker max offset (from the latest pull) minus the committed consumer offset")
    high = Family("rmqrun_queue_broker_offset", "gauge", "the queue's max offset in the latest pull answer")
    committed = Family("rmqrun_queue_consumer_offset", "gauge", "the group's consumer offset as this process holds it")
    for mq, req in sorted(engine.table.items()):
        labels = {"topic": mq.topic, "broker": mq.broker_name, "queue_id": str(mq.queue_id)}
        inflight.add(req.pq.msg_count, **labels)
        done = engine.offset_store.read_memory(mq)
        if done >= 0:
            committed.add(done, **labels)
        if req.broker_max_offset >= 0:
            high.add(req.broker_max_offset, **labels)
            if done >= 0:
                lag.add(max(0, req.broker_max_offset - done), **labels)
    return [inflight, lag, high, committed]


def render(families: Iterable[Family]) -> str:
    return "\n".join(fam.render() for fam in families) + "\n"


class MetricsServer:
    """``GET /metrics`` (and ``HEAD``) on ``host:port``; anything else gets 404 or 405."""

    def __init__(self, supervisor: "Supervisor", host: str = "127.0.0.1", port: int = 0) -> None:
        self.supervisor = supervisor
        self.host = host
        self.port = port
        self.started_at = time.time()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        logger.info("metrics on http://{}:{}/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def body(self) -> bytes:
        return render(collect(self.supervisor, self.started_at)).encode("utf-8")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, extra = "405 Method Not Allowed", b"only GET\n", "Allow: GET, HEAD\r\n"
            elif path != "/metrics":
                status, body, extra = "404 Not Found", b"metrics are at /metrics\n", ""
            else:
                status, body, extra = "200 OK", self.body(), ""
            ctype = CONTENT_TYPE if status.startswith("200") else "text/plain; charset=utf-8"
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
