"""Commit-log fsync in a dedicated thread, with group commit.

A waiter asks "make everything below offset X durable". The thread snapshots the
write position, fsyncs up to it, then wakes *every* waiter whose X is covered, so
one fsync serves all appends written before it started, however many there were
(group commit). The asyncio loop never blocks on the disk: it awaits a future that
the thread resolves through ``call_soon_threadsafe``.

Without waiters the thread still fsyncs every ``interval`` (ASYNC flush mode, and
plain ``put`` calls in SYNC mode). If an fsync fails the flusher is *fenced*: every
pending and future waiter gets :class:`StoreIOError`, because after a failed fsync
the kernel may have dropped the dirty pages and retrying would report false success.
"""

from __future__ import annotations

from loguru import logger

import asyncio
import threading
from dataclasses import dataclass
from typing import Callable

from .errors import StoreIOError
from .segmented_file import SegmentedFile




@dataclass(eq=False)
class _Waiter:
    """Someone waiting for ``offset``: an asyncio future on ``loop``, or a thread's event."""

    offset: int
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[None] | None = None
    event: threading.Event | None = None
    error: BaseException | None = None


def _resolve_futures(futures: list[asyncio.Future[None]], exc: BaseException | None) -> None:
    for fut in futures:
        if not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)


def _wake(waiters: list[_Waiter], exc: BaseException | None) -> None:
    """Wake waiters; one ``call_soon_threadsafe`` per event loop, not one per waiter."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for w in waiters:
        if w.loop is not None and w.future is not None:
            by_loop.setdefault(w.loop, []).append(w.future)
        elif w.event is not None:
            w.error = exc
            w.event.set()
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve_futures, futures, exc)
        except RuntimeError:  # loop closed meanwhile: nobody is waiting any more
            pass


class CommitLogFlusher:
    def __init__(self, file: SegmentedFile, write_pos: Callable[[], int], interval_s: float) -> None:
        self._file = file
        self._write_pos = write_pos
        self._interval = interval_s
        self._cond = threading.Condition()
        self._waiters: list[_Waiter] = []
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        #: Counters for tests and the benchmark: fsync rounds and waiters served.
        self.fsync_count = 0
        self.waiters_served = 0

    @property
    def flushed_pos(self) -> int:
        return self._file.synced_pos

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="store-commitlog-flush", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Flush what is written, wake everyone, and end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # -- requests ------------------------------------------------------------------
    def _request(self, waiter: _Waiter) -> None:
        with self._cond:
            if self.error is not None:
                exc: BaseException | None = StoreIOError(f"commit log flush failed earlier: {self.error}")
            elif waiter.offset <= self._file.synced_pos:
                exc = None
            elif self._stopping or self._thread is None:
                exc = StoreIOError("commit log flusher is not running")
            else:
                self._waiters.append(waiter)
                self._cond.notify()
                return
        _wake([waiter], exc)

    async def wait_for(self, offset: int) -> None:
        """Await durability of every commit-log byte below ``offset`` (group-committed)."""
        if offset <= self._file.synced_pos and self.error is None:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._request(_Waiter(offset, loop=loop, future=fut))
        await fut

    def wait_blocking(self, offset: int, timeout: float | None = None) -> None:
        """Thread version of :meth:`wait_for` (checkpoint thread, close, non-async callers)."""
        waiter = _Waiter(offset, event=threading.Event())
        self._request(waiter)
        assert waiter.event is not None
        if not waiter.event.wait(timeout):
            raise TimeoutError(f"commit log not flushed to {offset} within {timeout}s")
        if waiter.error is not None:
            raise waiter.error

    # -- the thread ------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._waiters and not self._stopping:
                    self._cond.wait(self._interval)
                stopping = self._stopping
            truncations = self._file.truncations  # before the target: see SegmentedFile.sync
            target = self._write_pos()
            if self.error is None and target > self._file.synced_pos:
                try:
                    self._file.sync(target, truncations)
                    self.fsync_count += 1
                except OSError as exc:
                    logger.error("commit log fsync failed; refusing further writes: {}", exc)
                    self.error = exc
            elif self.error is None:
                self._file.sync(self._file.synced_pos)  # new directories only
            self._wake_ready()
            if stopping:
                with self._cond:
                    rest, self._waiters = self._waiters, []
                _wake(rest, StoreIOError("store closed before the flush completed"))
                return

    def _wake_ready(self) -> None:
        with self._cond:
            if self.error is not None:
                ready, self._waiters = self._waiters, []
                exc: BaseException | None = StoreIOError(f"commit log flush failed: {self.error}")
            else:
                synced = self._file.synced_pos
                ready = [w for w in self._waiters if w.offset <= synced]
                self._waiters = [w for w in self._waiters if w.offset > synced]
                exc = None
        self.waiters_served += len(ready)
        if ready:
            _wake(ready, exc)
