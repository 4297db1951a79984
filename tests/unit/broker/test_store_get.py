"""Pull reads: every GetMessageStatus case, nextBeginOffset, filters, batch limits."""

from __future__ import annotations

import pytest

from rmqrun.broker.store import GetMessageStatus as S
from rmqrun.broker.store import MessageStore
from rmqrun.broker.store.queue_reader import MIN_SCAN_ENTRIES, SPAN_GAP
from tests.unit.store_records import build_record, decode_record, small_config


@pytest.fixture
def store(tmp_path):
    s = MessageStore(tmp_path, small_config(segment_size=1 << 20, consume_queue_entries_per_file=1000)).open()
    yield s
    s.close()


def fill(store, n, topic="T", qid=0, tags=lambda i: i % 3, size=10):
    return [store.put(topic, qid, build_record(topic, qid, bytes([65 + i % 26]) * size), tags(i)) for i in range(n)]


def bodies(res):
    return [decode_record(r).body for r in res.records]


def offsets(res):
    return [decode_record(r).queue_offset for r in res.records]


def test_unknown_or_empty_queue(store) -> None:
    res = store.get("nope", 0, 5, 32)
    assert (res.status, res.next_begin_offset, res.min_offset, res.max_offset) == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    assert res.records == []


def test_offset_statuses_and_next_begin_offset(store) -> None:
    fill(store, 10)
    cases = {
        -3: (S.OFFSET_TOO_SMALL, 0),  # corrected to the min offset
        10: (S.OFFSET_OVERFLOW_ONE, 10),  # caught up: stay
        11: (S.OFFSET_OVERFLOW_BADLY, 10),  # beyond the end: corrected to max
        1000: (S.OFFSET_OVERFLOW_BADLY, 10),
        0: (S.FOUND, 10),
        7: (S.FOUND, 10),
    }
    for offset, (status, nxt) in cases.items():
        res = store.get("T", 0, offset, 32)
        assert (res.status, res.next_begin_offset, res.min_offset, res.max_offset) == (status, nxt, 0, 10), offset
        assert (res.records != []) == (status is S.FOUND)


def test_max_msgs_limits_the_batch(store) -> None:
    fill(store, 50)
    res = store.get("T", 0, 5, 8)
    assert res.status is S.FOUND and offsets(res) == list(range(5, 13)) and res.next_begin_offset == 13


def test_max_bytes_limits_the_batch_but_one_message_always_fits(store) -> None:
    results = fill(store, 10, size=100)
    size = results[0].size
    res = store.get("T", 0, 0, 32, max_bytes=size * 3 + 1)
    assert offsets(res) == [0, 1, 2] and res.next_begin_offset == 3
    res = store.get("T", 0, 4, 32, max_bytes=1)
    assert offsets(res) == [4] and res.next_begin_offset == 5
    assert res.total_size == size and res.message_count == 1


def test_filter_skips_entries_but_advances_next_begin_offset(store) -> None:
    fill(store, 30)  # tags code = i % 3
    res = store.get("T", 0, 0, 5, accept=lambda code: code == 2)
    assert res.status is S.FOUND
    assert offsets(res) == [2, 5, 8, 11, 14]
    # The batch filled up at offset 14; the next pull starts right after it,
    # not after the skipped entries that follow.
    assert res.next_begin_offset == 15


def test_filter_matching_nothing(store) -> None:
    fill(store, 30)
    res = store.get("T", 0, 3, 5, accept=lambda code: code == 99)
    assert (res.status, res.records, res.next_begin_offset) == (S.NO_MATCHED_MESSAGE, [], 30)


def test_filter_scan_is_bounded_per_pull(store) -> None:
    n = MIN_SCAN_ENTRIES + 100
    store.put_many("T", 0, [build_record("T", 0, b"x") for _ in range(n)], [1] * n)
    res = store.get("T", 0, 0, 32, accept=lambda code: False)
    assert res.status is S.NO_MATCHED_MESSAGE and res.next_begin_offset == MIN_SCAN_ENTRIES
    res = store.get("T", 0, res.next_begin_offset, 32, accept=lambda code: False)
    assert res.next_begin_offset == n


def test_filter_tail_match_after_skips(store) -> None:
    fill(store, 10, tags=lambda i: 1 if i == 9 else 0)
    res = store.get("T", 0, 0, 32, accept=lambda code: code == 1)
    assert offsets(res) == [9] and res.next_begin_offset == 10


def test_interleaved_queues_read_correct_records(store) -> None:
    for i in range(40):
        store.put("A", 0, build_record("A", 0, b"a%d" % i), 0)
        store.put("B", 0, build_record("B", 0, b"b%d" % i), 0)
    assert bodies(store.get("A", 0, 10, 4)) == [b"a10", b"a11", b"a12", b"a13"]
    assert bodies(store.get("B", 0, 38, 4)) == [b"b38", b"b39"]


