"""The embedded broker's POP path after its per-message cuts (#32): batch acks as one bitmask, a filtered pop's
checkpoint that is not contiguous, restNum of a pop that filled up early, and batch acks that survive a restart
in the compact checkpoint log."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.pop import PopMessageRequestHeader, PopMessageResponseHeader
from rmqrun.protocol.pop_batch_ack import build_batch_acks, encode_batch_ack_body
from rmqrun.remoting import frame as codec
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.broker_kit import LOOPS
from tests.integration.pop_kit import (
    ack,
    batch_ack,
    change_invisible,
    connect,
    pop,
    pop_all,
    pop_until,
    popped,
    run,
    send_many,
)

pytestmark = pytest.mark.timeout(90)
G, T = "CG_pop_acks", "TPopAcks"


def test_a_filtered_pop_batch_acked_in_part_revives_exactly_the_rest(tmp_path: Path) -> None:
    """A tag filter makes the checkpoint's offsets 1, 3, 4 (not a run): acking 1 and 4 in one batch leaves 3,
    and only that one comes back."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for i, tag in enumerate(["A", "B", "A", "B", "B"]):
                await c.send(T, f"x{i}".encode(), queue_id=0, tags=tag)
            got = popped(await pop(c, G, T, exp="B", invisible_ms=1000))
            assert [(m.body, r.queue_offset) for m, r in got] == [(b"x1", 1), (b"x3", 3), (b"x4", 4)]
            assert (await batch_ack(c, G, T, [got[0][1], got[2][1]])).code == ResponseCode.SUCCESS
            back = await pop_until(c, G, T, 1, exp="B", invisible_ms=60_000)
            assert [(m.body, m.reconsume_times) for m, _ in back] == [(b"x3", 1)]
            assert eb.broker.pop.counters.acked == 2
            await c.close()

    run(main())


def test_single_acks_of_a_filtered_pop_tick_off_only_the_messages_they_name(tmp_path: Path) -> None:
    """ACK_MESSAGE one message at a time (what a Java POP consumer sends) on a checkpoint whose offsets are
    1, 3, 4: an ack naming offset 2 (in the queue, filtered out of the pop) ticks nothing off; acks of 1 and 4
    leave 3, and only that one comes back."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for i, tag in enumerate(["A", "B", "A", "B", "B"]):
                await c.send(T, f"x{i}".encode(), queue_id=0, tags=tag)
            got = popped(await pop(c, G, T, exp="B", invisible_ms=1000))
            assert [r.queue_offset for _, r in got] == [1, 3, 4]
            stray = got[0][1]._replace(queue_offset=2)  # the pop's checkpoint, an offset it did not hand out
            assert (await ack(c, G, T, stray)).code == ResponseCode.SUCCESS
            assert eb.broker.pop.counters.acked == 0 and eb.broker.pop.in_flight(G) == 3
            for i in (0, 2):
                assert (await ack(c, G, T, got[i][1])).code == ResponseCode.SUCCESS
            assert eb.broker.pop.counters.acked == 2 and eb.broker.pop.in_flight(G) == 1
            back = await pop_until(c, G, T, 1, exp="B", invisible_ms=60_000)
            assert [(m.body, m.reconsume_times) for m, _ in back] == [(b"x3", 1)]
            await c.close()

    run(main())


def test_a_pop_that_fills_up_counts_what_every_other_queue_still_holds(tmp_path: Path) -> None:
    """restNum: the rest of the queue it read plus the whole backlog of the queues it did not need to read."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for q in range(4):
                await send_many(c, T, 5, queue_id=q, prefix=f"q{q}-")
            queues = eb.broker.topics.get(T).read_queue_nums
            assert queues >= 4
            resp = await pop(c, G, T, max_nums=3, invisible_ms=60_000)
            assert len(popped(resp)) == 3
            assert PopMessageResponseHeader.from_ext(resp.ext_fields).rest_num == 4 * 5 - 3
            await c.close()

    run(main())


