"""``order_by: key`` end to end: embedded broker, real supervisor, real worker processes.

What the mode promises (issue #11), each checked from what the handler recorded:
every message once, each key strictly in order and one call at a time on the
worker its key hashes to, different keys on all workers at once, the committed
offset below the oldest unfinished message, failures suspending only their key.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, wait_for
from tests.integration.keyed_kit import (
    assert_key_order, finished, max_overlap, produce_keyed, read_calls, stored_messages,
)

HANDLER = "tests.integration.keyed_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 300))


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FILE", str(path))
    return path


def test_thousand_keys_two_queues_four_workers(tmp_path: Path, calls_file: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """2 queues, 1,000 keys, 4 workers: once each, in order per key, all 4 workers at once."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "5")
    keys, total = 1000, 3000

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K1", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK1", "K1", order_by="key")
            assert cfg.orderly  # key mode is an orderly mode: broker locks as in queue mode
            async with Running(cfg, pool_config(HANDLER, workers=4)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                mine = [req for mq, req in engine.table.items() if mq.topic == "K1"]
                assert len(mine) == 2 and all(req.pq.locked for req in engine.table.values())
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= total, timeout=180,
                               what=f"{total} messages")
                slots = {s.worker_id: s.pid for s in r.supervisor.executor.pool.workers()}
                ids = sorted(slots)
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="every queue drained")
                assert engine.consume_service.suspensions == 0
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            # every message once
            assert sorted(c.i for c in calls) == list(range(total))
            assert all(c.status == "ok" for c in calls)
            # each key strictly in order, one call at a time
            assert_key_order(calls, keys)
            # each key always on the worker its key hashes to
            per_key_pids = defaultdict(set)
            for c in calls:
                per_key_pids[c.key].add(c.pid)
            for key, pids in per_key_pids.items():
                assert pids == {slots[ids[zlib.crc32(key.encode()) % len(ids)]]}, key
            # all 4 workers busy, at the same time, although the topic has only 2 queues
            share = Counter(c.pid for c in calls)
            assert len(share) == 4 and min(share.values()) >= total // 10, share
            assert max_overlap(calls) >= 4
            # committed: everything
            offsets = await committed_offsets(eb, "GK1", "K1")
            per_queue = Counter(c.queue for c in calls)
            assert offsets == {q: per_queue[q] for q in (0, 1)}
    run(main())


def test_a_failing_key_suspends_only_itself_then_goes_to_the_dlq(tmp_path: Path, calls_file: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One queue, 50 keys: key 7's first message always fails. Only key 7 waits (its later messages
    do not overtake it); every other key flows past it in the same queue meanwhile; after
    max_reconsume_times it goes to the DLQ and key 7 continues in order."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "5")
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FAIL", "7:7")
    keys, total = 50, 500

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_keyed(eb.namesrv_address, "K2", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK2", "K2", order_by="key", max_reconsume_times=2,
                                  suspend_current_queue_time_ms=1500)
            async with Running(cfg, pool_config(HANDLER, workers=4)) as r:
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= total - 1, timeout=180,
                               what=f"{total - 1} successes")
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="the queue drained")
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            assert_key_order(calls, keys, moved_on={7})
            poison = [c for c in calls if c.i == 7]
            # max_reconsume_times 2: delivered with reconsume 0, 1, 2, then dead-lettered
            assert [(c.reconsume, c.status) for c in poison] == [(0, "fail"), (1, "fail"), (2, "fail")]
            # the suspension held key 7 only: other keys, stored behind it in the same queue, ran
            # in the pause between its first failure and its retry
            first_fail, retry = poison[0].end, poison[1].start
            assert first_fail is not None
            assert retry - first_fail >= 1_400_000_000  # the lane waited its suspend time
            overtook = [c for c in calls if c.key != "7" and c.offset > poison[0].offset
                        and first_fail < c.start < retry and c.status == "ok"]
            assert len(overtook) >= 100, len(overtook)
            # the rest of key 7 only after the poison message was dead-lettered, in order
            key7 = [c.i for c in calls if c.key == "7" and c.status == "ok"]
            assert key7 == list(range(57, total, keys))
            assert min(c.start for c in calls if c.key == "7" and c.i > 7) > poison[-1].end
            # every other message exactly once
            assert sorted(c.i for c in calls if c.key != "7") == [i for i in range(total) if i % keys != 7]
            dlq = await stored_messages(eb.namesrv_address, eb.broker_address, "%DLQ%GK2")
            assert [m.body for m in dlq] == [b"msg-7"]
            assert (await committed_offsets(eb, "GK2", "K2"))[0] == total
    run(main())
