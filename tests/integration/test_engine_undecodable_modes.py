"""A record nobody can decode, in the two modes the DLQ path treats apart: broadcasting and manual commit.

* Broadcasting has no DLQ: the record is dropped with the error logged and counted,
  and the queue moves on (the later messages are handled, the local offset passes it).
* Orderly with ``auto_commit: false``: the record goes to ``%DLQ%<group>`` as stored,
  the queue moves on in order, and it is committed by the handler's next COMMIT.

The record (properties that are not UTF-8) is written to the embedded broker's store
directly, as no client can send one; everything else is real: TCP, worker processes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.remoting import message as codec

from rmqrun.remoting import message_props
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from tests.integration.test_engine_orderly import _topic_messages


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def _store_undecodable(eb, topic: str) -> None:  # type: ignore[no-untyped-def]
    placeholder = "\u00ff"
    props = f"TAGS\x01TagA\x02broken\x01{placeholder}"
    record = codec.encode_stored(topic=topic, body=b"bad properties", properties=props, queue_id=0,
                                 store_host=eb.broker_address, born_host=eb.broker_address)
    record = bytearray(bytes(record).replace(placeholder.encode(), b"\xff\xfe"))
    eb.broker.store.put(topic, 0, record, message_props.tags_code("TagA"))


def test_broadcasting_drops_an_undecodable_record_and_moves_on(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "UB", 3)          # offsets 0..2
            _store_undecodable(eb, "UB")                        # offset 3
            await produce(eb.namesrv_address, "UB", 3, start=3)  # offsets 4..6
            cfg = consumer_config(eb.namesrv_address, "GUB", "UB", message_model="BROADCASTING",
                                  broker_suspend_max_time_ms=300, offset_store_dir=str(tmp_path / "offsets"))
            async with Running(cfg, pool_config("workers.orderly_record:handle")) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "UB"]
                await wait_for(lambda: len(read_records(record)) >= 6, what="the six good messages")
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 7, what="the local offset past it")
                assert engine.stats.undecodable == 1
                assert await r.stop() == 0
            assert sorted(read_records(record)) == [(0, o) for o in (0, 1, 2, 4, 5, 6)]
            assert await _topic_messages_or_none(eb, "%DLQ%GUB") is None, "broadcasting has no DLQ"
    run(main())


async def _topic_messages_or_none(eb, topic: str):  # type: ignore[no-untyped-def]
    from rmqrun.remoting.errors import TopicNotExistError
    try:
        return await _topic_messages(eb, topic)
    except TopicNotExistError:
        return None


def test_manual_commit_dead_letters_an_undecodable_record_and_commits_it_with_the_next_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manual = tmp_path / "manual.txt"
    monkeypatch.setenv("MANUAL_RECORD", str(manual))
    monkeypatch.setenv("MANUAL_SCRIPT", "1:commit,5:commit")

    def deliveries() -> list[tuple[int, str]]:
        if not manual.exists():
            return []
        return [(int(a), b) for a, b in (line.split() for line in manual.read_text().splitlines() if line)]

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "UM", 3)          # 0..2
            _store_undecodable(eb, "UM")                        # 3
            await produce(eb.namesrv_address, "UM", 3, start=3)  # 4..6
            cfg = consumer_config(eb.namesrv_address, "GUM", "UM", orderly=True, auto_commit=False,
                                  broker_suspend_max_time_ms=300)
            async with Running(cfg, pool_config("tests.integration.handlers.manual_handler:handle")) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "UM"]
                await wait_for(lambda: len(deliveries()) >= 6, what="the six good messages")
                # committed through offset 5's COMMIT (the dead-lettered 3 included), not past 6
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 6, what="the commit at 6")
                dlq = await _topic_messages(eb, "%DLQ%GUM")
                assert [m.properties.get("RETRY_TOPIC") for m in dlq] == ["UM"]
                assert engine.stats.undecodable == 1
                assert await r.stop() == 0
            assert [o for o, _ in deliveries()] == [0, 1, 2, 4, 5, 6], "in order, each once, 3 never handled"
            assert (await committed_offsets(eb, "GUM", "UM"))[0] == 6
    run(main())
