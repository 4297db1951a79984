"""One worker process as the supervisor sees it: spawn, socket buffering, death detection.

Nothing here decides what a frame or a death means; that is the pool's
business. A :class:`WorkerProcess` is given the event loop and two
callbacks, ``on_frame(proc, frame)`` for each frame the worker sends and
``on_exit(proc, exit_code)`` once, after the process died and everything it
wrote before dying was read. It never reaches back into the pool.

The socket is non-blocking: reads run from ``loop.add_reader``; writes are
gathered until the end of the loop iteration and sent in one syscall, the
rest finished with ``add_writer``. Death is watched with a pidfd (Linux >=
5.3), else with a pipe whose write end only the child holds
(multiprocessing's sentinel trick). Why the worker is started with
fork+exec of ``python -m rmqrun.worker`` rather than fork or
multiprocessing is told in :mod:`rmqrun.supervisor.pool`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

from loguru import logger

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import Batch, Frame, FrameBuffer, WireError
from rmqrun.remoting.security import SECRET_ENV

__all__ = ["WorkerProcess", "WorkerStatus", "process_stopped", "spawn_worker"]


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
    #: handler calls in progress now (up to worker_concurrency with the threads / asyncio classes)
    calls: int = 0


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

OnFrame = Callable[["WorkerProcess", Frame], None]
OnExit = Callable[["WorkerProcess", int], None]


class WorkerProcess:
    """One worker process and its end of the socket pair (non-blocking)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, slot: int, popen: subprocess.Popen, sock: socket.socket,
                 sentinel: int, progress_fd: int, on_frame: OnFrame, on_exit: OnExit, infers: bool = False) -> None:
        self._loop = loop
        self._on_frame = on_frame
        self._on_exit = on_exit
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
        #: the batches it announced (STARTED) and has not answered: batch id -> when last announced, oldest
        #: first (one at most for the process class; up to its lanes for threads / asyncio). Read it through
        #: :meth:`begun`, which first settles :attr:`due`.
        self.started: dict[int, float] = {}
        #: a process worker (one batch at a time, in order) sends no STARTED of its own as a batch begins:
        #: its head batch is due from the moment the previous one's DONE arrived, or the batch was handed
        #: to it idle, or it became ready (``due_since``); it counts as begun once its progress block names
        #: it (the worker writes the id there as it begins it), from ``due_since``
        self.infers = infers
        self.due: int | None = None
        self.due_since = 0.0
        #: the batch a cut was last asked for (:meth:`rmqrun.supervisor.pool.Pool.cut`)
        self.cut_batch: int | None = None
        #: the batch it was killed for at the hard time limit
        self.overran: int | None = None
        self.state = "starting"
        self.spawned_at = loop.time()
        self.candidate = False  # spawned by reload(), not yet installed in its slot
        self.stop_sent = False
        self.kill_reason: str | None = None
        self.boot_error: str | None = None
        self.boot_code: int | None = None
        self.batches_done = 0
        self.dead = False
        self.broken = False
        self.eof = False
        #: bytes read from the worker so far: any frame is a sign of life (:mod:`rmqrun.supervisor.liveness`)
        self.received = 0
        #: killed for a reason no message explains and no crash is (a stuck worker): not a crash-loop death
        self.kill_explained = False

    @property
    def running(self) -> int | None:
        """The oldest batch it runs (None: none); a process worker runs one at a time."""
        return next(iter(self.begun()), None)

    @property
    def running_since(self) -> float:
        """When the oldest batch it runs was last announced."""
        return next(iter(self.begun().values()), 0.0)

    def expect_next(self, now: float) -> None:
        """A process worker will begin its head batch from ``now`` on: the one before it was answered, it
        got the batch idle, or it became ready. Nothing for the threads / asyncio classes (they say STARTED)."""
        if self.infers and self.pending and self.state != "starting":
            head = next(iter(self.pending))
            if head not in self.started:
                self.due, self.due_since = head, now

    def begun(self) -> dict[int, float]:
        """:attr:`started`, with the due batch in it once the worker has begun it (its progress block names it)."""
        due = self.due
        if due is not None and not self.dead and progress_mem.find_lane(self.progress, due) is not None:
            self.started[due] = self.due_since
            self.due = None
        return self.started

    def watch(self) -> None:
        """Start reading the socket and watching for the death (once the caller has the object)."""
        self._loop.add_reader(self.fd, self.on_readable)
        self._loop.add_reader(self.sentinel, self._on_sentinel)

    # -- writing
    def write(self, parts: list) -> None:
        """Queue bytes for the worker; they leave in one send at the end of this loop iteration.

        Coalescing matters when the supervisor hands out several batches at
        once (one pull split into small batches): one syscall and one wake-up
        of the worker instead of one per batch.
        """
        if self.broken:
            return
        self.out += b"".join(parts)  # one copy into the buffer, not a Python step per record
        if not self.flush_scheduled and not self.writer_armed:
            self.flush_scheduled = True
            self._loop.call_soon(self._flush)

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
            self._loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        self._flush()
        if not self.out and self.writer_armed:
            self.writer_armed = False
            self._loop.remove_writer(self.fd)

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
            self._loop.remove_reader(self.fd)
            return False
        self.received += len(data)
        self.frames.feed(data)
        try:
            while (frame := self.frames.next()) is not None:
                self._on_frame(self, frame)
        except WireError as exc:
            logger.error("worker {} (pid {}) sent a malformed frame: {}; killing it", self.slot, self.pid, exc)
            self.kill("protocol error")
            self.eof = True
            self._loop.remove_reader(self.fd)
            return False
        return True

    def drain(self) -> None:
        """Read everything the (dead) worker wrote before it died."""
        while not self.eof and self._read_once():
            pass

    # -- death
    def _on_sentinel(self) -> None:
        self._loop.remove_reader(self.sentinel)
        self.drain()
        self._reap()

    def _reap(self) -> None:
        code = self.popen.poll()
        if code is None:  # the sentinel fired a moment before the exit status exists
            self._loop.call_later(0.005, self._reap)
            return
        self._on_exit(self, code)

    def kill(self, reason: str, sig: int = signal.SIGKILL, *, explained: bool = False) -> None:
        if self.kill_reason is None:
            self.kill_reason = reason
            self.kill_explained = explained
        try:
            os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- liveness (read by :mod:`rmqrun.supervisor.liveness`)
    def life_sign(self) -> tuple[int, bytes, int]:
        """What changes whenever the worker does anything: bytes it sent, the head of its progress
        block (the batch, the call, how far), and its claim. Equal twice: it did nothing in between."""
        return self.received, progress_mem.heads(self.progress), progress_mem.read_claim(self.progress)

    def in_call(self) -> bool:
        """Whether the worker is inside a handler call of a batch it runs (the progress block says so)."""
        for batch_id in self.begun():
            live = progress_mem.live_batch(self.progress, batch_id)
            if live is not None and live.in_call:
                return True
        return False

    def unclaimed(self) -> list[int]:
        """Batches in its pipe it has not reached yet (after the one it runs or claimed), in order."""
        ids = list(self.pending)
        reached = [ids.index(b) for b in (*self.begun(), progress_mem.read_claim(self.progress)) if b in self.pending]
        return ids[max(reached) + 1:] if reached else ids

    def stopped(self) -> bool:
        return process_stopped(self.pid)

    def cpu_time(self) -> int | None:
        """CPU time its main thread has used (clock ticks; None where unknown): moving, it works on something
        (a huge batch to decode, a garbage collection); still, it does nothing."""
        stat = _main_thread_stat(self.pid)
        if stat is None:
            return None
        fields = stat[stat.rfind(b")") + 2:].split()
        try:
            return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        except (IndexError, ValueError):
            return None

    def close(self) -> None:
        loop = self._loop
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
                            self.batches_done, 0 if self.dead else progress_mem.read_calls(self.progress))


