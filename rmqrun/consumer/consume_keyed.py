"""Orderly consumption by key (``order_by: key``): in order per key, parallel across keys.

Queue-ordered consumption (``consume_orderly.py``, Java's model) runs one job
per queue at a time, so a topic with 2 queues keeps at most 2 handler calls
busy however many workers there are, and one failing message stops its whole
queue. Most users need order per business key (an order id, an account), so
this service splits each queue's messages into *lanes*, one per key
(:mod:`rmqrun.consumer.key_order`), and runs each lane like an orderly queue:

* **locks as in queue mode**: the queue is taken, renewed and required under
  the broker lock exactly as there (the rebalancer and puller do that); no job
  of a queue starts unless its lock is held and fresh; locked again after a
  gap, the queue waits for its running jobs and checks the broker's offset:
  if another client committed past its own, it drops every lane and goes on
  from there (``lock_gap.py``);
* **one job per lane at a time, strictly in offset order**, each on the worker
  the key hashes to (the job's ``dispatch_key`` is its :class:`KeyLane`);
  different lanes run at once, on every worker;
* **commit below the oldest unfinished message**: finished messages leave the
  ProcessQueue, and the offset stored is its smallest remaining offset (Java's
  concurrent rule, ``ProcessQueue.removeMessage``), never past a message that
  is pending or running in any lane;
* **failures are per key**: SUSPEND (or an exception) puts the call's messages
  back at the head of their lane with the reconsume count raised and suspends
  only that lane (suspendCurrentQueueTimeMillis, or the handler's own); at
  max_reconsume_times they go to the DLQ and the lane moves on. A worker death
  hands back only the lanes that were on that worker (the executor re-runs
  them there, isolated, in order);
* **drain before unlock**: a dropped queue starts no new job; its running jobs
  finish (or reach the time limit) and are committed, and only then does the
  rebalancer persist the offset and unlock (the same ``is_busy`` /
  ``on_orderly_idle`` handshake as queue mode);
* **bounded memory**: messages stay in the ProcessQueue until finished, so the
  per-queue count, size and offset-span limits of the puller stop pulling when
  a key is stuck (the span limit is consume_concurrently_max_span, applied in
  key mode too). The stuck key shows as the queue's oldest unfinished offset
  and its age (metrics ``rmqrun_queue_oldest_unfinished_*``).

Messages of different lanes may be handed out in any order, so after a queue
moves to another client (or a restart) the messages above the committed
offset that had already finished run again (at-least-once, as in concurrent
mode), each key's redelivery again in order. Manual commit is refused in this
mode (``ConsumerConfig.validate``).

How many jobs are outstanding is bounded (a few per worker); lanes wait their
turn in a FIFO, so the oldest messages go first and the executor's queue of
waiting jobs stays short. With thousands of keys a lane rarely holds more than
a message or two, and a job per lane would cost a pipe round trip per message;
so, with one message per handler call (the default), a job takes several ready
lanes of the same queue that hash to the same worker (:func:`lane_slot`, the
dispatcher's own rule), one lane after another. The worker still stops at the
first message that does not succeed: that lane is suspended, the lanes behind
it in the job are merely put back and go again at once (a job broken off by
a worker death or a time limit likewise pauses only the key it broke off at).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from loguru import logger

from rmqrun.consumer import defaults as d
from rmqrun.consumer.consume_orderly import MAX_CALLS_PER_JOB, TARGET_JOB_SECONDS
from rmqrun.consumer.context import ConsumeContext
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.consumer.key_order import KeyLane, key_of, lane_slot, parse_order_key
from rmqrun.consumer.lock_gap import settle_gap
from rmqrun.consumer.orderly_failures import clamp_suspend_ms, failed_call, suspend_or_dlq
from rmqrun.consumer.process_queue import QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.model import MessageQueue, Status

#: outstanding jobs per worker process: enough to keep each worker's pipe fed, few enough that the
#: executor's list of jobs waiting for their worker stays short
JOBS_PER_WORKER = 8
#: lanes (keys) that may share one job; a job goes to the worker of its first lane, and the others are
#: chosen among the lanes that hash to that same worker
MAX_LANES_PER_JOB = 64
#: when the executor does not say how many workers it has
DEFAULT_PARALLELISM = 4
#: how long a queue whose lock could not be renewed waits before asking the broker again
RELOCK_DELAY_S = 1.0


@dataclass(eq=False)
class _Queue:
    """The lanes of one pulled queue (one PullRequest)."""

    req: PullRequest
    lanes: dict[str | None, deque[QueuedMessage]] = field(default_factory=dict)
    running: set[str | None] = field(default_factory=set)
    suspended: dict[str | None, asyncio.TimerHandle] = field(default_factory=dict)
    #: lanes in the service's ready FIFO
    queued: set[str | None] = field(default_factory=set)
    #: lanes held back until the broker lock is renewed
    unlocked: set[str | None] = field(default_factory=set)
    #: the highest offset routed into a lane (a re-sent offset is not routed twice)
    routed: int = -1
    #: ready lanes grouped by the worker they hash to, for the pool size ``slots`` (lanes share a job)
    by_slot: dict[int, deque[str | None]] = field(default_factory=dict)
    slots: int = 0
    relock: asyncio.Task[None] | None = None
    #: checks the broker's offset after a lock gap (``lock_gap.py``)
    settle: asyncio.Task[None] | None = None


class KeyedConsumeService:
    def __init__(self, engine: ConsumeContext) -> None:
        self.engine = engine
        self.config = engine.config
        self._reader = parse_order_key(self.config.order_key)
        self._queues: dict[MessageQueue, _Queue] = {}
        self._busy: dict[MessageQueue, int] = {}  # jobs in flight per queue (old and new PullRequests alike)
        self._ready: deque[tuple[_Queue, str | None]] = deque()
        self._jobs: set[asyncio.Task[None]] = set()
        self._per_message_s = 0.001
        self.stopping = False
        self.suspensions = 0  # lanes suspended after a failure (for tests and logs)

    # ----------------------------------------------------------------- ConsumeService

    def start(self) -> None:
        pass

    @property
    def in_flight(self) -> int:
        return len(self._jobs)

    def is_busy(self, mq: MessageQueue) -> bool:
        """Whether a job of this queue is in flight (the rebalancer waits for none before unlocking)."""
        return self._busy.get(mq, 0) > 0

    def lanes(self, mq: MessageQueue) -> dict[str, int]:
        """Per queue: lanes with messages, running and suspended (for status and tests)."""
        q = self._queues.get(mq)
        if q is None:
            return {"lanes": 0, "running": 0, "suspended": 0}
        return {"lanes": len(q.lanes), "running": len(q.running), "suspended": len(q.suspended)}

    async def stop(self, grace: float) -> None:
        """Start no new job; let the running ones finish within ``grace``."""
        self.stopping = True
        for q in self._queues.values():
            for handle in q.suspended.values():
                handle.cancel()
            q.suspended.clear()
            for task in (q.relock, q.settle):
                if task is not None:
                    task.cancel()
        jobs = list(self._jobs)
        if jobs:
            done, pending = await asyncio.wait(jobs, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)

    def submit(self, req: PullRequest, entries: Sequence[QueuedMessage]) -> None:
        """Route newly pulled messages into their lanes and start what may start."""
        q = self._queues.get(req.mq)
        if q is None or q.req is not req:
            q = self._queues[req.mq] = _Queue(req)
        reader = self._reader
        for entry in entries:
            if entry.offset <= q.routed:
                continue
            q.routed = entry.offset
            key = key_of(entry.payload, reader)
            lane = q.lanes.get(key)
            if lane is None:
                lane = q.lanes[key] = deque()
            lane.append(entry)
            self._make_ready(q, key)
        self._pump()

    def kick(self, req: PullRequest) -> None:
        """The queue's lock was renewed (lanes held back for it may run again), or is to be asked for."""
        if req.pq.dropped or self.stopping:
            return
        q = self._queues.get(req.mq)
        if q is None or q.req is not req:
            q = self._queues[req.mq] = _Queue(req)
        if self.config.clustering and not req.pq.locked:
            self._relock(q)
            return
        if req.pq.lock_lapsed:
            self._settle_gap(q)
            return
        for key in list(q.unlocked):
            self._make_ready(q, key)
        q.unlocked.clear()
        self._pump()

    # ----------------------------------------------------------------- scheduling

    def _parallelism(self) -> int:
        return max(1, int(getattr(self.engine.executor, "parallelism", None) or DEFAULT_PARALLELISM))

    def _window(self) -> int:
        return self._parallelism() * JOBS_PER_WORKER

    def _packing(self) -> bool:
        """Lanes share a job only with one message per handler call: then a call never mixes keys, and
        a failure stops the job at one key's message (the lanes after it are only put back, not suspended)."""
        return self.config.consume_message_batch_max_size == 1

    def _make_ready(self, q: _Queue, key: str | None) -> None:
        if key in q.queued or key in q.running or key in q.suspended:
            return
        q.queued.add(key)
        self._ready.append((q, key))
        if self._packing():
            self._bucket(q, key).append(key)

    def _bucket(self, q: _Queue, key: str | None) -> deque[str | None]:
        """The ready lanes of ``q`` that run on the same worker as ``key`` (candidates to share its job)."""
        n = self._parallelism()
        if q.slots != n:  # the pool was resized: regroup the ready lanes
            q.slots = n
            q.by_slot = {}
            for other in q.queued:
                q.by_slot.setdefault(lane_slot(KeyLane(q.req.mq, other), n), deque()).append(other)
        slot = lane_slot(KeyLane(q.req.mq, key), n)
        bucket = q.by_slot.get(slot)
        if bucket is None:
            bucket = q.by_slot[slot] = deque()
        elif len(bucket) > 4 * len(q.queued) + 64:  # entries of lanes started from the FIFO: drop them
            bucket = q.by_slot[slot] = deque(k for k in bucket if k in q.queued)
        return bucket

    def _pump(self) -> None:
        """Start lanes from the ready FIFO while the window has room (with company from the same worker)."""
        window = self._window()
        cfg = self.config
        packing = self._packing()
        while self._ready and len(self._jobs) < window and not self.stopping:
            q, key = self._ready.popleft()
            if key not in q.queued:
                continue  # it went out in another lane's job
            q.queued.discard(key)
            pq = q.req.pq
            if pq.dropped:
                if not self.is_busy(q.req.mq) and self._queues.get(q.req.mq) is q:
                    del self._queues[q.req.mq]  # its cached messages are the next owner's now
                continue
            if key in q.running or key in q.suspended:
                continue
            lane = q.lanes.get(key)
            if not lane:
                q.lanes.pop(key, None)
                continue
            if cfg.clustering and (not pq.locked or pq.is_lock_expired()):
                q.unlocked.add(key)
                self._relock(q)
                continue
            if pq.lock_lapsed:  # locked again after a gap: no new job; the queue restarts once none runs
                q.unlocked.add(key)
                self._settle_gap(q)
                continue
            budget = cfg.consume_message_batch_max_size * self._calls_per_job()
            taken = [lane.popleft() for _ in range(min(budget, len(lane)))]
            picked: list[tuple[str | None, list[QueuedMessage]]] = [(key, taken)]
            budget -= len(taken)
            if packing:
                bucket = self._bucket(q, key)
                while bucket and budget > 0 and len(picked) < MAX_LANES_PER_JOB:
                    other = bucket.popleft()
                    if other not in q.queued or other in q.running or other in q.suspended:
                        continue
                    q.queued.discard(other)
                    more = q.lanes.get(other)
                    if not more:
                        q.lanes.pop(other, None)
                        continue
                    taken = [more.popleft() for _ in range(min(budget, len(more)))]
                    picked.append((other, taken))
                    budget -= len(taken)
            for k, _ in picked:
                q.running.add(k)
            mq = q.req.mq
            self._busy[mq] = self._busy.get(mq, 0) + 1
            task = asyncio.ensure_future(self._run(q, picked))
            self._jobs.add(task)

    def _relock(self, q: _Queue) -> None:
        """tryLockLaterAndReconsume, once per queue: ask the broker for the lock until granted."""
        if q.relock is not None and not q.relock.done():
            return

        async def relock() -> None:
            while not q.req.pq.dropped and not self.stopping:
                if await self.engine.rebalancer.lock(q.req.mq):
                    self.kick(q.req)
                    return
                await asyncio.sleep(RELOCK_DELAY_S)

        q.relock = asyncio.ensure_future(relock())

    def _settle_gap(self, q: _Queue) -> None:
        """A queue locked again after a gap: once no job of it runs, settle where it goes on (one task per queue).

        If it restarts from the broker's offset every lane is dropped (a suspended lane's raised
        retry count with it, as on a fresh allocation) and the messages come again, each key in
        its order; otherwise its lanes go on as they were.
        """
        if self.is_busy(q.req.mq) or (q.settle is not None and not q.settle.done()):
            return  # _run calls again when the queue's last job is over

        async def settle() -> None:
            req = q.req
            while not req.pq.dropped and not self.stopping and req.pq.lock_lapsed:
                restarted = await settle_gap(self.engine.offset_store, req)
                if restarted is None:
                    await asyncio.sleep(RELOCK_DELAY_S)
                    continue
                if restarted:
                    for handle in q.suspended.values():
                        handle.cancel()
                    q.queued.clear()  # its entries in the ready FIFO are skipped
                    if self._queues.get(req.mq) is q:
                        del self._queues[req.mq]
                else:
                    self.kick(req)
                return

        q.settle = asyncio.ensure_future(settle())

    def _resume(self, q: _Queue, key: str | None) -> None:
        q.suspended.pop(key, None)
        if not q.req.pq.dropped and not self.stopping:
            self._make_ready(q, key)
            self._pump()

    def _calls_per_job(self) -> int:
        return max(1, min(MAX_CALLS_PER_JOB, int(TARGET_JOB_SECONDS / max(self._per_message_s, 1e-6)
                                                 / self.config.consume_message_batch_max_size)))

    # ----------------------------------------------------------------- one job: one or more lanes of a queue

    async def _run(self, q: _Queue, picked: list[tuple[str | None, list[QueuedMessage]]]) -> None:
        task = asyncio.current_task()
        outcome: dict[str | None, tuple[float, list[QueuedMessage]]] = {k: (0.0, entries) for k, entries in picked}
        try:
            outcome = await self._consume(q, picked)
        finally:
            mq = q.req.mq
            left = self._busy.get(mq, 1) - 1
            if left > 0:
                self._busy[mq] = left
            else:
                self._busy.pop(mq, None)
            self._jobs.discard(task)  # type: ignore[arg-type]
            live = not q.req.pq.dropped and not self.stopping
            for key, (pause, back) in outcome.items():
                if back:  # unfinished: first in line again, in their order
                    lane = q.lanes.get(key)
                    if lane is None:
                        lane = q.lanes[key] = deque()
                    lane.extendleft(reversed(back))
                q.running.discard(key)
                if not live:
                    continue
                if pause > 0:
                    self.suspensions += 1
                    q.suspended[key] = asyncio.get_running_loop().call_later(pause, self._resume, q, key)
                elif q.lanes.get(key):
                    self._make_ready(q, key)
                else:
                    q.lanes.pop(key, None)
            if not live and left <= 0:
                # the queue was dropped (or we stop) and its last job is over: the rebalancer may unlock now
                if self._queues.get(mq) is q:
                    del self._queues[mq]
                self.engine.rebalancer.on_orderly_idle(q.req)
            elif live and left <= 0 and q.req.pq.lock_lapsed and q.req.pq.locked:
                self._settle_gap(q)
            self._pump()

    async def _consume(self, q: _Queue, picked: list[tuple[str | None, list[QueuedMessage]]]
                       ) -> dict[str | None, tuple[float, list[QueuedMessage]]]:
        """Run one job; per lane: (seconds to suspend it, messages to put back at its head)."""
        req = q.req
        entries = [e for _, lane in picked for e in lane]
        job = ConsumeJob(req.mq, True, [e.payload for e in entries], [e.offset for e in entries],
                         auto_commit=True, pq=req.pq, dispatch_key=KeyLane(req.mq, picked[0][0]),
                         under_lock=self.config.clustering)
        started = time.monotonic()
        try:
            result = await self.engine.executor.run(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("{}: job of {} message(s) of {} key(s) not run: {}", req.mq, len(entries), len(picked), exc)
            return {k: (d.SUSPEND_CURRENT_QUEUE_TIME_MS / 1000, lane) for k, lane in picked}
        elapsed = time.monotonic() - started
        ran = sum(1 for v in result.verdicts if v is not Status.NOT_RUN) or 1
        self._per_message_s = 0.8 * self._per_message_s + 0.2 * (elapsed / ran)
        self.engine.stats.record(len(entries), elapsed, result, job.records)
        self.engine.status.on_consumed(req.mq.topic, result, elapsed)
        verdicts = list(result.verdicts) + [Status.NOT_RUN] * (len(entries) - len(result.verdicts))
        # automatic commit only: COMMIT and ROLLBACK count as SUCCESS, as Java treats them then
        verdicts = [Status.SUCCESS if v in (Status.COMMIT, Status.ROLLBACK) else v for v in verdicts]
        # the worker stops at the job's first message that does not succeed: only that message's lane is
        # judged (suspended, dead-lettered); the lanes behind it never ran and simply go again
        first_bad = next((i for i, v in enumerate(verdicts) if v is not Status.SUCCESS), len(entries))
        outcome: dict[str | None, tuple[float, list[QueuedMessage]]] = {}
        done: list[QueuedMessage] = []
        pos = 0
        for key, lane in picked:
            if first_bad < pos:  # behind the message that stopped the job: not run, not to blame
                pause, finished, back = 0.0, [], lane
            else:
                pause, finished, back = await self._apply(req, key, lane, verdicts[pos:pos + len(lane)], result,
                                                          pos)
            pos += len(lane)
            done.extend(finished)
            outcome[key] = (pause, back)
        if done:
            commit_offset = req.pq.remove_messages([e.offset for e in done])
            if commit_offset >= 0 and self._may_commit(req):
                self.engine.offset_store.update(req.mq, commit_offset, True)
        return outcome

    async def _apply(self, req: PullRequest, key: str | None, entries: list[QueuedMessage],
                     verdicts: list[Status], result: JobResult, at: int
                     ) -> tuple[float, list[QueuedMessage], list[QueuedMessage]]:
        """One lane's share of a job (its messages from index ``at`` of the job): (seconds to suspend it,
        messages finished, messages to put back)."""
        cfg = self.config
        first_bad = next((i for i, v in enumerate(verdicts) if v is not Status.SUCCESS), len(entries))
        error = result.error_of(at + first_bad)
        done = entries[:first_bad]
        rest = entries[first_bad:]
        bad = verdicts[first_bad] if rest else None
        suspend = 0.0
        if bad is Status.SUSPEND or bad is Status.RECONSUME_LATER:
            call = failed_call(rest, verdicts[first_bad:], cfg.consume_message_batch_max_size)
            moved_on, suspend = await self._suspend_or_dlq(req, key, call, result.suspend_ms, error)
            done = done + call[:moved_on]
            rest = rest[moved_on:]
        elif bad is Status.UNDECODABLE:
            if await self.engine.dead_letter_undecodable(req.mq, rest[0].payload, rest[0].offset, error):
                done = done + rest[:1]
                rest = rest[1:]
            else:
                suspend = clamp_suspend_ms(-1, cfg.suspend_current_queue_time_ms) / 1000
        elif bad is Status.NOT_RUN and result.error:
            # the job broke off at this key's message (worker died, time limit): pause it before redelivering
            suspend = clamp_suspend_ms(-1, cfg.suspend_current_queue_time_ms) / 1000
        return suspend, done, rest

    def _may_commit(self, req: PullRequest) -> bool:
        """As in queue mode: a dropped queue's commit is ours while we still hold its lock."""
        pq = req.pq
        if not pq.dropped:
            return True
        return self.config.clustering and pq.locked and not pq.is_lock_expired()

    async def _suspend_or_dlq(self, req: PullRequest, key: str | None, call: list[QueuedMessage],
                              suspend_ms: int, error: str | None = None) -> tuple[int, float]:
        """checkReconsumeTimes for a lane (:mod:`.orderly_failures`): the key's messages reach the DLQ in order."""
        self.engine.stats.failed += len(call)
        return await suspend_or_dlq(self.engine, req, call, suspend_ms, key, error)
