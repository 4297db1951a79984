"""The soft time limit of a worker's handler calls: a timer for each call's own deadline, never an earlier one.

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

The one exception to "a fresh timer per call" costs nothing in that guarantee: a call
whose own deadline is no later than the timer already armed keeps that timer. Each
timer is armed for its call's limit plus a small grace (:data:`REARM_GRACE_S`, at
most 1 % of the limit and a tenth of the kill grace), so the many short calls of a
batch that start within the grace of the call that armed it (a no-op batch of 32:
one arm instead of 32 ``setitimer`` calls; 1 ms calls: one in 50 instead of one in
3, where a ``setitimer`` is ~0.5 us against the worker's ~8 us per message) share
it; it still fires no earlier than the deadline of the call it interrupts, and at
most the grace after it (50 ms of the default 15-minute limit). A call that
starts later, or after the timer has fired, arms its own.

Nothing is logged from the signal handler (a handler that logs can deadlock on the
logger's lock); the worker logs the warning once the call is over, from
:attr:`CallLimit.fired_offset`.
"""

from __future__ import annotations

import math
import signal
import time

from rmqrun.handler.results import SoftTimeLimitExceeded

#: how much earlier than a call's deadline its alarm may be seen: the deadline is read before the
#: timer is armed, so the timer cannot fire before it; this only absorbs float rounding
ALARM_SLACK_S = 0.001
#: how long after a call's deadline its alarm may come at most, so that calls starting within this of each
#: other share one timer (capped at 1 % of the limit and a tenth of the kill grace, so the soft limit
#: still comes well before the supervisor's kill): never earlier than the deadline, only this much later
REARM_GRACE_S = 0.05


class CallLimit:
    """The timer of the handler call running now (``limit`` seconds per call; 0 = no limit)."""

    __slots__ = ("limit", "deadline", "offset", "fired_offset", "grace", "expires")

    def __init__(self, limit: float, kill_grace: float = math.inf) -> None:
        self.limit = limit
        self.grace = min(REARM_GRACE_S, limit / 100, kill_grace / 10)
        #: the monotonic time no earlier than which the armed timer fires; 0 while none is armed
        self.expires = 0.0
        #: the monotonic deadline of the call running now; 0 while no call runs (set it so when one returns)
        self.deadline = 0.0
        #: the first queue offset of that call, for the warning
        self.offset = -1
        #: the call whose limit fired and has not been reported yet (-1: none)
        self.fired_offset = -1

    def arm(self, now: float, offset: int) -> None:
        """A call starts at ``now`` (monotonic): a timer that fires no earlier than its deadline.

        The timer armed for an earlier call is kept when it fires no earlier than this
        call's deadline (``now`` is read before the ``setitimer`` that armed it, so it
        expires no earlier than ``expires``); otherwise a fresh one replaces it.
        """
        self.offset = offset
        deadline = self.deadline = now + self.limit
        if deadline > self.expires:
            self.expires = deadline + self.grace
            signal.setitimer(signal.ITIMER_REAL, self.limit + self.grace)

    def disarm(self) -> None:
        """The batch is over: no call runs and no timer is left armed."""
        self.deadline = 0.0
        if self.limit > 0:
            self.expires = 0.0
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
