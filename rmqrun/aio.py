"""Small asyncio helpers shared by the layers.

:func:`wait_for` and :func:`wait_event` replace ``asyncio.wait_for``: before Python 3.12
it can swallow a cancellation that lands just as the awaited thing completes (CPython
gh-86296), and a task cancelled once carries on. That lost the Ctrl-C of ``rmqrun status
--watch`` (the cancellation ``asyncio.run`` turns SIGINT into landed as a connection opened)
and keeps a periodic loop alive after its one cancel. Here the caller waits with
``asyncio.wait``, which always raises the caller's cancellation.
:func:`cancel_and_wait` still cancels again until tasks are really done: code outside rmqrun
(a user's handler, a library) may swallow one.

:func:`stop_on_signals` is how a command that runs until stopped hears SIGINT and SIGTERM:
an event the running loop sets, never a ``KeyboardInterrupt`` raised wherever the main
thread happens to be.

:func:`call_after_writes` and :func:`after_writes_done` are one idea: work put
two loop steps later, behind a connection's end-of-turn write of the requests
this step queued (the puller's hand-over of a pull, the POP service's lane
flush), and a wait that sees all such work through.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any, Awaitable, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

#: What a command that runs until stopped stops on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw``, or ``asyncio.TimeoutError`` after ``timeout`` seconds (None: no limit), ``aw`` then
    cancelled and waited for, as ``asyncio.wait_for`` does; a cancellation of the caller is never lost.

    ``aw`` runs as a task of its own, watched with ``asyncio.wait``, which raises the caller's cancellation
    whatever ``aw`` did meanwhile (a result that came with it is dropped). Not ``asyncio.timeout``: it cancels
    the *current task* at the deadline, and a request handler the connection runs on its reader
    (``Connection._serve_now``) would have it cancel the reader; Python 3.12's ``wait_for`` is built on it.
    """
    inner = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({inner}, timeout=timeout)
    except asyncio.CancelledError:
        inner.cancel()
        raise
    if not done:
        await cancel_and_wait([inner])
        raise asyncio.TimeoutError
    return inner.result()


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds have passed; whether it is set."""
    if not event.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(event.wait(), timeout)
    return event.is_set()


@contextlib.contextmanager
def stop_on_signals(signals: Iterable[int] = STOP_SIGNALS) -> Iterator[asyncio.Event]:
    """An event the running loop sets when one of ``signals`` arrives, for the block's duration (the
    handlers are removed after it: a signal then does what it did before)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    before = {sig: signal.getsignal(sig) for sig in signals}
    for sig in before:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)  # puts the default back, not necessarily what was there
            if handler is not None:
                signal.signal(sig, handler)


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], *, retry_every: float = 0.5) -> None:
    """Cancel ``tasks`` and wait until every one has finished, cancelling again if one goes on."""
    tasks = list(tasks)  # walked twice: a generator would leave the outcomes unretrieved
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry_every)
    retrieve(tasks)


def retrieve(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Mark the outcome of every done task as seen: asyncio then does not log an exception nobody asked for
    ("exception was never retrieved") when the task is collected."""
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()


async def run_until_set(stop: asyncio.Event, aw: Awaitable[T]) -> "asyncio.Future[T]":
    """Run ``aw`` until it ends or ``stop`` is set; then it is cancelled and waited for. Returns its task, done:
    ``cancelled()`` when the stop cut it short, else its result or exception."""
    work = asyncio.ensure_future(aw)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not work.done():
            await cancel_and_wait([work])
    return work


def call_after_writes(callback: Callable[..., object], *args: Any) -> None:
    """Run ``callback(*args)`` two loop steps from now: after the callbacks this step scheduled, among them a
    connection's end-of-turn write of the frames queued in it (``Connection._queue``), so the requests this step
    made are on the wire before ``callback`` runs. Callbacks scheduled so run in the order they were."""
    loop = asyncio.get_running_loop()
    loop.call_soon(loop.call_soon, callback, *args)


async def after_writes_done() -> None:
    """Return once every callback that :func:`call_after_writes` scheduled before this call has run (two steps
    of the caller: callbacks run in the order they were scheduled)."""
    for _ in range(2):
        await asyncio.sleep(0)
