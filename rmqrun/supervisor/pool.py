"""The worker pool: spawn, feed, watch, time-limit, recycle, replace and stop worker processes.

Everything here runs inside the supervisor's asyncio loop and never blocks
on a worker: each worker's socket is non-blocking and read with
``loop.add_reader`` (writes that do not fit are buffered and finished with
``add_writer``), and each process's ``sentinel`` fd is watched to learn of its
death the moment it happens. Results and losses are reported through plain
callbacks called from the loop; they must not block.

Start method: **spawn**, i.e. a fresh interpreter per worker (``python -m
rmqrun.worker <fd>``, started with fork+exec by ``subprocess``). ``fork`` is
out of the question: the supervisor has a running event loop, selector fds,
sockets to brokers and possibly threads (loguru's, the resolver's); a forked
child inherits all of that in whatever state another thread left it (held
locks, half-written buffers), the classic fork-with-threads deadlock.
``forkserver`` avoids that but its children inherit the server's environment
and imports from when it started, which makes "reload picks up new code" and
per-worker environment changes subtle. We exec the interpreter ourselves
rather than use ``multiprocessing``'s spawn context because that one
re-imports the parent's ``__main__`` in every child (the whole CLI, or an
unguarded script that starts a second pool), and adds a resource-tracker
process and an atexit join we do not want. The worker inherits only its socket
(``pass_fds``) and gets its settings and the supervisor's ``sys.path`` in the
first frame. A spawn costs ~0.15 s, paid at start-up and on replacement only.
Death is watched with a pidfd (Linux >= 5.3), else with a pipe whose write end only the child holds.

Worker slots: a worker id is a slot number 0..N-1, stable across replacement, recycling and reload, so
orderly queues pinned to a slot keep their worker.
A slot has one *current* process (new batches go there) and possibly older processes still finishing
batches they were given before a recycle/reload.

Deaths: a current process that dies unexpectedly is replaced at once (before
``on_worker_lost`` runs, so the callback can resubmit to the same slot); its
unfinished batches are given back in submission order with the one it had
started marked, together with the worker's per-message progress on it (read
from memory the worker shares, :mod:`rmqrun.pipe.progress`): which
messages already have results and whether it died inside a handler call.
A death inside a handler call is explained by a message and is the
executor's business (it isolates the message); only deaths no message
explains (outside a handler call, or before the worker was ready) count
against the crash-loop guard: more than ``crash_limit`` of them within
``crash_window`` seconds, or a replacement that cannot import the handler
(a worker that never became ready and said so), is fatal: ``on_fatal`` is
called, nothing is respawned and ``submit`` raises. Any exit of a worker that
was ready, whatever its code, is a crash, never a boot failure. See
:class:`rmqrun.pipe.wire.ExitCode` for the exit-code table.

Time limits count per handler call, like Java's consumeTimeout (a pool batch is a whole pull, many calls):
the worker interrupts a call at ``time_limit`` (soft, the batch is reported with failures); the pool SIGKILLs
it ``time_limit + kill_grace`` after the batch began or was last announced (STARTED,
which a worker repeats before calls of a long batch) and reports that batch
as a ``BatchResult`` with ``timed_out=True``: the messages the worker had
finished keep their statuses, the hung call fails and the rest are NOT_RUN
(nothing of the hung call is ever a success); batches queued behind it come
back through ``on_worker_lost`` untouched.
When a batch began: a threads / asyncio worker says STARTED as it begins one (several run at once); a
process worker runs its batches one at a time in the order given and says nothing, and its head batch
counts from when the previous one's DONE arrived (the worker writes DONE before it begins the next), or
when it was handed over idle or the worker became ready, which is never later than the worker began it
(queued behind another: never earlier either; handed over idle: earlier by the hand-over's latency); it
counts as begun only once the worker's progress block names it (``WorkerProcess.begun``), so a batch the
worker never reached is neither killed for, nor blamed for a death, nor kept from being skipped or moved.

Layout: this module orchestrates (slots, submission, frames, deaths, stop);
one process's spawn, socket I/O and death live in ``worker_process``, the
settings in ``pool_config``, the crash-loop rule in ``crash_guard``, what is
said about a death in ``death_report``, the graceful stop and the waits on workers in ``pool_stop``
(all in :mod:`rmqrun.supervisor`).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import signal
import sys
from dataclasses import dataclass
from typing import Callable

from loguru import logger

from rmqrun.errors import RmqrunError
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import (
    Batch, BatchResult, Boot, BootFailed, Done, ExitCode, Frame, Ready, Retiring,
    Started, Status, describe_exit, encode, encode_run,
)
from rmqrun.supervisor.crash_guard import CrashGuard
from rmqrun.supervisor.death_report import OomWatch, hard_limit_result, log_death
from rmqrun.supervisor.lineage import kill_leftovers
from rmqrun.supervisor.pool_config import PoolConfig
from rmqrun.supervisor.pool_stop import PoolStopping
from rmqrun.supervisor.worker_process import WorkerProcess, WorkerStatus, spawn_worker

__all__ = ["Pool", "PoolError", "PoolClosedError", "WorkerBootError", "CrashLoopError", "WorkerLost", "LaneLoss"]


class PoolError(RmqrunError):
    """The pool cannot do what was asked."""


class PoolClosedError(PoolError):
    """The pool is not running (not started, stopping, stopped, or failed)."""


class WorkerBootError(PoolError):
    """A worker could not load the handler/hooks, worker_init failed, or it never became ready."""

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class CrashLoopError(PoolError):
    """Workers died, for no reason a message explains, more than ``crash_limit`` times in ``crash_window`` s."""


@dataclass(frozen=True)
class WorkerLost:
    """A worker process ended holding batches it never finished.

    ``batches`` are in submission order; ``started_batch_id`` is the one it
    was running (a likely culprit if the death was caused by a message), or
    None if it died between batches. None of them produced a result.
    """

    worker_id: int
    pid: int
    exitcode: int | None
    reason: str
    batches: list[Batch]
    started_batch_id: int | None
    #: the worker's per-message progress on the started batch (None: no batch was started)
    progress: progress_mem.Progress | None = None
    #: it died inside a handler call of the started batch (the message there is the suspect)
    in_call: bool = False
    #: every batch it had begun (a threads / asyncio worker runs several at once): batch id -> what it lost
    lanes: dict[int, "LaneLoss"] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class LaneLoss:
    """One begun batch of a dead worker: what its lane recorded, and whether the death is blamed on it."""

    progress: progress_mem.Progress | None
    #: it was the only batch inside a handler call: the message(s) there are the suspects
    in_call: bool
    #: the death may be its doing (not when the worker was killed for another batch that overran)
    suspect: bool


_KILL_TIME_LIMIT = "hard time limit"


class Pool(PoolStopping):
    """N worker processes behind an async, non-blocking API (see the module docstring).

    Callbacks (called from the event loop, must not block; exceptions are logged):

    * ``on_result(BatchResult)`` for every batch that finished (or hit the hard time limit);
    * ``on_worker_lost(WorkerLost)`` for batches a dead worker never finished;
    * ``on_fatal(PoolError)`` once, when the pool gives up (crash loop, handler no longer imports).
      It runs before the ``on_worker_lost`` of the death that caused it; from then on ``submit``
      raises PoolClosedError, surviving workers keep running until ``stop()``.
    """

    def __init__(self, config: PoolConfig, *, on_result: Callable[[BatchResult], None],
                 on_worker_lost: Callable[[WorkerLost], None],
                 on_fatal: Callable[[PoolError], None] | None = None) -> None:
        self.config = config
        self._on_result = on_result
        self._on_worker_lost = on_worker_lost
        self._on_fatal = on_fatal
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._state = "new"
        self._slots: list[WorkerProcess] = []
        self._procs: set[WorkerProcess] = set()
        self._where: dict[int, WorkerProcess] = {}
        self._crash_guard = CrashGuard(config.effective_crash_limit, config.crash_window)
        self._leftovers: list[Batch] = []
        self._changed: asyncio.Event | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._reloading = False
        self._oom = OomWatch()
        #: batches cut short by the last stop() (killed or interrupted), and how many of their messages run again
        #: (a batch's NOT_RUN ones, all of a killed worker's; not what finished), for the log and tests
        self.cut_short: list[Batch] = []
        self.cut_short_messages = 0
        self.fatal: PoolError | None = None
        #: replacements of workers that died unexpectedly / were recycled (limits), for metrics
        self.restarts = 0
        self.recycles = 0
        limit = config.worker.time_limit
        self._tick_interval = min(1.0, max(0.02, limit / 20)) if limit > 0 else 1.0

    # ------------------------------------------------------------------ public API
    @property
    def state(self) -> str:
        """"new", "starting", "running", "stopping" or "stopped"."""
        return self._state

    @property
    def size(self) -> int:
        return len(self._slots)

    @property
    def worker_ids(self) -> list[int]:
        return list(range(len(self._slots)))

    def workers(self) -> list[WorkerStatus]:
        current = set(map(id, self._slots))
        return sorted((p.status(id(p) in current) for p in self._procs if not p.candidate),
                      key=lambda s: (s.worker_id, not s.current, s.pid))

    def processes(self) -> list[WorkerProcess]:
        """The living worker processes (reload candidates aside), for the liveness watch."""
        return [p for p in self._procs if not p.candidate and not p.dead]

    def in_flight(self, worker_id: int | None = None) -> int:
        """Batches submitted and not finished (to one slot's current process, or in total)."""
        if worker_id is None:
            return len(self._where)
        return len(self._slots[worker_id].pending)

    async def start(self) -> None:
        """Spawn the workers and wait until every one is ready; raises WorkerBootError otherwise."""
        if self._state != "new":
            raise PoolError(f"start() on a pool that is {self._state}")
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._state = "starting"
        atexit.register(self._atexit_kill)
        self._tick_handle = self._loop.call_later(self._tick_interval, self._tick)
        try:
            self._slots = [self._spawn(i) for i in range(self.config.workers)]
            await self._await_ready(self._slots)
        except BaseException:
            await self._kill_all()
            self._finish_stop()
            raise
        self._state = "running"
        logger.info("pool started: {} workers, handler {}", len(self._slots), self.config.worker.handler)

    def submit(self, worker_id: int, batch: Batch) -> None:
        """Send a batch to a worker slot; its result comes back through ``on_result``."""
        if self._state != "running" or self.fatal is not None:
            raise PoolClosedError(f"cannot submit: the pool is {self._state}"
                                  + (f" and failed: {self.fatal}" if self.fatal else "")) from self.fatal
        if not 0 <= worker_id < len(self._slots):
            raise PoolError(f"no worker {worker_id}; worker ids are 0..{len(self._slots) - 1}")
        if batch.batch_id in self._where:
            raise PoolError(f"batch {batch.batch_id} is already in flight")
        proc = self._slots[worker_id]
        idle = not proc.pending
        proc.pending[batch.batch_id] = batch
        self._where[batch.batch_id] = proc
        proc.write(encode_run(batch))
        if idle:
            proc.expect_next(self._loop.time())

    def queued_behind(self, batch_id: int) -> list[int]:
        """Batches waiting in the pipe of the worker running ``batch_id``, behind it, in submission order."""
        proc = self._where.get(batch_id)
        if proc is None or proc.dead or batch_id not in proc.begun():
            return []
        return [b for b in proc.pending if b not in proc.started]

    def cut(self, batch_id: int, index: int) -> bool:
        """Ask the worker running ``batch_id`` to start no call on its messages from ``index`` on.

        Whether it was in time is the caller's to confirm (see :mod:`rmqrun.pipe.progress`):
        the call it was in must still be running a while later.
        """
        proc = self._where.get(batch_id)
        if proc is None or proc.dead or batch_id not in proc.begun():
            return False
        progress_mem.ask_cut(proc.progress, batch_id, index)
        proc.cut_batch = batch_id
        return True

    def live_call(self, batch_id: int) -> progress_mem.LiveCall | None:
        """Where the worker running ``batch_id`` is in it, read from its progress block.

        None when the batch has not started (it waits in a worker's pipe), is not in
        flight, or its worker is dead. For the consume-timeout sweep, which must judge
        a message by when its handler call began, not by when it was handed over.
        """
        proc = self._where.get(batch_id)
        if proc is None or proc.dead or batch_id not in proc.begun():
            return None
        # None also when the batch has begun and no call has yet: no call yet
        return progress_mem.live_batch(proc.progress, batch_id)

    def skip(self, batch_id: int) -> bool:
        """Ask the worker holding a batch not to run it (its queue was dropped); True if asked in time.

        Only a batch waiting behind another one in a worker's pipe can be
        skipped; the worker then answers it with every message NOT_RUN.
        """
        proc = self._where.get(batch_id)
        if proc is None or proc.dead or batch_id in proc.begun():
            return False
        return proc.skips.add(batch_id)  # False: its skip list is full

    def add_worker(self) -> int:
        """Add a slot (TTIN); returns its worker id. It accepts batches at once (they wait for its boot)."""
        self._require_running()
        slot = len(self._slots)
        self._slots.append(self._spawn(slot))
        logger.info("worker {} added; {} workers", slot, len(self._slots))
        return slot

    def remove_worker(self) -> int:
        """Remove the highest slot (TTOU); its process finishes what it holds, then exits. Returns its id."""
        self._require_running()
        if len(self._slots) <= 1:
            raise PoolError("cannot remove the last worker")
        proc = self._slots.pop()
        self._retire(proc)
        logger.info("worker {} (pid {}) removed; {} workers", proc.slot, proc.pid, len(self._slots))
        return proc.slot

    async def reload(self) -> None:
        """Replace every worker with a fresh process importing fresh code (HUP).

        The new processes are started first; only when all are ready do they
        take over their slots, and the old ones retire after the batches they
        already hold. If the new code does not load, the new processes are
        killed, the old ones keep running and WorkerBootError is raised.
        """
        self._require_running()
        if self._reloading:
            raise PoolError("a reload is already in progress")
        self._reloading = True
        try:
            fresh = []
            for slot in range(len(self._slots)):
                proc = self._spawn(slot)
                proc.candidate = True
                fresh.append(proc)
            try:
                await self._await_ready(fresh)
                self._require_running()
            except BaseException:
                for proc in fresh:
                    proc.kill("reload failed")
                raise
            for proc in fresh:
                proc.candidate = False
                if proc.slot < len(self._slots):
                    old = self._slots[proc.slot]
                    self._slots[proc.slot] = proc
                    self._retire(old)
                else:  # the pool shrank while we waited
                    self._retire(proc)
            logger.info("reloaded: {} fresh workers", len(fresh))
        finally:
            self._reloading = False

    # ------------------------------------------------------------------ processes
    def _spawn(self, slot: int) -> WorkerProcess:
        boot = encode(Boot(slot, dataclasses.asdict(self.config.worker), list(sys.path)))
        lanes = progress_mem.lanes_for(self.config.worker.worker_class, self.config.worker.concurrency)
        proc = spawn_worker(self._loop, slot, boot, self._on_frame, self._on_death, lanes,
                            self.config.worker.worker_class == "process")
        self._procs.add(proc)
        logger.debug("worker {} spawned (pid {})", slot, proc.pid)
        return proc

    def _on_frame(self, proc: WorkerProcess, frame: Frame) -> None:
        if isinstance(frame, Done):
            batch = proc.pending.pop(frame.batch_id, None)
            if batch is None:
                logger.error("worker {} (pid {}) finished unknown batch {}", proc.slot, proc.pid, frame.batch_id)
                return
            del self._where[frame.batch_id]
            proc.skips.discard(frame.batch_id)
            if proc.cut_batch == frame.batch_id or proc.cut_batch not in proc.started:
                progress_mem.clear_cut(proc.progress)  # a cut asked for this batch is spent
                proc.cut_batch = None
            proc.started.pop(frame.batch_id, None)
            if proc.due == frame.batch_id:  # answered without being begun (skipped, not run)
                proc.due = None
            proc.expect_next(self._loop.time())  # in order: its next batch begins now
            proc.batches_done += 1
            if self._state == "stopping" and Status.NOT_RUN in frame.statuses:
                self.cut_short.append(batch)
                self.cut_short_messages += frame.statuses.count(Status.NOT_RUN)
            if len(frame.statuses) != batch.count:
                logger.error("worker {} reported {} statuses for batch {} of {} messages", proc.slot,
                             len(frame.statuses), batch.batch_id, batch.count)
            self._emit(self._on_result, BatchResult(batch, proc.slot, proc.pid, frame.statuses, frame.delay_levels,
                                                    frame.queue_offsets, frame.suspend_ms, frame.timed_out,
                                                    frame.error or None, frame.elapsed_us / 1e6, frame.errors))
        elif isinstance(frame, Started):  # begun, or announced again before a call of a long batch
            proc.started[frame.batch_id] = self._loop.time()
            if proc.due == frame.batch_id:
                proc.due = None
        elif isinstance(frame, Ready):
            if proc.state == "starting":
                proc.state = "ready"
                proc.expect_next(self._loop.time())  # batches given while it booted: the first begins now
            self._signal_change()
        elif isinstance(frame, Retiring):
            self._recycle(proc, frame.reason)
        elif isinstance(frame, BootFailed):
            proc.boot_code = frame.exit_code
            proc.boot_error = frame.message
        else:
            logger.error("worker {} sent an unexpected {} frame", proc.slot, type(frame).__name__)

    def _recycle(self, proc: WorkerProcess, reason: str) -> None:
        if self._state != "running" or proc.stop_sent or proc.slot >= len(self._slots) \
                or self._slots[proc.slot] is not proc:
            return
        try:
            new = self._spawn(proc.slot)
        except OSError as exc:
            logger.error("worker {} (pid {}) wants recycling ({}) but no replacement can start: {}; keeping it",
                         proc.slot, proc.pid, reason, exc)
            return
        self._slots[proc.slot] = new
        self.recycles += 1
        self._retire(proc)
        logger.info("worker {} (pid {}) recycling ({}); replacement pid {}", proc.slot, proc.pid, reason, new.pid)

    def _on_death(self, proc: WorkerProcess, code: int) -> None:
        """A process exited: settle its batches, replace it if it was current, report what it held."""
        proc.begun()  # the due batch, if the worker had begun it (read before the block is unmapped)
        proc.dead = True
        # what each batch it had begun recorded, read before the block is unmapped (None: it died after a
        # threads / asyncio worker's STARTED, before it began recording that batch)
        recorded = {b: progress_mem.read_batch(proc.progress, b) for b in proc.begun()}
        proc.close()
        kill_leftovers(proc.slot, proc.pid)  # the handler's children die with their worker
        self._procs.discard(proc)
        batches = list(proc.pending.values())
        for batch in batches:
            self._where.pop(batch.batch_id, None)
        proc.pending.clear()
        was_ready = proc.state != "starting"
        # a ready worker's exit 3 or 4 comes from the handler (sys.exit), not from loading it
        what = describe_exit(code) if not was_ready or code not in (ExitCode.BOOT_ERROR, ExitCode.INIT_ERROR) \
            else f"exit code {code}"
        if proc.kill_reason:
            what += f" ({proc.kill_reason})"
        begun = [b for b in batches if b.batch_id in recorded]
        # the batches it died inside a handler call of (a kill, for whatever reason, is no handler's doing)
        calling = [(b, p) for b in begun if (p := recorded[b.batch_id]) is not None and p.in_call] \
            if was_ready and proc.kill_reason is None else []
        if not was_ready and proc.boot_error is None:
            proc.boot_error = f"worker {proc.slot} (pid {proc.pid}) exited before it was ready: {what}"
            proc.boot_code = code
        hint = self._oom.hint() if code == -signal.SIGKILL and not proc.kill_reason else ""
        log_death(proc.slot, proc.pid, proc.stop_sent and code == ExitCode.OK, what + hint, batches, calling)
        timed_out: BatchResult | None = None
        over = next((b for b in begun if b.batch_id == proc.overran), None)
        if proc.kill_reason == _KILL_TIME_LIMIT and over is not None:
            batches.remove(over)
            begun.remove(over)
            timed_out = hard_limit_result(over, proc.slot, proc.pid, self._loop.time() - proc.started[over.batch_id],
                                          recorded[over.batch_id])
        is_current = proc.slot < len(self._slots) and self._slots[proc.slot] is proc
        if self._state == "running" and is_current and self.fatal is None:
            self._replace(proc, code, was_ready, bool(calling))
        self._signal_change()
        if timed_out is not None:
            self._emit(self._on_result, timed_out)
        if batches:
            if self._state in ("stopping", "stopped", "starting"):
                self._leftovers.extend(batches)
            else:
                self._emit(self._on_worker_lost, _lost(proc, code, what, batches, begun, recorded, calling))

    def _replace(self, proc: WorkerProcess, code: int, was_ready: bool, explained: bool = False) -> None:
        if not was_ready and proc.boot_code == ExitCode.BOOT_ERROR:
            self._fail(WorkerBootError(f"a replacement for worker {proc.slot} cannot load the handler: "
                                       f"{proc.boot_error}", code))
            return
        explained = explained or proc.kill_explained  # a stuck worker killed (liveness.py) is no crash
        if proc.kill_reason != _KILL_TIME_LIMIT and not explained:
            if self._crash_guard.record(self._loop.time()):
                self._fail(CrashLoopError(
                    f"workers died {self._crash_guard.count} times within {self.config.crash_window:g} s "
                    f"(limit {self._crash_guard.limit}); last: worker {proc.slot} (pid {proc.pid}) "
                    f"{describe_exit(code)}" + (f": {proc.boot_error}" if proc.boot_error else "")
                    + " (deaths counted: at boot or outside a handler call, which no message explains;"
                      " settings crash_limit / crash_window)"))
                return
        try:
            self._slots[proc.slot] = self._spawn(proc.slot)
            self.restarts += 1
        except OSError as exc:  # out of processes or fds: nothing sensible left to do but stop
            self._fail(PoolError(f"cannot start a replacement for worker {proc.slot}: {exc}"))

    def _fail(self, error: PoolError) -> None:
        if self.fatal is not None:
            return
        self.fatal = error
        logger.critical("worker pool failed: {}", error)
        if self._on_fatal is not None:
            self._emit(self._on_fatal, error)

    def _tick(self) -> None:
        now = self._loop.time()
        worker = self.config.worker
        hard = worker.time_limit + worker.kill_grace if worker.time_limit > 0 else 0.0
        for proc in list(self._procs):
            if proc.dead or proc.kill_reason:
                continue
            over = next((b for b, since in proc.begun().items() if now - since > hard), None) if hard else None
            if over is not None:
                logger.error("worker {} (pid {}) still on batch {} after {:.1f} s; killing it (hard time limit)",
                             proc.slot, proc.pid, over, now - proc.started[over])
                proc.overran = over
                proc.kill(_KILL_TIME_LIMIT)
            elif proc.state == "starting" and now - proc.spawned_at > self.config.boot_timeout:
                proc.boot_error = (f"worker {proc.slot} (pid {proc.pid}) not ready after "
                                   f"{self.config.boot_timeout:g} s")
                proc.kill("boot timeout")
        self._tick_handle = self._loop.call_later(self._tick_interval, self._tick)

    # ------------------------------------------------------------------ helpers
    def _emit(self, callback: Callable, arg: object) -> None:
        try:
            callback(arg)
        except Exception:
            logger.exception("pool callback {} raised", getattr(callback, "__qualname__", callback))

    def _require_running(self) -> None:
        if self._state != "running" or self.fatal is not None:
            raise PoolClosedError(f"the pool is {self._state}" + (f" and failed: {self.fatal}" if self.fatal else ""))

    async def _await_ready(self, procs: list[WorkerProcess]) -> None:
        deadline = self._loop.time() + self.config.boot_timeout + 1.0
        while True:
            failed = [p for p in procs if p.boot_error is not None]
            if failed:
                first = min(failed, key=lambda p: (p.boot_code != ExitCode.BOOT_ERROR, p.slot))
                raise WorkerBootError(f"worker {first.slot} failed to boot: {first.boot_error}", first.boot_code)
            if all(p.state != "starting" for p in procs):
                return
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                raise WorkerBootError(f"workers not ready after {self.config.boot_timeout:g} s")
            await self._wait_change(remaining)


def _lost(proc: WorkerProcess, code: int, what: str, batches: list[Batch], begun: list[Batch],
          recorded: dict[int, progress_mem.Progress | None], calling: list) -> WorkerLost:
    """What a dead worker held, each batch it had begun with its lane's progress. A batch is known to hold the
    killer (``in_call``) only when it was the one batch in a handler call: with calls in several lanes, none is."""
    only = calling[0][0].batch_id if len(calling) == 1 else None
    suspect = proc.kill_reason != _KILL_TIME_LIMIT  # the batches beside one that overran did nothing wrong
    lanes = {b.batch_id: LaneLoss(recorded[b.batch_id], b.batch_id == only, suspect) for b in begun}
    first = begun[0].batch_id if begun else None
    return WorkerLost(proc.slot, proc.pid, code, what, batches, first,
                      lanes[first].progress if first is not None else None,
                      first is not None and first == only, lanes)
