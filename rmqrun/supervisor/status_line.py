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

from rmqrun.supervisor.snapshot import SupervisorSnapshot


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

    def text(self, snap: SupervisorSnapshot, now: float) -> str:
        consume = snap.consume
        consumed = consume.consumed if consume is not None else 0
        rate = (consumed - self._consumed) / max(now - self._at, 1e-6)
        self._at, self._consumed = now, consumed
        failed = consume.failed if consume is not None else 0
        queues = consume.queues if consume is not None else ()
        known = [q.lag for q in queues if q.lag is not None]
        lag = str(sum(known)) if known or not queues else "?"
        pop = consume.pop if consume is not None else None
        held = (f"{plural(len(pop.assignments), 'POP assignment')}, {pop.unacked} un-acked, "
                f"{plural(pop.extensions, 'extension')}, " if pop is not None else "")
        return (f"{consumed} consumed ({rate:.0f}/s now), lag {lag}, {failed} failed, {held}"
                f"{plural(len(queues), 'queue')}, {plural(snap.inflight_batches, 'batch', 'batches')} in flight, "
                f"{plural(snap.workers, 'worker')}"
                + (f" ({snap.health.not_responding} not responding)" if snap.health.not_responding else ""))
