"""``rmqrun demo``: the whole thing on one machine, with nothing to set up.

It starts the embedded name server and broker on free loopback ports with
their data in a temporary directory, produces a backlog, runs the worker
pool over it with a CPU-bound example handler (``workers.cpu:handle``, which
burns ``--cpu-ms`` of CPU per message), shows live progress and ends with a
summary: how many messages, how long, how many workers, and the throughput
against the ideal ``workers / handler cost``.

``--order-by queue|key`` consumes in order instead, from a topic with fewer
queues than workers (``--queues``, default half the workers) and messages
spread over many sharding keys: queue order can keep at most one worker per
queue busy, key order all of them. Run both to see the difference.

Everything runs in this process except the workers, so cleaning up is
simple and certain: the supervisor stops its workers, the broker stops with
the loop, and the temporary directory is removed in a ``finally``. Ctrl-C
(or SIGTERM) at any point stops the run gracefully and still cleans up.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.admin.session import admin_session
from rmqrun.cli.exit_codes import EXIT_INTERRUPTED
from rmqrun.client.admin import TopicConfig
from rmqrun.errors import RmqrunError
from rmqrun.cli.produce.sender import ProduceSpec, Template, generated, produce
from rmqrun.client.producer import Producer
from rmqrun.supervisor.status_line import plural
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.supervisor.pool_config import PoolConfig, worker_config_for
from rmqrun.supervisor.supervisor import RunSettings, Supervisor

TOPIC = "RmqrunDemo"
GROUP = "rmqrun_demo"
CPU_ENV = "RMQRUN_HANDLER_CPU_MS"  # read by workers.cpu at import, i.e. in each worker


class DemoError(RmqrunError):
    """The demo could not do its part (the backlog was not sent)."""


@dataclass(frozen=True)
class DemoOptions:
    messages: int = 20_000
    cpu_ms: float = 1.0
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    handler: str = "workers.cpu:handle"
    tty: bool = False
    #: the supervisor's and workers' log level (flow-control warnings are normal while draining a backlog)
    log_level: str = "ERROR"
    #: seconds between progress updates (default: 0.2 on a TTY, 2 otherwise)
    interval: float | None = None
    #: None: consume concurrently; "queue" or "key": orderly, by queue or by key
    order_by: str | None = None
    #: queues of the demo topic (None: the broker's default; with order_by: half the workers)
    queues: int | None = None
    #: sharding keys of the backlog when ordering
    keys: int = 1000

    @property
    def topic_queues(self) -> int | None:
        if self.queues is not None or self.order_by is None:
            return self.queues
        return max(1, self.workers // 2)


@dataclass
class DemoResult:
    handled: int = 0
    failed: int = 0
    produced: int = 0
    produce_seconds: float = 0.0
    boot_seconds: float = 0.0
    consume_seconds: float = 0.0
    worker_cpu: dict[int, float] = field(default_factory=dict)
    interrupted: bool = False
    exit_code: int = 0


class _Rate:
    """Messages per second over the last few seconds (a steadier number than the average so far)."""

    def __init__(self, window: float = 2.0) -> None:
        self.window = window
        self.points: deque[tuple[float, int]] = deque()

    def update(self, count: int) -> float:
        now = time.monotonic()
        self.points.append((now, count))
        while len(self.points) > 2 and now - self.points[0][0] > self.window:
            self.points.popleft()
        t0, c0 = self.points[0]
        return (count - c0) / (now - t0) if now > t0 else 0.0


class _WorkerLoad:
    """CPU use of each worker process (psutil), by worker id."""

    def __init__(self) -> None:
        self.procs: dict[int, psutil.Process] = {}
        self.cpu_seconds: dict[int, float] = {}

    def sample(self, workers: list[tuple[int, int]]) -> dict[int, float]:
        out: dict[int, float] = {}
        for wid, pid in workers:
            proc = self.procs.get(pid)
            try:
                if proc is None:
                    proc = self.procs[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)  # the first call only starts the measurement
                out[wid] = proc.cpu_percent(None)
                times = proc.cpu_times()
                self.cpu_seconds[pid] = times.user + times.system
            except psutil.Error:
                continue
        return out


class Display:
    """One rewritten line on a terminal, plain periodic lines otherwise."""

    def __init__(self, tty: bool, write: Callable[[str], None]) -> None:
        self.tty = tty
        self.write = write
        self._open = False

    def progress(self, text: str) -> None:
        if self.tty:
            self.write("\r\x1b[2K" + text)
            self._open = True
        else:
            self.write(text + "\n")

    def line(self, text: str) -> None:
        if self._open:
            self.write("\n")
            self._open = False
        self.write(text + "\n")


async def _produce_backlog(namesrv: str, opts: DemoOptions, display: Display, stop: asyncio.Event,
                           result: DemoResult) -> None:
    sent = 0
    last = time.monotonic()
    interval = opts.interval or (0.2 if opts.tty else 2.0)

    def on_sent(n: int) -> None:
        nonlocal sent, last
        sent += n
        now = time.monotonic()
        if now - last >= interval or sent == opts.messages:
            last = now
            display.progress(f"producing {sent}/{opts.messages} messages to {TOPIC}")

    started = time.monotonic()
    async with Producer(namesrv, "rmqrun_demo_producer") as producer:
        # ordered: every message carries one of opts.keys sharding keys (one by one: a batch has no key)
        spec = (ProduceSpec(TOPIC, tags="demo", sharding_key=Template(f"key-{{i%{opts.keys}}}"))
                if opts.order_by else ProduceSpec(TOPIC, tags="demo"))
        job = asyncio.ensure_future(produce(producer, spec,
                                            generated(opts.messages, Template("demo message {i}")),
                                            concurrency=64 if opts.order_by else 16,
                                            batch=1 if opts.order_by else 64, on_sent=on_sent))
        halt = asyncio.ensure_future(stop.wait())
        await asyncio.wait({job, halt}, return_when=asyncio.FIRST_COMPLETED)
        halt.cancel()
        if not job.done():
            job.cancel()
            await asyncio.wait({job})
            result.interrupted = True
            return
        report = job.result()
    result.produced = report.sent
    result.produce_seconds = time.monotonic() - started
    if report.failed:
        raise DemoError(f"{report.failed} message(s) could not be sent: {report.first_error}")
    display.line(f"produced {report.sent} messages in {result.produce_seconds:.1f} s "
                 f"({report.rate:.0f} msg/s) on {len(report.per_queue)} queues")


async def _create_topic(broker: EmbeddedBroker, queues: int, *, ordered: bool) -> None:
    """The demo topic with exactly ``queues`` queues, before the first send (an auto-created topic gets the
    broker's default, and sends by sharding key racing its creation could pick a queue it does not have)."""
    async with admin_session(broker.namesrv_address, "rmqrun-demo-admin") as (instance, admin):
        await admin.create_or_update_topic(broker.broker_address, TopicConfig(TOPIC, queues, queues, order=ordered))
        for _ in range(100):  # until the name server has the route
            try:
                route = await instance.update_route(TOPIC)
            except RmqrunError:
                route = None
            if route is not None:
                return
            await asyncio.sleep(0.05)


def _settings(namesrv: str, opts: DemoOptions, on_ready: Callable[[], None]) -> RunSettings:
    consumer = ConsumerConfig(group=GROUP, namesrv=namesrv, subscriptions={TOPIC: "*"},
                              consume_from_where="CONSUME_FROM_FIRST_OFFSET", persist_offset_interval_ms=1000,
                              instance_name="rmqrun-demo", orderly=opts.order_by is not None,
                              order_by=opts.order_by or "queue")
    pool = PoolConfig(worker_config_for(consumer, opts.handler, log_level=opts.log_level), workers=opts.workers)
    return RunSettings(consumer=consumer, pool=pool, grace=5.0, status_interval=0, on_ready=on_ready)


async def _consume(namesrv: str, opts: DemoOptions, display: Display, stop: asyncio.Event,
                   result: DemoResult) -> None:
    ready_at: list[float] = []
    spawned = time.monotonic()
    supervisor = Supervisor(_settings(namesrv, opts, lambda: ready_at.append(time.monotonic())))
    run = asyncio.ensure_future(supervisor.run())
    loop = asyncio.get_running_loop()
    # The supervisor handles SIGINT/SIGTERM itself while it runs (graceful stop); before and after, we do.
    rate, load = _Rate(), _WorkerLoad()
    interval = opts.interval or (0.2 if opts.tty else 2.0)
    done_at: float | None = None
    shown = time.monotonic()
    try:
        while not run.done():
            # check often (the end is timed from here), show at the display's pace
            await asyncio.wait({run}, timeout=0.02)
            engine = supervisor.engine
            if engine is None or not ready_at:
                if stop.is_set():
                    supervisor.request_stop()
                continue
            if not rate.points:  # prime the rate and the CPU readings at the moment consuming began
                rate.points.append((ready_at[0], 0))
                load.sample([(w.worker_id, w.pid) for w in supervisor.executor.pool.workers() if w.current])
            consumed = engine.stats.consumed
            if done_at is not None:
                continue
            if consumed >= opts.messages:
                done_at = time.monotonic()
                supervisor.request_stop()
            elif time.monotonic() - shown < interval:
                continue
            shown = time.monotonic()
            workers = [(w.worker_id, w.pid) for w in supervisor.executor.pool.workers() if w.current]
            cpu = load.sample(workers)
            loads = " ".join(f"{cpu.get(wid, 0):3.0f}%" for wid, _ in workers)
            lag = max(0, result.produced - consumed)
            pct = 100 * consumed / max(1, opts.messages)
            display.progress(f"consumed {consumed}/{opts.messages} {pct:3.0f}%  {rate.update(consumed):6.0f} msg/s"
                             f"  lag {lag:6d}  {plural(len(workers), 'worker')} CPU: {loads}")
        result.exit_code = run.result()
    finally:
        if not run.done():  # cancelled from outside: let the supervisor stop its workers
            supervisor.request_stop()
            await asyncio.wait({run})
        for sig in (signal.SIGINT, signal.SIGTERM):  # the supervisor removed its handlers on the way out
            loop.add_signal_handler(sig, stop.set)
    engine = supervisor.engine
    if engine is not None:
        result.handled = engine.stats.consumed
        result.failed = engine.stats.failed
    if ready_at:
        result.boot_seconds = ready_at[0] - spawned
        result.consume_seconds = (done_at or time.monotonic()) - ready_at[0]
    result.worker_cpu = {i: s for i, s in enumerate(load.cpu_seconds.values())}
    if result.handled < opts.messages:
        result.interrupted = True


async def _demo(opts: DemoOptions, data_dir: Path, display: Display) -> DemoResult:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    result = DemoResult()
    os.environ[CPU_ENV] = repr(opts.cpu_ms)
    broker = EmbeddedBroker(data_dir / "broker", flush_mode="async")
    await broker.start()
    try:
        display.line(f"embedded broker: name server {broker.namesrv_address}, broker {broker.broker_address}, "
                     f"data in {data_dir}")
        if opts.topic_queues is not None:
            await _create_topic(broker, opts.topic_queues, ordered=opts.order_by is not None)
        await _produce_backlog(broker.namesrv_address, opts, display, stop, result)
        if not result.interrupted and not stop.is_set():
            display.line(f"starting {plural(opts.workers, 'worker')} running {opts.handler} "
                         f"({opts.cpu_ms:g} ms CPU per message){_mode(opts)}")
            await _consume(broker.namesrv_address, opts, display, stop, result)
    finally:
        await broker.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    result.interrupted = result.interrupted or stop.is_set()
    return result


def _mode(opts: DemoOptions) -> str:
    if opts.order_by is None:
        return ""
    return (f", in order by {opts.order_by} ({opts.keys} sharding keys on {opts.topic_queues} queue(s): "
            f"{'one worker per queue at most' if opts.order_by == 'queue' else 'every worker, one key at a time'})")


def summary(opts: DemoOptions, r: DemoResult) -> str:
    if r.interrupted and not r.consume_seconds:
        return f"interrupted before consuming began ({r.produced} of {opts.messages} messages produced)"
    rate = r.handled / r.consume_seconds if r.consume_seconds > 0 else 0.0
    ideal = opts.workers / (opts.cpu_ms / 1000) if opts.cpu_ms > 0 else float("inf")
    head = "interrupted: " if r.interrupted else ""
    lines = [f"{head}{plural(r.handled, 'message')} handled in {r.consume_seconds:.1f} s by "
             f"{plural(opts.workers, 'worker')} "
             f"({opts.handler}, {opts.cpu_ms:g} ms CPU per message{_mode(opts)}), {r.failed} failed",
             f"throughput {rate:.0f} msg/s; ideal {plural(opts.workers, 'worker')} / {opts.cpu_ms:g} ms = "
             f"{ideal:.0f} msg/s: {100 * rate / ideal:.0f}% of ideal"
             if ideal != float("inf") else f"throughput {rate:.0f} msg/s",
             f"produced {r.produced} in {r.produce_seconds:.1f} s; workers ready in {r.boot_seconds:.1f} s"]
    if r.worker_cpu:
        lines.append("CPU seconds per worker: " + " ".join(f"{s:.1f}" for s in r.worker_cpu.values()))
    return "\n".join(lines)


def run_demo(opts: DemoOptions, write: Callable[[str], None] | None = None) -> int:
    """Run the demo; returns the exit code (0, 130 when interrupted, else the supervisor's)."""
    out = write or (lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    display = Display(opts.tty, out)
    data_dir = Path(tempfile.mkdtemp(prefix="rmqrun-demo-"))
    result: DemoResult | None = None
    try:
        result = asyncio.run(_demo(opts, data_dir, display))
    except KeyboardInterrupt:
        display.line("interrupted")
        return EXIT_INTERRUPTED
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    display.line(summary(opts, result))
    if result.exit_code:
        return result.exit_code
    return EXIT_INTERRUPTED if result.interrupted else 0
