"""What a handler's return value means, before it becomes a status anywhere.

Concurrent mode needs no wire type: a call over ``count`` messages ends as
"the first ``acked`` succeeded, the rest retry with ``delay_level``", which the
worker turns into pipe statuses and the Spark runner into a report, so both
behave the same. Orderly results map onto the pipe's statuses and live with
the worker (:mod:`rmqrun.worker.handler`); the refusal of a bad value is shared
(:func:`bad_result`), so its wording is the same in both modes.

The functions are pure so every return type can be unit-tested without processes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from rmqrun.errors import RmqrunError
from rmqrun.handler.results import CONCURRENT_RESULTS, ORDERLY_RESULTS, AckIndex, HandlerResult, ReconsumeLater


class BadResultError(RmqrunError, TypeError):
    """A handler returned something that is not a valid result for its mode."""


@dataclass(frozen=True, slots=True)
class ConcurrentOutcome:
    """Messages ``[0, acked)`` of the call succeeded; the rest are retried with ``delay_level``."""

    acked: int
    delay_level: int = 0


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def bad_result(value: Any, handler_ref: str, orderly: bool) -> BadResultError:
    """The error for a return value that is not a result of the handler's mode (the caller raises it)."""
    who = f"handler '{handler_ref}'"
    if isinstance(value, type) and issubclass(value, HandlerResult):
        return BadResultError(f"{who} returned the class {value.__name__}; return an instance: {value.__name__}()")
    if orderly and isinstance(value, CONCURRENT_RESULTS):
        return BadResultError(f"{who} returned {value!r}, a concurrent-mode result, but its queue is consumed "
                              f"orderly; return SuspendCurrentQueue() to have the messages delivered again")
    if not orderly and isinstance(value, ORDERLY_RESULTS):
        return BadResultError(f"{who} returned {value!r}, an orderly-mode result, but its queue is consumed "
                              f"concurrently; return ReconsumeLater() or AckIndex(n)")
    if inspect.isawaitable(value) or inspect.isgenerator(value) or inspect.isasyncgen(value):
        return BadResultError(f"{who} returned {_describe(value)}: its work never ran (workers call plain "
                              "functions; do not return a coroutine or a generator)")
    expected = ("SuspendCurrentQueue, Commit, Rollback" if orderly else "ReconsumeLater, AckIndex")
    return BadResultError(f"{who} returned {_describe(value)}; expected None or one of {expected}")


def is_plain_success(value: Any) -> bool:
    """The rule for what is not an explicit result: a handler that returns normally has done its work.

    ``None``, ``True`` and any other value (a string, a count, a dict the handler
    computed) mean success, as a Celery, RQ or dramatiq task's return value does:
    only an exception, an explicit result or ``False`` fail a message. ``False``
    is the one plain value read as "not done" (retry later): failing it costs a
    retry, taking it for success would lose a message its handler said it did
    not handle. Never a success: a coroutine, generator or other awaitable (the
    work never ran) or a result class instead of an instance (``return
    ReconsumeLater``), which :func:`bad_result` refuses.
    """
    if value is None or value is True:
        return True
    if value is False or isinstance(value, HandlerResult):
        return False
    if isinstance(value, type) and issubclass(value, HandlerResult):
        return False
    return not (inspect.isawaitable(value) or inspect.isgenerator(value) or inspect.isasyncgen(value))


def map_concurrent(value: Any, count: int, handler_ref: str) -> ConcurrentOutcome:
    """A concurrent-mode return value for a call over ``count`` messages (raises BadResultError).

    :func:`is_plain_success` values acknowledge all; ``False`` retries all as ``ReconsumeLater()`` does.
    """
    if is_plain_success(value):
        return ConcurrentOutcome(count)
    if value is False:
        return ConcurrentOutcome(0)
    if isinstance(value, ReconsumeLater):
        return ConcurrentOutcome(0, value.delay_level)
    if isinstance(value, AckIndex):
        return ConcurrentOutcome(min(value.index + 1, count), value.delay_level)
    raise bad_result(value, handler_ref, orderly=False)
