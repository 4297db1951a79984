"""Orderly consumption (Java ``ConsumeMessageOrderlyService``).

Each queue hands its jobs over one after another (a second one waits behind the
running one in its worker's pipe when the executor runs chains), so the handler
sees its offsets strictly increasing. The executor pins each queue to one worker
process. A queue consumes while it has cached messages and, in clustering mode,
holds an unexpired broker lock; a queue locked again after a gap checks the
broker's offset before its next job (``lock_gap.py``). A job that succeeds in
full is settled in its future's done callback, which hands the next one over;
a task per queue takes over only for what must wait (failures, suspends, the
lock, a gap, a stop) and for manual commit.

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
from functools import partial
from typing import Callable, Sequence

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


def _succeeded(job: ConsumeJob, result: JobResult) -> bool:
    """Every message of the job succeeded. clean: the executor's settled callback found so already (an
    executor's run() never sets it)."""
    if job.clean:
        return True
    verdicts = result.verdicts
    return verdicts.count(Status.SUCCESS) == len(verdicts)


class _Queue:
    """A queue with work going on: its jobs in flight, and what drives it. The head job's done callback
    settles the usual result (auto-commit, every message SUCCESS) and hands the next job over; a task
    (:meth:`OrderlyConsumeService._loop`) takes over for the rest (a failure, a job that could not run,
    a lock to wait for, a gap to settle, a suspend, a stop) and hands back once a job is in flight again."""

    __slots__ = ("req", "clustering", "depth", "fast", "flight", "task", "on_done")

    def __init__(self, req: PullRequest, clustering: bool, depth: int, fast: bool,
                 head_done: "Callable[[_Queue, asyncio.Future[JobResult]], None]") -> None:
        self.req = req
        self.clustering = clustering  # read once while the queue is busy, not per job (a property)
        self.depth = depth
        self.fast = fast  # auto-commit: a clean result is settled in its future's done callback
        self.flight: deque[_Flight] = deque()  # the queue's jobs in flight, in offset order
        self.task: asyncio.Task[None] | None = None
        #: the done callback of its head job in flight, while callbacks drive it
        self.on_done: Callable[[asyncio.Future[JobResult]], None] = partial(head_done, self)

    def lock_in_doubt(self) -> bool:
        """No first job may be handed over yet: the lock is to be asked for again (clustering: not held, or
        expired) or the gap after it settled, which is the queue's task's work."""
        pq = self.req.pq
        return pq.lock_lapsed or (self.clustering and not pq.holds_lock())