def _main_thread_stat(pid: int) -> bytes | None:
    """/proc's stat line of a process's main thread (its state and CPU time), None where there is none."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
            return f.read()
    except OSError:
        return None


def process_stopped(pid: int) -> bool:
    """Whether a process is stopped (SIGSTOP, a debugger): /proc's state T or t (False where unknown)."""
    stat = _main_thread_stat(pid)
    return stat is not None and stat[stat.rfind(b")") + 2:][:1] in (b"T", b"t")


def spawn_worker(loop: asyncio.AbstractEventLoop, slot: int, boot_frame: bytes, on_frame: OnFrame,
                 on_exit: OnExit, lanes: int = 1, infers: bool = False) -> WorkerProcess:
    """Start ``python -m rmqrun.worker`` for a slot, queue its boot frame and start watching it.

    The child inherits only its socket, its progress block and (without
    pidfds) the write end of the death pipe; every fd is closed on any
    failure, so a spawn that fails (out of processes or fds) leaks nothing.
    """
    parent, child = socket.socketpair()
    pipe_r = pipe_w = -1
    prog_fd = progress_mem.create_fd(lanes)  # a lane per batch it may run at once
    try:
        if not _HAS_PIDFD:
            pipe_r, pipe_w = os.pipe()
        fds = (child.fileno(), prog_fd) if pipe_w < 0 else (child.fileno(), prog_fd, pipe_w)
        popen = subprocess.Popen([sys.executable, "-m", "rmqrun.worker", str(child.fileno()), str(prog_fd),
                                  str(os.getpid())],
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
    proc = WorkerProcess(loop, slot, popen, parent, sentinel, prog_fd, on_frame, on_exit, infers)
    proc.write([boot_frame])
    proc.watch()
    return proc
