"""Orderly consumption end to end: broker locks, pinned workers, suspend and redelivery in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    Running, broker, by_queue, committed_offsets, consumer_config, pool_config, produce, wait_for,
)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 240))


def assert_in_order_no_gap(records: list[tuple[int, int]], expected_per_queue: dict[int, int]) -> None:
    """Per queue, offsets strictly increasing from 0 with no gap and no repeat."""
    per_queue = by_queue(records)
    for qid, count in expected_per_queue.items():
        assert per_queue.get(qid, []) == list(range(count)), f"queue {qid}: {per_queue.get(qid)}"


@pytest.fixture
def record_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(path))
    return path


def test_orderly_sees_each_queue_in_order(tmp_path: Path, record_file: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "O1", 120, sharding_keys=4)
            cfg = consumer_config(eb.namesrv_address, "GO1", "O1", orderly=True)
            async with Running(cfg, pool_config("workers.orderly_record:handle", workers=2)) as r:
                await wait_for(lambda: len(read_records(record_file)) >= 120, what="120 messages")
                engine = r.supervisor.engine
                assert engine is not None
                locked = [mq for mq, req in engine.table.items() if req.pq.locked]
                assert len(locked) == len(engine.table) > 0
                assert await r.stop() == 0
            records = read_records(record_file)
            counts = {q: len(o) for q, o in by_queue(records).items()}
            assert sum(counts.values()) == 120
            assert_in_order_no_gap(records, counts)
            offsets = await committed_offsets(eb, "GO1", "O1")
            assert all(offsets[q] == c for q, c in counts.items())
    run(main())


def test_orderly_suspend_redelivers_same_message_first(tmp_path: Path, record_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing message is retried in place (reconsume times growing); nothing after it overtakes it."""
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_OFFSETS", "3")
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_TIMES", "2")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "O2", 10)
            cfg = consumer_config(eb.namesrv_address, "GO2", "O2", orderly=True, suspend_current_queue_time_ms=100)
            async with Running(cfg, pool_config("tests.integration.handlers.fail_handler:handle", workers=2)) as r:
                await wait_for(lambda: len([x for x in read_records(record_file) if x[2] == "ok"]) >= 10,
                               what="10 successes")
                assert await r.stop() == 0
            seen = read_records(record_file)
            # offset 3 fails twice (reconsume 0, 1), then succeeds with reconsume 2
            assert [x for x in seen if x[1] == 3] == [(0, 3, "fail", 0), (0, 3, "fail", 1), (0, 3, "ok", 2)]
            ok_offsets = [x[1] for x in seen if x[2] == "ok"]
            assert ok_offsets == list(range(10))
            assert (await committed_offsets(eb, "GO2", "O2"))[0] == 10
    run(main())


def read_records(path: Path) -> list[tuple]:  # type: ignore[no-redef]
    """Lines are ``queue offset [status reconsume]`` depending on the handler."""
    if not path.exists():
        return []
    out: list[tuple] = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((int(parts[0]), int(parts[1])))
        elif len(parts) == 4:
            out.append((int(parts[0]), int(parts[1]), parts[2], int(parts[3])))
    return out


def test_orderly_dead_letters_after_max_reconsume_times(tmp_path: Path, record_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_OFFSETS", "2")
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_TIMES", "1000")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "O3", 5)
            cfg = consumer_config(eb.namesrv_address, "GO3", "O3", orderly=True, suspend_current_queue_time_ms=50,
                                  max_reconsume_times=3)
            async with Running(cfg, pool_config("tests.integration.handlers.fail_handler:handle", workers=1)) as r:
                await wait_for(lambda: len([x for x in read_records(record_file) if x[2] == "ok"]) >= 4,
                               what="the 4 good messages")
                assert await r.stop() == 0
            seen = read_records(record_file)
            assert [x[3] for x in seen if x[1] == 2] == [0, 1, 2, 3], "max 3 reconsumes: 4 deliveries"
            assert [x[1] for x in seen if x[2] == "ok"] == [0, 1, 3, 4]
            assert (await committed_offsets(eb, "GO3", "O3"))[0] == 5
            dlq = await _topic_messages(eb, "%DLQ%GO3")
            assert [m.body for m in dlq] == [b"msg-2"]
    run(main())


async def _topic_messages(eb, topic: str):  # type: ignore[no-untyped-def]
    from rmqrun.protocol.headers import PullMessageRequestHeader
    from rmqrun.client.instance import ClientInstance
    from rmqrun.remoting.message import decode_messages
    inst = ClientInstance(eb.namesrv_address, instance_name="probe")
    try:
        out = []
        for mq in await inst.subscribe_queues(topic):
            header = PullMessageRequestHeader(consumer_group="probe", topic=topic, queue_id=mq.queue_id,
                                              queue_offset=0, max_msg_nums=32, sys_flag=4, commit_offset=0,
                                              suspend_timeout_millis=0, sub_version=0, subscription="*",
                                              expression_type="TAG")
            result = await inst.broker.pull(eb.broker_address, header)
            out.extend(decode_messages(result.body))
        return out
    finally:
        await inst.close()
