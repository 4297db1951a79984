"""Worker liveness: a worker that holds work and does nothing with it is stuck, and its waiting work moves.

A worker stopped with ``kill -STOP`` (or frozen, or held by a debugger) used
to keep the batches in its pipe for ever: nothing was logged, ``/readyz``
stayed green, the committed offsets of their queues stopped and the lag grew.
The long-call watch (:mod:`rmqrun.supervisor.long_calls`) sees handler calls
that run long, not a worker that never picks its batches up.

A few times a second the supervisor reads each worker's *life sign*
(:meth:`~rmqrun.supervisor.worker_process.WorkerProcess.life_sign`: the bytes
it sent, the head of its progress block, the batch it claimed last). A worker
that holds work (batches sent to it and not answered) and whose sign has not
changed for ``worker_liveness_timeout`` seconds is **not responding**, unless
it is inside a handler call and its process is not stopped (that is a long
call, which the long-call watch handles: a call may rightly take minutes), or
the CPU time of its main thread moves from one tick to the next (it is busy
outside a call: decoding a huge batch, a long garbage collection; a stopped
or blocked worker uses none). What a worker does outside a call takes well
under a second, seconds on a loaded machine with a huge batch: the default
(20 s) leaves room for that, and the CPU time covers the rest.

A worker not responding:

* is marked stuck (:meth:`~rmqrun.supervisor.dispatch.Dispatcher.set_stuck`):
  concurrent batches go to the other workers, and an orderly queue or key lane
  is pinned anew elsewhere once nothing of it is left that can still run there
  (the pin moves with the work, never ahead of it);
* has the batches it has not reached taken back, in two steps a tick apart as
  for long calls: ask it to skip them (its skip list), then confirm that its
  life sign is still the same, so it has claimed none of them since (a worker
  claims a batch before it reads the skip list, :mod:`rmqrun.pipe.progress`),
  and only then send them to other workers (``PoolExecutor.reclaim``). An
  orderly batch chained behind the one it runs goes back to its service
  instead (it must not run before that one). The batch it was running stays
  with it: it finishes there when the worker resumes, or its unfinished
  messages run again when the worker is killed. With every worker stuck
  nothing moves (it would come straight back);
* is named in one warning: its pid, for how long, how many batches moved,
  what happens next;
* cannot take work: with no worker left that can, ``/readyz`` and
  ``rmqrun_ready`` say not ready (:mod:`rmqrun.supervisor.health`);
* is killed with SIGKILL and replaced once it has been stuck for
  ``stuck_worker_kill_after`` more seconds (gunicorn kills a worker that
  misses its heartbeats): what it had finished keeps its results, the rest
  of its batch runs again. That death is no crash: the crash-loop guard does
  not count it.

A worker that moves again before that (``kill -CONT``) gets its place back;
the batches moved were skipped there (answered NOT_RUN, dropped by the
executor), so nothing runs twice; one line says so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from loguru import logger

from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.supervisor.pool import Pool
from rmqrun.supervisor.worker_process import WorkerProcess

__all__ = ["LivenessWatch", "WHY"]

#: the reason the dispatcher keeps these stuck workers under
WHY = "not responding"
#: a gap between two ticks longer than the period by this much: the supervisor itself did not run
FROZEN_GAP_S = 2.0

Sign = tuple[int, bytes, int]


@dataclass(slots=True)
class _Watched:
    """One worker process holding work, as the watch has seen it."""

    sign: Sign
    #: when its sign last changed (or when it was first seen holding work)
    since: float
    #: since when it is stuck (None: it is not)
    stuck_since: float | None = None
    #: batches asked to be skipped, waiting for the confirmation, and the sign they were asked under
    marked: list[int] = field(default_factory=list)
    mark_sign: Sign | None = None
    #: batches taken back from it (each once)
    moved: set[int] = field(default_factory=set)
    warned: bool = False
    #: its main thread's CPU time when it had been silent for the bound (None: not read since its last sign)
    cpu: int | None = None


class TakesBack(Protocol):
    """What the watch needs of the executor (:class:`rmqrun.supervisor.executor.PoolExecutor`)."""

    pool: Pool
    dispatcher: Dispatcher | None

    def reclaim(self, batch_id: int) -> bool: ...

    def dispatch_waiting(self) -> None: ...


class LivenessWatch:
    """Runs on the supervisor's loop beside the executor; see the module docstring."""

    def __init__(self, executor: TakesBack, bound: float, kill_after: float) -> None:
        self.executor = executor
        self.bound = bound
        self.kill_after = kill_after
        self.period = min(0.5, max(0.05, bound / 8))
        self._handle: asyncio.TimerHandle | None = None
        self._watched: dict[int, _Watched] = {}  # by pid
        #: worker ids whose current process is stuck now
        self.stuck: frozenset[int] = frozenset()
        #: batches taken back from stuck workers, for metrics and tests
        self.taken_back = 0
        #: pids killed for not responding, until the executor has their batches back: no message is to blame
        self.killed: set[int] = set()
        self._last_tick = time.monotonic()
        self._awake_since = 0.0

    @property
    def enabled(self) -> bool:
        return self.bound > 0

    def start(self) -> None:
        if self.enabled:
            self._last_tick = time.monotonic()
            self._handle = asyncio.get_running_loop().call_later(self.period, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self.period, self._tick)
        now = time.monotonic()
        if now - self._last_tick > self.period + FROZEN_GAP_S:
            # the supervisor itself did not run (SIGSTOP, a paused VM): its workers' silence is not theirs
            self._awake_since = now
            for w in self._watched.values():
                w.marked, w.mark_sign = [], None
        self._last_tick = now
        try:
            self._look(now)
        except Exception:  # a bug here must not stop the watch, nor the loop
            logger.exception("the worker liveness watch failed; it goes on at the next tick")

    def _look(self, now: float) -> None:
        pool = self.executor.pool
        current = {s.pid for s in pool.workers() if s.current}
        stuck: list[tuple[WorkerProcess, _Watched, Sign]] = []
        holding: set[int] = set()
        procs = {proc.pid: proc for proc in pool.processes()}
        for proc in procs.values():
            if proc.state == "starting" or proc.kill_reason or not proc.pending:
                continue  # a booting worker has boot_timeout; one being killed is the pool's
            holding.add(proc.pid)
            sign = proc.life_sign()
            w = self._watched.get(proc.pid)
            if w is None:
                self._watched[proc.pid] = _Watched(sign, now)
                continue
            if sign == w.sign:
                if now - max(w.since, self._awake_since) < self.bound:
                    continue
                busy = self._busy(proc, w)
                if busy is None:
                    continue  # its CPU time noted: judged at the next tick
                if not busy:
                    stuck.append((proc, w, sign))
                    continue
                # in a running handler call (a long call: long_calls.py), or its CPU time moves: not silent
            if w.stuck_since is not None:
                self._revived(proc, w, now)
            w.sign, w.since, w.stuck_since, w.marked, w.mark_sign, w.warned = sign, now, None, [], None, False
            w.cpu = None
        for pid in [p for p in self._watched if p not in holding]:
            w = self._watched.pop(pid)
            gone = procs.get(pid)
            if w.stuck_since is not None and gone is not None and not gone.kill_reason:
                self._revived(gone, w, now)  # it answered all it held within a tick (a killed one: the pool says)
        was, self.stuck = self.stuck, frozenset(proc.slot for proc, _, _ in stuck if proc.pid in current)
        dispatcher = self.executor.dispatcher
        if dispatcher is not None:
            dispatcher.set_stuck(self.stuck, WHY)
            # work moves only if some worker can take it: with every worker stuck it would come straight back
            movable = not dispatcher.stuck.issuperset(dispatcher.worker_ids)
        else:
            movable = False
        for proc, w, sign in stuck:
            self._handle_stuck(proc, w, sign, now, movable)
        if was - self.stuck:
            self.executor.dispatch_waiting()  # a worker back: work waiting for room may go to it now

    @staticmethod
    def _busy(proc: WorkerProcess, w: _Watched) -> bool | None:
        """Whether a worker silent for the bound is busy all the same: in a handler call of a process that is
        not stopped, or its main thread's CPU time moving (True); stuck (False); None: its CPU time was not
        known yet, now it is (look again at the next tick)."""
        if proc.in_call():
            return not proc.stopped()
        cpu = proc.cpu_time()
        if cpu is None:
            return False  # no /proc: the sign alone decides
        if w.cpu is None:
            w.cpu = cpu
            return None if w.stuck_since is None else False
        return cpu != w.cpu

    def _handle_stuck(self, proc: WorkerProcess, w: _Watched, sign: Sign, now: float, movable: bool) -> None:
        if w.stuck_since is None:
            w.stuck_since = now
        if movable:
            if w.marked and sign == w.mark_sign:
                # a tick after the marks and still the same sign: it claimed none of them, they are ours
                moved = 0
                for batch_id in w.marked:
                    w.moved.add(batch_id)
                    moved += self.executor.reclaim(batch_id)
                self.taken_back += moved
                w.marked = []
                if w.warned and moved:
                    logger.info("worker {} (pid {}) still not responding: {} more batch(es) moved to other workers",
                                proc.slot, proc.pid, moved)
            pool = self.executor.pool
            w.marked = [b for b in proc.unclaimed() if b not in w.moved and pool.skip(b)]
            w.mark_sign = sign if w.marked else None
        quiet = now - max(w.since, self._awake_since)
        if not w.warned and not w.marked:
            w.warned = True
            self._warn(proc, w, quiet, movable)
        if self.kill_after > 0 and now - w.stuck_since >= self.kill_after:
            logger.warning("worker {} (pid {}) still not responding after {:.0f} s; killing it (SIGKILL) and "
                           "starting a replacement (stuck_worker_kill_after {:g} s): what it had not finished "
                           "runs again", proc.slot, proc.pid, quiet, self.kill_after)
            self.killed.add(proc.pid)
            proc.kill(f"not responding for {quiet:.0f} s", explained=True)

    def _warn(self, proc: WorkerProcess, w: _Watched, quiet: float, movable: bool) -> None:
        state = "stopped (SIGSTOP?)" if proc.stopped() else "not stopped"
        moved = len(w.moved)
        held = len(proc.pending) - moved
        then = (f"it is killed and replaced if still stuck in {self.kill_after:g} s (stuck_worker_kill_after)"
                if self.kill_after > 0 else "it is never killed for this (stuck_worker_kill_after 0)")
        where = (f"{moved} batch(es) moved to other workers" if movable
                 else "nothing moved: no other worker can take work")
        logger.warning("worker {} (pid {}) has not responded for {:.1f} s while holding work (process {}): {}, "
                       "{} batch(es) stay with it; {} (worker_liveness_timeout {:g} s)", proc.slot,
                       proc.pid, quiet, state, where, held, then, self.bound)

    def _revived(self, proc: WorkerProcess, w: _Watched, now: float) -> None:
        logger.info("worker {} (pid {}) responds again after {:.1f} s stuck; the {} batch(es) moved are skipped "
                    "there", proc.slot, proc.pid, now - (w.stuck_since or now), len(w.moved))
