"""The soft time limit of a worker's handler calls: one timer per call, armed for that call's own deadline.

A handler blocked in a C call (``libc.sleep``, a socket read, a driver) is woken by
SIGALRM with EINTR, and most such calls return early instead of being retried; so
the timer must never fire before the deadline of the call it interrupts. Arming it
once per batch and re-arming it from the signal handler for what the current call
had left did exactly that: the first fire, meant for an earlier call, cut the later
call's C call short, the handler returned before its limit, and the message counted
as a success with no warning. Here every call arms a fresh timer (one
``setitimer``, about a microsecond), and a signal is acted on only while a call is
running and has reached its deadline: one that arrives after its call finished
(delivered late, or fired just as the call returned) belongs to no call and is
ignored, so it never reaches the next one.

Nothing is logged from the signal handler (a handler that logs can deadlock on the
logger's lock); the worker logs the warning once the call is over, from
:attr:`CallLimit.fired_offset`.
"""

from __future__ import annotations

import signal
import time

from rmqrun.handler.results import SoftTimeLimitExceeded

#: how much earlier than a call's deadline its alarm may be seen: the deadline is read before the
#: timer is armed, so the timer cannot fire before it; this only absorbs float rounding
ALARM_SLACK_S = 0.001


class CallLimit:
    """The timer of the handler call running now (``limit`` seconds per call; 0 = no limit)."""

    __slots__ = ("limit", "deadline", "offset", "fired_offset")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        #: the monotonic deadline of the call running now; 0 while no call runs (set it so when one returns)
        self.deadline = 0.0
        #: the first queue offset of that call, for the warning
        self.offset = -1
        #: the call whose limit fired and has not been reported yet (-1: none)
        self.fired_offset = -1

    def arm(self, now: float, offset: int) -> None:
        """A call starts at ``now`` (monotonic): its own timer, replacing any earlier call's."""
        self.offset = offset
        self.deadline = now + self.limit
        signal.setitimer(signal.ITIMER_REAL, self.limit)

    def disarm(self) -> None:
        """The batch is over: no call runs and no timer is left armed."""
        self.deadline = 0.0
        if self.limit > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def on_alarm(self) -> None:
        """SIGALRM: raise in the running call if its deadline has come; otherwise the signal is stale."""
        deadline = self.deadline
        if deadline and time.monotonic() >= deadline - ALARM_SLACK_S:
            self.fired_offset = self.offset
            raise SoftTimeLimitExceeded(f"soft time limit ({self.limit:g} s) exceeded")

    def take_fired(self) -> int:
        """The offset of the call whose limit fired (-1: none), cleared so it is reported once."""
        offset, self.fired_offset = self.fired_offset, -1
        return offset
