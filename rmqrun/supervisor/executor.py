"""The consumer engine's :class:`~rmqrun.consumer.executor.Executor`, backed by worker processes.

A job becomes a pool :class:`~rmqrun.supervisor.wire.Batch`. The
:class:`~rmqrun.supervisor.dispatch.Dispatcher` picks its worker (orderly
queues pinned, concurrent jobs by load) or says "wait"; waiting jobs queue
here in arrival order and go out as results free room. That wait is the
back-pressure the engine feels: its in-flight count stays bounded.

A worker that dies gives its unfinished batches back; they are dispatched
again first, orderly ones to the replacement in the same slot. A batch that
was running when its worker died three times is treated as failed (sent back
for a retry, or suspended) instead of killing workers forever: a poison
message must not become a crash loop.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass

from loguru import logger

from rmqrun.consumer.executor import ConsumeJob, JobResult, Verdict
from rmqrun.errors import RmqrunError
from rmqrun.supervisor.dispatch import DEFAULT_MAX_INFLIGHT_MESSAGES, Dispatcher
from rmqrun.supervisor.pool import Pool, PoolConfig, PoolError, WorkerLost
from rmqrun.supervisor.wire import Batch, BatchResult, ConsumeMode

POISON_DEATHS = 3
_VERDICTS = tuple(Verdict)  # index = status byte (the same numbering as wire.Status)


class ExecutorClosedError(RmqrunError):
    """The executor is stopping: the job was not run."""


@dataclass(slots=True, eq=False)
class _Pending:
    batch: Batch
    future: asyncio.Future[JobResult]
    deaths: int = 0


class PoolExecutor:
    def __init__(self, config: PoolConfig, *, max_inflight_messages: int = DEFAULT_MAX_INFLIGHT_MESSAGES) -> None:
        self.config = config
        self.pool = Pool(config, on_result=self._on_result, on_worker_lost=self._on_lost, on_fatal=self._on_fatal)
        self.dispatcher: Dispatcher | None = None
        self.max_inflight_messages = max_inflight_messages
        self._ids = itertools.count(1)
        self._waiting: deque[_Pending] = deque()
        self._flying: dict[int, _Pending] = {}
        self._closed: BaseException | None = None
        self.fatal: asyncio.Future[PoolError] | None = None
        self.lost_batches = 0
        #: the pool stops a call at its time limit and answers for every batch (lost ones are redispatched)
        self.enforces_time_limit = config.time_limit > 0

    async def start(self) -> None:
        self.fatal = asyncio.get_running_loop().create_future()
        await self.pool.start()
        self.dispatcher = Dispatcher(self.pool.worker_ids, max_inflight_messages=self.max_inflight_messages)

    # ----------------------------------------------------------------- Executor

    async def run(self, job: ConsumeJob) -> JobResult:
        if self._closed is not None:
            raise ExecutorClosedError(f"not running: {self._closed}")
        mode = ConsumeMode.ORDERLY if job.orderly else ConsumeMode.CONCURRENT
        batch = Batch(next(self._ids), job.mq, mode, job.mq.broker_name, list(job.records), job.auto_commit)
        pending = _Pending(batch, asyncio.get_running_loop().create_future())
        self._waiting.append(pending)
        self._dispatch()
        return await pending.future

    @property
    def in_flight(self) -> int:
        return len(self._flying)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _dispatch(self) -> None:
        """Send every waiting batch that has room now, oldest first."""
        dispatcher = self.dispatcher
        if dispatcher is None or self._closed is not None:
            return
        still: deque[_Pending] = deque()
        while self._waiting:
            pending = self._waiting.popleft()
            if pending.future.done():  # cancelled by its caller
                continue
            batch = pending.batch
            worker = dispatcher.assign(batch.batch_id, batch.queue_key, batch.mode, batch.count)
            if worker is None:
                still.append(pending)
                if batch.mode is ConsumeMode.CONCURRENT and not dispatcher.has_room(1):
                    still.extend(self._waiting)
                    self._waiting.clear()
                    break
                continue
            try:
                self.pool.submit(worker, batch)
            except PoolError as exc:
                dispatcher.done(batch.batch_id, ran=False)
                pending.future.set_exception(ExecutorClosedError(str(exc)))
                continue
            self._flying[batch.batch_id] = pending
        self._waiting = still

    # ----------------------------------------------------------------- pool callbacks

    def _on_result(self, result: BatchResult) -> None:
        pending = self._flying.pop(result.batch_id, None)
        if self.dispatcher is not None:
            # a batch cut short by a time limit says nothing about how long batches take
            self.dispatcher.done(result.batch_id, ran=not result.timed_out)
        if pending is not None and not pending.future.done():
            # statuses are one byte per message in batch order, with the same values as Verdict
            pending.future.set_result(JobResult(
                verdicts=[_VERDICTS[b] for b in result.statuses],
                delay_levels=list(result.delay_levels),
                suspend_ms=result.suspend_ms,
                error=result.error,
                handler_seconds=result.elapsed))
        self._dispatch()

    def _on_lost(self, lost: WorkerLost) -> None:
        logger.warning("worker {} (pid {}) {}: redelivering {} batch(es)", lost.worker_id, lost.pid, lost.reason,
                       len(lost.batches))
        again: list[_Pending] = []
        for batch in lost.batches:
            pending = self._flying.pop(batch.batch_id, None)
            if self.dispatcher is not None:
                self.dispatcher.done(batch.batch_id, ran=False)
            if pending is None or pending.future.done():
                continue
            self.lost_batches += 1
            if batch.batch_id == lost.started_batch_id:
                pending.deaths += 1
                if pending.deaths >= POISON_DEATHS:
                    logger.error("batch {} of {} was running in {} worker deaths; treating it as failed",
                                 batch.batch_id, batch.queue_key, pending.deaths)
                    verdict = Verdict.SUSPEND if batch.mode is ConsumeMode.ORDERLY else Verdict.RECONSUME_LATER
                    pending.future.set_result(JobResult([verdict] * batch.count, [0] * batch.count,
                                                        error=f"worker died {pending.deaths} times on this batch"))
                    continue
            again.append(pending)
        if self._closed is not None:
            for pending in again:
                pending.future.set_exception(ExecutorClosedError(f"worker lost while stopping: {lost.reason}"))
            return
        # first in line again, in their original order
        self._waiting.extendleft(reversed(again))
        self._dispatch()

    def _on_fatal(self, error: PoolError) -> None:
        logger.error("worker pool gave up: {}", error)
        if self.fatal is not None and not self.fatal.done():
            self.fatal.set_result(error)
        self._fail_all(error)

    def _fail_all(self, error: BaseException) -> None:
        self._closed = error
        for pending in list(self._waiting) + list(self._flying.values()):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError(str(error)))
        self._waiting.clear()
        self._flying.clear()

    # ----------------------------------------------------------------- pool management

    def resize(self) -> None:
        """After add_worker/remove_worker: orderly queues re-pin when they have nothing in flight."""
        if self.dispatcher is not None:
            self.dispatcher.set_workers(self.pool.worker_ids)
            self._dispatch()

    def close_intake(self) -> None:
        """First step of a graceful stop: jobs not yet dispatched (and new ones) are not run;
        jobs already with a worker finish normally."""
        self._closed = ExecutorClosedError("shutting down")
        for pending in list(self._waiting):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError("shutting down"))
        self._waiting.clear()

    async def stop(self, grace: float) -> None:
        """Stop taking jobs; in-flight ones may finish within ``grace``; the rest are not run."""
        for pending in list(self._waiting):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError("shutting down"))
        self._waiting.clear()
        leftovers = await self.pool.stop(grace)
        if leftovers:
            logger.warning("{} batch(es) did not finish before the grace period; they are redelivered later",
                           len(leftovers))
        self._fail_all(ExecutorClosedError("stopped"))
