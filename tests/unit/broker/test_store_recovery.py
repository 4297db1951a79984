"""Recovery: torn tails, garbage, zero fill, corrupt or missing consume queues."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from rmqrun.broker.store import GetMessageStatus, MessageStore
from rmqrun.broker.store.tags_code import java_string_hash
from tests.unit.store_records import assert_consistent, build_record, crash, decode_record, small_config

TAGS = ["red", "green", "blue"]


def populate(path: Path, n: int, queues=(("T", 0), ("T", 1), ("U", 0)), close=True, **cfg):
    """Write n records round-robin over queues; returns the store (closed or crashed) and results."""
    store = MessageStore(path, small_config(**cfg)).open()
    results = []
    for i in range(n):
        topic, qid = queues[i % len(queues)]
        tag = TAGS[(i // len(queues)) % 3]  # tags rotate inside each queue
        rec = build_record(topic, qid, b"body-%04d" % i + b"." * (i % 50), tags=tag)
        results.append((topic, qid, store.put(topic, qid, rec, java_string_hash(tag)), b"body-%04d" % i + b"." * (i % 50)))
    if close:
        store.close()
    else:
        crash(store)
    return results


def last_segment(path: Path) -> Path:
    return sorted((path / "commitlog").iterdir())[-1]


def reopen(path: Path, **cfg) -> MessageStore:
    return MessageStore(path, small_config(**cfg)).open()


def expected_prefix(results, keep_before: int):
    """Bodies per queue of the records that start before commit-log offset keep_before."""
    out: dict = {}
    for topic, qid, r, body in results:
        if r.commit_log_offset < keep_before:
            out.setdefault((topic, qid), []).append(body)
    return out


def check(store, results, end: int) -> None:
    assert store.commit_log_max_offset == end
    assert assert_consistent(store) == expected_prefix(results, end)


@pytest.mark.parametrize("crashed", [False, True])
@pytest.mark.parametrize("cut", [1, 5, 40, -1])  # bytes of the last record kept (-1: all but one)
def test_truncated_last_record(tmp_path, crashed, cut) -> None:
    results = populate(tmp_path, 200, close=not crashed)
    last = results[-1][2]
    seg = last_segment(tmp_path)
    keep = last.size - 1 if cut == -1 else cut
    os.truncate(seg, last.commit_log_offset - int(seg.name) + keep)
    with reopen(tmp_path) as s:
        check(s, results, last.commit_log_offset)
        assert s.recovery.problem is not None
        # The torn record's slot is reused by the next append.
        r = s.put("U", 0, build_record("U", 0, b"after"), 0)
        assert r.commit_log_offset == last.commit_log_offset and r.queue_offset == last.queue_offset
    with reopen(tmp_path) as s:
        assert s.recovery.problem is None
        assert decode_record(s.read_at(last.commit_log_offset)).body == b"after"


@pytest.mark.parametrize("crashed", [False, True])
def test_garbage_after_the_end_is_cut(tmp_path, crashed) -> None:
    results = populate(tmp_path, 150, close=not crashed)
    seg = last_segment(tmp_path)
    end = results[-1][2].end_offset
    with open(seg, "ab") as f:
        f.write(random.Random(1).randbytes(300))
    with reopen(tmp_path) as s:
        check(s, results, end)
        assert s.recovery.truncated_bytes == 300
    assert seg.stat().st_size == end - int(seg.name)


def test_zero_filled_tail(tmp_path) -> None:
    results = populate(tmp_path, 150, close=False)
    seg = last_segment(tmp_path)
    with open(seg, "ab") as f:
        f.write(b"\x00" * 1000)  # like a preallocated file
    with reopen(tmp_path) as s:
        check(s, results, results[-1][2].end_offset)


@pytest.mark.parametrize("crashed", [False, True])
def test_zeroed_last_records(tmp_path, crashed) -> None:
    results = populate(tmp_path, 150, close=not crashed)
    seg = last_segment(tmp_path)
    victim = results[-3][2]  # zero the last three records, keeping the file length
    start = victim.commit_log_offset - int(seg.name)
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.seek(start)
        f.write(b"\x00" * (size - start))
    with reopen(tmp_path) as s:
        check(s, results, victim.commit_log_offset)
        if not crashed:  # the clean checkpoint's last record was destroyed: it must not be trusted
            assert any("checkpoint ignored" in n for n in s.recovery.notes)


def test_bad_crc_in_the_middle_keeps_the_valid_prefix(tmp_path) -> None:
    results = populate(tmp_path, 200, close=False)
    (tmp_path / "checkpoint.json").unlink()  # nothing trusted: full validation
    victim = results[77][2]
    seg_path = tmp_path / "commitlog" / f"{victim.commit_log_offset - victim.commit_log_offset % 4096:020d}"
    with open(seg_path, "r+b") as f:
        f.seek(victim.commit_log_offset % 4096 + victim.size - 20)  # inside the body
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    with reopen(tmp_path) as s:
        check(s, results, victim.commit_log_offset)
        assert "CRC" in s.recovery.problem
        assert s.recovery.scanned_from == 0
        # Later segments were removed, not just ignored.
        assert int(last_segment(tmp_path).name) <= victim.commit_log_offset


def test_torn_end_of_segment_marker(tmp_path) -> None:
    # A marker can be torn only if the crash came before anything past it was fsynced, so
    # no checkpoint may cover it. With the 50 ms checkpoint of small_config, whether one
    # did depended on how long the 200 puts took (a loaded machine checkpointed past the
    # marker, recovery rightly trusted segment 0 and kept the whole log): no periodic
    # checkpoint runs here, whatever the load.
    results = populate(tmp_path, 200, close=False, checkpoint_interval_ms=3_600_000)
    # Find a segment end: the last record of segment 0, then corrupt the blank marker after it.
    in_first = [r for _t, _q, r, _b in results if r.commit_log_offset < 4096]
    marker = in_first[-1].end_offset
    with open(tmp_path / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(marker)
        f.write(b"\x00\x00\x00\x00")
    with reopen(tmp_path) as s:
        assert s.recovery.scanned_from <= marker, "a checkpoint covered the torn marker: the test's premise"
        check(s, results, marker)
        assert len(list((tmp_path / "commitlog").iterdir())) == 1


def test_duplicate_queue_offset_ends_the_log(tmp_path) -> None:
    results = populate(tmp_path, 30, queues=(("T", 0),), close=False)
    end = results[-1][2].end_offset
    # A well-formed record (valid CRC, right PHYSICALOFFSET) that repeats queue offset 5.
    rec = build_record("T", 0, b"dup")
    rec[20:28] = (5).to_bytes(8, "big")
    rec[28:36] = end.to_bytes(8, "big")
    with open(last_segment(tmp_path), "ab") as f:
        f.write(rec)
    with reopen(tmp_path) as s:
        check(s, results, end)
        assert "queue offset 5" in s.recovery.problem


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage", "zero", "swap", "extra"])
def test_damaged_consume_queue_is_rebuilt_from_the_commit_log(tmp_path, damage) -> None:
    results = populate(tmp_path, 300)
    qdir = tmp_path / "consumequeue" / "T" / "1"
    files = sorted(qdir.iterdir())
    assert len(files) > 1  # 100 entries over 16-entry segments
    target = files[2]
    if damage == "delete":
        for f in files:
            f.unlink()
        qdir.rmdir()
    elif damage == "truncate":
        os.truncate(target, 7 * 20 + 3)
    elif damage == "garbage":
        with open(target, "r+b") as f:
            f.seek(60)
            f.write(random.Random(2).randbytes(40))
    elif damage == "zero":
        with open(target, "r+b") as f:
            f.seek(20)
            f.write(b"\x00" * 20)
    elif damage == "swap":
        data = bytearray(target.read_bytes())
        data[0:20], data[20:40] = data[20:40], data[0:20]
        target.write_bytes(data)
    elif damage == "extra":
        with open(files[-1], "ab") as f:
            f.write(files[0].read_bytes()[:40])
    with reopen(tmp_path) as s:
        if damage == "extra":  # structurally fine, just too long: trimmed to the checkpoint
            assert s.recovery.resized_queues == {("T", 1): (102, 100)}
        else:
            assert s.recovery.rebuilt_queues == [("T", 1)]
        bodies = assert_consistent(s)
        assert bodies == expected_prefix(results, 1 << 60)
        assert s.recovery.truncated_bytes == 0
        # Tags codes were recomputed from the TAGS property: filtering still works.
        res = s.get("T", 1, 0, 32, accept=lambda code: code == java_string_hash("green"))
        assert res.status is GetMessageStatus.FOUND
        assert [decode_record(r).queue_offset for r in res.records] == list(range(1, 95, 3))
        assert {decode_record(r).properties["TAGS"] for r in res.records} == {"green"}
        assert res.next_begin_offset == 95


def test_lost_consume_queue_tail_after_crash_is_redispatched(tmp_path) -> None:
    # Long checkpoint interval: the checkpoint stays at open time, queues are rebuilt from C=0 on.
    results = populate(tmp_path, 200, close=False, checkpoint_interval_ms=60_000)
    for qdir in (tmp_path / "consumequeue").glob("*/*"):
        files = sorted(qdir.iterdir())
        for f in files[1:]:
            f.unlink()
        os.truncate(files[0], 5 * 20 + 7)  # 5 entries and a torn one
    with reopen(tmp_path) as s:
        assert s.recovery.checkpoint_used
        check(s, results, results[-1][2].end_offset)


def test_missing_checkpoint_rebuilds_everything(tmp_path) -> None:
    results = populate(tmp_path, 120)
    (tmp_path / "checkpoint.json").write_text("{not json")
    with reopen(tmp_path) as s:
        assert not s.recovery.checkpoint_used
        assert sorted(s.recovery.rebuilt_queues) == [("T", 0), ("T", 1), ("U", 0)]
        check(s, results, results[-1][2].end_offset)


def test_recovery_from_recent_checkpoint_scans_only_the_tail(tmp_path) -> None:
    store = MessageStore(tmp_path, small_config(checkpoint_interval_ms=60_000)).open()
    for i in range(100):
        store.put("T", 0, build_record("T", 0, b"%d" % i), 0)
    store._checkpoint()  # as the background thread would
    mark = store.commit_log_max_offset
    for i in range(100, 130):
        store.put("T", 0, build_record("T", 0, b"%d" % i), 0)
    crash(store)
    with reopen(tmp_path) as s:
        assert s.recovery.scanned_from == mark and s.recovery.records_scanned == 30
        assert assert_consistent(s)[("T", 0)] == [b"%d" % i for i in range(130)]


def test_queue_without_records_is_removed(tmp_path) -> None:
    results = populate(tmp_path, 3, queues=(("T", 0), ("Late", 0), ("Late", 0)), close=False)
    # Cut the log before the first record of "Late".
    first_late = results[1][2]
    os.truncate(last_segment(tmp_path), first_late.commit_log_offset)
    with reopen(tmp_path) as s:
        assert s.queues() == [("T", 0)]
        assert not (tmp_path / "consumequeue" / "Late").exists()
        assert s.get("Late", 0, 0, 1).status is GetMessageStatus.NO_MESSAGE_IN_QUEUE


def test_full_scan_option_revalidates_everything(tmp_path) -> None:
    results = populate(tmp_path, 60)
    with reopen(tmp_path, recover_full_scan=True) as s:
        assert s.recovery.scanned_from == 0 and s.recovery.records_scanned == 60
        check(s, results, results[-1][2].end_offset)


@pytest.mark.parametrize("next_file", ["empty", "missing"])
def test_crash_right_after_a_segment_roll(tmp_path, next_file) -> None:
    results = populate(tmp_path, 200, queues=(("T", 0),), close=False)
    segs = sorted((tmp_path / "commitlog").iterdir())
    # Drop everything after the first segment's end marker.
    for seg in segs[2:]:
        seg.unlink()
    if next_file == "empty":
        os.truncate(segs[1], 0)
    else:
        segs[1].unlink()
    with reopen(tmp_path) as s:
        check(s, results, 4096)
        assert s.recovery.problem is None
    with reopen(tmp_path) as s:  # the checkpoint now sits exactly on a segment start
        assert s.recovery.checkpoint_used and s.recovery.scanned_from == 4096
        r = s.put("T", 0, build_record("T", 0, b"next"), 0)
        assert r.commit_log_offset == 4096
        assert assert_consistent(s)[("T", 0)][-1] == b"next"
