"""Queue mode: an orderly job waiting for a busy worker while its queue's lock lapses does not start.

One worker taking one job at a time; queue 0's message at offset 5 holds it (the gate
handler) while queue 1's job waits in the executor for the same worker. Queue 1's lock
then lapses (not renewed in time: a supervisor frozen past the expiry, a broker out of
reach); another client may own the queue by now. When the worker frees, the waiting job must come back unrun, and the queue be locked
again (and its gap settled, ``lock_gap.py``) before any of its messages is handled: started
on the stale lock, it would run beside the new owner (out of order, or twice).

The broker holds the lock request that follows, so the test looks at what was handled at
that moment: nothing of queue 1 yet.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, wait_for

HANDLER = "tests.integration.handlers.gate_handler:handle"
TOPIC, GROUP = "OLapse", "GOLapse"
QUEUE_1 = re.compile(rb'"queueId"\s*:\s*1\b')


def _handled(record: Path) -> set[tuple[int, int]]:
    if not record.exists():
        return set()
    return {(int(q), int(o)) for q, o in (line.split() for line in record.read_text().splitlines() if line)}


def test_a_waiting_queue_mode_job_does_not_start_once_its_lock_lapsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, gate = tmp_path / "record.txt", tmp_path / "gate"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))
    monkeypatch.setenv("RMQRUN_HANDLER_GATE_FILE", str(gate))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            for i in range(6):       # queue 0: offset 5 waits for the gate
                assert (await c.send(TOPIC, b"q0-%d" % i, queue_id=0)).code == ResponseCode.SUCCESS
            real_lock = eb.broker.server.processors[RequestCode.LOCK_BATCH_MQ]
            hold = asyncio.Event()       # set: lock requests naming queue 1 wait for `release`
            release = asyncio.Event()
            held = asyncio.Event()

            async def lock_batch(conn, cmd):  # type: ignore[no-untyped-def]
                if hold.is_set() and QUEUE_1.search(cmd.body or b""):
                    held.set()
                    await release.wait()
                return await real_lock(conn, cmd)

            eb.broker.server.register(RequestCode.LOCK_BATCH_MQ, lock_batch)
            cfg = consumer_config(eb.namesrv_address, GROUP, TOPIC, orderly=True, lock_interval_ms=600_000)
            running = Running(cfg, pool_config(HANDLER, workers=1))
            # the worker takes one job at a time (--max-inflight-messages 1): the next waits in the executor
            running.supervisor.executor.max_inflight_messages = 1
            async with running as r:
                engine, ex = r.supervisor.engine, r.supervisor.executor
                assert engine is not None and ex is not None
                await wait_for(lambda: {(0, o) for o in range(5)} <= _handled(record), what="queue 0 up to 4")
                pq0 = engine.table[MessageQueue(TOPIC, "broker-a", 0)].pq
                await wait_for(lambda: 5 in ex.handler_calls(pq0), what="queue 0's offset 5 holding the worker")
                for i in range(3):   # queue 1's job comes while the worker is held
                    assert (await c.send(TOPIC, b"q1-%d" % i, queue_id=1)).code == ResponseCode.SUCCESS

                def queue_1_job_waits() -> bool:
                    return any(p.job is not None and p.job.mq.queue_id == 1 for p in ex._waiting)
                await wait_for(queue_1_job_waits, what="queue 1's job waiting for the worker")
                pq = engine.table[MessageQueue(TOPIC, "broker-a", 1)].pq
                hold.set()
                pq.last_lock_timestamp -= pq.lock_max_live_ms + 1_000   # not renewed in time: lapsed
                gate.touch()                                             # the worker frees
                await asyncio.wait_for(held.wait(), 60)
                assert (0, 5) in _handled(record)
                early = {o for q, o in _handled(record) if q == 1}
                assert not early, f"queue 1's offsets {sorted(early)} were handled on a lapsed lock"
                release.set()
                await wait_for(lambda: {(1, o) for o in range(3)} <= _handled(record), what="queue 1, relocked")
                assert pq.holds_lock()
                assert await r.stop() == 0
            lines = record.read_text().splitlines()
            assert len(lines) == len(set(lines)) == 9, lines
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 200))
