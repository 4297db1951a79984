"""``rmqrun run`` under a namespace, end to end (embedded broker, real worker processes).

The broker is asked what it holds (its topic table, subscription groups,
stored offsets, the DLQ), so these tests see the names on the wire; the
handler's record file shows what the handler saw. Messages are produced to the
wrapped topic by a client without a namespace, as another tenant-aware client
(or the Java producer with ``setNamespace``) would store them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from rmqrun.cli.run.metrics import registry_for
from tests.integration.engine_kit import FAST_DELAYS, Running, broker, consumer_config, pool_config, produce, wait_for
from tests.integration.test_engine_orderly import _topic_messages
from tests.integration.handlers.topic_handler import deliveries

HANDLER = "tests.integration.handlers.topic_handler:handle"
NS = "MQ_INST_t1"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 150))


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "deliveries.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD", str(path))
    return path


def by_idx(rows: list[tuple[str, str, int, int]]) -> dict[int, list[tuple[str, int]]]:
    out: dict[int, list[tuple[str, int]]] = {}
    for event, _topic, idx, times in rows:
        out.setdefault(idx, []).append((event, times))
    return out


def test_concurrent_consumer_wraps_every_name_on_the_wire_and_shows_the_handler_plain_ones(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """idx 2 fails once (retried through the namespaced retry topic), idx 5 always (namespaced DLQ)."""
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_ONCE_IDX", "2")
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_IDX", "5")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, f"{NS}%NsT", 10)
            cfg = consumer_config(eb.namesrv_address, "GNs", "NsT", namespace=NS, max_reconsume_times=1)
            async with Running(cfg, pool_config(HANDLER, workers=2, consumer=cfg)) as r:
                # the handler is told the plain names; the engine uses the wrapped ones
                assert r.supervisor.engine is not None
                assert {mq.topic for mq in r.supervisor.engine.table} == {f"{NS}%NsT", f"%RETRY%{NS}%GNs"}

                def done() -> bool:
                    seen = by_idx(deliveries(record))
                    return (sum(1 for i in range(10) if ("ok", 0) in seen.get(i, []) or ("ok", 1) in seen.get(i, []))
                            == 9 and len(seen.get(5, [])) == 2)
                await wait_for(done, timeout=90, what="9 successes and 2 failures of idx 5")
                await wait_for(lambda: eb.broker.topics.get(f"%DLQ%{NS}%GNs") is not None, timeout=30,
                               what="the namespaced DLQ topic")
                metrics = generate_latest(registry_for(r.supervisor, time.time())).decode()
                await asyncio.sleep(1.5)  # nothing more may come
                assert await r.stop() == 0

            rows = deliveries(record)
            assert {topic for _, topic, _, _ in rows} == {"NsT"}, f"the handler saw wrapped names: {rows}"
            seen = by_idx(rows)
            assert seen[2] == [("fail", 0), ("ok", 1)]
            assert seen[5] == [("fail", 0), ("fail", 1)]
            assert all(seen[i] == [("ok", 0)] for i in range(10) if i not in (2, 5)), seen

            names = set(eb.broker.topics.names())
            assert {f"{NS}%NsT", f"%RETRY%{NS}%GNs", f"%DLQ%{NS}%GNs"} <= names, names
            assert not names & {"NsT", "%RETRY%GNs", "%DLQ%GNs"}, names
            assert f"{NS}%GNs" in eb.broker.groups.names() and "GNs" not in eb.broker.groups.names()

            offsets = eb.broker.store.consumer_offsets
            assert sum(offsets.offsets(f"{NS}%GNs", f"{NS}%NsT").values()) == 10
            assert offsets.offsets("GNs", "NsT") == {} and offsets.offsets("GNs", f"{NS}%NsT") == {}

            dlq = await _topic_messages(eb, f"%DLQ%{NS}%GNs")
            assert [m.body for m in dlq] == [b"msg-5"]

            queue_lines = [ln for ln in metrics.splitlines() if ln.startswith("rmqrun_queue_")]
            assert any('topic="NsT"' in ln for ln in queue_lines), metrics
            assert any('topic="%RETRY%GNs"' in ln for ln in queue_lines), metrics
            assert all('group="GNs"' in ln for ln in queue_lines), metrics  # the user's name, as the topics
            assert not any(NS in ln for ln in queue_lines), queue_lines
    run(main())


def test_orderly_consumer_locks_wrapped_queues_and_dead_letters_into_the_namespaced_dlq(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Orderly mode re-publishes to the retry topic to reach the DLQ: that path carries the namespace too."""
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_IDX", "3")

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, f"{NS}%NsO", 8)
            cfg = consumer_config(eb.namesrv_address, "GNsO", "NsO", namespace=NS, orderly=True,
                                  max_reconsume_times=1, suspend_current_queue_time_ms=100)
            async with Running(cfg, pool_config(HANDLER, workers=2, consumer=cfg)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                locked = [mq for mq in engine.table if mq.topic == f"{NS}%NsO"]
                assert locked and all(eb.broker.locks.owner(f"{NS}%GNsO", mq) == engine.instance.client_id
                                      for mq in locked)
                await wait_for(lambda: eb.broker.topics.get(f"%DLQ%{NS}%GNsO") is not None, timeout=60,
                               what="the namespaced DLQ topic")
                await wait_for(lambda: sum(e == "ok" for e, *_ in deliveries(record)) >= 7, timeout=60,
                               what="the 7 other messages")
                assert await r.stop() == 0
            rows = deliveries(record)
            assert {topic for _, topic, _, _ in rows} == {"NsO"}, rows
            assert by_idx(rows)[3] == [("fail", 0), ("fail", 1)]
            dlq = await _topic_messages(eb, f"%DLQ%{NS}%GNsO")
            assert [m.body for m in dlq] == [b"msg-3"]
            assert "%DLQ%GNsO" not in eb.broker.topics.names()
            assert sum(eb.broker.store.consumer_offsets.offsets(f"{NS}%GNsO", f"{NS}%NsO").values()) == 8
    run(main())
