"""The consume-status windows (GET_CONSUMER_RUNNING_INFO's TPS and failed-in-the-last-hour figures) stay small.

Found by scripts/bench_report.py's memory run: one entry per pull and per consumed batch, kept for an hour
in the failed-messages window, made the supervisor's RSS grow for as long as it consumed.
"""

from __future__ import annotations

from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.running_info import HOUR_S, MINUTE_S, ConsumeStatusTable, TopicStatus, _Window
from rmqrun.model import Status


def test_a_busy_hour_window_holds_one_entry_per_second_and_the_right_sum() -> None:
    w = _Window(HOUR_S)
    t0 = 1000.0
    # 2 hours at 500 adds per second (a consumer doing 50k msg/s in batches of 100)
    for step in range(2 * 3600 * 500):
        w.add(1.0, t0 + step / 500)
    now = t0 + 2 * 3600
    assert len(w.events) <= HOUR_S + 1
    # the last hour's adds, give or take the one-second edge bucket
    assert 3600 * 500 <= w.total(now) <= 3601 * 500


def test_a_window_forgets_what_is_older_than_its_span() -> None:
    w = _Window(MINUTE_S)
    w.add(5.0, 10.2)
    w.add(7.0, 10.9)  # same second: one bucket
    w.add(1.0, 30.0)
    assert len(w.events) == 2
    assert w.total(31.0) == 13.0
    assert w.total(69.9) == 13.0  # the bucket of second 10 leaves once its start is a span old:
    assert w.total(70.5) == 1.0  # the edge is exact to the second
    assert w.total(200.0) == 0.0
    assert not w.events


def test_topic_status_reports_tps_and_failures_from_the_buckets() -> None:
    s = TopicStatus()
    for i in range(600):  # 10 s of consumption, 60 calls/s, 32 messages each, one failed per call
        now = 100.0 + i / 60
        s.ok.add(31, now)
        s.failed.add(1, now)
        s.failed_hour.add(1, now)
        s.consume_ms.add(2.0, now)
        s.consume_calls.add(1, now)
    out = s.to_json(110.0)
    assert out["consumeFailedMsgs"] == 600
    assert out["consumeOKTPS"] == 600 * 31 / MINUTE_S
    assert out["consumeRT"] == 2.0
    # half an hour later the minute windows are empty, the hour still counts the failures
    half = s.to_json(100.0 + 1800)
    assert (half["consumeFailedMsgs"], half["consumeOKTPS"], half["consumeRT"]) == (600, 0.0, 0.0)
    # an hour and a bit later the hour has forgotten too
    assert s.to_json(100.0 + HOUR_S + 12)["consumeFailedMsgs"] == 0


def test_a_job_counts_its_successes_failures_and_calls_whether_or_not_all_succeeded() -> None:
    """``on_consumed`` counts a job that succeeded in full in one step; any other is counted verdict by verdict:
    COMMIT is a success, the four failures fail, NOT_RUN is neither and no call (it never reached the handler)."""
    table = ConsumeStatusTable()
    table.on_consumed("T", JobResult([Status.SUCCESS] * 4, handler_seconds=0.004), 1.0)
    mixed = [Status.SUCCESS, Status.COMMIT, Status.RECONSUME_LATER, Status.SUSPEND, Status.ROLLBACK,
             Status.UNDECODABLE, Status.NOT_RUN, Status.NOT_RUN]
    table.on_consumed("T", JobResult(mixed, handler_seconds=0.012), 1.0)
    s = table._of("T")
    now = s.ok.events[-1][0]
    assert (s.ok.total(now), s.failed.total(now), s.failed_hour.total(now)) == (6, 4, 4)
    assert s.consume_calls.total(now) == 4 + 6  # the mixed job's two NOT_RUN messages were no calls
    assert s.consume_ms.total(now) == 4.0 + 12.0
    table.on_consumed("T", JobResult([Status.NOT_RUN] * 3, handler_seconds=0.5), 1.0)
    assert s.consume_calls.total(now) == 10 and s.consume_ms.total(now) == 16.0  # nothing ran: no time counted
