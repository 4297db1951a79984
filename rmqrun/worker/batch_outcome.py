"""What one batch comes to in a worker, call by call, before its DONE frame reports it.

Per message a status and a delay level; for the batch its suspend time, whether
a time limit cut it short and its first error; and per failed message the error
of the call it was in, so that the supervisor's failure and dead-letter lines
name each message's own error, not the batch's first (issue #31).
"""

from __future__ import annotations

from rmqrun.pipe.wire import Status


class BatchOutcome:
    """What one batch comes to, filled in call by call and sent back in its DONE frame."""

    __slots__ = ("statuses", "delays", "suspend_ms", "error", "timed_out", "errors")

    def __init__(self, n: int) -> None:
        #: one status per message; NOT_RUN until a call (or a decode error) decides it
        self.statuses = bytearray([Status.NOT_RUN]) * n
        #: delay levels the handler asked for (ReconsumeLater(delay_level=n)), 0 = the broker's
        self.delays = [0] * n
        self.suspend_ms = -1
        #: the first error of the batch, for the log line and the result
        self.error = ""
        self.timed_out = False
        #: each failed message's own error by index (a call's error belongs to the messages of that call)
        self.errors: dict[int, str] = {}

    def fail(self, start: int, end: int, status: int, error: str) -> None:
        """Messages [start, end) end with ``status`` (a failure) and ``error``."""
        self.statuses[start:end] = bytes([status]) * (end - start)
        self.failed(start, end, error)

    def failed(self, start: int, end: int, error: str) -> None:
        """Messages [start, end) failed with ``error`` (the batch's first error stays the batch's)."""
        self.error = self.error or error
        for i in range(start, end):
            self.errors[i] = error
