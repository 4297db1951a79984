"""``scan_columns`` (the puller's one-pass scan of a pull body) against ``scan_spans`` and the per-record
store-time reader it replaces on the push path: the same columns, the same store times as the statistics
count them, the same refusals with the same messages, on any body (hosts IPv4 or IPv6, topics V1 or V2,
store times missing, bytes corrupted, bodies cut short).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.consumer.executor import JobResult
from rmqrun.consumer.oldest import store_timestamp_ms
from rmqrun.consumer.push import ConsumeStats
from rmqrun.model import Status
from rmqrun.remoting import message
from rmqrun.remoting.errors import ProtocolError

settings.register_profile("scan_columns", max_examples=300, deadline=None)

_HOSTS = st.sampled_from(["10.0.0.1:10911", "[::1]:10911", "[fe80::2]:7"])
_RECORDS = st.lists(st.fixed_dictionaries({
    "topic": st.sampled_from(["T", "T" * 200]),
    "body": st.binary(max_size=40),
    "properties": st.sampled_from(["", "KEYS\x01k\x02", "TAGS\x01a\x02UNIQ_KEY\x01" + "u" * 30 + "\x02"]),
    "born_host": _HOSTS, "store_host": _HOSTS,
    "store_timestamp": st.sampled_from([0, -1, 1, 1_700_000_000_123, 2 ** 62]),
    "queue_offset": st.integers(0, 2 ** 40),
}), max_size=6)


def _outcome(fn, body: bytes):  # type: ignore[no-untyped-def]
    try:
        return "ok", fn(body)
    except ProtocolError as exc:
        return "refused", str(exc)


def _as_before(body: bytes):  # type: ignore[no-untyped-def]
    """What the puller built before: columns from the spans, then a store time read per record."""
    spans = message.scan_spans(body)
    view = memoryview(body)
    views = [bytes(view[s[0]:s[0] + s[1]]) for s in spans]
    return [s[3] for s in spans], [s[5] for s in spans], views, [store_timestamp_ms(v) for v in views]


def _as_now(body: bytes):  # type: ignore[no-untyped-def]
    offsets, sizes, views, stamps = message.scan_columns(body)
    return offsets, sizes, [bytes(v) for v in views], [s if s > 0 else None for s in stamps]


@settings(settings.get_profile("scan_columns"))
@given(_RECORDS, st.data())
def test_scan_columns_answers_as_the_spans_and_the_store_time_reader(records: list[dict], data: st.DataObject) -> None:
    body = bytearray(b"".join(bytes(message.encode_stored(**r)) for r in records))
    if body and data.draw(st.booleans()):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    if body and data.draw(st.booleans()):
        body = body[:data.draw(st.integers(0, len(body) - 1))]
    body = bytes(body)
    assert _outcome(_as_now, body) == _outcome(_as_before, body)


def test_a_whole_pull_s_store_times_count_as_its_records_would() -> None:
    """The statistics given the scan's store times (0 where none, some never run) count what reading the
    records counts."""
    recs = [bytes(message.encode_stored(topic="T", body=b"x", store_timestamp=ts, born_host=host))
            for ts, host in [(1_700_000_000_000, "1.2.3.4:5"), (0, "1.2.3.4:5"), (1_700_000_000_500, "[::1]:5"),
                             (1_699_999_000_000, "1.2.3.4:5")]]
    stamps = message.scan_columns(b"".join(recs))[3]
    for verdicts in ([Status.SUCCESS] * 4, [Status.SUCCESS, Status.SUCCESS, Status.RECONSUME_LATER, Status.NOT_RUN]):
        by_records, by_stamps = ConsumeStats(), ConsumeStats()
        by_records.record(4, 0.01, JobResult(list(verdicts), handler_seconds=0.004), recs)
        by_stamps.record(4, 0.01, JobResult(list(verdicts), handler_seconds=0.004), recs, stamps)
        a, b = by_records.store_to_handler, by_stamps.store_to_handler
        assert (a.counts, a.count) == (b.counts, b.count) and abs(a.total - b.total) < 1.0
        assert a.count == (3 if verdicts[3] is Status.SUCCESS else 2)


def test_damaged_records_are_refused_as_scan_spans_refuses_them() -> None:
    good = bytes(message.encode_stored(topic="T", body=b"hello", properties="KEYS\x01k\x02"))
    props_len_at = len(good) - len("KEYS\x01k\x02") - 2
    cases = []
    for value in (0, 3, 200, -1):  # a properties length short of, past or outside the record
        bad = bytearray(good)
        bad[props_len_at:props_len_at + 2] = value.to_bytes(2, "big", signed=True)
        cases.append(bytes(bad))
    v6 = bytes(message.encode_stored(topic="T", body=b"hello", properties="", born_host="[::1]:1",
                                     store_host="[::1]:2"))
    cases += [good + v6[:-1], good[:-1] + v6, v6 + good[:30], good[:90]]
    for body in cases:
        outcome = _outcome(_as_now, body)
        assert outcome[0] == "refused" and outcome == _outcome(_as_before, body), outcome
