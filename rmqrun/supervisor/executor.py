"""The consumer engine's :class:`~rmqrun.consumer.executor.Executor`, backed by worker processes.

A job becomes a pool :class:`~rmqrun.pipe.wire.Batch`. The
:class:`~rmqrun.supervisor.dispatch.Dispatcher` picks its worker (orderly
queues pinned, concurrent jobs by load) or says "wait"; waiting jobs queue
here in arrival order and go out as results free room. That wait is the
back-pressure the engine feels: its in-flight count stays bounded.

A worker that dies gives its unfinished batches back; those it had not
started are dispatched again first, orderly ones to the replacement in the
same slot. Of the batch it was running, the messages whose results it had
recorded keep them (they never run again); the others are re-run one message
per batch (crash isolation). A one-message batch whose worker dies inside the
handler call has found its poison message: that message alone is failed
(concurrent: sent back, so retried and dead-lettered after
max_reconsume_times; orderly: suspended, then dead-lettered), and every other
message of the job is handled once. An orderly job's isolated messages run one
after another and stop at the first that does not succeed, keeping the
queue's order.

A job whose queue was dropped (rebalanced away) is not run: skipped while it
waits here, and skipped by its worker if it waits in that worker's pipe. So is
an orderly job whose queue lost its broker lock, or let it expire, while the
job waited (``ConsumeJob.under_lock``): it goes back to its service, which
waits for the lock and, after such a gap, checks the broker's offset first.

Work stuck behind a long handler call is taken back
(:mod:`rmqrun.supervisor.long_calls` decides when): a batch waiting in the
stuck worker's pipe is skipped there and sent again as a fresh batch
(:meth:`PoolExecutor.reclaim`), and a concurrent batch's messages after the
long call are cut off and run as a batch of their own, the job's result
joined from both (:meth:`PoolExecutor.split`). So is the work of a worker that
does not respond at all (stopped, frozen: :mod:`rmqrun.supervisor.liveness`),
with the same :meth:`PoolExecutor.reclaim`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import deque
from dataclasses import dataclass, field

from loguru import logger

from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import Status
from rmqrun.errors import RmqrunError
from rmqrun.supervisor.dispatch import DEFAULT_MAX_INFLIGHT_MESSAGES, Dispatcher
from rmqrun.supervisor.liveness import LivenessWatch
from rmqrun.supervisor.long_calls import LongCallWatch
from rmqrun.supervisor.pool import LaneLoss, Pool, PoolError, WorkerLost
from rmqrun.supervisor.pool_config import PoolConfig
from rmqrun.pipe.progress import Progress, lanes_for
from rmqrun.pipe.wire import Batch, BatchResult, ConsumeMode

POISON_DEATHS = 3
_VERDICTS = tuple(Status)  # index = status byte on the pipe


class ExecutorClosedError(RmqrunError):
    """The executor is stopping: the job was not run."""


@dataclass(slots=True, eq=False)
class _Pending:
    batch: Batch
    future: asyncio.Future[JobResult]
    deaths: int = 0
    job: ConsumeJob | None = None
    #: ``time.monotonic()`` when the job came: how long work has waited, for the stall rule of ``/healthz``
    queued_at: float = field(default_factory=time.monotonic)
    #: the index in its job of the batch's first message (a split's tail, an isolated re-run: not 0)
    first: int = 0

    def dropped(self) -> bool:
        job = self.job
        if job is None:
            return False
        pq = job.pq
        if pq is not None and pq.dropped:
            return True
        # a job queued behind another of its queue: the lock is checked again until it runs
        return job.still_owned is not None and not job.still_owned()

    def lock_gone(self) -> bool:
        """An orderly job whose queue no longer holds its broker lock without a gap: it may not start."""
        job = self.job
        return job is not None and job.under_lock and job.pq is not None and not job.pq.holds_lock()


_SKIP_SWEEP_S = 0.05


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """How the pool moves, for the health checks (:mod:`rmqrun.supervisor.health`)."""

    #: seconds each handler call in progress has run
    call_ages: tuple[float, ...]
    #: batches not in a handler call yet: waiting here or behind another one in a worker's pipe
    queued: int
    #: seconds work has waited with no batch finishing (None: nothing waits)
    stalled_for: float | None
    #: workers that cannot take work: not responding (:mod:`rmqrun.supervisor.liveness`) or in a long call
    stuck: int = 0
    #: of those, the ones not responding
    not_responding: int = 0


class PoolExecutor:
    def __init__(self, config: PoolConfig, *, max_inflight_messages: int = DEFAULT_MAX_INFLIGHT_MESSAGES) -> None:
        self.config = config
        self.pool = Pool(config, on_result=self._on_result, on_worker_lost=self._on_lost, on_fatal=self._on_fatal)
        self.dispatcher: Dispatcher | None = None
        # calls at once in each worker (threads / asyncio): room for N calls' messages running and as many waiting;
        # the process class (one call at a time) keeps the bound it was given
        worker = config.worker
        floor = 2 * worker.concurrency * worker.batch_size if worker.worker_class != "process" else 1
        self.max_inflight_messages = max(max_inflight_messages, floor)
        self._ids = itertools.count(1)
        self._waiting: deque[_Pending] = deque()
        self._flying: dict[int, _Pending] = {}
        self._closed: BaseException | None = None
        self.fatal: asyncio.Future[PoolError] | None = None
        self.lost_batches = 0
        #: messages failed alone because their worker died inside the handler call on them
        self.poison_messages = 0
        self._sweeper: asyncio.TimerHandle | None = None
        self._isolations: set[asyncio.Task[None]] = set()
        #: the pool stops a call at its time limit and answers for every batch (lost ones are redispatched)
        self.enforces_time_limit = config.worker.time_limit > 0
        #: a job with ``after`` goes behind that job in its worker's pipe, run only if that one succeeded
        self.runs_chains = True
        #: ``time.monotonic()`` of the latest batch to finish (or of a worker's loss: the pool moved)
        self._moved_at = time.monotonic()
        #: warns of long handler calls and takes back the work queued behind them
        self.long_calls = LongCallWatch(self, config.long_call_seconds)
        #: notices a worker that holds work and does nothing with it, and takes that work back
        self.liveness = LivenessWatch(self, config.worker_liveness_timeout, config.stuck_worker_kill_after)
        self.long_calls.leave_stopped = self.liveness.enabled

    async def start(self) -> None:
        self.fatal = asyncio.get_running_loop().create_future()
        await self.pool.start()
        worker = self.config.worker
        self.dispatcher = Dispatcher(self.pool.worker_ids, max_inflight_messages=self.max_inflight_messages,
                                     lanes=lanes_for(worker.worker_class, worker.concurrency))
        self.long_calls.start()
        self.liveness.start()

    # ----------------------------------------------------------------- Executor

    async def run(self, job: ConsumeJob) -> JobResult:
        return await self.submit(job)

    def submit(self, job: ConsumeJob) -> "asyncio.Future[JobResult]":
        """:meth:`run` as a future, no task per job (the orderly service's way); failed if the executor is closed."""
        future: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        if self._closed is not None:
            future.set_exception(ExecutorClosedError(f"not running: {self._closed}"))
            return future
        mode = ConsumeMode.ORDERLY if job.orderly else ConsumeMode.CONCURRENT
        key = job.mq if job.dispatch_key is None else job.dispatch_key  # key mode: pinned per key
        # one record per entry, each checked by the puller's scan: the batch need not walk them again
        batch = Batch(next(self._ids), key, mode, job.mq.broker_name, list(job.records), job.auto_commit,
                      len(job.offsets), topic=job.mq.topic, checked=True)
        pending = _Pending(batch, future, job=job)
        if job.orderly:
            job.batch_id = batch.batch_id
            pending.future.add_done_callback(job.settled)
        self._waiting.append(pending)
        self._dispatch()
        if job.pq is not None and self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(_SKIP_SWEEP_S, self._sweep)
        return pending.future

    @staticmethod
    def _not_run(batch: Batch, why: str | None) -> JobResult:
        return JobResult([Status.NOT_RUN] * batch.count, [0] * batch.count, error=why)

    def _sweep(self) -> None:
        """Ask workers to skip pipelined batches of dropped queues (cheap: a few in flight)."""
        self._sweeper = None
        for batch_id, pending in list(self._flying.items()):
            if pending.dropped() or pending.lock_gone():
                self.pool.skip(batch_id)
        if self._flying and self._closed is None:
            self._sweeper = asyncio.get_running_loop().call_later(_SKIP_SWEEP_S, self._sweep)

    def handler_calls(self, pq: object) -> dict[int, float | None]:
        """The messages of ``pq`` whose handler call has begun and whose result is not back yet.

        Maps a queue offset to the ``time.monotonic()`` its call began, or to None
        when the call has ended (the result comes with the rest of its batch).
        Messages waiting here or in a worker's pipe are absent: their call has not
        begun, so the consume-timeout sweep leaves them alone (Java sweeps only
        messages with a consumeStartTimeStamp, set as the listener is called).
        """
        return {pending.job.offsets[pending.first + i]: began for pending, i, began in self._begun_calls(pq)}

    def handler_call_indexes(self, pq: object) -> dict[int, float | None]:
        """:meth:`handler_calls` by index in the job (a POP job of several queues repeats offsets)."""
        return {pending.first + i: began for pending, i, began in self._begun_calls(pq)}

    def _begun_calls(self, pq: object) -> list[tuple[_Pending, int, float | None]]:
        """(batch, index in it, when its call began or None once ended) of each begun call of ``pq``'s jobs."""
        out: list[tuple[_Pending, int, float | None]] = []
        for batch_id, pending in list(self._flying.items()):
            live = self.pool.live_call(batch_id) if pending.job is not None and pending.job.pq is pq else None
            if live is not None:
                n = pending.batch.count
                out.extend((pending, i, None) for i in range(min(live.done, n)))
                calls = range(max(0, live.call_start), min(live.call_end, n)) if live.in_call else ()
                out.extend((pending, i, live.call_began) for i in calls)
        return out

    def load(self, now: float) -> PoolLoad:
        """The handler calls in progress and how long queued work has waited with nothing finishing.

        Work has waited at least since the oldest batch not yet in a call came; nothing finished since
        the pool last moved; the stall is the shorter of the two (a burst after an idle hour is no stall).
        """
        ages: list[float] = []
        queued = len(self._waiting)
        since = min((p.queued_at for p in self._waiting), default=None)
        for batch_id, pending in self._flying.items():
            live = self.pool.live_call(batch_id)
            if live is not None and live.in_call:
                ages.append(max(0.0, now - live.call_began))
            elif live is None:
                queued += 1
                since = pending.queued_at if since is None else min(since, pending.queued_at)
        stalled = None if since is None else max(0.0, now - max(since, self._moved_at))
        ids = set(self.pool.worker_ids)
        stuck = len(self.dispatcher.stuck & ids) if self.dispatcher is not None else 0
        return PoolLoad(tuple(ages), queued, stalled, stuck, len(self.liveness.stuck & ids))

    @property
    def in_flight(self) -> int:
        return len(self._flying)

    @property
    def parallelism(self) -> int:
        """Worker processes: how many jobs can run at once (the key-ordered service sizes its window by it)."""
        return max(1, len(self.pool.worker_ids))

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def dispatch_waiting(self) -> None:
        """A worker can take work again (it responds after being stuck): send what waits for room."""
        self._dispatch()

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
            if pending.dropped():  # rebalanced away while waiting: the new owner consumes it
                pending.future.set_result(self._not_run(batch, "skipped: its queue was dropped"))
                continue
            if pending.lock_gone():  # its service puts the messages back and waits for the lock (lock_gap.py)
                pending.future.set_result(self._not_run(batch, None))
                continue
            follow = 0
            if pending.job is not None and pending.job.after is not None:
                follow = self._follow(pending, still)
                if follow < 0:
                    continue
            batch.after = follow
            worker = dispatcher.assign(batch.batch_id, batch.queue_key, batch.mode, batch.count, follow)
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

    def _follow(self, pending: _Pending, still: deque[_Pending]) -> int:
        """A job chained to an earlier one of its queue: the batch id it follows now (0: none, that one
        succeeded), or -1: it waits behind that one in ``still``, or it was answered all NOT_RUN (that
        one failed, or runs nowhere this one can follow it: it stays first, the queue's order)."""
        job = pending.job
        ahead = job.after  # type: ignore[union-attr]
        if ahead.clean:
            return 0
        if ahead.clean is None:
            flying = self._flying.get(ahead.batch_id)
            if flying is not None and flying.job is ahead:
                return ahead.batch_id
            if any(p.job is ahead for p in still):
                still.append(pending)
                return -1
        pending.future.set_result(self._not_run(pending.batch, None))
        return -1

    # ----------------------------------------------------------------- pool callbacks

    def _on_result(self, result: BatchResult) -> None:
        self._moved_at = time.monotonic()
        pending = self._flying.pop(result.batch_id, None)
        if self.dispatcher is not None:
            # a batch cut short by a time limit says nothing about how long batches take
            self.dispatcher.done(result.batch_id, ran=not result.timed_out)
        if pending is not None and not pending.future.done():
            # statuses are one byte per message in batch order: a Status each
            statuses = result.statuses
            pending.future.set_result(JobResult(
                # all SUCCESS (status byte 0) is the common case: build that list in C
                verdicts=([Status.SUCCESS] * len(statuses) if statuses.count(0) == len(statuses)
                          else [_VERDICTS[b] for b in statuses]),
                delay_levels=list(result.delay_levels),
                suspend_ms=result.suspend_ms,
                error=result.error,
                handler_seconds=result.elapsed,
                errors=dict(result.errors),
                timed_out=result.timed_out))
        self._dispatch()

    def _on_lost(self, lost: WorkerLost) -> None:
        self._moved_at = time.monotonic()
        logger.warning("worker {} (pid {}) {}: redelivering {} batch(es)", lost.worker_id, lost.pid, lost.reason,
                       sum(b.batch_id in self._flying for b in lost.batches))  # not those taken back before
        again: list[_Pending] = []
        for batch in lost.batches:
            pending = self._flying.pop(batch.batch_id, None)
            if self.dispatcher is not None:
                self.dispatcher.done(batch.batch_id, ran=False)
            if pending is None or pending.future.done():
                continue
            self.lost_batches += 1
            lane = lost.lanes.get(batch.batch_id)
            if lane is None and batch.batch_id == lost.started_batch_id:  # a WorkerLost made without lanes
                lane = LaneLoss(lost.progress, lost.in_call, True)
            if lane is not None:  # begun: each of a threads / asyncio worker's batches at once
                # killed for not responding, or for a batch beside it that overran: no suspect
                pending.deaths += lane.suspect and lost.pid not in self.liveness.killed
                if batch.count == 1 and (lane.in_call or pending.deaths >= POISON_DEATHS):
                    self._fail_poison(pending, lost)
                    continue
                if self._closed is None and batch.count > 1:
                    self._isolate(pending, lost, lane.progress)
                    continue
                batch.alone = True  # a suspect: run again with nothing beside it, so a death there names it
            again.append(pending)
        self.liveness.killed.discard(lost.pid)
        if self._closed is not None:
            for pending in again:
                pending.future.set_exception(ExecutorClosedError(f"worker lost while stopping: {lost.reason}"))
            return
        # first in line again, in their original order
        self._waiting.extendleft(reversed(again))
        self._dispatch()

    def _fail_poison(self, pending: _Pending, lost: WorkerLost) -> None:
        """A message that killed its worker when run alone: fail it (retry / suspend, then DLQ)."""
        batch = pending.batch
        self.poison_messages += 1
        verdict = Status.SUSPEND if batch.mode is ConsumeMode.ORDERLY else Status.RECONSUME_LATER
        logger.error("worker {} (pid {}) {} running only message at offset {} of {}: failing that message "
                     "(retried, then dead-lettered after max_reconsume_times)", lost.worker_id, lost.pid,
                     lost.reason, batch.queue_offsets()[0], batch.queue_key)
        pending.future.set_result(JobResult([verdict], [0], error=f"worker {lost.reason} in the handler call"))

    def _isolate(self, pending: _Pending, lost: WorkerLost, prog: Progress | None) -> None:
        """Keep what the dead worker finished (``prog``: its lane's record); re-run every unfinished message
        of the job alone."""
        batch = pending.batch
        done = prog.done if prog is not None else 0
        verdicts: list[Status] = [_VERDICTS[b] for b in prog.statuses] if prog is not None else []
        delays = list(prog.delay_levels) if prog is not None else []
        # calls at once (threads / asyncio workers): messages that finished past the prefix keep their results
        later = {i: (_VERDICTS[st], lv) for i, st, lv in prog.later if i < batch.count} if prog is not None else {}
        done += len(later)
        why = ("its worker was killed for not responding" if lost.pid in self.liveness.killed
               else "to find the one that kills its worker")
        logger.warning("batch {} of {}: {} of {} messages had finished when worker {} died; re-running the other "
                       "{} one per batch ({})", batch.batch_id, batch.queue_key, done, batch.count, lost.worker_id,
                       batch.count - done, why)
        task = asyncio.ensure_future(self._run_isolated(pending, verdicts, delays, later))
        self._isolations.add(task)
        task.add_done_callback(self._isolations.discard)

    async def _run_isolated(self, parent: _Pending, verdicts: list[Status], delays: list[int],
                            later: dict[int, tuple[Status, int]] | None = None) -> None:
        batch = parent.batch
        records = batch.split_records()
        n = len(records)
        delays = delays + [0] * (len(verdicts) - len(delays))
        orderly = batch.mode is ConsumeMode.ORDERLY
        later = later or {}
        error = f"isolated after a worker death: {n - len(verdicts) - len(later)} message(s) re-run one by one"
        loop = asyncio.get_running_loop()

        errors: dict[int, str] = {}

        async def one(i: int) -> tuple[Status, int]:
            if parent.future.done():
                return Status.NOT_RUN, 0
            sub = _Pending(Batch(next(self._ids), batch.queue_key, batch.mode, batch.broker_name, [records[i]],
                                 batch.auto_commit, 1, topic=batch.topic, alone=True), loop.create_future(),
                           job=parent.job, first=parent.first + i)
            self._waiting.appendleft(sub)
            self._dispatch()
            try:
                res = await sub.future
            except ExecutorClosedError:
                return Status.NOT_RUN, 0
            own = res.error_of(0)
            if own:
                errors[i] = own  # each re-run message's own error, not the isolation's
            return (res.verdicts[0] if res.verdicts else Status.NOT_RUN), res.delay_level(0)

        try:
            rest = range(len(verdicts), n)
            if orderly:
                # an orderly job stops at the first message that does not simply succeed
                if any(v is not Status.SUCCESS for v in verdicts):
                    outcomes = [(Status.NOT_RUN, 0)] * len(rest)
                else:
                    outcomes = []
                    for i in rest:
                        v, lv = await one(i)
                        outcomes.append((v, lv))
                        if v is not Status.SUCCESS:
                            outcomes += [(Status.NOT_RUN, 0)] * (n - i - 1)
                            break
            else:
                outcomes = list(await asyncio.gather(*(_known(later[i]) if i in later else one(i) for i in rest)))
        except asyncio.CancelledError:
            if not parent.future.done():
                parent.future.cancel()
            raise
        if not parent.future.done():
            parent.future.set_result(JobResult(verdicts + [v for v, _ in outcomes],
                                               delays + [lv for _, lv in outcomes], error=error, errors=errors))

    def _on_fatal(self, error: PoolError) -> None:
        logger.error("worker pool gave up: {}", error)
        if self.fatal is not None and not self.fatal.done():
            self.fatal.set_result(error)
        self._fail_all(error)

    def _fail_all(self, error: BaseException) -> None:
        self._closed = error
        self.long_calls.stop()
        self.liveness.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for pending in list(self._waiting) + list(self._flying.values()):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError(str(error)))
        self._waiting.clear()
        self._flying.clear()

    # ----------------------------------------------------------------- work taken back from a stuck worker

    def reclaim(self, batch_id: int) -> bool:
        """A batch its stuck worker was told to skip: send it again, first in line, as a fresh batch.

        The stuck worker will answer the old batch id NOT_RUN when it gets to it;
        that answer finds nothing in flight here and is dropped.
        """
        pending = self._flying.pop(batch_id, None)
        if pending is None:
            return False
        if self.dispatcher is not None:
            self.dispatcher.done(batch_id, ran=False)
        if pending.future.done():
            return False
        job = pending.job
        if job is not None and job.after is not None and not job.after.clean:
            # chained behind the stuck call itself (or one moved just now): nowhere else may it run first
            pending.future.set_result(self._not_run(pending.batch, None))
            self._dispatch()  # its queue is free now: a batch of it moved a moment ago may go
            return True
        pending.batch = dataclasses.replace(pending.batch, batch_id=next(self._ids))
        if job is not None and job.orderly:
            job.batch_id = pending.batch.batch_id
        self._waiting.appendleft(pending)
        self._dispatch()
        return True

    def split(self, batch_id: int, index: int) -> int:
        """Messages ``index..`` of a running concurrent batch, cut off in its worker: run them as a batch of their
        own; the job's result is joined from both parts. Returns how many messages were moved."""
        pending = self._flying.get(batch_id)
        if pending is None or pending.future.done() or pending.batch.mode is not ConsumeMode.CONCURRENT:
            return 0
        batch = pending.batch
        records = batch.split_records()
        if not 0 < index < len(records):
            return 0
        loop = asyncio.get_running_loop()
        # the pool still knows the batch as it was (its statuses come for every message); from here on this
        # pending stands for the head only, so a death of its worker re-runs only the head's unfinished messages
        pending.batch = Batch(batch.batch_id, batch.queue_key, batch.mode, batch.broker_name, records[:index],
                              batch.auto_commit, index, topic=batch.topic)
        tail = _Pending(Batch(next(self._ids), batch.queue_key, batch.mode, batch.broker_name, records[index:],
                              batch.auto_commit, len(records) - index, topic=batch.topic), loop.create_future(),
                        job=pending.job, first=pending.first + index)
        whole, pending.future = pending.future, loop.create_future()
        task = asyncio.ensure_future(_join(pending.future, tail.future, whole, index))
        self._isolations.add(task)
        task.add_done_callback(self._isolations.discard)
        self._waiting.appendleft(tail)
        self._dispatch()
        return len(records) - index

    def flying_batch(self, batch_id: int) -> tuple[Batch, ConsumeJob | None] | None:
        """The batch in flight under this id as the executor sees it (a split one: its head), and its job."""
        pending = self._flying.get(batch_id)
        return None if pending is None else (pending.batch, pending.job)

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
        self.long_calls.stop()  # nothing may be sent elsewhere any more
        self.liveness.stop()  # (a stuck worker is still killed by the pool's stop grace)
        for pending in list(self._waiting):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError("shutting down"))
        self._waiting.clear()

    async def stop(self, grace: float, *, waited: float = 0.0) -> None:
        """Stop taking jobs; in-flight ones may finish within ``grace``; the rest are not run.

        ``waited``: seconds of the stop's grace already spent before this (the log says the whole)."""
        for pending in list(self._waiting):
            if not pending.future.done():
                pending.future.set_exception(ExecutorClosedError("shutting down"))
        self._waiting.clear()
        await self.pool.stop(grace, waited=waited)  # it logs every batch cut short
        self._fail_all(ExecutorClosedError("stopped"))


