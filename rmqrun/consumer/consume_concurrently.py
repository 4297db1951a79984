"""Concurrent consumption (Java ``ConsumeMessageConcurrentlyService``).

Every pulled batch becomes one job for the executor, which spreads jobs over
the workers; results come back in any order. For each finished job:

* successes are removed from the queue's cache;
* failures (clustering) are sent back to the broker for a delayed retry, or
  the DLQ; a failure whose send-back also fails stays cached and is consumed
  again locally after 5 s with its reconsume count raised, never dropped;
* failures (broadcasting) are dropped with a warning, as in Java;
* the offset stored for the queue is then the smallest offset still cached
  (or the highest seen + 1 when nothing is), increase-only: a slow message
  at offset k holds the commit at k however many later ones finish.

A result for a queue dropped meanwhile (rebalanced away) is discarded: the
new owner starts from the committed offset and redelivers what we had. A job
of a dropped queue that has not started yet is not run at all (the executor
skips it, like Java's check of the dropped flag when a ConsumeRequest starts),
so what is redone after a rebalance is bounded by what was running.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Sequence

from loguru import logger

from rmqrun.consumer import defaults as d
from rmqrun.consumer.context import ConsumeContext, HandlerCalls
from rmqrun.consumer.dead_letters import Failure
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.consumer.process_queue import QueuedMessage, QueuedRun
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.retry import reconsume_times, with_reconsume_times
from rmqrun.model import Status


_UNEXPECTED = "a consume job failed unexpectedly; its messages stay cached and hold the committed offset"


class ConcurrentConsumeService:
    def __init__(self, engine: ConsumeContext) -> None:
        self.engine = engine
        self.config = engine.config
        #: in flight: the executor's futures of jobs handed over, and tasks (delayed jobs, results that send back)
        self._tasks: set[asyncio.Future] = set()
        self._cleaner: asyncio.Task[None] | None = None
        #: the executor's word on whose handler call has begun (None: count from the hand-over)
        self._calls: HandlerCalls | None = engine.executor if isinstance(engine.executor, HandlerCalls) else None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if getattr(self.engine.executor, "enforces_time_limit", False):
            return  # the executor stops slow calls itself; see Executor.enforces_time_limit
        period = self.config.consume_timeout_minutes * 60
        self._cleaner = asyncio.ensure_future(self._clean_expired_loop(period))

    async def stop(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for in-flight jobs (and what their results start), then cancel the rest."""
        if self._cleaner is not None:
            self._cleaner.cancel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._tasks:  # a job's result may start a task of its own (send-backs): waited for as well
            left = deadline - loop.time()
            if left <= 0:
                break
            await asyncio.wait(list(self._tasks), timeout=left)
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    # ----------------------------------------------------------------- submission

    def submit(self, req: PullRequest, entries: Sequence[QueuedMessage]) -> None:
        """Consume ``entries`` (just cached in ``req.pq``) as one job."""
        self._spawn(req, list(entries))

    def submit_run(self, req: PullRequest, run: QueuedRun) -> None:
        """Consume a pull cached whole in ``req.pq`` (:meth:`ProcessQueue.put_run`) as one job: the run's
        lists are the job's, and a job that succeeds in full forgets it in one step."""
        self._spawn(req, run)

    def _spawn(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun, delay: float = 0.0) -> None:
        submit = getattr(self.engine.executor, "submit", None)
        if submit is None or delay:
            self._track(asyncio.ensure_future(self._consume(req, entries, delay)))
            return
        # the hot path (a pull handed over as it comes): the executor's future and a callback, no task
        if req.pq.dropped:
            return
        job = self._job(req, entries)
        future = submit(job)
        self._tasks.add(future)
        future.add_done_callback(partial(self._job_done, req, entries, job, time.monotonic()))

    def _track(self, task: "asyncio.Future[None]") -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    def _job(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun) -> ConsumeJob:
        pq = req.pq
        # the stamps are read only by the consume-timeout sweep, and only when the executor cannot
        # say when a call began; otherwise skip a loop per message
        stamp = self._cleaner is not None and self._calls is None
        if isinstance(entries, QueuedRun):
            offsets, records = entries.offsets, entries.payloads
            if stamp:
                pq.mark_run_started(entries)
        else:
            offsets, records = [e.offset for e in entries], [e.payload for e in entries]
            if stamp:
                pq.mark_consume_started(offsets)
        return ConsumeJob(req.mq, False, records, offsets, pq=pq)

    def _job_done(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun, job: ConsumeJob,
                  started: float, future: "asyncio.Future[JobResult]") -> None:
        """:meth:`_consume`'s second half for a job handed over by :meth:`_spawn`: settled here when it
        succeeded in full (the usual job), else by a task (send-backs, redelivery)."""
        self._tasks.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            logger.warning("job of {} messages of {} not run: {}", len(job.offsets), req.mq, error)
            return
        result = future.result()
        try:
            if self._counted(req, job, result, started, entries) and not self._settled(req, entries, result):
                self._track(asyncio.ensure_future(self._process_result(req, entries, result)))
        except Exception as exc:  # as _log_failure reports a task's
            logger.opt(exception=exc).error(_UNEXPECTED)

    async def _consume(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        pq = req.pq
        if pq.dropped:
            return
        job = self._job(req, entries)
        started = time.monotonic()
        try:
            result = await self.engine.executor.run(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Could not run at all (shutting down): nothing counts as consumed; the
            # messages stay cached, so the committed offset stays below them.
            logger.warning("job of {} messages of {} not run: {}", len(job.offsets), req.mq, exc)
            return
        if self._counted(req, job, result, started, entries) and not self._settled(req, entries, result):
            await self._process_result(req, entries, result)

    def _counted(self, req: PullRequest, job: ConsumeJob, result: JobResult, started: float,
                 entries: list[QueuedMessage] | QueuedRun) -> bool:
        """Count a finished job in the stats; False when there is nothing more to do with it. A whole pull's
        job hands over the store times its scan read (one per record, as ``job.records``)."""
        if req.pq.dropped and all(v is Status.NOT_RUN for v in result.verdicts):
            return False  # skipped by the executor: the queue was given away before the job started
        elapsed = time.monotonic() - started
        stored = entries.stamps if isinstance(entries, QueuedRun) else None
        self.engine.stats.record(len(job.offsets), elapsed, result, job.records, stored)
        self.engine.status.on_consumed(req.mq.topic, result, elapsed)
        return True

    def _settled(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun, result: JobResult) -> bool:
        """The common case, kept cheap and synchronous: everything succeeded (a whole pull goes in one step)
        and the queue is still ours. False: :meth:`_process_result` settles it."""
        pq = req.pq
        verdicts = result.verdicts
        if pq.dropped or len(verdicts) != len(entries) or verdicts.count(Status.SUCCESS) != len(entries):
            return False
        if isinstance(entries, QueuedRun):
            offset = pq.remove_run(entries)
        else:
            offset = pq.remove_messages([e.offset for e in entries])
        if offset >= 0 and not pq.dropped:
            self.engine.offset_store.update(req.mq, offset, True)
        return True

    async def _process_result(self, req: PullRequest, entries: list[QueuedMessage] | QueuedRun,
                              result: JobResult) -> None:
        pq = req.pq
        if pq.dropped:
            ran = len(result.verdicts) - result.verdicts.count(Status.NOT_RUN)
            if ran:
                logger.warning("{} was dropped while {} messages were consumed; the result is discarded and the "
                               "new owner redelivers them", req.mq, ran)
            return
        if isinstance(entries, QueuedRun):
            entries = pq.split_run(entries)  # settled message by message from here
        done: list[int] = []
        failed: list[tuple[QueuedMessage, int, str | None]] = []
        redo: list[QueuedMessage] = []
        undecodable: list[tuple[QueuedMessage, str | None]] = []
        for i, entry in enumerate(entries):
            verdict = result.verdicts[i] if i < len(result.verdicts) else Status.NOT_RUN
            if verdict is Status.SUCCESS:
                done.append(entry.offset)
            elif verdict is Status.NOT_RUN:
                redo.append(entry)
            elif verdict is Status.UNDECODABLE:
                undecodable.append((entry, result.error_of(i)))
            else:
                failed.append((entry, result.delay_level(i), result.error_of(i)))
        if undecodable:
            # Never handled and never retried: no later attempt can decode them either.
            sent = await asyncio.gather(*(self.engine.dead_letter_undecodable(req.mq, e.payload, e.offset, error)
                                          for e, error in undecodable))
            for (entry, _), ok in zip(undecodable, sent):
                if ok:
                    done.append(entry.offset)
                else:
                    redo.append(entry)
        if failed:
            self.engine.stats.failed += len(failed)
            if self.config.clustering:
                sent = await asyncio.gather(*(self._send_back(req, entry, level, error)
                                              for entry, level, error in failed))
                for (entry, _, _), ok in zip(failed, sent):
                    if ok:
                        done.append(entry.offset)
                    else:
                        entry.payload = with_reconsume_times(entry.payload, reconsume_times(entry.payload) + 1)
                        redo.append(entry)
            else:
                for entry, _, _ in failed:
                    logger.warning("broadcasting: dropping failed message at {}:{} (no retry in this model)",
                                   req.mq, entry.offset)
                    done.append(entry.offset)
        if redo:
            delay = d.SEND_BACK_FAILED_RESUBMIT_DELAY_MS / 1000 if failed or undecodable else 0.0
            self._spawn(req, redo, delay)
        if done:
            offset = pq.remove_messages(done)
            if offset >= 0 and not pq.dropped:
                self.engine.offset_store.update(req.mq, offset, True)

    async def _send_back(self, req: PullRequest, entry: QueuedMessage, delay_level: int,
                         error: str | None = None) -> bool:
        return await self.engine.send_back.send_back(
            entry.payload, req.mq.broker_name, delay_level, self.config.effective_max_reconsume_times,
            Failure(req.mq, entry.offset, error))

    # ----------------------------------------------------------------- consume timeout

    async def _clean_expired_loop(self, period: float) -> None:
        """cleanExpireMsg: messages stuck in a handler past consumeTimeout go back to the broker.

        Only for executors that do not enforce the limit themselves (the worker pool
        with ``time_limit: 0``; the pool with a limit stops a slow call and always
        answers). A message counts from when its handler call began, as Java's
        consumeStartTimeStamp, when the executor can tell (:class:`HandlerCalls`):
        one waiting behind a stuck call is never sent back, so never handled twice.
        Otherwise it counts from when its job was handed to the executor.
        """
        timeout_ms = int(self.config.consume_timeout_minutes * 60_000)
        while True:
            await asyncio.sleep(period)
            for req in list(self.engine.pull_requests()):
                expired = req.pq.clean_expired(timeout_ms, started_ms=self._call_starts(req))
                for entry in expired:
                    if await self._send_back(req, entry, 3, "consume timeout: the handler call ran past "
                                             f"{self.config.consume_timeout_minutes} minute(s)"):
                        offset = req.pq.remove_messages([entry.offset])
                        if offset >= 0 and not req.pq.dropped:
                            self.engine.offset_store.update(req.mq, offset, True)

    def _call_starts(self, req: PullRequest) -> dict[int, int | None] | None:
        """The executor's handler-call begin times for the queue's messages, in wall-clock ms."""
        if self._calls is None:
            return None
        calls = self._calls.handler_calls(req.pq)
        now_ms, now_mono = time.time() * 1000, time.monotonic()
        return {offset: None if began is None else int(now_ms - (now_mono - began) * 1000)
                for offset, began in calls.items()}


def _log_failure(task: "asyncio.Task[None]") -> None:
    """Observe a consume task's exception so it is logged here, not lost as "never retrieved"."""
    if not task.cancelled() and task.exception() is not None:
        logger.opt(exception=task.exception()).error(_UNEXPECTED)
