"""POP checkpoints and their durable log: ack bits by offset index, replay, a torn last line, compaction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rmqrun.broker.pop import ck_log as ck_log_module
from rmqrun.broker.pop.checkpoint import PopCheckpoint
from rmqrun.broker.pop.ck_log import CheckpointLog
from tests.waiting import eventually_async


def ck(start: int = 10, offsets: tuple[int, ...] = (10, 12, 15), pop_time: int = 1000, it: int = 500) -> PopCheckpoint:
    return PopCheckpoint(topic="T", group="G", queue_id=1, start_offset=start, pop_time=pop_time, invisible_time=it,
                         revive_qid=3, broker_name="b", offsets=offsets)


def test_bits_follow_the_offsets_list_not_the_distance_from_start() -> None:
    c = ck()
    assert c.ack(12) and c.acked == 0b010
    assert not c.ack(12) and not c.ack(11)  # twice, and an offset this pop never handed out
    assert c.unacked() == [10, 15] and c.is_acked(12) and not c.is_acked(15)
    c.ack(10)
    c.ack(15)
    assert c.fully_acked and c.unacked() == []
    assert PopCheckpoint.from_json(c.to_json()) == c
    assert c.to_json()["d"] == [0, 2, 5]


def test_log_replays_acks_and_drops_done_checkpoints(tmp_path: Path) -> None:
    log = CheckpointLog(tmp_path, fsync=False)
    log.open()
    a, b, done = ck(), ck(pop_time=2000), ck(pop_time=3000, offsets=(10,))
    for c in (a, b, done):
        log.add(c)
    log.ack(a.key, [15])
    log.ack(done.key, [10])  # fully acked: dropped
    log.remove(b.key)
    log.close()
    with open(tmp_path / ck_log_module.LOG_NAME, "a", encoding="utf-8") as fh:
        fh.write('{"op":"ack","k":["T","G",1,10,1000')  # a torn last line from a crash
    again = CheckpointLog(tmp_path, fsync=False)
    again.open()
    assert [(c.key, c.unacked()) for c in again.all()] == [(a.key, [10, 12])]
    assert again.latest_end("T", "G", 1) == 16 and again.latest_end("T", "G", 0) == -1
    # the log was rewritten with the live checkpoint only
    assert len((tmp_path / ck_log_module.LOG_NAME).read_text().splitlines()) == 1
    again.close()


def test_due_hands_out_each_checkpoint_once_and_reschedule_puts_it_back(tmp_path: Path) -> None:
    log = CheckpointLog(tmp_path, fsync=False)
    log.open()
    early, late = ck(pop_time=1000, it=100), ck(pop_time=1000, it=900, start=20, offsets=(20,))
    log.add(late)
    log.add(early)
    assert log.next_due() == 1100
    assert log.due(1099) == []
    assert log.due(1500) == [early]
    assert log.due(1500) == []
    log.reschedule(early, 1600)
    assert log.due(2000) == [early, late]
    log.close()


def test_compaction_while_running_keeps_live_checkpoints(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ck_log_module, "COMPACT_SLACK", 10)
    log = CheckpointLog(tmp_path, fsync=True)
    log.open()
    keep = ck(pop_time=1)
    log.add(keep)
    for i in range(2, 40):
        c = ck(pop_time=i, offsets=(10,))
        log.add(c)
        log.ack(c.key, [10])
    lines = (tmp_path / ck_log_module.LOG_NAME).read_text().splitlines()
    assert len(lines) < 20, "the log should have been rewritten"
    asyncio.run(log.durable())
    log.close()
    again = CheckpointLog(tmp_path, fsync=False)
    again.open()
    assert [c.key for c in again.all()] == [keep.key]
    again.close()


def test_async_mode_answers_without_fsync_and_syncs_when_asked(tmp_path: Path, monkeypatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(ck_log_module.os, "fsync", lambda fd: synced.append(fd))
    log = CheckpointLog(tmp_path, fsync=False)
    log.open()
    synced.clear()
    log.add(ck())

    async def main() -> None:
        await log.durable()  # ASYNC: an answer does not wait for the disk
        assert synced == []
        await log.sync()  # the periodic sync
        assert len(synced) == 1
        await log.sync()  # nothing new: no second fsync
        assert len(synced) == 1

    asyncio.run(main())
    log.close()


def test_a_checkpoint_line_is_the_json_of_its_fields_whatever_its_names_hold() -> None:
    """``to_line`` (built by hand, the log's hot path) is exactly ``json.dumps`` of the record it replaces,
    names with quotes, backslashes and non-ASCII included, so a replay reads it back as the same checkpoint;
    the contiguous-offset shortcut of ``index_of`` still says -1 for an offset a filtered pop skipped."""
    import json
    for topic, group in (("T", "G"), ('t"ö\\', "g\u2028x")):
        ck = PopCheckpoint(topic=topic, group=group, queue_id=3, start_offset=100, pop_time=1795500243867,
                           invisible_time=60_000, revive_qid=5, broker_name="b-a", offsets=(100, 102, 107),
                           acked=0b101)
        assert ck.to_line() == json.dumps({"op": "ck", **ck.to_json()}, separators=(",", ":"))
        assert PopCheckpoint.from_json(json.loads(ck.to_line())) == ck
        assert [ck.index_of(o) for o in (99, 100, 101, 102, 107, 108)] == [-1, 0, -1, 1, 2, -1]


def test_the_lines_of_one_request_reach_the_os_together_before_its_answer(tmp_path: Path) -> None:
    """A pop writes a line per queue and a batch ack one per checkpoint: buffered, handed to the OS in one
    write by ``durable`` (which every POP/ACK answer awaits), or at the end of the loop turn at the latest."""
    async def main() -> None:
        log = CheckpointLog(tmp_path, fsync=False)
        log.open()
        on_disk = tmp_path / ck_log_module.LOG_NAME
        a, b = ck(), ck(pop_time=2000)
        log.add(a)
        log.add(b)
        log.ack(a.key, [12])
        assert on_disk.read_text() == ""  # still in this process: nothing flushed per line
        await log.durable()
        assert [line.split("\t")[0] for line in on_disk.read_text().splitlines()] == ["c", "c", "a"]
        log.ack(b.key, [10])  # written outside a request (a revive pass): flushed at the end of the turn
        await eventually_async(lambda: len(on_disk.read_text().splitlines()) == 4, what="the end-of-turn flush")
        log.close()
        again = CheckpointLog(tmp_path, fsync=False)
        again.open()
        assert sorted((c.key, tuple(c.unacked())) for c in again.all()) == [(a.key, (10, 15)), (b.key, (12, 15))]
        again.close()

    asyncio.run(main())


def test_durable_hands_the_lines_to_the_os_at_once_and_waits_only_for_a_sync_mode_fsync(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    """What every POP and ACK answer awaits: the lines are with the OS as soon as ``durable()`` returns; in ASYNC
    mode its awaitable is done already (no fsync, no suspension), in SYNC mode awaiting it fsyncs them."""
    synced: list[int] = []
    monkeypatch.setattr(ck_log_module.os, "fsync", lambda fd: synced.append(fd))

    async def main(fsync: bool) -> None:  # on a loop, as in the broker: lines stay buffered until handed over
        directory = tmp_path / str(fsync)
        log = CheckpointLog(directory, fsync=fsync)
        log.open()
        a = ck()
        log.add(a)
        log.ack(a.key, [12])
        on_disk = directory / ck_log_module.LOG_NAME
        assert on_disk.read_text() == ""
        synced.clear()
        waiting = log.durable()
        assert [line.split("\t")[0] for line in on_disk.read_text().splitlines()] == ["c", "a"]
        if fsync:
            assert synced == []
            await waiting
            assert len(synced) == 1, "SYNC mode: the answer waits for an fsync of its lines"
        else:
            with pytest.raises(StopIteration):  # done at once: awaiting it never gives the loop a turn
                waiting.__await__().__next__()
            await log.durable()
            assert synced == [], "ASYNC mode: no fsync on an answer's path"
        log.close()

    for fsync in (False, True):
        asyncio.run(main(fsync))


def _reopened(path: Path) -> CheckpointLog:
    log = CheckpointLog(path, fsync=False)
    log.open()
    return log


def test_compact_records_replay_acks_bits_and_done_after_a_restart(tmp_path: Path) -> None:
    """The records the log writes now: a checkpoint (contiguous offsets as ``+n``, a filtered pop's as diffs),
    acks by its number and bits, a done record; a torn last record is skipped; a name with a tab or a line
    break falls back to the JSON line, and its acks and done name its key."""
    log = _reopened(tmp_path)
    plain = ck(start=20, offsets=(20, 21, 22, 23))
    filtered = ck(pop_time=2000)  # offsets 10, 12, 15
    odd = PopCheckpoint(topic="T", group="G\tx\ny", queue_id=1, start_offset=5, pop_time=1, invisible_time=9,
                        revive_qid=0, broker_name="b", offsets=(5, 6))
    gone = ck(pop_time=3000, offsets=(10, 11))
    for c in (plain, filtered, odd, gone):
        log.add(c)
    assert log.ack_bits(plain, 0b0101) == 2 and log.ack_bits(plain, 0b0001) == 0  # an ack twice counts once
    assert log.ack(filtered.key, [15]) == (filtered, 1)
    assert log.ack(odd.key, [6]) == (odd, 1)
    log.ack_bits(gone, 0b11)  # fully acked: its done record
    log.close()
    lines = (tmp_path / ck_log_module.LOG_NAME).read_text().splitlines()
    assert [line.split("\t")[0] if not line.startswith("{") else json.loads(line)["op"] for line in lines] == [
        "c", "c", "ck", "c", "a", "a", "ack", "d"]
    assert lines[0].split("\t")[10] == "+4" and lines[1].split("\t")[10] == "0,2,5"
    with open(tmp_path / ck_log_module.LOG_NAME, "a", encoding="utf-8") as fh:
        fh.write("a\t1\t")  # torn after a crash: no bits
    again = _reopened(tmp_path)
    assert sorted((c.key, tuple(c.unacked())) for c in again.all()) == sorted([
        (plain.key, (21, 23)), (filtered.key, (10, 12)), (odd.key, (5,))])
    assert again.latest_end("T", "G", 1) == 24
    again.close()
    third = _reopened(tmp_path)  # the rewrite at open numbered them afresh: read back the same again
    assert sorted((c.key, tuple(c.unacked())) for c in third.all()) == sorted(
        (c.key, tuple(c.unacked())) for c in again.all())
    third.close()


def test_a_log_of_json_lines_from_an_older_broker_is_read_and_rewritten_compact(tmp_path: Path) -> None:
    """A data directory written before the compact records: its checkpoints, acks and deletions are read, the
    rewrite at open turns them into records, and acks after that go to the right checkpoint."""
    a, b, c = ck(), ck(pop_time=2000, start=30, offsets=(30, 31)), ck(pop_time=3000)
    old = [json.dumps({"op": "ck", **x.to_json()}, separators=(",", ":")) for x in (a, b, c)]
    old.append(json.dumps({"op": "ack", "k": list(a.key), "o": [12]}))
    old.append(json.dumps({"op": "del", "k": list(c.key)}))
    (tmp_path / ck_log_module.LOG_NAME).write_text("\n".join(old) + "\n", encoding="utf-8")
    log = _reopened(tmp_path)
    assert sorted((x.key, tuple(x.unacked())) for x in log.all()) == sorted([(a.key, (10, 15)), (b.key, (30, 31))])
    assert all(not line.startswith("{") for line in (tmp_path / ck_log_module.LOG_NAME).read_text().splitlines())
    live_b = log.get(b.key)
    assert live_b is not None and log.ack_bits(live_b, 0b10) == 1
    log.close()
    again = _reopened(tmp_path)
    assert sorted((x.key, tuple(x.unacked())) for x in again.all()) == sorted([(a.key, (10, 15)), (b.key, (30,))])
    again.close()


def test_a_checkpoint_record_reads_back_as_the_same_checkpoint() -> None:
    for offsets in ((100,), (100, 101, 102), (100, 102, 107)):
        c = PopCheckpoint(topic="%RETRY%G_T", group="G", queue_id=3, start_offset=100, pop_time=1795500243867,
                          invisible_time=60_000, revive_qid=5, broker_name="b-a", offsets=offsets, acked=0b1)
        c.log_id = 7
        back = PopCheckpoint.from_record(c.to_record().split("\t"))
        assert back == c and back.log_id == 7
    c.acked = 0
    assert c.ack_bits(0b1111) == 0b111 and c.fully_acked  # bits past the checkpoint's offsets are no acks


def test_a_write_that_fails_half_way_loses_no_line_and_leaves_no_glued_one(tmp_path: Path, monkeypatch) -> None:
    """A full disk: the write of a request's lines stops in the middle of a line and fails. The error reaches the
    caller (the answer is an error, not a success), every line stays pending, and the next flush writes them all
    again after ending the torn one: a restart reads each checkpoint and ack exactly as they were."""
    log = CheckpointLog(tmp_path, fsync=False)
    log.open()
    a, b = ck(), ck(pop_time=2000)
    real_write = ck_log_module.os.write
    calls: list[int] = []

    def failing_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:7])  # a short write: part of the first line reaches the file
        if len(calls) == 2:
            raise OSError(28, "No space left on device")  # and the rest finds the disk full
        return real_write(fd, data)

    async def main() -> None:
        log.add(a)
        log.add(b)
        log.ack(b.key, [12])
        monkeypatch.setattr(ck_log_module.os, "write", failing_write)
        with pytest.raises(OSError):
            await log.durable()
        await log.durable()  # the disk has room again: everything goes out
        monkeypatch.setattr(ck_log_module.os, "write", real_write)

    asyncio.run(main())
    log.close()
    assert len(calls) == 3
    again = _reopened(tmp_path)
    assert sorted((c.key, tuple(c.unacked())) for c in again.all()) == [(a.key, (10, 12, 15)), (b.key, (10, 15))]
    again.close()
