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
Death is watched with a pidfd (Linux >= 5.3), else with a pipe whose write
end only the child holds (multiprocessing's sentinel trick).

Worker slots: a worker id is a slot number 0..N-1, stable across replacement,
recycling and reload, so orderly queues pinned to a slot keep their worker.
A slot has one *current* process (new batches go there) and possibly older
processes still finishing batches they were given before a recycle/reload.

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

Time limits count per handler call, like Java's consumeTimeout (a pool
batch is a whole pull, many calls): the worker interrupts a call at
``time_limit`` (soft, the batch is reported with failures); the pool SIGKILLs
it ``time_limit + kill_grace`` after the batch was last announced (STARTED,
which a worker repeats before calls of a long batch) and reports that batch
as a ``BatchResult`` with ``timed_out=True``: the messages the worker had
finished keep their statuses, the hung call fails and the rest are NOT_RUN
(nothing of the hung call is ever a success); batches queued behind it come
back through ``on_worker_lost`` untouched.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import os
import signal
import socket
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from loguru import logger

from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import (
    Batch, BatchResult, Boot, BootFailed, ConsumeMode, Done, ExitCode, FrameBuffer, Frame, MessageOutcome, Ready,
    Retiring, Started, Status, Stop, WireError, describe_exit, encode, encode_run,
)
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.security import SECRET_ENV