def test_rest_num_of_the_queues_not_read_starts_at_their_newest_checkpoint(tmp_path: Path) -> None:
    """A queue the pop did not need to read counts from its pop offset: the end of its newest checkpoint where the
    group's stored offset lies behind it (an offsets file older than the checkpoint log, after a kill -9)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for q in range(2):
                await send_many(c, T, 5, queue_id=q, prefix=f"q{q}-")
            assert len(popped(await pop(c, G, T, queue_id=1, max_nums=4, invisible_ms=60_000))) == 4
            eb.broker.store.consumer_offsets.commit(G, T, 1, 1)  # behind the checkpoint's end (4)
            eb.broker.pop._random.random = lambda: 0.0  # the pass starts at queue 0
            resp = await pop(c, G, T, max_nums=1, invisible_ms=60_000)
            assert [r.queue_id for _, r in popped(resp)] == [0]
            # full after queue 0: its own 4 left, queue 1 counts 5 - 4 (not 5 - 1), the other queues hold nothing
            assert PopMessageResponseHeader.from_ext(resp.ext_fields).rest_num == 4 + 1
            await c.close()

    run(main())


def test_a_batch_ack_counts_its_entries_as_calls_and_its_messages_as_acks(tmp_path: Path) -> None:
    """GROUP_ACK_NUMS and BROKER_ACK_NUMS of one batch ack naming two checkpoints: the messages it acked, as two
    calls (one per entry that acked something, as Java's add per entry); an entry that acks nothing again is
    not a call."""
    from rmqrun.broker.stats import BROKER_ACK_NUMS, GROUP_ACK_NUMS

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 4, queue_id=0)
            await send_many(c, T, 2, queue_id=1, prefix="n")
            first = popped(await pop(c, G, T, queue_id=0, invisible_ms=60_000))
            second = popped(await pop(c, G, T, queue_id=1, invisible_ms=60_000))
            assert (len(first), len(second)) == (4, 2)
            assert (await batch_ack(c, G, T, [r for _, r in first + second])).code == ResponseCode.SUCCESS
            assert (await batch_ack(c, G, T, [second[0][1]])).code == ResponseCode.SUCCESS  # acked already
            stats = eb.broker.stats.table
            for name, key in ((GROUP_ACK_NUMS, f"{T}@{G}"), (BROKER_ACK_NUMS, eb.broker.stats.cluster_name)):
                data = stats.get(name, key)
                assert data is not None and data.stats_minute.sum == 6 and data.stats_minute.avgpt == 3.0, name
            assert eb.broker.pop.counters.acked == 6
            await c.close()

    run(main())


def test_batch_acks_in_the_compact_log_survive_a_restart(tmp_path: Path) -> None:
    """Two pops, one batch ack for part of each: after a restart only the un-acked ones come back, once."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 4, queue_id=0)
            await send_many(c, T, 3, queue_id=1, prefix="n")
            first = popped(await pop(c, G, T, queue_id=0, invisible_ms=3000))
            second = popped(await pop(c, G, T, queue_id=1, invisible_ms=3000))
            assert len(first) == 4 and len(second) == 3
            acks = [first[0][1], first[3][1], second[1][1]]
            assert (await batch_ack(c, G, T, acks)).code == ResponseCode.SUCCESS
            await c.close()
        async with EmbeddedBroker(tmp_path / "d") as eb:
            assert len(eb.broker.pop.ck_log) == 2
            c = await connect(eb)
            back = await pop_until(c, G, T, 4, invisible_ms=60_000)
            assert sorted((m.body, m.reconsume_times) for m, _ in back) == [
                (b"m1", 1), (b"m2", 1), (b"n0", 1), (b"n2", 1)]
            assert await pop_all(c, G, T) == []
            await c.close()

    run(main())


def test_in_sync_mode_every_pop_and_ack_answer_follows_an_fsync_of_its_checkpoint_lines(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """SYNC flush mode: a pop, an ack, a batch ack and a change of invisible time are each answered only after an
    fsync of the checkpoint log that covers the lines the request wrote (a power cut after the answer loses
    none of them); the log's size at each of its fsyncs is recorded and must reach its size at the answer."""
    import os

    from rmqrun.broker.pop import ck_log as ck_log_module
    real_fsync = os.fsync
    fsynced: list[int] = []

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync") as eb:
            path = eb.broker.pop.ck_log.path

            def fsync(fd: int) -> None:
                if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                    fsynced.append(os.fstat(fd).st_size)
                real_fsync(fd)

            monkeypatch.setattr(ck_log_module.os, "fsync", fsync)
            c = await connect(eb)
            await send_many(c, T, 6, queue_id=0)

            def covered(what: str) -> None:
                size = path.stat().st_size
                assert fsynced and max(fsynced) >= size, f"{what} answered before its lines were fsync'ed"

            got = popped(await pop(c, G, T, queue_id=0, invisible_ms=60_000))
            assert len(got) == 6
            covered("the pop")
            assert (await ack(c, G, T, got[0][1])).code == ResponseCode.SUCCESS
            covered("the ack")
            assert (await batch_ack(c, G, T, [got[1][1], got[2][1]])).code == ResponseCode.SUCCESS
            covered("the batch ack")
            assert (await change_invisible(c, G, T, got[3][1], 60_000)).code == ResponseCode.SUCCESS
            covered("the change of invisible time")
            await c.close()

    run(main())


def test_concurrent_pops_of_one_consumer_on_queue_minus_one_each_come_back_full_and_disjoint(tmp_path: Path) -> None:
    """Three pops of one group sent together (a queue -1 assignment's pops) on an 8-queue topic with 12 messages
    in each queue: none collides with another on a queue (none comes back short or empty), and no message goes
    out twice; restNum counts what is left after each."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 12, queue_id=0)
            queues = eb.broker.topics.get(T).read_queue_nums
            for q in range(1, queues):
                await send_many(c, T, 12, queue_id=q, prefix=f"q{q}-")
            total = 12 * queues
            answers = await asyncio.gather(*(pop(c, G, T, max_nums=16, invisible_ms=60_000) for _ in range(3)))
            got = [popped(resp) for resp in answers]
            assert [len(g) for g in got] == [16, 16, 16]
            keys = [(r.queue_id, r.queue_offset) for g in got for _, r in g]
            assert len(set(keys)) == 48
            rests = sorted(PopMessageResponseHeader.from_ext(resp.ext_fields).rest_num for resp in answers)
            assert rests == [total - 48, total - 32, total - 16]
            await c.close()

    run(main())


class _WriteSpy:
    """The broker side's stream writer of one connection, noting what the checkpoint log file holds each time
    frames are handed to the OS."""

    def __init__(self, writer: Any, log_file: Path) -> None:
        self._writer, self._log_file = writer, log_file
        self.writes: list[tuple[bytes, str]] = []

    def write(self, data: bytes) -> None:
        self.writes.append((bytes(data), self._log_file.read_text()))
        self._writer.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


async def _one_write_two_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                 frames: list[RemotingCommand]) -> dict[int, RemotingCommand]:
    """Send ``frames`` in one TCP write (so the broker serves them in one loop turn); their answers by opaque."""
    writer.write(b"".join(codec.encode(f) for f in frames))
    answers: dict[int, RemotingCommand] = {}
    while len(answers) < len(frames):
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        resp = codec.decode(await reader.readexactly(length))
        answers[resp.opaque] = resp
    return answers


@pytest.mark.parametrize("loop", LOOPS)
def test_answers_of_one_turn_leave_after_their_checkpoint_lines(tmp_path: Path, loop: str) -> None:
    """A GET_MAX_OFFSET and a POP in one TCP write are served in one loop turn: the GET_MAX_OFFSET's answer is
    queued (the connection's send scheduled) before the POP writes its checkpoint line, so the end-of-turn flush
    of the log would come too late; still the write that carries the POP's answer finds the line with the OS;
    the batch ack's done line likewise. ASYNC flush mode (in SYNC mode an answer waits for an fsync anyway)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="async") as eb:
            c = await connect(eb)
            await send_many(c, T, 3)
            log_file = tmp_path / "d" / "pop" / "checkpoints.log"
            reader, writer = await asyncio.open_connection(*eb.broker_address.rsplit(":", 1))
            while len(eb.broker.server.connections) < 2:
                await asyncio.sleep(0.01)
            spy = None
            for conn in eb.broker.server.connections:
                if conn.name.endswith(f":{writer.get_extra_info('sockname')[1]}"):
                    spy = conn._writer = _WriteSpy(conn._writer, log_file)
            assert spy is not None
            header = PopMessageRequestHeader(consumer_group=G, topic=T, queue_id=0, max_msg_nums=32,
                                             invisible_time=60_000, poll_time=0, born_time=0, init_mode=0,
                                             bname="broker-a")
            frames = [RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": T, "queueId": "0"}, opaque=1),
                      RemotingCommand(RequestCode.POP_MESSAGE, header.to_ext(), opaque=2)]
            answers = await _one_write_two_answers(reader, writer, frames)
            assert answers[1].code == ResponseCode.SUCCESS and answers[2].code == ResponseCode.SUCCESS
            assert len(spy.writes) == 1, "both answers of the turn leave in one write"  # the case this is about
            assert [line.split("\t")[0] for line in spy.writes[0][1].splitlines()] == ["c"], spy.writes
            got = popped(answers[2])
            assert len(got) == 3
            body = encode_batch_ack_body("broker-a", build_batch_acks(G, T, [r for _, r in got]))
            frames = [RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": T, "queueId": "0"}, opaque=3),
                      RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, {}, body=body, opaque=4)]
            answers = await _one_write_two_answers(reader, writer, frames)
            assert answers[4].code == ResponseCode.SUCCESS
            assert [line.split("\t")[0] for line in spy.writes[-1][1].splitlines()] == ["c", "d"], spy.writes
            writer.close()
            await c.close()

    run(main(), loop=loop)
