"""Orderly queue locks when the broker cannot answer lock and unlock requests.

The embedded broker answers LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with SYSTEM_ERROR while
the test says so (as a broker that is failing or going away would; the requests
travel over real TCP). What must hold, as in Java's ``RebalanceImpl``:

* a failed renewal changes nothing: the queues keep their lock state and their
  consumption (the broker's lock lasts 60 s, longer than a renewal period);
* a queue newly assigned is not taken while its lock cannot be had, and is taken
  (and consumed) once it can;
* a shutdown whose unlock fails still ends cleanly, with the queues marked unlocked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from rmqrun.broker.processors.common import answer
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from tests.integration.test_engine_route_change import _resize

HANDLER = "workers.orderly_record:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 150))


@dataclass
class LockRefusals:
    """Makes the broker refuse lock and/or unlock requests while switched on, counting them."""

    eb: object
    lock: bool = False
    unlock: bool = False
    refused: dict[str, int] = field(default_factory=lambda: {"lock": 0, "unlock": 0})

    def install(self) -> "LockRefusals":
        server = self.eb.broker.server  # type: ignore[attr-defined]
        real_lock = server.processors[RequestCode.LOCK_BATCH_MQ]
        real_unlock = server.processors[RequestCode.UNLOCK_BATCH_MQ]

        async def lock(conn, cmd):  # type: ignore[no-untyped-def]
            if self.lock:
                self.refused["lock"] += 1
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "lock refused by the test")
            return await real_lock(conn, cmd)

        async def unlock(conn, cmd):  # type: ignore[no-untyped-def]
            if self.unlock:
                self.refused["unlock"] += 1
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "unlock refused by the test")
            return await real_unlock(conn, cmd)
        server.register(RequestCode.LOCK_BATCH_MQ, lock)
        server.register(RequestCode.UNLOCK_BATCH_MQ, unlock)
        return self


def test_lock_requests_failing_neither_stop_held_queues_nor_take_new_ones(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "OLF", 10)
            refusals = LockRefusals(eb).install()
            cfg = consumer_config(eb.namesrv_address, "GOLF", "OLF", orderly=True, broker_suspend_max_time_ms=300,
                                  lock_interval_ms=300, rebalance_interval_ms=300, poll_name_server_interval_ms=200)
            async with Running(cfg, pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None

                def held() -> list[int]:
                    return sorted(mq.queue_id for mq in engine.table if mq.topic == "OLF")

                await wait_for(lambda: len(read_records(record)) >= 10, what="the first 10")
                assert held() == [0, 1]

                # renewals fail: nothing changes, consumption goes on
                refusals.lock = True
                await wait_for(lambda: refusals.refused["lock"] >= 3, what="three refused lock renewals")
                assert all(req.pq.locked for req in engine.table.values()), "a failed renewal unlocked a queue"
                assert engine.rebalancer.lock_losses == 0
                await produce(eb.namesrv_address, "OLF", 6, start=10)
                await wait_for(lambda: len(read_records(record)) >= 16, what="6 more while renewals fail")

                # a queue added while locks fail is not taken without its lock
                await _resize(eb, "OLF", 3, 3)
                await wait_for(lambda: engine.instance.route("OLF") is not None
                               and len(engine.instance.route("OLF").queue_datas) == 1
                               and engine.instance.route("OLF").queue_datas[0].read_queue_nums == 3,
                               what="the route with three queues")
                before = refusals.refused["lock"]
                await wait_for(lambda: refusals.refused["lock"] >= before + 4, what="more refused locks")
                assert held() == [0, 1], "queue 2 was taken without its broker lock"

                # locks granted again: queue 2 is taken and consumed in order
                refusals.lock = False
                await wait_for(lambda: held() == [0, 1, 2], what="queue 2 taken once its lock is granted")
                await produce(eb.namesrv_address, "OLF", 9, start=16)  # a fresh producer: three queues
                await wait_for(lambda: len(read_records(record)) >= 25, what="all 25")
                got = read_records(record)
                q2 = [o for q, o in got if q == 2]
                assert q2 and q2 == list(range(len(q2))), f"queue 2 consumed in order from 0, got {q2}"

                # the shutdown's unlock fails: the run still ends cleanly, its queues marked unlocked
                refusals.unlock = True
                reqs = list(engine.table.values())
                assert await r.stop() == 0
                assert refusals.refused["unlock"] >= 1, "the shutdown did not try to unlock"
                assert not any(req.pq.locked for req in reqs)
            got = read_records(record)
            assert len(got) == len(set(got)) == 25, "a message was lost or handled twice"
            committed = await committed_offsets(eb, "GOLF", "OLF")
            assert sum(v or 0 for v in committed.values()) == 25
    run(main())
