"""The supervisor: one asyncio loop that runs the push consumer over the worker pool.

Signals only enqueue (handlers registered with ``loop.add_signal_handler``
run in the loop, and they do nothing but put the signal on a queue); every
state change happens in :meth:`Supervisor.run`'s loop, gunicorn style:

* TERM / INT: graceful stop. Pulling stops, jobs already with a worker
  finish within ``grace`` seconds, offsets of finished messages are
  committed, orderly queues unlocked, the client unregisters; exit 0. A second
  TERM/INT, or the end of the grace period, stops at once (still committing
  only what finished: unfinished messages are redelivered to the next run).
* HUP: reload: fresh workers import the handler anew; old ones retire after
  the work they hold. The reload runs in the background (importing new code
  may take a while), so TERM/INT and the other signals are acted on meanwhile;
  a stop abandons the reload (the fresh workers are killed, nothing they
  could hold is lost).
* TTIN / TTOU: one worker more / less.

Each of these is logged with its sender's pid when it is known
(:mod:`rmqrun.supervisor.signal_senders`); one sent by a worker or by a
process of a worker is ignored with a warning naming that worker: a handler
cannot stop, reload or resize the service it runs in (systemd would take a
stop with exit 0 for a clean one and never restart it).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import defaultdict, deque

from loguru import logger

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.engines import new_engine
from rmqrun.consumer.push import PushConsumer
from rmqrun.consumer.trace_hook import TracingExecutor, consumer_tracing
from rmqrun.errors import ConfigError
from rmqrun.pipe import procs
from rmqrun.supervisor.cluster_wait import start_when_reachable
from rmqrun.supervisor.config_reload import reload_with_config
from rmqrun.supervisor.executor import PoolExecutor
from rmqrun.supervisor.health import (
    HealthLimits, HealthWatch, Verdict, liveness, readiness,
)
from rmqrun.supervisor.pool import PoolError, WorkerBootError
from rmqrun.supervisor.lineage import owner_of
from rmqrun.supervisor.pool_config import PoolConfig
from rmqrun.supervisor.run_settings import RunSettings
from rmqrun.supervisor.signal_senders import UNKNOWN_SENDER, SignalReceiver
from rmqrun.supervisor.snapshot import StatusSnapshot, SupervisorSnapshot, health_of, snapshot_of, status_of
from rmqrun.supervisor.status_line import StatusLine, plural

EXIT_OK = 0
EXIT_FATAL = 1
EXIT_BOOT = 3  # the handler or a hook does not import (same number as the worker's)


def _check_agree(consumer: ConsumerConfig, pool: PoolConfig) -> None:
    """The workers take the consumer's namespace off message topics and name its group in their spans; a pool
    built apart from its consumer would show handlers the wrong names. ``rmqrun run``'s settings table builds
    the WorkerConfig from the consumer's values; a program building its own is told what to set."""
    worker = pool.worker
    if (worker.namespace or None) != (consumer.namespace or None):
        raise ConfigError(f"the workers' namespace {worker.namespace!r} is not the consumer's "
                          f"{consumer.namespace!r}: build the WorkerConfig with namespace=consumer.namespace")
    if worker.otel and worker.consumer_group != consumer.group:
        raise ConfigError(f"the workers' consumer_group {worker.consumer_group!r} is not the consumer's group "
                          f"{consumer.group!r}: build the WorkerConfig with consumer_group=consumer.group")


