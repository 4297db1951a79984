"""The supervisor's command signals, each with the pid of whoever sent it.

Why: a handler calling ``os.kill(os.getppid(), SIGTERM)`` (its parent is the
supervisor) used to stop the whole service with exit 0, which systemd's
``Restart=on-failure`` takes for a clean stop; and no line said who sent it.
Python's signal handlers are never told the sender, but ``sigtimedwait``
is: while the supervisor runs, its command signals are blocked in the loop's
thread and one small thread takes them with their ``siginfo``. The pool then
says whether the sender is one of its workers or their descendants.

Blocking is inherited: threads started later block them too (so the kernel
leaves them pending for ``sigtimedwait``), and so do the workers, which
unblock them first thing (:mod:`rmqrun.pipe.procs`). A thread started before
that still has them unblocked; a signal the kernel hands to it goes the old
way, through the event loop's handler, with no sender known. Both paths end
in the same callback, so nothing is lost either way.

Any thread started before :meth:`SignalReceiver.install` keeps them
unblocked, and the kernel may pick it: ``--metrics-port`` resolves its host on
the event loop's resolver thread before the supervisor runs, and every SIGTERM
then lost its sender. ``rmqrun run`` therefore blocks them for the whole
process, before the event loop and any thread exist
(:func:`command_signals_blocked`); one arriving before the receiver is
installed waits, pending, and is then taken like any other.

Embedding programs that start other child processes while a supervisor runs
in them would pass the blocked mask on to those too; so this is opt-in
(``RunSettings.signal_senders``), and ``rmqrun run`` opts in.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from loguru import logger

from rmqrun.pipe.procs import COMMAND_SIGNALS, ProcStat, ancestry

__all__ = ["SignalReceiver", "UNKNOWN_SENDER", "command_signals_blocked"]

#: the sender when the signal came through the event loop's handler, which is not told
UNKNOWN_SENDER = -1
_WAIT_S = 0.2  # how often the waiting thread looks whether it should end


class SignalReceiver:
    """Delivers each command signal as ``deliver(signum, sender_pid, sender_chain)`` on the event loop.

    ``sender_pid`` is :data:`UNKNOWN_SENDER` when the sender could not be read
    (the signal took the event loop's path, or ``with_senders`` is off);
    ``sender_chain`` is the sender and its ancestors, read from /proc the moment
    the signal was taken (empty when unknown or already gone).
    """

    def __init__(self, deliver: Callable[[int, int, tuple[ProcStat, ...]], None], *, with_senders: bool) -> None:
        self._deliver = deliver
        self._with_senders = with_senders and hasattr(signal, "sigtimedwait")
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._old_mask: set[signal.Signals] | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        for sig in COMMAND_SIGNALS:
            loop.add_signal_handler(sig, self._deliver, sig, UNKNOWN_SENDER, ())
        if not self._with_senders:
            return
        self._old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, COMMAND_SIGNALS)
        self._stop.clear()
        self._thread = threading.Thread(target=self._wait_loop, name="rmqrun-signals", daemon=True)
        self._thread.start()

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in COMMAND_SIGNALS:
            loop.remove_signal_handler(sig)
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(2 * _WAIT_S + 1.0)
        self._thread = None
        # the mask as it was before the run: a signal still pending goes where it would have gone then
        if self._old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)
            self._old_mask = None

    def _wait_loop(self) -> None:
        loop = self._loop
        assert loop is not None
        while not self._stop.is_set():
            try:
                info = signal.sigtimedwait(COMMAND_SIGNALS, _WAIT_S)
            except OSError as exc:  # pragma: no cover - EINVAL would mean a broken platform
                logger.error("cannot wait for signals ({}); they go through the event loop", exc)
                return
            if info is None:
                continue
            chain = ancestry(info.si_pid) if info.si_pid > 0 else ()
            try:
                loop.call_soon_threadsafe(self._deliver, info.si_signo, info.si_pid, chain)
            except RuntimeError:  # the loop is closed: the run is over
                return


@contextmanager
def command_signals_blocked() -> Iterator[None]:
    """The command signals blocked in this thread, and so in every thread started inside the block.

    Why: a thread that exists before :meth:`SignalReceiver.install` (an event
    loop's resolver or executor thread) would otherwise take some of them with
    no sender known. On leaving, the mask is what it was; a signal still
    pending then goes where it would have gone.
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, COMMAND_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