__all__ = [
    "Pool", "PoolConfig", "PoolError", "PoolClosedError", "WorkerBootError", "CrashLoopError", "WorkerLost",
    "WorkerStatus", "Batch", "BatchResult", "MessageOutcome", "Status", "ConsumeMode",
]


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
class PoolConfig:
    """Settings of the pool (the settings table maps rmqrun's options onto these).

    ``batch_size`` is consumeMessageBatchMaxSize (messages per handler call of
    an ``@rmqrun.batch`` handler). ``time_limit`` is consumeTimeout in seconds,
    per handler call (0 = none); ``kill_grace`` is how long after it the worker
    is SIGKILLed. ``max_messages_jitter`` defaults to 10% of
    ``max_messages_per_worker``; ``max_memory_per_worker`` is RSS in bytes.
    ``crash_limit`` defaults to max(10, 2 * workers); it counts only deaths that
    no message explains (outside a handler call, or at boot).
    """

    handler: str
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    worker_init: str | None = None
    worker_exit: str | None = None
    batch_size: int = 1
    time_limit: float = 15 * 60.0
    kill_grace: float = 10.0
    max_messages_per_worker: int = 0
    max_messages_jitter: int | None = None
    max_memory_per_worker: int = 0
    boot_timeout: float = 60.0
    crash_limit: int | None = None
    crash_window: float = 60.0
    log_level: str = "INFO"
    log_format: str = "text"
    #: the consumer's namespace, which workers take off message topics (the supervisor sets it)
    namespace: str | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.workers >= 1, f"workers must be >= 1, got {self.workers}"),
            (self.batch_size >= 1, f"batch_size (consumeMessageBatchMaxSize) must be >= 1, got {self.batch_size}"),
            (self.time_limit >= 0, f"time_limit must be >= 0 (0 = none), got {self.time_limit}"),
            (self.kill_grace > 0, f"kill_grace must be > 0, got {self.kill_grace}"),
            (self.max_messages_per_worker >= 0, f"max_messages_per_worker must be >= 0, got "
                                                f"{self.max_messages_per_worker}"),
            (self.max_messages_jitter is None or self.max_messages_jitter >= 0,
             f"max_messages_jitter must be >= 0, got {self.max_messages_jitter}"),
            (self.max_memory_per_worker >= 0, f"max_memory_per_worker must be >= 0, got "
                                              f"{self.max_memory_per_worker}"),
            (self.boot_timeout > 0, f"boot_timeout must be > 0, got {self.boot_timeout}"),
            (self.crash_limit is None or self.crash_limit >= 1, f"crash_limit must be >= 1, got {self.crash_limit}"),
            (self.crash_window > 0, f"crash_window must be > 0, got {self.crash_window}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    def worker_config(self) -> WorkerConfig:
        jitter = self.max_messages_jitter
        if jitter is None:
            jitter = self.max_messages_per_worker // 10
        return WorkerConfig(handler=self.handler, worker_init=self.worker_init, worker_exit=self.worker_exit,
                            batch_size=self.batch_size, time_limit=self.time_limit, kill_grace=self.kill_grace,
                            max_messages=self.max_messages_per_worker, max_messages_jitter=jitter,
                            max_memory=self.max_memory_per_worker, log_level=self.log_level,
                            log_format=self.log_format, namespace=self.namespace)

    @property
    def effective_crash_limit(self) -> int:
        return self.crash_limit if self.crash_limit is not None else max(10, 2 * self.workers)


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


@dataclass(frozen=True)
class WorkerStatus:
    """A snapshot of one live worker process, for status pages and metrics."""

    worker_id: int
    pid: int
    state: str  # "starting", "ready", "retiring"
    current: bool  # the process new batches of this slot go to
    in_flight: int  # batches submitted and not finished
    running_batch_id: int | None
    batches_done: int


_KILL_TIME_LIMIT = "hard time limit"
_TERM_WAIT = 1.0  # after the stop grace: how long SIGTERM may take before SIGKILL


def _oom_kills() -> int | None:
    """The cgroup v2 ``oom_kill`` counter of this process's cgroup, or None when unreadable."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next((line.split(":", 2)[2].strip() for line in f if line.startswith("0::")), None)
        if rel is None:
            return None
        with open(f"/sys/fs/cgroup{rel}/memory.events") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError, IndexError):
        return None
    return None


def describe_messages(batch: Batch, start: int, end: int) -> str:
    """topic, queue, offset and msg id of messages [start, end) of a batch, for the logs."""
    from rmqrun.remoting.message import decode_message
    records = batch.split_records()
    out = []
    for i in range(max(0, start), min(end, len(records))):
        try:
            msg, _ = decode_message(records[i], broker_name=batch.broker_name, decompress=False)
            out.append(f"message {msg.msg_id} ({msg.topic}, queue {batch.queue_key}, offset {msg.queue_offset})")
        except Exception as exc:  # a record that does not decode is described by its place
            out.append(f"record {i} of batch {batch.batch_id} ({batch.queue_key}; undecodable: {exc})")
    return ", ".join(out) or f"batch {batch.batch_id} of {batch.queue_key}"


def _worker_env() -> dict[str, str]:
    """The supervisor's environment without the variables that carry secrets (ACL keys):
    a handler never has them in reach, nor in ``/proc/<worker>/environ``."""
    return {k: v for k, v in os.environ.items() if k not in SECRET_ENV}


def _pidfd_works() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


_HAS_PIDFD = _pidfd_works()


class _Proc:
    """One worker process and its end of the socket pair (non-blocking)."""

    def __init__(self, pool: "Pool", slot: int, popen: subprocess.Popen, sock: socket.socket,
                 sentinel: int, progress_fd: int) -> None:
        self.pool = pool
        self.progress_fd = progress_fd
        self.progress = progress_mem.map_fd(progress_fd)
        self.skips = progress_mem.SkipRing(self.progress)
        self.slot = slot
        self.popen = popen
        self.pid: int = popen.pid
        self.sock = sock
        self.fd = sock.fileno()
        self.sentinel = sentinel
        self.frames = FrameBuffer()
        self.out = bytearray()
        self.flush_scheduled = False
        self.writer_armed = False
        self.pending: dict[int, Batch] = {}
        self.running: int | None = None
        self.running_since = 0.0
        self.state = "starting"
        self.spawned_at = pool._loop.time()
        self.candidate = False  # spawned by reload(), not yet installed in its slot
        self.stop_sent = False
        self.kill_reason: str | None = None
        self.boot_error: str | None = None
        self.boot_code: int | None = None
        self.batches_done = 0
        self.dead = False
        self.broken = False
        self.eof = False

    # -- writing
    def write(self, parts: list) -> None:
        """Queue bytes for the worker; they leave in one send at the end of this loop iteration.

        Coalescing matters when the supervisor hands out several batches at
        once (one pull split into small batches): one syscall and one wake-up
        of the worker instead of one per batch.
        """
        if self.broken:
            return
        for part in parts:
            self.out += part
        if not self.flush_scheduled and not self.writer_armed:
            self.flush_scheduled = True
            self.pool._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        if self.broken or self.dead:
            self.out.clear()
            return
        try:
            sent = self.sock.send(self.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.broken = True
            self.out.clear()
            return
        del self.out[:sent]
        if self.out and not self.writer_armed:
            self.writer_armed = True
            self.pool._loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        self._flush()
        if not self.out and self.writer_armed:
            self.writer_armed = False
            self.pool._loop.remove_writer(self.fd)

    # -- reading
    def on_readable(self) -> None:
        self._read_once()

    def _read_once(self) -> bool:
        """One recv; False when nothing more is available now."""
        try:
            data = self.sock.recv(1 << 18)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self.eof = True
            self.pool._loop.remove_reader(self.fd)
            return False
        self.frames.feed(data)
        try:
            while (frame := self.frames.next()) is not None:
                self.pool._on_frame(self, frame)
        except WireError as exc:
            logger.error("worker {} (pid {}) sent a malformed frame: {}; killing it", self.slot, self.pid, exc)
            self.kill("protocol error")
            self.eof = True
            self.pool._loop.remove_reader(self.fd)
            return False
        return True

    def drain(self) -> None:
        """Read everything the (dead) worker wrote before it died."""
        while not self.eof and self._read_once():
            pass

    def kill(self, reason: str, sig: int = signal.SIGKILL) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
        try:
            os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        loop = self.pool._loop
        if not self.eof:
            loop.remove_reader(self.fd)
        if self.writer_armed:
            loop.remove_writer(self.fd)
            self.writer_armed = False
        self.sock.close()
        os.close(self.sentinel)
        self.progress.close()
        os.close(self.progress_fd)

    def status(self, current: bool) -> WorkerStatus:
        return WorkerStatus(self.slot, self.pid, self.state, current, len(self.pending), self.running,
                            self.batches_done)


class Pool:
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
        self._wcfg = config.worker_config()
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._state = "new"
        self._slots: list[_Proc] = []
        self._procs: set[_Proc] = set()
        self._where: dict[int, _Proc] = {}
        self._deaths: deque[float] = deque()
        self._leftovers: list[Batch] = []
        self._changed: asyncio.Event | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._reloading = False
        self._oom_seen = _oom_kills() or 0
        #: batches cut short by the last stop() (killed or interrupted), for the log and tests
        self.cut_short: list[Batch] = []
        self.fatal: PoolError | None = None
        #: replacements of workers that died unexpectedly / were recycled (limits), for metrics
        self.restarts = 0
        self.recycles = 0
        limit = config.time_limit
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
        logger.info("pool started: {} workers, handler {}", len(self._slots), self.config.handler)

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
        proc.pending[batch.batch_id] = batch
        self._where[batch.batch_id] = proc
        proc.write(encode_run(batch))

    def live_call(self, batch_id: int) -> progress_mem.LiveCall | None:
        """Where the worker running ``batch_id`` is in it, read from its progress block.

        None when the batch has not started (it waits in a worker's pipe), is not in
        flight, or its worker is dead. For the consume-timeout sweep, which must judge
        a message by when its handler call began, not by when it was handed over.
        """
        proc = self._where.get(batch_id)
        if proc is None or proc.dead or proc.running != batch_id:
            return None
        live = progress_mem.read_live(proc.progress)
        if live is None or live.batch_id != batch_id:
            return None  # STARTED was sent, the block not yet switched to this batch: no call yet
        return live

    def skip(self, batch_id: int) -> bool:
        """Ask the worker holding a batch not to run it (its queue was dropped); True if asked in time.

        Only a batch waiting behind another one in a worker's pipe can be
        skipped; the worker then answers it with every message NOT_RUN.
        """
        proc = self._where.get(batch_id)
        if proc is None or proc.running == batch_id or proc.dead:
            return False
        proc.skips.add(batch_id)
        return True

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
        self.cut_short = []
        for proc in list(self._procs):
            self._retire(proc)
        await self._wait_dead(grace)
        if self._procs:
            logger.warning("{} worker(s) still busy after {:g} s; stopping them now", len(self._procs),
                           round(waited + grace, 1))  # waited: the part of the stop's grace spent before the pool's
            for proc in list(self._procs):
                proc.kill("stop grace expired", signal.SIGTERM)
            await self._wait_dead(_TERM_WAIT)
        if self._procs:
            for proc in list(self._procs):
                proc.kill("stop grace expired")
            await self._wait_dead(10.0)
        leftovers = self._leftovers
        self._leftovers = []
        self.cut_short.extend(leftovers)
        self._finish_stop()
        if self.cut_short:
            logger.warning("pool stopped; {} batch(es) cut short ({} messages), redelivered later: {}",
                           len(self.cut_short), sum(b.count for b in self.cut_short),
                           "; ".join(f"batch {b.batch_id} of {b.queue_key}" for b in self.cut_short))
        else:
            logger.info("pool stopped; every batch finished")
        return leftovers

    # ------------------------------------------------------------------ processes
    def _spawn(self, slot: int) -> _Proc:
        parent, child = socket.socketpair()
        pipe_r = pipe_w = -1
        prog_fd = progress_mem.create_fd()
        try:
            if not _HAS_PIDFD:
                pipe_r, pipe_w = os.pipe()
            fds = (child.fileno(), prog_fd) if pipe_w < 0 else (child.fileno(), prog_fd, pipe_w)
            popen = subprocess.Popen([sys.executable, "-m", "rmqrun.worker", str(child.fileno()), str(prog_fd)],
                                     stdin=subprocess.DEVNULL, pass_fds=fds, close_fds=True, env=_worker_env())
        except BaseException:
            parent.close()
            os.close(prog_fd)
            for fd in (pipe_r, pipe_w):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            child.close()
        if pipe_w >= 0:
            os.close(pipe_w)
            sentinel = pipe_r
        else:
            sentinel = os.pidfd_open(popen.pid)
        parent.setblocking(False)
        proc = _Proc(self, slot, popen, parent, sentinel, prog_fd)
        self._procs.add(proc)
        proc.write([encode(Boot(slot, dataclasses.asdict(self._wcfg), list(sys.path)))])
        self._loop.add_reader(proc.fd, proc.on_readable)
        self._loop.add_reader(proc.sentinel, self._on_sentinel, proc)
        logger.debug("worker {} spawned (pid {})", slot, proc.pid)
        return proc

    def _retire(self, proc: _Proc) -> None:
        if not proc.stop_sent and not proc.dead:
            proc.stop_sent = True
            proc.state = "retiring"
            proc.write([encode(Stop())])

    def _on_frame(self, proc: _Proc, frame: Frame) -> None:
        if isinstance(frame, Done):
            batch = proc.pending.pop(frame.batch_id, None)
            if batch is None:
                logger.error("worker {} (pid {}) finished unknown batch {}", proc.slot, proc.pid, frame.batch_id)
                return
            del self._where[frame.batch_id]
            proc.running = None
            proc.batches_done += 1
            if self._state == "stopping" and Status.NOT_RUN in frame.statuses:
                self.cut_short.append(batch)
            if len(frame.statuses) != batch.count:
                logger.error("worker {} reported {} statuses for batch {} of {} messages", proc.slot,
                             len(frame.statuses), batch.batch_id, batch.count)
            self._emit(self._on_result, BatchResult(batch, proc.slot, proc.pid, frame.statuses, frame.delay_levels,
                                                    frame.queue_offsets, frame.suspend_ms, frame.timed_out,
                                                    frame.error or None, frame.elapsed_us / 1e6))
        elif isinstance(frame, Started):
            proc.running = frame.batch_id
            proc.running_since = self._loop.time()
        elif isinstance(frame, Ready):
            if proc.state == "starting":
                proc.state = "ready"
            self._signal_change()
        elif isinstance(frame, Retiring):
            self._recycle(proc, frame.reason)
        elif isinstance(frame, BootFailed):
            proc.boot_code = frame.exit_code
            proc.boot_error = frame.message
        else:
            logger.error("worker {} sent an unexpected {} frame", proc.slot, type(frame).__name__)

    def _recycle(self, proc: _Proc, reason: str) -> None:
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

    def _on_sentinel(self, proc: _Proc) -> None:
        self._loop.remove_reader(proc.sentinel)
        proc.drain()
        self._reap(proc)

    def _reap(self, proc: _Proc) -> None:
        code = proc.popen.poll()
        if code is None:  # the sentinel fired a moment before the exit status exists
            self._loop.call_later(0.005, self._reap, proc)
            return
        self._on_death(proc, code)

    def _on_death(self, proc: _Proc, code: int) -> None:
        proc.dead = True
        progress = progress_mem.read(proc.progress) if proc.running is not None else None
        if progress is not None and progress.batch_id != proc.running:
            progress = None  # it died after STARTED, before it began recording this batch
        proc.close()
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
        hint = self._oom_hint() if code == -signal.SIGKILL and not proc.kill_reason else ""
        running = next((b for b in batches if b.batch_id == proc.running), None)
        in_call = bool(was_ready and running is not None and progress is not None and progress.in_call
                       and proc.kill_reason is None)
        if not was_ready and proc.boot_error is None:
            proc.boot_error = f"worker {proc.slot} (pid {proc.pid}) exited before it was ready: {what}"
            proc.boot_code = code
        is_current = proc.slot < len(self._slots) and self._slots[proc.slot] is proc
        expected = proc.stop_sent and code == ExitCode.OK
        if expected:
            logger.debug("worker {} (pid {}) exited", proc.slot, proc.pid)
        else:
            logger.warning("worker {} (pid {}) {}{}{}", proc.slot, proc.pid, what, hint,
                           f" holding {len(batches)} batch(es)" if batches else "")
        if in_call and running is not None and progress is not None:
            logger.error("worker {} (pid {}) {}{} inside the handler call on {}", proc.slot, proc.pid, what, hint,
                         describe_messages(running, progress.call_start, progress.call_end))
        timed_out: BatchResult | None = None
        if proc.kill_reason == _KILL_TIME_LIMIT and batches and batches[0].batch_id == proc.running:
            timed_out = self._hard_limit_result(proc, batches.pop(0), progress)
        if self._state == "running" and is_current and self.fatal is None:
            self._replace(proc, code, was_ready, in_call)
        self._signal_change()
        if timed_out is not None:
            self._emit(self._on_result, timed_out)
        if batches:
            if self._state in ("stopping", "stopped", "starting"):
                self._leftovers.extend(batches)
            else:
                started = running.batch_id if running is not None and running in batches else None
                self._emit(self._on_worker_lost, WorkerLost(proc.slot, proc.pid, code, what, batches, started,
                                                            progress if started is not None else None, in_call))

    def _oom_hint(self) -> str:
        """For a SIGKILL rmqrun did not send: the kernel's OOM killer is the usual sender."""
        count = _oom_kills()
        if count is not None and count > self._oom_seen:
            self._oom_seen = count
            return " (OOM-killed: the cgroup's memory.events oom_kill count rose)"
        return " (not sent by rmqrun: possibly the OOM killer)"

    def _replace(self, proc: _Proc, code: int, was_ready: bool, explained: bool = False) -> None:
        if not was_ready and proc.boot_code == ExitCode.BOOT_ERROR:
            self._fail(WorkerBootError(f"a replacement for worker {proc.slot} cannot load the handler: "
                                       f"{proc.boot_error}", code))
            return
        if proc.kill_reason != _KILL_TIME_LIMIT and not explained:
            now = self._loop.time()
            self._deaths.append(now)
            while self._deaths and self._deaths[0] < now - self.config.crash_window:
                self._deaths.popleft()
            limit = self.config.effective_crash_limit
            if len(self._deaths) > limit:
                self._fail(CrashLoopError(
                    f"workers died {len(self._deaths)} times within {self.config.crash_window:g} s "
                    f"(limit {limit}); last: worker {proc.slot} (pid {proc.pid}) {describe_exit(code)}"
                    + (f": {proc.boot_error}" if proc.boot_error else "")
                    + " (deaths counted: at boot or outside a handler call, which no message explains;"
                      " settings crash_limit / crash_window)"))
                return
        try:
            self._slots[proc.slot] = self._spawn(proc.slot)
            self.restarts += 1
        except OSError as exc:  # out of processes or fds: nothing sensible left to do but stop
            self._fail(PoolError(f"cannot start a replacement for worker {proc.slot}: {exc}"))

    def _hard_limit_result(self, proc: _Proc, batch: Batch,
                           progress: progress_mem.Progress | None = None) -> BatchResult:
        """The result of a batch whose worker was killed at the hard limit.

        Messages the worker had finished keep their statuses; the call that hung
        fails (retry / suspend); messages after it never ran (NOT_RUN). Without
        progress, every message fails, as nothing is known to have finished.
        """
        status = Status.SUSPEND if batch.mode is ConsumeMode.ORDERLY else Status.RECONSUME_LATER
        offsets = tuple(batch.queue_offsets())
        n = len(offsets)
        elapsed = self._loop.time() - proc.running_since
        if progress is not None and progress.batch_id == batch.batch_id and progress.in_call:
            done = min(progress.done, n)
            end = min(max(progress.call_end, done + 1), n)
            statuses = progress.statuses[:done] + bytes([status]) * (end - done) + bytes([Status.NOT_RUN]) * (n - end)
            delays = tuple(progress.delay_levels[:done]) + (0,) * (n - done)
        else:
            statuses, delays = bytes([status]) * n, (0,) * n
        return BatchResult(batch, proc.slot, proc.pid, statuses, delays, offsets, -1, True,
                           f"hard time limit: worker {proc.slot} (pid {proc.pid}) killed after {elapsed:.1f} s",
                           elapsed)

    def _fail(self, error: PoolError) -> None:
        if self.fatal is not None:
            return
        self.fatal = error
        logger.critical("worker pool failed: {}", error)
        if self._on_fatal is not None:
            self._emit(self._on_fatal, error)

    def _tick(self) -> None:
        now = self._loop.time()
        hard = self.config.time_limit + self.config.kill_grace if self.config.time_limit > 0 else 0.0
        for proc in list(self._procs):
            if proc.dead or proc.kill_reason:
                continue
            if hard and proc.running is not None and now - proc.running_since > hard:
                logger.error("worker {} (pid {}) still on batch {} after {:.1f} s; killing it (hard time limit)",
                             proc.slot, proc.pid, proc.running, now - proc.running_since)
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

    def _signal_change(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _wait_change(self, timeout: float) -> None:
        assert self._changed is not None
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def _await_ready(self, procs: list[_Proc]) -> None:
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
