"""Concurrent retries and the dead-letter queue, end to end (embedded broker, real workers).

The broker's delay levels are all 1 s (``message_delay_levels``) so a retry
comes back in about a second. What the handler saw comes from its record
file; what the broker holds (DLQ contents, committed offsets) is asked of the
broker.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    FAST_DELAYS, Running, broker, committed_offsets, consumer_config, pool_config, produce, wait_for,
)
from tests.integration.signals_kit import Delivery, read_deliveries
from tests.waiting import eventually_async

HANDLER = "tests.integration.handlers.probe_handler:record"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(path))
    return path


def by_idx(deliveries: list[Delivery]) -> dict[int, list[Delivery]]:
    out: dict[int, list[Delivery]] = defaultdict(list)
    for d in deliveries:
        out[d.idx].append(d)
    return out


async def dlq_messages(eb, group: str) -> list:  # type: ignore[no-untyped-def,type-arg]
    from tests.integration.test_engine_orderly import _topic_messages
    from rmqrun.remoting.errors import TopicNotExistError
    try:
        return await _topic_messages(eb, f"%DLQ%{group}")
    except TopicNotExistError:
        return []


def test_failing_k_times_is_delivered_k_plus_1_times_with_growing_reconsume_times(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_FAIL_IDX", "3,7")
    monkeypatch.setenv("PROBE_FAIL_TIMES", "2")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "RT1", 12)
            cfg = consumer_config(eb.namesrv_address, "GRT1", "RT1")
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                await wait_for(lambda: sum(d.event == "ok" for d in read_deliveries(record)) >= 12, timeout=60,
                               what="12 successes")
                await asyncio.sleep(1.5)  # nothing more may come
                assert await r.stop() == 0
            seen = by_idx(read_deliveries(record))
            for idx in range(12):
                got = [(d.event, d.reconsume) for d in seen[idx]]
                if idx in (3, 7):
                    assert got == [("fail", 0), ("fail", 1), ("ok", 2)], f"idx {idx}: {got}"
                else:
                    assert got == [("ok", 0)], f"idx {idx}: {got}"
            offsets = await committed_offsets(eb, "GRT1", "RT1")
            assert sum(o or 0 for o in offsets.values()) == 12, f"the source topic is fully committed: {offsets}"
            assert await dlq_messages(eb, "GRT1") == []
    run(main())


def test_always_failing_message_ends_in_the_dlq_after_max_reconsume_times(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_FAIL_IDX", "2")
    monkeypatch.setenv("PROBE_FAIL_TIMES", "1000")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "RT2", 6)
            cfg = consumer_config(eb.namesrv_address, "GRT2", "RT2", max_reconsume_times=2)
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                await wait_for(lambda: len(by_idx(read_deliveries(record))[2]) >= 3, timeout=60,
                               what="3 deliveries of idx 2")
                dlq: list = []  # type: ignore[type-arg]
                dlq = await eventually_async(lambda: dlq_messages(eb, "GRT2"), what="a message in %DLQ%GRT2",
                                             interval=0.2)
                await asyncio.sleep(2.5)  # a 4th delivery would come within ~1 s
                assert await r.stop() == 0
            seen = by_idx(read_deliveries(record))
            assert [(d.event, d.reconsume) for d in seen[2]] == [("fail", 0), ("fail", 1), ("fail", 2)]
            assert [m.properties.get("idx") for m in dlq] == ["2"]
            assert dlq[0].body == b"msg-2"
            assert all([(d.event, d.reconsume) for d in seen[i]] == [("ok", 0)] for i in (0, 1, 3, 4, 5))
    run(main())


def test_reconsume_later_with_delay_level_minus_1_goes_straight_to_the_dlq(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_FAIL_IDX", "4")
    monkeypatch.setenv("PROBE_FAIL_TIMES", "1000")
    monkeypatch.setenv("PROBE_DELAY_LEVEL", "-1")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "RT3", 6)
            cfg = consumer_config(eb.namesrv_address, "GRT3", "RT3")
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                await wait_for(lambda: len(read_deliveries(record)) >= 6, timeout=60, what="6 deliveries")
                dlq: list = []  # type: ignore[type-arg]
                dlq = await eventually_async(lambda: dlq_messages(eb, "GRT3"), what="a message in %DLQ%GRT3",
                                             interval=0.2)
                await asyncio.sleep(2.5)  # a retry would come within ~1 s
                assert await r.stop() == 0
            seen = by_idx(read_deliveries(record))
            assert [(d.event, d.reconsume) for d in seen[4]] == [("fail", 0)], "one delivery, no retry"
            assert [m.properties.get("idx") for m in dlq] == ["4"]
            offsets = await committed_offsets(eb, "GRT3", "RT3")
            assert sum(o or 0 for o in offsets.values()) == 6
    run(main())


def test_ack_index_in_a_batch_handler_retries_only_the_unacknowledged_tail(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_ACK_INDEX", "1")
    total = 24

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "RT4", total)
            cfg = consumer_config(eb.namesrv_address, "GRT4", "RT4", consume_message_batch_max_size=4)
            pool = pool_config("tests.integration.handlers.probe_handler:ack_batch", workers=2, batch_size=4)
            async with Running(cfg, pool) as r:
                await wait_for(lambda: len({d.idx for d in read_deliveries(record) if d.event == "ok"}) >= total,
                               timeout=60, what="every message acknowledged")
                await asyncio.sleep(1.5)
                assert await r.stop() == 0
            deliveries = read_deliveries(record)
            calls: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
            for d in deliveries:
                calls[(d.pid, d.call)].append(d)
            first_calls = [c for c in calls.values() if c[0].reconsume == 0]
            assert any(len(c) > 2 for c in first_calls), "some call had a tail to retry"
            retried: set[int] = set()
            for c in first_calls:
                # AckIndex(1): messages 0 and 1 of the call succeed, the rest come back
                assert [d.event for d in c] == ["ok"] * min(2, len(c)) + ["fail"] * max(0, len(c) - 2)
                retried |= {d.idx for d in c[2:]}
            seen = by_idx(deliveries)
            for idx in range(total):
                events = [(d.event, d.reconsume) for d in seen[idx]]
                if idx in retried:
                    assert events == [("fail", 0), ("ok", 1)], f"idx {idx}: {events}"
                else:
                    assert events == [("ok", 0)], f"idx {idx}: {events}"
            offsets = await committed_offsets(eb, "GRT4", "RT4")
            assert sum(o or 0 for o in offsets.values()) == total
    run(main())
