"""Say a repeating failure once per interval, not on every retry.

A consumer retries through an outage on fixed periods (offset commits every
5 s per queue, routes every 30 s, heartbeats, name-server requests), and each
retry fails the same way. Logging every one buries the first, useful line and
fills the journal. :class:`LogLimit` answers, per key, whether this occurrence
is the one to log at its level; the others go to DEBUG, and the next line that
is logged says how many were held back.
"""

from __future__ import annotations

import time
from typing import Callable, Hashable


class LogLimit:
    """At most one line per key per ``every`` seconds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}

    def allow(self, key: Hashable) -> int | None:
        """None when this occurrence is held back; else how many were held back since the last allowed one."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)

    def reset(self, key: Hashable) -> None:
        """The failure is over: the next one is logged at once."""
        self._last.pop(key, None)
        self._held.pop(key, None)


def held_note(held: int) -> str:
    """The suffix that tells how many identical lines were held back."""
    return f" ({held} more like it since the last report)" if held else ""
