"""What keeps a worker, and what its handler starts, from outliving or impersonating it.

Set up once at boot, before the handler is imported:

* **its own process group**: the worker leads a group, so everything its
  handler starts is in it; when the worker is gone the supervisor kills what
  is left of the group (:mod:`rmqrun.supervisor.lineage`), and a signal sent
  to the supervisor's group (a terminal's ^C) no longer reaches the workers,
  which the supervisor stops itself. TTIN/TTOU are ignored: a background group
  writing to a terminal with ``tostop`` would otherwise be stopped.
* **death with the supervisor**: ``PR_SET_PDEATHSIG`` = SIGKILL, so a worker
  stuck in a handler call (where it reads no pipe and would never see the
  supervisor go) dies the moment its supervisor does, ``kill -9`` included.
  If the supervisor died before the flag was set, the worker leaves at once.
* **a title**: ``rmqrun: worker N [module:func]`` in ``ps``/``top`` instead of
  ``python3 -m rmqrun.worker 14 15``.
* **forked copies**: a handler that calls ``os.fork()`` makes a copy of the
  worker, with the worker's pipe and progress block. The copy must never talk
  to the supervisor: in it the pipe is pointed at ``/dev/null``, its progress
  writer leaves the process (exit 0) the moment the copy returns into worker
  code (it is called before every handler call and after the last), SIGTERM
  is back to its default (it would otherwise raise ``WorkerTerminated`` and
  run worker code) and its title says what it is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
from typing import Any, NoReturn

from rmqrun.pipe import procs
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import ExitCode

__all__ = ["protect", "die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """Ask the kernel for SIGKILL when the parent dies; False if the platform cannot.

    Exits at once (LOST_SUPERVISOR) when the parent is already gone: the flag
    would never fire then, since we were re-parented before it was set.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols: libc is there (no ldconfig run)
        ok = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if parent_pid and os.getppid() != parent_pid:
        os._exit(ExitCode.LOST_SUPERVISOR)
    return ok


class _ForkedCopy(progress_mem.Writer):
    """The progress writer of a forked copy of the worker: the copy is back in worker code, so it leaves."""

    __slots__ = ()

    def begin(self, batch_id: int) -> None:
        _leave()

    def call(self, *args: Any) -> None:
        _leave()

    def publish(self, *args: Any) -> None:
        _leave()


def _leave() -> NoReturn:
    os.write(2, f"rmqrun: a process forked by a handler (pid {os.getpid()}) returned into the worker's code; "
                f"it exits here (a forked child should end with os._exit)\n".encode())
    os._exit(0)


def protect(worker_id: int, handler: str, parent_pid: int, sock: socket.socket,
            progress: progress_mem.Writer | None) -> None:
    """Everything in the module docstring, in that order; call once at boot."""
    try:
        os.setpgid(0, 0)
    except OSError:  # already a group leader (started with process_group=0), or not allowed: keep the group
        pass
    for sig in (signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    die_with_parent(parent_pid)
    procs.set_title(procs.worker_title(worker_id, handler))
    fork_title = f"rmqrun: fork of worker {worker_id} [{handler}]"
    sock_fd = sock.fileno()

    def in_forked_child() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sock_fd)
        os.close(null)
        if progress is not None:
            progress.mm = _private_copy(progress.mm)
            progress.__class__ = _ForkedCopy
        procs.set_title(fork_title)

    os.register_at_fork(after_in_child=in_forked_child)


def _private_copy(mm: Any) -> bytearray:
    """The copy's own bytes, so nothing it still writes lands in the block the supervisor reads."""
    return bytearray(len(mm))
