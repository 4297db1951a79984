"""The run log's status line: the rate over the last interval (not since start), the lag, nouns that agree.

The reported case: ``1000 consumed (1/s)`` twelve minutes after the last message, a lifetime average,
and no word of the lag.
"""

from __future__ import annotations

from rmqrun.supervisor.snapshot import StatusSnapshot
from rmqrun.supervisor.status_line import StatusLine, plural


def snap(consumed: int, lags: list[tuple[int | None, int | None]], workers: int = 2, batches: int = 0,
         failed: int = 0, not_responding: int = 0) -> StatusSnapshot:
    """(broker max offset, consumer offset) per queue, None while not known."""
    queue_lags = tuple(None if high is None or done is None else max(0, high - done) for high, done in lags)
    return StatusSnapshot(consumed, failed, queue_lags, batches, workers, not_responding)


def test_the_rate_is_the_last_interval_s_not_a_lifetime_average() -> None:
    line = StatusLine(started=0.0)
    assert line.text(snap(1000, [(600, 600), (400, 400)]), 10.0).startswith("1000 consumed (100/s now), lag 0, ")
    # twelve minutes later, nothing new: 0/s, where the lifetime average said 1/s
    assert line.text(snap(1000, [(600, 600), (400, 400)]), 730.0).startswith("1000 consumed (0/s now), lag 0, ")
    assert line.text(snap(1050, [(650, 600), (450, 450)]), 740.0).startswith("1050 consumed (5/s now), lag 50, ")


def test_lag_unknown_until_a_queue_has_answered() -> None:
    line = StatusLine(started=0.0)
    assert ", lag ?, " in line.text(snap(0, [(None, None), (None, 3)]), 1.0)
    assert ", lag 7, " in line.text(snap(0, [(None, None), (10, 3)]), 2.0), "the queues known so far"
    assert ", lag 0, 0 failed, 0 queues, " in line.text(snap(0, []), 3.0)


def test_nouns_agree_with_their_counts() -> None:
    one = StatusLine(started=0.0).text(snap(1, [(1, 1)], workers=1, batches=1), 1.0)
    assert one == "1 consumed (1/s now), lag 0, 0 failed, 1 queue, 1 batch in flight, 1 worker"
    two = StatusLine(started=0.0).text(snap(2, [(1, 1), (1, 1)], workers=2, batches=2, failed=1), 1.0)
    assert two.endswith("1 failed, 2 queues, 2 batches in flight, 2 workers")
    assert (plural(0, "batch", "batches"), plural(1, "worker")) == ("0 batches", "1 worker")


def test_workers_not_responding_are_said() -> None:
    """A stopped worker (supervisor/liveness.py) shows in the line until it responds again or is replaced."""
    text = StatusLine(started=0.0).text(snap(5, [(1, 1)], workers=2, not_responding=1), 1.0)
    assert text.endswith("0 batches in flight, 2 workers (1 not responding)"), text
    assert StatusLine(started=0.0).text(snap(5, [(1, 1)]), 1.0).endswith("in flight, 2 workers")
