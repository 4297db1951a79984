"""Orderly consumption (Java ``ConsumeMessageOrderlyService``).

One consume loop per queue, so at most one job of a queue is ever in flight
and the handler sees its offsets strictly increasing. The executor pins each
queue to one worker process. A loop runs while the queue has cached messages
and, in clustering mode, holds an unexpired broker lock; a queue locked again
after a gap checks the broker's offset before its next job (``lock_gap.py``).

Each job carries several handler calls' worth of messages (consumeMessageBatchMaxSize
per call, as many calls as fit in ~100 ms of measured handler time) to keep
the pipe cheap; the worker stops at the first call that does not succeed and
reports the rest NOT_RUN. The outcome per call is Java's:

* SUCCESS commits (auto-commit) or merely consumes (manual commit);
* SUSPEND (or an exception) puts the call's messages back, with their
  reconsume count raised, and pauses the queue for suspendCurrentQueueTimeMillis
  (clamped to 10..30000 ms); at max reconsume times the messages are
  re-published for the broker to dead-letter, and the queue moves on;
* COMMIT / ROLLBACK apply in manual-commit mode.

The committed offset is stored with increase_only=False, like Java.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from loguru import logger

from rmqrun.consumer import defaults as d
from rmqrun.consumer.context import ConsumeContext
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import Status
from rmqrun.consumer.lock_gap import settle_gap
from rmqrun.consumer.orderly_failures import clamp_suspend_ms, failed_call, suspend_or_dlq
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage, QueuedRun
from rmqrun.consumer.pull_request import PullRequest

TARGET_JOB_SECONDS = 0.1
MAX_CALLS_PER_JOB = 32
PIPELINE_DEPTH = 2  # jobs of one queue in flight: one running, the next waiting behind it in its worker's pipe


@dataclass(slots=True)
class _Flight:
    """A job of the queue handed to the executor and not applied yet: its messages taken as entries, or as
    one pull taken whole (:meth:`ProcessQueue.take_run`; its entries made only for a result not in full)."""

    taken: list[QueuedMessage] | QueuedRun
    job: ConsumeJob
    future: asyncio.Future[JobResult]
    sent: float


def _entries(pq: ProcessQueue, f: _Flight) -> list[QueuedMessage]:
    """The job's messages as entries: the queue's own (taken, or put back since), which a result changes."""
    taken = f.taken
    return pq.taken_entries(taken) if isinstance(taken, QueuedRun) else taken


def _all_success(result: JobResult) -> bool:
    verdicts = result.verdicts
    return verdicts.count(Status.SUCCESS) == len(verdicts)


class OrderlyConsumeService:
    def __init__(self, engine: ConsumeContext) -> None:
        self.engine = engine
        self.config = engine.config
        self._loops: dict[object, asyncio.Task[None]] = {}
        self._busy: set[object] = set()  # queues with a job in flight
        self._per_message_s = 0.001      # running estimate of handler time per message
        #: seconds between results of a queue not spent in its handler, over gap_jobs jobs (benchmarks)
        self.gap_seconds = 0.0
        self.handler_seconds = 0.0
        self.gap_jobs = 0
        self.chained_jobs = 0  # jobs handed over behind a running one of their queue
        self._last_result: dict[object, float] = {}  # per queue: when its latest result came
        self.stopping = False

    def start(self) -> None:
        pass

    def is_busy(self, mq: object) -> bool:
        """Whether a job of this queue is in flight (the Java consume lock)."""
        return mq in self._busy

    @property
    def in_flight(self) -> int:
        return len(self._busy)

    async def stop(self, grace: float) -> None:
        """Let each queue finish the job it has in flight; start no new one."""
        self.stopping = True
        if self.gap_jobs:
            logger.info("orderly queues: {:.3f} ms per job between results not in the handler ({:.3f} ms in it), "
                        "over {} jobs, {} of them pipelined", 1e3 * self.gap_seconds / self.gap_jobs,
                        1e3 * self.handler_seconds / self.gap_jobs, self.gap_jobs, self.chained_jobs)
        loops = list(self._loops.values())
        if loops:
            done, pending = await asyncio.wait(loops, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)

    def submit(self, req: PullRequest, entries: Sequence[QueuedMessage]) -> None:
        self.kick(req)

    def submit_run(self, req: PullRequest, run: QueuedRun) -> None:
        """A pull cached whole (:meth:`ProcessQueue.put_run`): a job that is exactly that pull takes it whole."""
        self.kick(req)

    def kick(self, req: PullRequest) -> None:
        """Make sure the queue's consume loop runs (it exits when the queue is empty)."""
        task = self._loops.get(req.mq)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._loop(req))  # ensure_future's checks, once a pull
            self._loops[req.mq] = task
            task.add_done_callback(lambda t, mq=req.mq: self._loops.get(mq) is t and self._loops.pop(mq))

    def _calls_per_job(self) -> int:
        return max(1, min(MAX_CALLS_PER_JOB, int(TARGET_JOB_SECONDS / max(self._per_message_s, 1e-6)
                                                 / self.config.consume_message_batch_max_size)))

    def _depth(self) -> int:
        """Jobs of one queue in flight at once: with an executor that runs chains and auto-commit, a
        second job waits behind the running one in its worker's pipe (no round trip per job); with
        manual commit, where what follows a COMMIT call decides its commit, one at a time."""
        return PIPELINE_DEPTH if self.config.auto_commit and getattr(self.engine.executor, "runs_chains", False) else 1

    async def _loop(self, req: PullRequest) -> None:
        pq = req.pq
        clustering = self.config.clustering  # read once a loop, not per job (a property)
        depth = self._depth()
        flight: deque[_Flight] = deque()  # the queue's jobs in flight, in offset order
        try:
            while True:
                if not flight:
                    if pq.dropped or self.stopping:
                        break
                    if clustering and (not pq.locked or pq.is_lock_expired()):
                        # tryLockLaterAndReconsume: ask the broker again, then come back
                        if not await self.engine.rebalancer.lock(req.mq):
                            await asyncio.sleep(1.0)
                        continue
                    if pq.lock_lapsed:
                        # locked again after a gap, and no job of the queue runs: where does it go on?
                        if await settle_gap(self.engine.offset_store, req) is None:
                            await asyncio.sleep(1.0)
                        continue
                self._fill(req, flight, clustering, depth)
                if not flight:
                    return  # consuming flag cleared; the next put() kicks us again
                self._busy.add(req.mq)
                pause = await self._settle_head(req, flight)
                if not flight:
                    self._busy.discard(req.mq)
                if pause and not (pq.dropped or self.stopping):
                    await asyncio.sleep(pause)
        except asyncio.CancelledError:
            for f in flight:
                f.future.cancel()
            pq.rollback()
            raise
        finally:
            self._busy.discard(req.mq)
            self._last_result.pop(req.mq, None)  # a gap while the queue was empty is no round trip
        self.engine.rebalancer.on_orderly_idle(req)

    def _fill(self, req: PullRequest, flight: deque[_Flight], clustering: bool, depth: int) -> None:
        """Hand over the queue's next jobs, up to the pipeline depth. A job behind another is sent only
        while the lock is held (checked again until it runs) and runs only if the one ahead succeeds."""
        pq = req.pq
        cfg = self.config
        size = cfg.consume_message_batch_max_size * self._calls_per_job()  # the estimate moves only with results
        while not pq.dropped and not self.stopping:
            ahead = flight[-1].job if flight else None
            # a short job behind costs more (a job's fixed cost) than the next pull's wait: the cache's
            # count first, the cheapest test and the one that ends the usual turn
            if ahead is not None and (len(flight) >= depth or ahead.clean is False or pq.cached_count < size // 2
                                      or (clustering and not pq.holds_lock())):
                return
            taken: list[QueuedMessage] | QueuedRun | None = pq.take_run(size)
            if taken is not None:
                records, offsets = taken.payloads, taken.offsets
            else:
                taken = pq.take_messages(size)
                if not taken:
                    return
                records, offsets = [e.payload for e in taken], [e.offset for e in taken]
            job = ConsumeJob(req.mq, True, records, offsets, auto_commit=cfg.auto_commit, pq=pq, under_lock=clustering, after=ahead,
                             still_owned=pq.holds_lock if ahead is not None and clustering else None)
            self.chained_jobs += ahead is not None
            executor = self.engine.executor
            submit = getattr(executor, "submit", None)  # an executor's future, else a task awaiting its run()
            flight.append(_Flight(taken, job, submit(job) if submit is not None else
                                  asyncio.ensure_future(executor.run(job)), time.monotonic()))

    async def _settle_head(self, req: PullRequest, flight: deque[_Flight]) -> float:
        """Wait for the oldest job in flight and apply its outcome; returns how long to suspend (0 = don't).

        A job that did not succeed in full is applied only once every job behind it is back (they were
        not run) and put back, so what it puts back is first in line and nothing after it ran."""
        head = flight[0]
        result: JobResult | None = None
        try:
            result = await head.future
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("orderly job of {} on {} not run: {}", len(head.job), req.mq, exc)
        flight.popleft()
        now = time.monotonic()
        if result is not None:
            self._account(req, head, result, now)
        # clean: the executor's settled callback found every verdict SUCCESS already (an executor run() never sets it)
        if result is not None and self.config.auto_commit and (head.job.clean or _all_success(result)):
            commit_offset = req.pq.commit_through(head.job.offsets[-1])
            if commit_offset >= 0 and self._may_commit(req):
                self.engine.offset_store.update(req.mq, commit_offset, False)
            return 0.0
        await self._take_back(req, flight)
        if result is None:
            req.pq.make_messages_to_consume_again(head.job.offsets)
            return d.SUSPEND_CURRENT_QUEUE_TIME_MS / 1000
        return await self._apply(req, _entries(req.pq, head), result)

    async def _take_back(self, req: PullRequest, flight: deque[_Flight]) -> None:
        """The jobs behind a failed one: wait for them (answered NOT_RUN) and put their messages back."""
        while flight:
            f = flight.popleft()
            try:
                result = await f.future
                if any(v is not Status.NOT_RUN for v in result.verdicts):
                    logger.error("orderly job of {} on {} ran behind a failed one: {}", len(f.job), req.mq,
                                 result.verdicts)
            except asyncio.CancelledError:
                flight.appendleft(f)
                raise
            except Exception:
                pass
            req.pq.make_messages_to_consume_again(f.job.offsets)

    def _account(self, req: PullRequest, f: _Flight, result: JobResult, now: float) -> None:
        elapsed = now - f.sent
        ran = (len(result.verdicts) - result.verdicts.count(Status.NOT_RUN)) or 1
        spent = result.handler_seconds if result.handler_seconds is not None else elapsed
        self._per_message_s = 0.8 * self._per_message_s + 0.2 * (spent / ran)
        last = self._last_result.get(req.mq)
        if last is not None and result.handler_seconds is not None:
            # the queue's time between two results not spent in its handler: a round trip per job
            # unless the next job was already waiting in the worker's pipe
            self.gap_seconds += max(0.0, now - max(last, f.sent) - result.handler_seconds)
            self.handler_seconds += result.handler_seconds
            self.gap_jobs += 1
        self._last_result[req.mq] = now
        taken = f.taken  # a pull taken whole hands over the store times its scan read
        self.engine.stats.record(len(f.job.offsets), elapsed, result, f.job.records,
                                 taken.stamps if isinstance(taken, QueuedRun) else None)
        self.engine.status.on_consumed(req.mq.topic, result, elapsed)

    async def _apply(self, req: PullRequest, entries: list[QueuedMessage], result: JobResult) -> float:
        cfg = self.config
        pq = req.pq
        verdicts = list(result.verdicts) + [Status.NOT_RUN] * (len(entries) - len(result.verdicts))
        if cfg.auto_commit:
            # Java: with auto-commit, COMMIT and ROLLBACK are "illegal" and count as SUCCESS.
            verdicts = [Status.SUCCESS if v in (Status.COMMIT, Status.ROLLBACK) else v for v in verdicts]
        # The first message that is not a plain success decides the job's fate; the
        # worker ran nothing after it.
        first_bad = next((i for i, v in enumerate(verdicts) if v is not Status.SUCCESS), len(entries))
        rest = entries[first_bad:]
        bad = verdicts[first_bad] if rest else None
        call = failed_call(rest, verdicts[first_bad:], cfg.consume_message_batch_max_size)
        suspend = 0.0
        commit_offset = -1
        if cfg.auto_commit:
            # successes stay taken and are committed; the rest go back, first in line
            pq.make_messages_to_consume_again([e.offset for e in rest])
            if first_bad:
                commit_offset = pq.commit()
            if bad is Status.SUSPEND:
                moved_on, suspend = await self._suspend_or_dlq(req, call, result.suspend_ms,
                                                               result.error_of(first_bad))
                if moved_on and pq.take_messages(moved_on):
                    commit_offset = pq.commit()
            elif bad is Status.UNDECODABLE:
                moved_on, suspend = await self._undecodable(req, rest[0], result.error_of(first_bad))
                if moved_on and pq.take_messages(1):
                    commit_offset = pq.commit()
            elif bad is Status.NOT_RUN and result.error:
                # the job broke off (worker died, time limit): pause before redelivering
                suspend = clamp_suspend_ms(-1, cfg.suspend_current_queue_time_ms) / 1000
        else:
            # Manual commit: SUCCESS consumes without committing; COMMIT commits all taken
            # so far (the COMMIT call included); ROLLBACK puts back all taken since the
            # last commit and suspends.
            while bad is Status.COMMIT:
                # The worker goes on after a COMMIT call, so what follows it in the job
                # already ran: commit through the call, keep the rest taken, and judge it
                # by its own verdicts (putting it back would deliver it twice).
                tail = rest[len(call):]
                pq.make_messages_to_consume_again([e.offset for e in tail])
                commit_offset = pq.commit()
                if tail:
                    pq.take_messages(len(tail))
                tail_verdicts = verdicts[len(entries) - len(tail):]
                k = next((i for i, v in enumerate(tail_verdicts) if v is not Status.SUCCESS), len(tail))
                rest = tail[k:]
                bad = tail_verdicts[k] if rest else None
                call = failed_call(rest, tail_verdicts[k:], cfg.consume_message_batch_max_size)
            if bad is Status.ROLLBACK:
                pq.rollback()
                suspend = clamp_suspend_ms(result.suspend_ms, cfg.suspend_current_queue_time_ms) / 1000
            elif bad is Status.SUSPEND:
                pq.make_messages_to_consume_again([e.offset for e in rest])
                moved_on, suspend = await self._suspend_or_dlq(req, call, result.suspend_ms,
                                                               result.error_of(len(entries) - len(rest)))
                if moved_on:
                    # dead-lettered: consumed, committed with the handler's next Commit()
                    pq.take_messages(moved_on)
            elif bad is Status.UNDECODABLE:
                pq.make_messages_to_consume_again([e.offset for e in rest])
                moved_on, suspend = await self._undecodable(req, rest[0], result.error_of(len(entries) - len(rest)))
                if moved_on:
                    pq.take_messages(1)  # like a dead-lettered message: committed with the next Commit()
            elif rest:
                pq.make_messages_to_consume_again([e.offset for e in rest])
        if commit_offset >= 0 and self._may_commit(req):
            self.engine.offset_store.update(req.mq, commit_offset, False)
        return suspend

    def _may_commit(self, req: PullRequest) -> bool:
        """Whether this job's commit may be stored.

        Java discards the commit of a queue dropped during the job, so the next owner
        consumes those messages again. rmqrun keeps the broker lock until the job is
        over (the removal waits for it), so the commit is still ours to make, unless
        the lock itself was lost meanwhile.
        """
        pq = req.pq
        if not pq.dropped:
            return True
        return self.config.clustering and pq.locked and not pq.is_lock_expired()

    async def _suspend_or_dlq(self, req: PullRequest, call: list[QueuedMessage],
                              suspend_ms: int, error: str | None = None) -> tuple[int, float]:
        """checkReconsumeTimes (:mod:`.orderly_failures`): (messages of the call dead-lettered, seconds to suspend)."""
        self.engine.stats.failed += len(call)
        return await suspend_or_dlq(self.engine, req, call, suspend_ms, error=error)

    async def _undecodable(self, req: PullRequest, entry: QueuedMessage,
                           error: str | None = None) -> tuple[bool, float]:
        """A record the worker could not decode (it stopped the job there): DLQ it and move on.

        No retry can decode it, so the queue neither suspends nor counts reconsumes;
        only if the broker does not take it does the queue pause and try again.
        """
        if await self.engine.dead_letter_undecodable(req.mq, entry.payload, entry.offset, error):
            return True, 0.0
        return False, clamp_suspend_ms(-1, self.config.suspend_current_queue_time_ms) / 1000
