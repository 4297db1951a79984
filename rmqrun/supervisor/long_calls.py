"""Handler calls that run far longer than usual: said in the log, and the work behind them taken back.

A hung call (``time.sleep(10**6)``) used to hold everything its worker had
been given until the time limit (15 minutes by default), while other workers
sat idle and nothing was logged. Now, a few times a second, the supervisor
looks at what each worker is running (the progress block it shares with it)
and, for a call that has run past the *long-call threshold* (the setting
``long_call_seconds``, or ten times the measured time per message when that
is longer, so a handler that is simply slow is not flagged on every call):

* logs one warning naming the call: worker, pid, the message (queue and
  offset), how long it has run, and what happens at the time limit;
* takes back the work queued behind it on that worker, for other workers:
  the batches waiting in its pipe (any mode: they are whole jobs of other
  queues or key lanes, never started, so moving them cannot reorder
  anything), and in concurrent mode the messages of the running batch after
  the long call. An orderly batch's later messages stay: they must not run
  before the message in the call (queue or key order);
* marks the worker stuck, so orderly queues pinned anew go elsewhere
  (:meth:`rmqrun.supervisor.dispatch.Dispatcher.set_stuck`).

Taking back is two steps, a tick apart: mark (ask the worker to skip those
batches and to cut the batch after the call), then confirm that the worker is
still in the very same call, and only then send the work elsewhere. A call
that ended in between leaves the marks to the worker, which answers what it
skipped NOT_RUN: the consume service runs those messages again, nothing is
run twice (:mod:`rmqrun.pipe.progress` tells why the confirmation is sound).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from loguru import logger

from rmqrun.pipe.wire import Batch, ConsumeMode
from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.supervisor.pool import Pool
from rmqrun.supervisor.pool_config import PoolConfig
from rmqrun.supervisor.worker_process import process_stopped

__all__ = ["LongCallWatch", "USUAL_TIMES"]

#: a call is long past this many times the measured time per message (when that exceeds the setting)
USUAL_TIMES = 10.0


#: a gap between two ticks of the watch longer than its period by this many seconds means the supervisor did
#: not run in between
FROZEN_GAP_S = 2.0


@dataclass(slots=True)
class _Marked:
    """Work of one long call asked to be skipped or cut, waiting for the confirmation."""

    behind: list[int]
    cut: int | None
    taken: set[int] = field(default_factory=set)


class TakesBack(Protocol):
    """What the watch needs of the executor (:class:`rmqrun.supervisor.executor.PoolExecutor`)."""

    config: PoolConfig
    pool: Pool
    dispatcher: Dispatcher | None

    def flying_batch(self, batch_id: int) -> tuple[Batch, Any] | None: ...

    def reclaim(self, batch_id: int) -> bool: ...

    def split(self, batch_id: int, index: int) -> int: ...


class LongCallWatch:
    """Runs on the supervisor's loop beside the executor; see the module docstring."""

    def __init__(self, executor: TakesBack, threshold: float) -> None:
        self.executor = executor
        self.threshold = threshold
        self.period = min(0.5, max(0.05, threshold / 4))
        self._handle: asyncio.TimerHandle | None = None
        #: per long call, keyed (batch id, call start, call began): its marks
        self._calls: dict[tuple[int, int, float], _Marked] = {}
        #: long calls already logged
        self._warned: set[tuple[int, int, float]] = set()
        #: batches taken back and cuts made, so neither is done twice
        self._moved: set[int] = set()
        self._cut_done: set[int] = set()
        self.taken_back = 0
        #: when the watch last ran, and since when the supervisor has been awake without a gap: a call's age
        #: counts only from then (see :meth:`_tick`)
        self._last_tick = time.monotonic()
        self._awake_since = 0.0
        #: a stopped process (SIGSTOP) is not in a long call: the liveness watch says it is stuck, once
        self.leave_stopped = False

    def start(self) -> None:
        if self.threshold > 0:
            self._handle = asyncio.get_running_loop().call_later(self.period, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def limit(self) -> float:
        """Seconds after which a call is long: the setting, or USUAL_TIMES x the usual time if longer."""
        dispatcher = self.executor.dispatcher
        usual = dispatcher.per_message_s if dispatcher is not None else None
        return max(self.threshold, USUAL_TIMES * usual) if usual else self.threshold

    def _tick(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self.period, self._tick)
        now = time.monotonic()
        if now - self._last_tick > self.period + FROZEN_GAP_S:
            # The supervisor itself did not run (SIGSTOP, a paused VM, a debugger): the wall time a call seems
            # to have taken is not evidence of a hung handler, and taking work back now would run it beside the
            # lock-gap rule's wait. Calls count as long only after LIMIT seconds of the supervisor awake again.
            logger.info("the supervisor did not run for {:.0f} s; long handler calls are measured from now",
                        now - self._last_tick)
            self._awake_since = now
            self._calls.clear()
        self._last_tick = now
        try:
            self._look()
        except Exception:  # a bug here must not stop the watch, nor the loop
            logger.exception("the long-call watch failed; it goes on at the next tick")

    def _look(self) -> None:
        pool = self.executor.pool
        now = time.monotonic()
        limit = self.limit()
        long_calls = []
        for status in pool.workers():
            batch_id = status.running_batch_id
            live = pool.live_call(batch_id) if batch_id is not None else None
            if live is not None and live.in_call and now - max(live.call_began, self._awake_since) >= limit \
                    and not (self.leave_stopped and process_stopped(status.pid)):
                long_calls.append((status, live))
        stuck = {status.worker_id for status, _ in long_calls}
        # work is moved only if some worker can take it: with every worker stuck it would come straight back
        movable = len(stuck) < len(pool.worker_ids)
        live_keys = set()
        for status, live in long_calls:
            batch_id = status.running_batch_id
            assert batch_id is not None
            key = (batch_id, live.call_start, live.call_began)
            live_keys.add(key)
            seen = self.executor.flying_batch(batch_id)
            if seen is None:
                continue
            batch, job = seen
            if key not in self._warned:
                self._warned.add(key)
                where = batch.queue_key if job is None else job.mq
                if job is not None and job.dispatch_key is not None:
                    where = f"{job.mq}, key {job.dispatch_key}"
                self._warn(status.worker_id, status.pid, batch, where, live.call_start, live.call_end,
                           now - live.call_began)
            marked = self._calls.get(key)
            if marked is not None and movable:
                self._take_back(batch_id, marked)
            if movable:
                self._mark(key, batch_id, batch.mode, batch.count, live.call_end)
        for key in [k for k in self._calls if k not in live_keys]:
            del self._calls[key]  # the call ended: whatever was not taken back stays with its worker
        self._warned &= live_keys
        if self.executor.dispatcher is not None:
            self.executor.dispatcher.set_stuck(stuck)

    def _mark(self, key: tuple[int, int, float], batch_id: int, mode: ConsumeMode, count: int, call_end: int) -> None:
        """Ask the worker to skip what waits behind the call, and to cut a concurrent batch after it."""
        pool = self.executor.pool
        marked = self._calls.setdefault(key, _Marked([], None))
        for behind in pool.queued_behind(batch_id):
            if behind not in self._moved and behind not in marked.behind and pool.skip(behind):
                marked.behind.append(behind)
        if (mode is ConsumeMode.CONCURRENT and call_end < count and batch_id not in self._cut_done
                and marked.cut is None and pool.cut(batch_id, call_end)):
            marked.cut = call_end

    def _take_back(self, batch_id: int, marked: _Marked) -> None:
        """The worker is still in the same call a tick after the marks: what they cover is ours to move."""
        moved = 0
        for behind in marked.behind:
            if behind not in marked.taken:
                marked.taken.add(behind)
                self._moved.add(behind)
                moved += self.executor.reclaim(behind)
        marked.behind = [b for b in marked.behind if b not in marked.taken]
        cut = 0
        if marked.cut is not None and batch_id not in self._cut_done:
            self._cut_done.add(batch_id)
            cut = self.executor.split(batch_id, marked.cut)
        what = ([f"{moved} batch(es) waiting behind the long call"] if moved else []) + \
            ([f"the {cut} message(s) of its batch after the call"] if cut else [])
        if what:
            self.taken_back += moved + (cut > 0)
            logger.warning("taken back from the worker on batch {}: {}; other workers run them now", batch_id,
                           " and ".join(what))

    def _warn(self, worker_id: int, pid: int, batch: Batch, queue: object, start: int, end: int, age: float) -> None:
        offsets = batch.queue_offsets()
        where = f"offset {offsets[start]}" if end - start <= 1 or end > len(offsets) else \
            f"offsets {offsets[start]}..{offsets[end - 1]}"
        time_limit = self.executor.config.worker.time_limit
        then = (f"at the time limit ({time_limit:g} s) the call is interrupted and the message retried"
                if time_limit > 0 else "there is no time limit (time_limit 0)")
        logger.warning("worker {} (pid {}) has been in one handler call for {:.1f} s: message at {} of {} "
                       "(batch {}); {}; the work queued behind it goes to other workers",
                       worker_id, pid, age, where, queue, batch.batch_id, then)
