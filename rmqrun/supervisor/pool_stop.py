"""The worker pool's way out: a graceful stop, its kill escalation, and the waits on worker state.

Why a file of its own: :mod:`rmqrun.supervisor.pool` orchestrates slots, submission,
frames and deaths; how the pool stops (STOP behind each worker's batches, then
SIGTERM, then SIGKILL, each after its grace) and the waits it and ``start`` /
``reload`` need (a change of any worker's state, every worker ready, every
process gone) are one coherent part that reads the pool's state and never
changes what a frame or a death does. :class:`PoolStopping` is the
:class:`~rmqrun.supervisor.pool.Pool`'s base class; the attributes it uses are
set by the pool's ``__init__``.
"""

from __future__ import annotations

import asyncio
import atexit
import signal

from loguru import logger

from rmqrun.aio import wait_event
from rmqrun.pipe.wire import Batch, Stop, encode
from rmqrun.supervisor.worker_process import WorkerProcess

__all__ = ["PoolStopping", "TERM_WAIT"]

TERM_WAIT = 1.0  # after the stop grace: how long SIGTERM may take before SIGKILL


class PoolStopping:
    """Stopping the pool and waiting on its workers (see the module docstring)."""

    _loop: asyncio.AbstractEventLoop
    _state: str
    _procs: set[WorkerProcess]
    _leftovers: list[Batch]
    _changed: asyncio.Event | None
    _tick_handle: asyncio.TimerHandle | None
    cut_short: list[Batch]
    cut_short_messages: int

    async def stop(self, grace: float = 30.0, *, waited: float = 0.0) -> list[Batch]:
        """Stop gracefully; returns the batches that did not finish.

        Submitting stops at once; every worker gets STOP behind the batches it
        holds and exits after them (running worker_exit). After ``grace``
        seconds the rest are stopped at once: SIGTERM (the handler is
        interrupted, its batch reported NOT_RUN), and SIGKILL for whatever has
        not exited a moment later. Results that do arrive still go to
        ``on_result``; batches of killed workers are returned, not reported
        through ``on_worker_lost``. Every batch cut short either way is
        counted in the final log line and kept in :attr:`cut_short`.
        """
        if self._state in ("new", "stopped"):
            self._state = "stopped"
            return []
        if self._state == "stopping":
            while self._state != "stopped":
                await self._wait_change(1.0)
            return []
        self._state = "stopping"
        self.cut_short, self.cut_short_messages = [], 0
        for proc in list(self._procs):
            self._retire(proc)
        await self._wait_dead(grace)
        if self._procs:
            self._say_who_is_left(round(waited + grace, 1))  # waited: the stop's grace spent before the pool's
            for proc in list(self._procs):
                proc.kill("stop grace expired", signal.SIGTERM)
            await self._wait_dead(TERM_WAIT)
        if self._procs:
            for proc in list(self._procs):
                proc.kill("stop grace expired")
            await self._wait_dead(10.0)
        leftovers, self._leftovers = self._leftovers, []
        self.cut_short.extend(leftovers)
        self.cut_short_messages += sum(b.count for b in leftovers)
        self._finish_stop()
        if self.cut_short:
            logger.warning("pool stopped; {} batch(es) cut short ({} messages), redelivered later: {}",
                           len(self.cut_short), self.cut_short_messages,
                           "; ".join(f"batch {b.batch_id} of {b.queue_key}" for b in self.cut_short))
        else:
            logger.info("pool stopped; every batch finished")
        return leftovers

    def _say_who_is_left(self, after: float) -> None:
        """The line for the workers left when the grace is over, which are about to be stopped at once: those
        holding batches are busy (their calls are cut short); the rest have nothing to cut. Those had not
        exited yet: on a stop with no grace (a consumer that cannot start, a second stop signal) that is
        no news; after a grace of their own (TERM_WAIT or more) they are stuck in ``worker_exit``."""
        busy = sum(1 for proc in self._procs if proc.pending)
        idle = len(self._procs) - busy
        if busy:
            logger.warning("{} worker(s) still busy after {:g} s; stopping them now", busy, after)
        if idle and after >= TERM_WAIT:
            logger.warning("{} idle worker(s) had not exited {:g} s after STOP (a slow worker_exit?); stopping "
                           "them now", idle, after)
        elif idle:
            logger.debug("{} idle worker(s) not exited yet; stopping them now", idle)

    def _retire(self, proc: WorkerProcess) -> None:
        if not proc.stop_sent and not proc.dead:
            proc.stop_sent = True
            proc.state = "retiring"
            proc.write([encode(Stop())])

    def _signal_change(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _wait_change(self, timeout: float) -> None:
        assert self._changed is not None
        self._changed.clear()
        await wait_event(self._changed, timeout)

    async def _wait_dead(self, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        while self._procs:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            await self._wait_change(remaining)

    async def _kill_all(self) -> None:
        for proc in list(self._procs):
            proc.kill("pool start failed")
        await self._wait_dead(10.0)

    def _finish_stop(self) -> None:
        self._state = "stopped"
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        atexit.unregister(self._atexit_kill)
        self._signal_change()

    def _atexit_kill(self) -> None:
        """Last resort if the program exits without stop(): do not leave workers behind."""
        for proc in list(self._procs):
            proc.kill("interpreter exit")