class OrderlyConsumeService:
    def __init__(self, engine: ConsumeContext) -> None:
        self.engine = engine
        self.config = engine.config
        self._queues: dict[object, _Queue] = {}  # queues with a job in flight or a task of their own
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
        for q in list(self._queues.values()):
            if q.task is None:  # settled by callbacks so far: a task waits for its jobs, and is cancelled
                self._spawn(q, True)
        loops = [q.task for q in self._queues.values() if q.task is not None]
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
        """Messages came: hand the queue's next job over unless one is in flight or a task drives the queue
        (both hand the new messages over when their job is back)."""
        if req.mq in self._queues:
            return
        cfg = self.config
        pq = req.pq
        q = _Queue(req, cfg.clustering, self._depth(), cfg.auto_commit, self._head_done)
        self._queues[req.mq] = q
        if not q.fast or pq.dropped or self.stopping or q.lock_in_doubt():
            self._spawn(q, False)  # manual commit, or a lock to wait for, a gap to settle, a stop: the task's
            return
        self._drive(q, False)

    def _spawn(self, q: _Queue, settle: bool) -> None:
        q.task = asyncio.get_running_loop().create_task(self._loop(q, settle))

    def _head_done(self, q: _Queue, future: "asyncio.Future[JobResult]") -> None:
        """The done callback of a queue's oldest job in flight."""
        flight = q.flight
        # else a task took the queue over (stop), or the queue ended on an error
        if q.task is None and flight and flight[0].future is future and self._queues.get(q.req.mq) is q:
            self._drive(q, True)

    def _drive(self, q: _Queue, settle: bool) -> None:
        """Settle the queue's head job if it succeeded in full (``settle``), hand over the next jobs, and
        watch the new head; anything else goes to the queue's task. A job is handed over only as the
        task would: nothing once the queue is dropped or stopping, the first one only under a fresh,
        continuous lock (clustering), one behind it only within the pipeline depth (:meth:`_fill`)."""
        req = q.req
        pq = req.pq
        flight = q.flight
        try:
            while True:
                if settle:
                    head = flight[0]
                    future = head.future
                    if future.cancelled() or future.exception() is not None:
                        return self._spawn(q, True)
                    result = future.result()
                    if not _succeeded(head.job, result):
                        return self._spawn(q, True)  # applied by the task, the jobs behind taken back first
                    flight.popleft()
                    self._account(req, head, result, time.monotonic())
                    self._commit(req, head)
                    if not flight:
                        self._busy.discard(req.mq)
                        if pq.dropped or self.stopping:
                            return self._idle(q)
                        if q.lock_in_doubt():
                            return self._spawn(q, False)  # tryLockLaterAndReconsume, or the gap: the task's
                        if not pq.cached_count:
                            return self._forget(q)  # the next pull hands its job over
                settle = True
                self._fill(req, flight, q.clustering, q.depth)
                if not flight:
                    return self._forget(q)
                self._busy.add(req.mq)
                future = flight[0].future
                if not future.done():
                    future.add_done_callback(q.on_done)
                    return
        except Exception as exc:  # as a task's would end it: logged, the queue's taken messages hold its commit
            logger.opt(exception=exc).error("the orderly queue {} stopped on an unexpected error", req.mq)
            self._forget(q)

    def _forget(self, q: _Queue) -> None:
        """Nothing of the queue in flight, and nothing drives it: the next pull kicks it again."""
        mq = q.req.mq
        if self._queues.get(mq) is q:
            del self._queues[mq]
        self._busy.discard(mq)
        self._last_result.pop(mq, None)  # a gap while the queue was empty is no round trip

    def _idle(self, q: _Queue) -> None:
        """The queue ends because it was dropped or the service stops: a removal waiting for it goes on."""
        self._forget(q)
        self.engine.rebalancer.on_orderly_idle(q.req)

    def _calls_per_job(self) -> int:
        return max(1, min(MAX_CALLS_PER_JOB, int(TARGET_JOB_SECONDS / max(self._per_message_s, 1e-6)
                                                 / self.config.consume_message_batch_max_size)))

    def _depth(self) -> int:
        """Jobs of one queue in flight at once: with an executor that runs chains and auto-commit, a
        second job waits behind the running one in its worker's pipe (no round trip per job); with
        manual commit, where what follows a COMMIT call decides its commit, one at a time."""
        return PIPELINE_DEPTH if self.config.auto_commit and getattr(self.engine.executor, "runs_chains", False) else 1

    async def _loop(self, q: _Queue, settle: bool) -> None:
        """The queue's task: settles its head job (``settle``) and goes on as :meth:`_drive` does, awaiting
        what a callback cannot (a failure's send-backs, a suspend, the lock, a gap's offset); with
        auto-commit it hands back to the callbacks once a job is in flight again, so an all-SUCCESS
        drain runs no task."""
        req = q.req
        pq = req.pq
        clustering = q.clustering
        flight = q.flight
        try:
            while True:
                if settle:
                    pause = await self._settle_head(req, flight)
                    if not flight:
                        self._busy.discard(req.mq)
                    if pause and not (pq.dropped or self.stopping):
                        await asyncio.sleep(pause)
                settle = True
                if not flight:
                    if pq.dropped or self.stopping:
                        break
                    if clustering and (not pq.locked or pq.is_lock_expired()):
                        # tryLockLaterAndReconsume: ask the broker again, then come back
                        if not await self.engine.rebalancer.lock(req.mq):
                            await asyncio.sleep(1.0)
                        settle = False
                        continue
                    if pq.lock_lapsed:
                        # locked again after a gap, and no job of the queue runs: where does it go on?
                        if await settle_gap(self.engine.offset_store, req) is None:
                            await asyncio.sleep(1.0)
                        settle = False
                        continue
                self._fill(req, flight, clustering, q.depth)
                if not flight:
                    return self._forget(q)  # consuming flag cleared; the next put() kicks us again
                self._busy.add(req.mq)
                if q.fast and not self.stopping:
                    q.task = None  # the usual job again: its done callback settles it
                    flight[0].future.add_done_callback(q.on_done)
                    return
        except asyncio.CancelledError:
            for f in flight:
                f.future.cancel()
            pq.rollback()
            self._forget(q)
            raise
        except BaseException:
            self._forget(q)
            raise
        self._idle(q)

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
        if result is not None and self.config.auto_commit and _succeeded(head.job, result):
            self._commit(req, head)
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

    def _commit(self, req: PullRequest, f: _Flight) -> None:
        """A job that succeeded in full (auto-commit): its messages are done, and the commit moves through
        them, not past a job pipelined behind it."""
        commit_offset = req.pq.commit_through(f.job.offsets[-1])
        if commit_offset >= 0 and self._may_commit(req):
            self.engine.offset_store.update(req.mq, commit_offset, False)

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
