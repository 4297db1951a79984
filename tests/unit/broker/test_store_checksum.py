"""The record checksum (seal): torn records are cut wherever they are torn, never served,
and data directories written before the checksum existed still open."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from rmqrun.broker.store import GetMessageStatus, MessageStore
from rmqrun.broker.store.record import PHYSICAL_OFFSET_POS, SEAL_TAG, parse_header
from tests.unit.store_records import assert_consistent, build_record, crash, decode_record, small_config

SEG = 4096  # small_config's segment size


def seg_path(path: Path, pos: int) -> Path:
    return path / "commitlog" / f"{pos - pos % SEG:020d}"


def raw_record(path: Path, pos: int, size: int) -> bytearray:
    with open(seg_path(path, pos), "rb") as f:
        f.seek(pos % SEG)
        return bytearray(f.read(size))


def overwrite(path: Path, pos: int, data: bytes) -> None:
    with open(seg_path(path, pos), "r+b") as f:
        f.seek(pos % SEG)
        f.write(data)


def write_some(path: Path, n: int, *, close: bool = False, **cfg) -> list:
    """n records over two queues; returns [(topic, qid, PutResult, body)]."""
    store = MessageStore(path, small_config(**cfg)).open()
    out = []
    for i in range(n):
        topic, qid = ("T", i % 2)
        body = b"msg-%03d|" % i + b"x" * (i % 40)
        rec = build_record(topic, qid, body, properties={"KEYS": "k%d" % i, "UNIQ_KEY": "u%d" % i}, tags="tag")
        out.append((topic, qid, store.put(topic, qid, rec, 0), body))
    if close:
        store.close()
    else:
        crash(store)
    return out


def bodies_below(results, end: int) -> dict:
    out: dict = {}
    for topic, qid, r, body in results:
        if r.commit_log_offset < end:
            out.setdefault((topic, qid), []).append(body)
    return out


def test_records_are_sealed_on_disk_and_served_unsealed(tmp_path) -> None:
    with MessageStore(tmp_path, small_config()) as store:
        rec = build_record("T", 0, b"payload", tags="a")
        r = store.put("T", 0, rec, 0)
        # The caller's bytearray ends up as served: PHYSICALOFFSET is the position again.
        assert decode_record(rec).physical_offset == r.commit_log_offset
        store.flush(timeout=5)
        on_disk = raw_record(tmp_path, r.commit_log_offset, r.size)
        tag, crc = struct.unpack_from(">II", on_disk, PHYSICAL_OFFSET_POS)
        assert tag == SEAL_TAG
        assert crc == zlib.crc32(bytes(rec))  # CRC of the whole record as served
        assert bytes(on_disk[:PHYSICAL_OFFSET_POS]) == bytes(rec[:PHYSICAL_OFFSET_POS])
        assert bytes(on_disk[PHYSICAL_OFFSET_POS + 8:]) == bytes(rec[PHYSICAL_OFFSET_POS + 8:])
        got = store.get("T", 0, 0, 1)
        assert [bytes(x) for x in got.records] == [bytes(rec)]
        assert store.read_at(r.commit_log_offset) == bytes(rec)


def _region_offset(data: bytearray, region: str) -> int:
    h = parse_header(data)
    return {
        "header": 40,  # BORNTIMESTAMP: no structural check covers it
        "body": h.body_pos + h.body_len // 2,
        "topic": h.body_pos + h.body_len + 1,  # V1: one length byte, then the topic
        "properties": h.properties_pos + h.properties_len - 3,
    }[region]


@pytest.mark.parametrize("clean", [False, True])
@pytest.mark.parametrize("region", ["header", "body", "topic", "properties"])
def test_a_record_torn_in_any_region_is_cut_at_recovery(tmp_path, region, clean) -> None:
    results = write_some(tmp_path, 60)
    victim = results[-1][2]
    data = raw_record(tmp_path, victim.commit_log_offset, victim.size)
    at = _region_offset(data, region)
    # Sizes, magic, position and (except for the body) body CRC all still hold: only the
    # whole-record CRC can tell.
    overwrite(tmp_path, victim.commit_log_offset + at, bytes([data[at] ^ 0x21]))
    if clean:  # no checkpoint at all: everything is validated from 0
        (tmp_path / "checkpoint.json").unlink()
    with MessageStore(tmp_path, small_config()) as s:
        assert s.commit_log_max_offset == victim.commit_log_offset
        assert "CRC" in s.recovery.problem, s.recovery.problem
        assert assert_consistent(s) == bodies_below(results, victim.commit_log_offset)


def test_torn_properties_in_the_middle_of_the_unflushed_tail(tmp_path) -> None:
    """The flaky crash test's case: a cut inside a record's properties, then junk: sizes add up."""
    results = write_some(tmp_path, 80)
    victim = results[-5][2]
    data = raw_record(tmp_path, victim.commit_log_offset, victim.size)
    h = parse_header(data)
    cut = victim.commit_log_offset + h.properties_pos + 2
    os.truncate(seg_path(tmp_path, cut), cut % SEG)
    with open(seg_path(tmp_path, cut), "ab") as f:
        f.write(b"\xa5" * 700)  # junk longer than the rest of the record
    with MessageStore(tmp_path, small_config()) as s:
        assert s.commit_log_max_offset == victim.commit_log_offset
        assert assert_consistent(s) == bodies_below(results, victim.commit_log_offset)
        assert s.recovery.truncated_bytes == cut - victim.commit_log_offset + 700


def test_a_record_corrupted_after_recovery_is_never_served(tmp_path) -> None:
    with MessageStore(tmp_path, small_config()) as store:
        results = [store.put("T", 0, build_record("T", 0, b"m%d" % i), 0) for i in range(5)]
        store.flush(timeout=5)
        bad = results[2]
        data = raw_record(tmp_path, bad.commit_log_offset, bad.size)
        at = _region_offset(data, "topic")
        overwrite(tmp_path, bad.commit_log_offset + at, b"X")  # bit rot under a running store
        got = store.get("T", 0, 0, 32)
        assert got.status is GetMessageStatus.FOUND
        assert [decode_record(r).body for r in got.records] == [b"m0", b"m1", b"m3", b"m4"]
        assert got.next_begin_offset == 5
        alone = store.get("T", 0, 2, 1)
        assert (alone.status, alone.records, alone.next_begin_offset) == (GetMessageStatus.MESSAGE_WAS_REMOVING, [], 3)
        assert store.read_at(bad.commit_log_offset) is None
        assert decode_record(store.read_at(results[3].commit_log_offset)).body == b"m3"


def unseal_files(path: Path, results) -> None:
    """Rewrite the log as rmqrun wrote it before the checksum: PHYSICALOFFSET = position."""
    for _t, _q, r, _b in results:
        overwrite(path, r.commit_log_offset + PHYSICAL_OFFSET_POS, struct.pack(">q", r.commit_log_offset))


@pytest.mark.parametrize("checkpoint", [True, False])
def test_a_directory_written_before_the_checksum_still_opens(tmp_path, checkpoint) -> None:
    results = write_some(tmp_path, 70, close=True)
    unseal_files(tmp_path, results)
    if not checkpoint:
        (tmp_path / "checkpoint.json").unlink()
    with MessageStore(tmp_path, small_config()) as s:
        assert s.recovery.problem is None and s.recovery.truncated_bytes == 0
        assert s.recovery.checkpoint_used is checkpoint
        assert assert_consistent(s) == bodies_below(results, 1 << 60)
        got = s.get("T", 0, 0, 32, max_bytes=1 << 20)
        assert [decode_record(x).physical_offset for x in got.records] == \
            [r.commit_log_offset for t, q, r, _b in results if q == 0][:32]
        assert decode_record(s.read_at(results[3][2].commit_log_offset)).body == results[3][3]
        new = s.put("T", 1, build_record("T", 1, b"sealed"), 0)
    # Old and new records side by side, after a clean close and after a full scan.
    for cfg in ({}, {"recover_full_scan": True}):
        with MessageStore(tmp_path, small_config(**cfg)) as s:
            assert s.recovery.problem is None
            assert assert_consistent(s)[("T", 1)][-1] == b"sealed"
            assert decode_record(s.read_at(new.commit_log_offset)).body == b"sealed"


def test_an_unsealed_torn_tail_is_still_cut_the_old_way(tmp_path) -> None:
    results = write_some(tmp_path, 40)
    unseal_files(tmp_path, results)
    victim = results[-1][2]
    data = raw_record(tmp_path, victim.commit_log_offset, victim.size)
    at = _region_offset(data, "body")
    overwrite(tmp_path, victim.commit_log_offset + at, bytes([data[at] ^ 1]))
    with MessageStore(tmp_path, small_config()) as s:
        assert s.commit_log_max_offset == victim.commit_log_offset
        assert "body CRC" in s.recovery.problem


def test_recovery_from_a_checkpoint_in_the_middle_cuts_a_torn_record_after_it(tmp_path) -> None:
    """Checkpoint at C > 0: records below C are trusted, the tail after C is validated."""
    store = MessageStore(tmp_path, small_config(checkpoint_interval_ms=60_000)).open()
    results = []
    for i in range(120):
        body = b"c%03d" % i
        results.append(("T", i % 2, store.put("T", i % 2, build_record("T", i % 2, body, tags="t"), 0), body))
        if i == 79:
            store._checkpoint()  # as the background thread would
            mark = store.commit_log_max_offset
    crash(store)
    assert mark > SEG  # the checkpoint is well inside the log, past a segment end
    victim = results[100][2]
    data = raw_record(tmp_path, victim.commit_log_offset, victim.size)
    at = _region_offset(data, "properties")
    overwrite(tmp_path, victim.commit_log_offset + at, b"\x00")
    with MessageStore(tmp_path, small_config()) as s:
        assert s.recovery.checkpoint_used and s.recovery.scanned_from == mark
        assert s.recovery.records_scanned == 100 - 80
        assert s.commit_log_max_offset == victim.commit_log_offset
        assert assert_consistent(s) == bodies_below(results, victim.commit_log_offset)
        assert s.max_offset("T", 0) == 50 and s.max_offset("T", 1) == 50


@pytest.mark.parametrize("cut_from_mark", [1, 200, 5000])
def test_a_checkpoint_pointing_past_the_valid_log_is_ignored(tmp_path, cut_from_mark) -> None:
    """The log ends (power cut, lost segment) before the checkpoint's offset: nothing is trusted."""
    store = MessageStore(tmp_path, small_config(checkpoint_interval_ms=60_000)).open()
    results = []
    for i in range(150):
        body = b"p%03d" % i
        results.append(("T", i % 2, store.put("T", i % 2, build_record("T", i % 2, body), 0), body))
    store._checkpoint()
    mark = store.commit_log_max_offset
    crash(store)
    cut = mark - cut_from_mark
    for seg in sorted((tmp_path / "commitlog").iterdir()):
        start = int(seg.name)
        if start >= cut:
            seg.unlink() if start > cut or cut % SEG == 0 and start == cut else None
        elif cut < start + SEG:
            os.truncate(seg, cut - start)
    with MessageStore(tmp_path, small_config()) as s:
        assert not s.recovery.checkpoint_used
        assert any("checkpoint ignored" in n for n in s.recovery.notes), s.recovery.notes
        assert s.recovery.scanned_from == 0
        kept = bodies_below([x for x in results if x[2].end_offset <= cut], 1 << 60)
        assert assert_consistent(s) == kept
        # Consume queues were cut to what the log still holds: pulls end there.
        for key, bodies in kept.items():
            assert s.max_offset(*key) == len(bodies)
            assert s.get(key[0], key[1], len(bodies), 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE


def test_a_checkpoint_whose_last_record_is_torn_is_not_trusted(tmp_path) -> None:
    """A clean close checkpoints at the end; if its last record then fails its CRC, the
    checkpoint is not used (otherwise that record would be trusted, unchecked)."""
    results = write_some(tmp_path, 50, close=True)
    victim = results[-1][2]
    data = raw_record(tmp_path, victim.commit_log_offset, victim.size)
    at = _region_offset(data, "properties")
    overwrite(tmp_path, victim.commit_log_offset + at, bytes([data[at] ^ 0x40]))
    with MessageStore(tmp_path, small_config()) as s:
        assert not s.recovery.checkpoint_used
        assert any("checkpoint ignored" in n and "CRC" in n for n in s.recovery.notes), s.recovery.notes
        assert s.commit_log_max_offset == victim.commit_log_offset
        assert assert_consistent(s) == bodies_below(results, victim.commit_log_offset)
