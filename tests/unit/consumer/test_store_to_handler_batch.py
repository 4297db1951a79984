"""The store → handler-start histogram, observed per job (issue #38): the same counts as one observation per message.

``ConsumeStats.record`` reads every finished message's store time; the batched readers
(:func:`store_timestamps_ms`, :meth:`LatencyHistogram.observe_since`) must give exactly
what the per-message ones give, for raw records with IPv4 and IPv6 born hosts, decoded
messages, records without a stamp, jobs whose waits span buckets and broker clocks ahead.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from rmqrun.consumer.oldest import store_timestamp_ms, store_timestamps_ms
from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.push import WAIT_BUCKETS, ConsumeStats, LatencyHistogram
from rmqrun.model import Status
from rmqrun.remoting.message import encode_stored

NOW_MS = 1_700_000_000_000


def raw(stamp: int, born: str = "127.0.0.1:5") -> memoryview:
    return memoryview(bytes(encode_stored(topic="T", body=b"x", born_host=born, store_timestamp=stamp)))


def per_message(records: list) -> list[int]:
    return [s for s in map(store_timestamp_ms, records) if s is not None]


def test_batched_store_times_equal_the_per_record_reader() -> None:
    v4 = [raw(NOW_MS - i) for i in range(32)]
    cases = [
        v4,
        v4[:5] + [raw(NOW_MS - 7, "[::1]:5")] + v4[5:],  # one IPv6 born host: its stamp sits elsewhere
        v4[:3] + [raw(0)] + v4[3:],  # a record without a stamp is skipped
        v4[:2] + [memoryview(b"short")] + v4[2:],  # a short record is skipped, not an error
        [SimpleNamespace(store_timestamp=NOW_MS - 3), SimpleNamespace(store_timestamp=0)],  # decoded messages
        [],
    ]
    for records in cases:
        assert store_timestamps_ms(records) == per_message(records)
    assert store_timestamps_ms(v4) == [NOW_MS - i for i in range(32)]
    assert store_timestamps_ms([raw(NOW_MS, "[::1]:5")]) == [NOW_MS]


def observed(stamp_jobs: list[tuple[float, list[int]]], batched: bool) -> LatencyHistogram:
    h = LatencyHistogram(WAIT_BUCKETS)
    for began_s, stamps in stamp_jobs:
        if batched:
            h.observe_since(began_s, stamps)
        else:
            h.observe_each([max(0.0, began_s - s / 1000) for s in stamps])
    return h


def test_per_job_observation_counts_what_per_message_observation_counts() -> None:
    rng = random.Random(38)
    began = NOW_MS / 1000
    jobs = [
        (began, [NOW_MS - 20] * 32),  # one bucket: the one-step path
        (began, [NOW_MS - 9, NOW_MS - 11, NOW_MS - 30]),  # 9 ms, 11 ms, 30 ms: three buckets
        (began, [NOW_MS + 500, NOW_MS - 5]),  # a broker clock ahead of this host: 0, not negative
        (began, [NOW_MS - 10]),  # exactly on a bound (le)
        (began, [NOW_MS - 3_600_000 * 2]),  # past the last bound: +Inf
    ]
    for _ in range(200):
        base = NOW_MS - rng.randrange(0, 4_000_000)
        jobs.append((began, [base - rng.randrange(0, rng.choice((2, 50, 5000))) for _ in range(rng.randrange(1, 40))]))
    each, batched = observed(jobs, False), observed(jobs, True)
    assert batched.counts == each.counts
    assert batched.count == each.count == sum(len(s) for _, s in jobs)
    assert abs(batched.total - each.total) <= 1e-6 * max(1.0, each.total)
    assert each.counts[0] >= 2 and each.counts[-1] >= 1  # the clamp and the +Inf bucket were exercised


def test_store_times_a_caller_read_already_count_what_the_records_count(monkeypatch: Any) -> None:
    """POP hands ``ConsumeStats.record`` the store times it read with the pop's answer (``stored``) instead
    of the records: the histogram is the same, messages that never reached the handler (NOT_RUN) are left
    out of both, and a 0 (a record stored without a time) is skipped as the record reader skips it."""
    monkeypatch.setattr("rmqrun.consumer.push.time.time", lambda: NOW_MS / 1000)
    stamps = [NOW_MS - 5, NOW_MS - 40, 0, NOW_MS - 3000, NOW_MS - 12]
    records = [raw(s) for s in stamps]
    verdicts = [Status.SUCCESS, Status.NOT_RUN, Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS]
    for vs in (verdicts, [Status.SUCCESS] * 5):
        by_records, by_stamps = ConsumeStats(), ConsumeStats()
        by_records.record(5, 0.0, JobResult(list(vs), handler_seconds=0.0), records)
        by_stamps.record(5, 0.0, JobResult(list(vs), handler_seconds=0.0), records, stored=stamps)
        assert by_stamps.store_to_handler.counts == by_records.store_to_handler.counts
        assert by_stamps.store_to_handler.count == by_records.store_to_handler.count == \
            sum(1 for s, v in zip(stamps, vs) if s and v is not Status.NOT_RUN)
