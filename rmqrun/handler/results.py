"""What a handler may return, besides ``None``.

These mirror the Java listener statuses, as small frozen dataclasses so a
handler says *what* it wants with the parameters that go with it::

    concurrent mode                          orderly mode
    -------------------------------------    ---------------------------------------
    return None      -> CONSUME_SUCCESS      return None      -> SUCCESS
    raise            -> RECONSUME_LATER      raise            -> SUSPEND_CURRENT_QUEUE_A_MOMENT
    ReconsumeLater(delay_level=0)            SuspendCurrentQueue(ms=-1)
    AckIndex(index, delay_level=0)           Commit() / Rollback()   (manual commit only)

Any other value returned normally (``True``, a string, a count) is success too, as
a Celery task's return value is; ``False`` alone means "not done" and fails the call
like ``ReconsumeLater()`` / ``SuspendCurrentQueue()`` (:func:`rmqrun.handler.outcome.is_plain_success`).
A result of the other mode, a result class instead of an instance, or a coroutine
or generator (the work never ran) is a programming error: the worker fails the call,
so nothing is committed by accident, and logs it with the handler's name and the
queue offsets for every call it fails.

This module imports only the root exception, so ``import rmqrun`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqrun.errors import RmqrunError


class HandlerResult:
    """Base of every explicit handler result (lets the worker type-check quickly)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ReconsumeLater(HandlerResult):
    """Concurrent mode: every message of this call is sent back for a later retry.

    ``delay_level`` follows ``ConsumeConcurrentlyContext.delayLevelWhenNextConsume``:
    0 lets the broker choose (3 + reconsume times), -1 sends the messages
    straight to the dead-letter queue, a positive value picks that delay level
    (1 = 1 s ... 18 = 2 h with the default broker table).
    """

    delay_level: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.delay_level, int) or self.delay_level < -1:
            raise ValueError(f"delay_level must be an int >= -1, got {self.delay_level!r}")


@dataclass(frozen=True, slots=True)
class AckIndex(HandlerResult):
    """Concurrent mode, batch handlers: messages ``[0..index]`` succeeded, the rest are retried.

    ``AckIndex(len(msgs) - 1)`` acknowledges everything, ``AckIndex(-1)``
    nothing (like Java's ``ackIndex``; larger values are clamped to the last
    message). The retried messages use ``delay_level`` as in :class:`ReconsumeLater`.
    """

    index: int
    delay_level: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.index, int) or self.index < -1:
            raise ValueError(f"index must be an int >= -1, got {self.index!r}")
        if not isinstance(self.delay_level, int) or self.delay_level < -1:
            raise ValueError(f"delay_level must be an int >= -1, got {self.delay_level!r}")


@dataclass(frozen=True, slots=True)
class SuspendCurrentQueue(HandlerResult):
    """Orderly mode: put the messages back and pause this queue, then deliver them again first.

    ``ms`` is the pause; -1 means the consumer's ``suspendCurrentQueueTimeMillis``
    (1000 ms by default). The consumer clamps it to 10..30000 ms like Java.
    """

    ms: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.ms, int) or self.ms < -1:
            raise ValueError(f"ms must be an int >= -1, got {self.ms!r}")


@dataclass(frozen=True, slots=True)
class Commit(HandlerResult):
    """Orderly mode with manual commit: commit everything consumed from this queue so far.

    With automatic commit (the default) it counts as a plain success, with a
    warning, as in the Java client.
    """


@dataclass(frozen=True, slots=True)
class Rollback(HandlerResult):
    """Orderly mode with manual commit: put back everything consumed since the last commit.

    The queue is then suspended for the default time and those messages come
    again first. With automatic commit it counts as a success, with a warning.
    """


CONCURRENT_RESULTS = (ReconsumeLater, AckIndex)
ORDERLY_RESULTS = (SuspendCurrentQueue, Commit, Rollback)


class SoftTimeLimitExceeded(RmqrunError):
    """Raised inside a handler when its batch ran past the soft time limit (consumeTimeout).

    An ``Exception`` (as in Celery; an :class:`~rmqrun.errors.RmqrunError`) so a
    handler may catch it to clean up; the call counts as failed. A handler that swallows it and keeps running is
    killed by the supervisor at the hard limit.
    """


class WorkerTerminated(BaseException):
    """Raised inside a handler when its worker gets SIGTERM (stop now).

    A ``BaseException`` so that ``except Exception`` in a handler does not
    stop it; the interrupted messages are reported NOT_RUN and redelivered.
    It is a control-flow signal, not an error, so it stands outside the
    :class:`~rmqrun.errors.RmqrunError` tree on purpose (see :mod:`rmqrun.errors`).
    """