async def _known(outcome: tuple[Status, int]) -> tuple[Status, int]:
    """A message of an isolated job that finished before its worker died: its result, not a re-run."""
    return outcome


async def _join(head: "asyncio.Future[JobResult]", tail: "asyncio.Future[JobResult]",
                whole: "asyncio.Future[JobResult]", index: int) -> None:
    """The result of a split job: the head's verdicts for its first ``index`` messages, then the tail's."""
    try:
        first = await head
        rest = await tail
    except asyncio.CancelledError:
        head.cancel()
        tail.cancel()
        if not whole.done():
            whole.cancel()
        raise
    except Exception as exc:
        tail.cancel()
        if not whole.done():
            whole.set_exception(exc)
        return
    if whole.done():
        return
    delays = [first.delay_level(i) for i in range(index)] + [rest.delay_level(i) for i in range(len(rest.verdicts))]
    head_verdicts = (first.verdicts + [Status.NOT_RUN] * index)[:index]
    errors = {i: e for i, e in first.errors.items() if i < index}
    errors.update({index + i: e for i, e in rest.errors.items()})
    whole.set_result(JobResult(head_verdicts + rest.verdicts, delays, error=first.error or rest.error,
                               handler_seconds=first.handler_seconds, errors=errors,
                               timed_out=first.timed_out or rest.timed_out))
