"""Manual commit (``auto_commit: false``, orderly) through the engine and real workers.

SUCCESS consumes without committing; Commit() commits everything taken so far;
Rollback() puts back everything taken since the last commit, which is delivered
again, in order. What the broker stores is read back over TCP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, produce, wait_for

HANDLER = "tests.integration.handlers.manual_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def deliveries(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [(int(o), r) for o, r in (line.split() for line in path.read_text().splitlines() if line.strip())]


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "manual.txt"
    monkeypatch.setenv("MANUAL_RECORD", str(path))
    return path


def _config(namesrv: str, group: str, topic: str):  # type: ignore[no-untyped-def]
    return consumer_config(namesrv, group, topic, orderly=True, auto_commit=False)


def test_commit_and_rollback_decide_what_is_committed_and_redelivered(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANUAL_SCRIPT", "1:commit,3:rollback,5:commit")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "MC1", 7)
            async with Running(_config(eb.namesrv_address, "GMC1", "MC1"), pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "MC1"]
                req = engine.table[mq]
                # the last message handled, its job's outcome applied, nothing left to hand out
                await wait_for(lambda: (6, "ok") in deliveries(record) and not engine.consume_service.is_busy(mq)
                               and not req.pq.has_temp_messages(), what="offset 6 consumed")
                # offset 6 returned SUCCESS after the last Commit(): consumed, not committed
                assert engine.offset_store.read_memory(mq) == 6
                assert await r.stop() == 0
            got = deliveries(record)
            assert [o for o, _ in got] == [0, 1, 2, 3, 2, 3, 4, 5, 6], got
            assert got[3] == (3, "rollback") and got[5] == (3, "ok")
            assert (await committed_offsets(eb, "GMC1", "MC1"))[0] == 6
    run(main())


def test_success_alone_never_commits(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "MC2", 5)
            async with Running(_config(eb.namesrv_address, "GMC2", "MC2"), pool_config(HANDLER)) as r:
                await wait_for(lambda: len(deliveries(record)) >= 5, what="every delivery")
                assert await r.stop() == 0  # the shutdown persists whatever the consumer holds
            assert [o for o, _ in deliveries(record)] == [0, 1, 2, 3, 4]
            assert (await committed_offsets(eb, "GMC2", "MC2"))[0] in (None, 0), "SUCCESS committed in manual mode"
    run(main())


def test_a_message_suspended_past_its_retries_goes_to_the_dlq_and_is_committed_by_the_next_commit(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Orderly, manual commit: offset 2 always suspends; after max_reconsume_times (1) it is
    dead-lettered, the queue moves on, and the handler's next Commit() (at offset 4) covers it;
    offset 5 (SUCCESS after that Commit) stays uncommitted."""
    monkeypatch.setenv("MANUAL_SCRIPT", "2:suspend,4:commit")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "MC3", 6)
            cfg = consumer_config(eb.namesrv_address, "GMC3", "MC3", orderly=True, auto_commit=False,
                                  max_reconsume_times=1)
            async with Running(cfg, pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "MC3"]
                await wait_for(lambda: (3, "ok") in deliveries(record), what="the queue moving past offset 2")
                await wait_for(lambda: eb.broker.store.max_offset("%DLQ%GMC3", 0) == 1, what="offset 2 in the DLQ")
                await wait_for(lambda: (5, "ok") in deliveries(record) and not engine.consume_service.is_busy(mq),
                               what="offset 5 consumed")
                assert engine.offset_store.read_memory(mq) == 5, "the Commit() at 4 covers the dead-lettered 2"
                assert await r.stop() == 0
            got = deliveries(record)
            assert [o for o, _ in got] == [0, 1, 2, 2, 3, 4, 5], got
            assert (await committed_offsets(eb, "GMC3", "MC3"))[0] == 5
    run(main())
