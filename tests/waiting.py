"""The one way a test waits: poll for the event the assertion is about, within a bound that only ends a failure.

A test that sleeps and then looks passes on an idle machine and fails on a busy one; a test that waits
for the state it asserts (a counter reaching its value, a log line, a held pull, a file) passes as soon as
the state is there, however slow the machine. ``timeout`` is never the synchronisation: it only turns a
state that never comes into a failure that names what was awaited and the last value seen, so keep it
generous (the default is 30 s) and never tune it to how fast the code usually is.

``eventually`` polls from plain code (threads, subprocesses); ``eventually_async`` polls from a coroutine
without blocking its event loop (the embedded broker or the consumer under test may run on that loop),
and accepts a condition that is a coroutine function too.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: long enough for any state the code reaches on a loaded 2-core machine; a failure, not a pace
DEFAULT_TIMEOUT_S = 30.0
#: how long a test kit's producer waits for the broker's answer to one send. The client's own default
#: (``SEND_TIMEOUT``, Java's 3 s ``sendMsgTimeout``) is a production pace, not a bound for a test: the
#: embedded broker flushes SYNC and answers a send after its fsync, and on a disk shared with other work one
#: fsync can take seconds (the broker itself answers FLUSH_DISK_TIMEOUT after ``sync_flush_timeout_ms``, 5 s).
#: A kit sending the messages a test is about waits for that answer instead; a failure, not a pace.
SEND_ANSWER_TIMEOUT_S = DEFAULT_TIMEOUT_S
#: how often the condition is read: often enough to add nothing noticeable, rare enough to cost no CPU
DEFAULT_INTERVAL_S = 0.02


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {what} (last value: {last!r})")


def eventually(cond: Callable[[], T], *, what: str = "the condition", timeout: float = DEFAULT_TIMEOUT_S,
               interval: float = DEFAULT_INTERVAL_S) -> T:
    """Call ``cond`` until it returns something truthy and return that; AssertionError after ``timeout``.

    ``cond`` may also raise AssertionError while the state is not there yet (a helper that asserts):
    that counts as "not yet", and the last such error is chained to the timeout's.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    error: AssertionError | None = None
    while True:
        try:
            last = cond()
            error = None
        except AssertionError as exc:
            last, error = exc, exc
        if last and error is None:
            return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last) from error
        time.sleep(interval)


async def eventually_async(cond: Callable[[], T | Awaitable[T]], *, what: str = "the condition",
                           timeout: float = DEFAULT_TIMEOUT_S, interval: float = DEFAULT_INTERVAL_S) -> T:
    """:func:`eventually` for a coroutine: sleeps with ``asyncio.sleep`` and awaits an awaitable result."""
    deadline = time.monotonic() + timeout
    last: object = None
    error: AssertionError | None = None
    while True:
        try:
            value = cond()
            last = await value if inspect.isawaitable(value) else value
            error = None
        except AssertionError as exc:
            last, error = exc, exc
        if last and error is None:
            return last  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last) from error
        await asyncio.sleep(interval)
