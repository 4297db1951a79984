"""A message that kills its worker is found and failed alone; the service never goes down for it.

Embedded broker, real worker processes. One message among many ends its
worker (``sys.exit(3)``, ``os._exit(7)``, a segfault, an address-space limit);
the pool keeps what the dead worker had finished, re-runs the rest one message
per batch, fails the killer alone, and with ``max_reconsume_times: 1`` it ends
in ``%DLQ%<group>`` while every other message is handled exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.engine_kit import FAST_DELAYS, Running, broker, consumer_config, pool_config, produce, wait_for
from tests.integration.signals_kit import read_deliveries
from tests.integration.test_guarantees_retry import dlq_messages
from tests.waiting import eventually_async

HANDLER = "tests.integration.handlers.crash_handler:crash"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 240))


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(path))
    return path


async def _until_dlq(eb, group: str, n: int, timeout: float = 120) -> list:  # type: ignore[no-untyped-def,type-arg]
    """The messages of ``%DLQ%<group>`` once it holds ``n`` (each look is a request to the broker)."""
    async def dlq() -> list:  # type: ignore[type-arg]
        messages = await dlq_messages(eb, group)
        assert len(messages) >= n, f"{len(messages)} of {n} messages in %DLQ%{group}"
        return messages

    return await eventually_async(dlq, what=f"{n} messages in %DLQ%{group}", timeout=timeout, interval=0.2)


async def _scenario(tmp_path: Path, record: Path, *, group: str, topic: str, total: int, bad: set[int],
                    orderly: bool, workers: int = 2) -> None:
    async with broker(tmp_path, message_delay_levels=FAST_DELAYS) as eb:
        await produce(eb.namesrv_address, topic, total, sharding_keys=4 if orderly else 0)
        cfg = consumer_config(eb.namesrv_address, group, topic, max_reconsume_times=1, orderly=orderly,
                              suspend_current_queue_time_ms=100)
        good = total - len(bad)
        async with Running(cfg, pool_config(HANDLER, workers=workers)) as r:
            await wait_for(lambda: len({d.idx for d in read_deliveries(record) if d.event == "ok"}) >= good,
                           timeout=150, what=f"{good} good messages handled")
            dlq = await _until_dlq(eb, group, len(bad))
            await asyncio.sleep(1.5)  # a late duplicate or a further retry would show by now
            assert not r.task.done(), "rmqrun stopped"  # type: ignore[union-attr]
            executor = r.supervisor.executor
            assert executor.fatal is not None and not executor.fatal.done()
            assert executor.poison_messages >= 2 * len(bad)  # first delivery and the retry, each failed alone
            assert await r.stop() == 0
        deliveries = read_deliveries(record)
        oks = Counter(d.idx for d in deliveries if d.event == "ok")
        assert set(oks) == set(range(total)) - bad
        assert [i for i, c in oks.items() if c != 1] == [], "every other message is handled exactly once"
        assert sorted(int(m.properties["idx"]) for m in dlq) == sorted(bad)
        assert all(m.body == f"msg-{m.properties['idx']}".encode() for m in dlq)
        if orderly:
            per_queue: dict[int, list[int]] = {}
            for d in deliveries:
                if d.event == "ok":
                    per_queue.setdefault(d.queue_id, []).append(d.offset)
            for qid, offsets in per_queue.items():
                assert offsets == sorted(offsets), f"queue {qid} out of order: {offsets}"


@pytest.mark.parametrize("how", ["exit3", "exit7", "segfault", "rlimit"])
def test_a_message_that_kills_its_worker_goes_to_the_dlq_alone(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.setenv("PROBE_CRASH", how)
    monkeypatch.setenv("PROBE_CRASH_IDX", "21")
    run(_scenario(tmp_path, record, group=f"GC_{how}", topic=f"TC_{how}", total=40, bad={21}, orderly=False))


@pytest.mark.parametrize("how", ["exit3", "segfault"])
def test_orderly_a_message_that_kills_its_worker_goes_to_the_dlq_and_the_queue_keeps_its_order(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.setenv("PROBE_CRASH", how)
    monkeypatch.setenv("PROBE_CRASH_IDX", "21")
    run(_scenario(tmp_path, record, group=f"GCO_{how}", topic=f"TCO_{how}", total=40, bad={21}, orderly=True))


def test_a_crash_storm_of_20_bad_messages_over_4_queues_does_not_stop_rmqrun(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = set(range(3, 80, 4))  # 20 messages, 5 on each of the 4 queues
    monkeypatch.setenv("PROBE_CRASH", "exit7")
    monkeypatch.setenv("PROBE_CRASH_IDX", ",".join(map(str, sorted(bad))))
    run(_scenario(tmp_path, record, group="GCS", topic="TCS", total=80, bad=bad, orderly=False))