def _count_reads(store, monkeypatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    log = store._log
    real = log.read_served
    monkeypatch.setattr(log, "read_served", lambda pos, size: calls.append((pos, size)) or real(pos, size))
    return calls


def test_records_close_together_are_read_with_one_read(store, monkeypatch) -> None:
    """A queue's records a few KiB apart (another queue's record between them) come from one read of the span;
    a gap over SPAN_GAP ends the span, and a record whose seal does not match is still not served."""
    store.put_many("T", 0, [build_record("T", 0, b"%d" % i) for i in range(20)], [0] * 20)
    for _ in range(3):  # about 2.5 KiB of queue U
        store.put("U", 0, build_record("U", 0, b"gap" * 250), 0)
    store.put_many("T", 0, [build_record("T", 0, b"%d" % i) for i in range(20, 30)], [0] * 10)
    for _ in range(SPAN_GAP // 800 + 1):  # more than SPAN_GAP of queue U
        store.put("U", 0, build_record("U", 0, b"x" * 800), 0)
    store.put_many("T", 0, [build_record("T", 0, b"%d" % i) for i in range(30, 35)], [0] * 5)
    calls = _count_reads(store, monkeypatch)
    res = store.get("T", 0, 0, 40, max_bytes=1 << 20)
    assert bodies(res) == [b"%d" % i for i in range(35)]
    assert len(calls) == 2, "the first 30 around 2.5 KiB of U in one read, the last 5 past 16 KiB of U in another"
    assert offsets(res) == list(range(35))
    rec = res.records[25]
    assert decode_record(rec).body == b"25"


def test_a_pull_without_a_filter_reads_only_its_batch_of_queue_entries(store, monkeypatch) -> None:
    """The consume queue is read for the batch and the entry after it (which says the batch is full), not for
    the whole 800-entry scan; a filter that skips entries makes the read go on, within the scan."""
    fill(store, 200)
    cq = store._queues.get("T", 0)
    counts: list[int] = []
    real = cq.read_entries
    monkeypatch.setattr(cq, "read_entries", lambda offset, count: counts.append(count) or real(offset, count))
    res = store.get("T", 0, 10, 32)
    assert offsets(res) == list(range(10, 42)) and res.next_begin_offset == 42
    assert counts == [33]
    counts.clear()
    res = store.get("T", 0, 0, 32, accept=lambda code: code == 2)  # one in three matches
    assert offsets(res) == list(range(2, 96, 3)) and res.next_begin_offset == 96
    assert counts[0] == 33 and len(counts) == 2 and sum(counts) <= MIN_SCAN_ENTRIES + 33


def test_a_span_stops_at_its_segment(tmp_path, monkeypatch) -> None:
    """Records never cross a commit log segment: a span does not either (the next segment is read on its own)."""
    s = MessageStore(tmp_path, small_config(segment_size=4096, consume_queue_entries_per_file=1000)).open()
    try:
        for i in range(60):
            s.put("T", 0, build_record("T", 0, b"t%d" % i), 0)
            s.put("U", 0, build_record("U", 0, b"u%d" % i), 0)
        calls = _count_reads(s, monkeypatch)
        res = s.get("T", 0, 0, 60, max_bytes=1 << 20)
        assert bodies(res) == [b"t%d" % i for i in range(60)]
        assert len(calls) > 1 and all(pos // 4096 == (pos + size - 1) // 4096 for pos, size in calls)
    finally:
        s.close()


def test_a_bad_record_in_a_span_is_skipped_and_the_rest_served(store, monkeypatch) -> None:
    for i in range(10):
        store.put("T", 0, build_record("T", 0, b"t%d" % i), 0)
        store.put("U", 0, build_record("U", 0, b"u%d" % i), 0)
    bad = store.queue_entries("T", 0, 4, 1)[0]
    log = store._log
    real = log.read_served

    def corrupt(pos: int, size: int) -> bytearray:
        buf = real(pos, size)
        at = bad.commit_log_offset - pos + bad.size - 1  # the last byte of T's record 4
        if 0 <= at < len(buf):
            buf[at] ^= 0xFF
        return buf
    monkeypatch.setattr(log, "read_served", corrupt)
    res = store.get("T", 0, 0, 32)
    assert bodies(res) == [b"t%d" % i for i in range(10) if i != 4]


def test_reads_do_not_keep_bodies_in_memory(store) -> None:
    fill(store, 5)
    res = store.get("T", 0, 0, 5)
    assert all(isinstance(r, memoryview) for r in res.records)
    # All views share one buffer read from disk for this contiguous run.
    assert len({id(r.obj) for r in res.records}) == 1


def test_store_time_at(store) -> None:
    for i in range(5):
        store.put("T", 0, build_record("T", 0, b"x", store_ts=1000 + i), 0)
    assert [store.store_time_at("T", 0, i) for i in range(5)] == [1000, 1001, 1002, 1003, 1004]
    assert store.store_time_at("T", 0, 5) == -1
    assert store.store_time_at("T", 9, 0) == -1
    assert store.earliest_store_time("T", 0) == 1000
    assert store.earliest_store_time() == 1000
    assert store.earliest_store_time("none", 0) == -1


def test_earliest_store_time_of_empty_store(store) -> None:
    assert store.earliest_store_time() == -1
