"""The run log's periodic status line: the rate now and the lag, not a lifetime average.

The line used to divide everything consumed by the time since start, so twelve
minutes after the last message it still said ``1000 consumed (1/s)`` and never
said whether anything was waiting. It now gives the rate since the previous
line (the first one: since the consumer started), the lag summed over the
queues this member holds (the broker's max offset minus the consumer offset,
as ``rmqrun status`` shows it; ``lag ?`` until a queue has answered a pull), and
counts with their nouns in agreement (``1 worker``, ``2 workers``), and the workers
not responding, if any (:mod:`rmqrun.supervisor.liveness`).
"""

from __future__ import annotations

from rmqrun.supervisor.snapshot import StatusSnapshot


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 worker``, ``2 workers``, ``1 batch``, ``2 batches``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_form or noun + 's'}"


class StatusLine:
    """Remembers the previous line's count and time, so each line's rate covers only its own interval."""

    def __init__(self, started: float, consumed: int = 0) -> None:
        self._at = started
        self._consumed = consumed

    def text(self, snap: StatusSnapshot, now: float) -> str:
        consumed = snap.consumed
        rate = (consumed - self._consumed) / max(now - self._at, 1e-6)
        self._at, self._consumed = now, consumed
        lags = snap.lags
        known = [lag for lag in lags if lag is not None]
        lag = str(sum(known)) if known or not lags else "?"
        pop = snap.pop
        held = (f"{plural(len(pop.assignments), 'POP assignment')}, {pop.unacked} un-acked, "
                f"{plural(pop.extensions, 'extension')}, " if pop is not None else "")
        return (f"{consumed} consumed ({rate:.0f}/s now), lag {lag}, {snap.failed} failed, {held}"
                f"{plural(len(lags), 'queue')}, {plural(snap.inflight_batches, 'batch', 'batches')} in flight, "
                f"{plural(snap.workers, 'worker')}"
                + (f" ({snap.not_responding} not responding)" if snap.not_responding else ""))