class Supervisor:
    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        pool = settings.pool
        _check_agree(settings.consumer, pool)
        self.executor = PoolExecutor(pool, max_inflight_messages=settings.max_inflight_messages)
        #: msg_trace: the executor the engine runs its jobs through, writing message traces (None: off)
        self.tracing: TracingExecutor | None = consumer_tracing(settings.consumer, self.executor)
        self.engine: PushConsumer | None = None
        #: True once the consumer has started and taken its first assignment (systemd READY=1)
        self.ready = False
        #: what the supervisor is doing, for ``/readyz``: starting, waiting, consuming, draining, stopped
        self.phase = "starting"
        #: why, in a few words (the cluster error while waiting, the signal while draining)
        self.phase_detail = ""
        self._signals: asyncio.Queue[int] = asyncio.Queue()
        #: per signal, the senders of those queued, in order (" from pid 1 (systemd)"), for the line acting on each
        self._senders: dict[int, deque[str]] = defaultdict(deque)
        self._receiver = SignalReceiver(self._received, with_senders=settings.signal_senders)
        self._stop_requested = asyncio.Event()
        self._reload_task: asyncio.Task[None] | None = None
        self.health_limits = HealthLimits(settings.ready_broker_timeout, settings.stall_timeout,
                                          pool.worker.time_limit)
        #: the status line's previous count and time (its rate covers one interval)
        self._status_line: StatusLine | None = None

    # ----------------------------------------------------------------- signals

    def _install_signals(self) -> None:
        self._receiver.install()

    def _remove_signals(self) -> None:
        self._receiver.remove()

    def _received(self, sig: int, sender: int, chain: tuple[procs.ProcStat, ...]) -> None:
        """A signal and its sender: dropped if from a worker or its descendant, else queued for the loop."""
        name = signal.Signals(sig).name
        if sender > 0:
            workers = {w.pid: w.worker_id for w in self.executor.pool.workers()}
            worker_pid = owner_of(workers, sender, chain)
            if worker_pid is not None:
                comm = f"pid {sender} ({chain[0].comm})" if chain else f"pid {sender}"
                what = "worker" if worker_pid == sender else f"{comm}, a process of worker"
                logger.warning("{} from {} {} (pid {}) ignored: a handler cannot stop, reload or resize the "
                               "service; send it from outside (systemctl, kill)", name,
                               what, workers[worker_pid], worker_pid)
                return
        if sender == UNKNOWN_SENDER:
            text = ""
        else:
            text = f" from pid {sender} ({chain[0].comm})" if chain else f" from {procs.describe(sender)}"
        self._senders[sig].append(text)
        self._signals.put_nowait(sig)

    def _sender(self, sig: int) -> str:
        """`` from pid N (name)`` for the oldest such signal queued, or nothing (unknown, or requested in code)."""
        queued = self._senders[sig]
        return queued.popleft() if queued else ""

    def request_stop(self) -> None:
        """Programmatic TERM (tests, the demo)."""
        self._signals.put_nowait(signal.SIGTERM)

    # ----------------------------------------------------------------- run

    async def run(self) -> int:
        self._install_signals()
        try:
            return await self._run()
        finally:
            self._remove_signals()
            if self.tracing is not None:
                await self.tracing.dispatcher.close()

    async def _run(self) -> int:
        try:
            await self.executor.start()
        except WorkerBootError as exc:
            logger.error("workers cannot start: {}", exc)
            return EXIT_BOOT
        try:
            self.engine = await start_when_reachable(
                lambda: new_engine(self.settings.consumer, self.tracing or self.executor), self._signals,
                on_status=self._waiting, on_signal=self._handle)
        except ConfigError:
            await self.executor.stop(0)
            raise
        except Exception as exc:
            logger.error("consumer cannot start: {}", exc)
            await self.executor.stop(0)
            return EXIT_FATAL
        if self.engine is None:  # TERM/INT while waiting for the cluster
            self._set_phase("draining", "stop requested while waiting for the cluster")
            await self.executor.stop(self.settings.grace)
            return EXIT_OK
        mode = self.settings.consumer.mode.description
        ns = self.settings.consumer.namespace
        logger.info("consuming {} as group {}{} ({}, {}), {} running {}",
                    ", ".join(f"{t}[{self.settings.consumer.expression_label(t, e)}]"
                              for t, e in self.settings.consumer.subscriptions.items()),
                    self.settings.consumer.group, f" in namespace {ns}" if ns else "",
                    self.settings.consumer.message_model, mode,
                    plural(self.executor.pool.size, "worker"), self.settings.pool.worker.handler)
        self.ready = True
        self._set_phase("consuming")
        if self.settings.on_ready:
            self.settings.on_ready()
        status_task = asyncio.ensure_future(self._status_loop())
        engine = self.engine
        watch_task = asyncio.ensure_future(HealthWatch(self, self.health_limits, engine.request_heartbeat).run())
        assert self.executor.fatal is not None
        refused = self._watch_refusals(self.engine)
        code = EXIT_OK
        try:
            while True:
                get_sig = asyncio.ensure_future(self._signals.get())
                done, _ = await asyncio.wait({get_sig, self.executor.fatal, refused},
                                             return_when=asyncio.FIRST_COMPLETED)
                if refused in done:
                    # an ACL refusal never heals by waiting: stop with the line that says what to fix
                    get_sig.cancel()
                    logger.error("stopping: the cluster refuses this consumer: {}", refused.result())
                    await self._stop(grace=self.settings.grace)
                    return EXIT_FATAL
                if self.executor.fatal in done:
                    get_sig.cancel()
                    logger.error("stopping: {}", self.executor.fatal.result())
                    # Exit code 3 means "the handler cannot be loaded when rmqrun starts", and the unit
                    # never restarts it. After start-up (code changed on disk, an import that fails
                    # for a moment) the pool gives up with 1: a restart either recovers or stops at 3.
                    code = EXIT_FATAL
                    await self._stop(grace=0)
                    return code
                sig = get_sig.result()
                if sig in (signal.SIGTERM, signal.SIGINT):
                    logger.info("{} received{}: stopping gracefully (grace {:g} s; send it again to stop now)",
                                signal.Signals(sig).name, self._sender(sig), self.settings.grace)
                    await self._stop(grace=self.settings.grace)
                    return EXIT_OK
                await self._handle(sig)
        finally:
            status_task.cancel()
            watch_task.cancel()
            refused.cancel()

    @staticmethod
    def _watch_refusals(engine: PushConsumer) -> "asyncio.Future[BaseException]":
        """A future set by the first ACL refusal any request of the consumer gets."""
        fut: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

        def on_refusal(error: BaseException) -> None:
            if not fut.done():
                fut.set_result(error)

        if engine.instance.refusal is not None:
            on_refusal(engine.instance.refusal)
        engine.instance.refusal_listeners.append(on_refusal)
        return fut

    async def _handle(self, sig: int) -> None:
        pool = self.executor.pool
        try:
            if sig == signal.SIGHUP:
                if self._reload_task is not None and not self._reload_task.done():
                    logger.warning("SIGHUP: a reload is already in progress; ignoring this one")
                    return
                logger.info("SIGHUP{}: reloading workers", self._sender(sig))
                self._reload_task = asyncio.ensure_future(self._reload())
            elif sig == signal.SIGTTIN:
                logger.info("SIGTTIN{}: one worker more", self._sender(sig))
                pool.add_worker()
                self.executor.resize()
            elif sig == signal.SIGTTOU:
                logger.info("SIGTTOU{}: one worker less", self._sender(sig))
                pool.remove_worker()
                self.executor.resize()
        except PoolError as exc:
            logger.error("{} failed: {}", signal.Signals(sig).name, exc)

    async def _reload(self) -> None:
        if self.settings.reload_config is not None:
            await reload_with_config(self, self.settings.reload_config)
            return
        try:
            await self.executor.pool.reload()
        except (PoolError, OSError) as exc:
            logger.error("SIGHUP failed: {}; the running workers carry on", exc)

    async def _abandon_reload(self) -> None:
        task = self._reload_task
        if task is not None and not task.done():
            logger.info("stopping: abandoning the reload in progress")
            task.cancel()
            await asyncio.wait({task})

    async def _stop(self, grace: float) -> None:
        engine = self.engine
        self._set_phase("draining", f"graceful stop, grace {grace:g} s" if grace else "stopping now")
        if self.settings.on_stopping:
            self.settings.on_stopping()
        await self._abandon_reload()
        assert engine is not None
        deadline = time.monotonic() + grace
        engine.stop_pulling()
        self.executor.close_intake()
        # A second TERM/INT cuts the grace period short.
        shutdown = asyncio.ensure_future(engine.shutdown(grace))
        while not shutdown.done():
            get_sig = asyncio.ensure_future(self._signals.get())
            done, _ = await asyncio.wait({shutdown, get_sig}, return_when=asyncio.FIRST_COMPLETED)
            if get_sig in done and get_sig.result() in (signal.SIGTERM, signal.SIGINT):
                logger.warning("second stop signal{}: stopping now; unfinished messages are redelivered later",
                               self._sender(get_sig.result()))
                await self.executor.stop(0)
            elif not get_sig.done():
                get_sig.cancel()
        await shutdown
        # the grace period is one budget for the whole stop: what is left of it, then workers stop at once
        left = max(0.0, deadline - time.monotonic())
        await self.executor.stop(left, waited=max(0.0, grace - left))
        self._set_phase("stopped")
        stats = engine.stats
        logger.info("stopped: {} messages consumed, {} failed", stats.consumed, stats.failed)

    # ----------------------------------------------------------------- status

    def _set_phase(self, phase: str, detail: str = "") -> None:
        self.phase = phase
        self.phase_detail = detail

    def _waiting(self, text: str) -> None:
        """The cluster wait's status line: kept for ``/readyz``, passed on (systemd STATUS=)."""
        self._set_phase("waiting", text)
        if self.settings.on_status:
            self.settings.on_status(text)

    def liveness(self) -> Verdict:
        """Alive, or why not (a wedged pool): ``/healthz`` and the systemd watchdog."""
        return liveness(health_of(self), self.health_limits)

    def readiness(self, now: float | None = None) -> Verdict:
        """Ready, or why not: ``/readyz`` and ``rmqrun_ready``."""
        return readiness(health_of(self), self.health_limits, now=now)

    def snapshot(self) -> SupervisorSnapshot:
        """A frozen picture of the pool, executor and consumer for the metrics (call it on the loop)."""
        return snapshot_of(self)

    def status(self) -> StatusSnapshot:
        """Only what the status line prints: cheap enough for a line every 0.1 s (call it on the loop)."""
        return status_of(self)

    def status_text(self) -> str:
        """One line of progress. The rate is over the time since the previous line (the status interval), not
        since start: an average over a day hides that consuming stopped an hour ago. While draining the line
        says so first, so systemd's ``stopping`` status is never replaced by a plain progress line."""
        engine = self.engine
        if engine is None:
            return "starting"
        if self._status_line is None:
            self._status_line = StatusLine(engine.stats.started)
        text = self._status_line.text(self.status(), time.monotonic())
        return f"stopping: {text}" if self.phase in ("draining", "stopped") else text

    async def _status_loop(self) -> None:
        interval = self.settings.status_interval
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            text = self.status_text()
            logger.info(text)
            if self.settings.on_status:
                self.settings.on_status(text)
