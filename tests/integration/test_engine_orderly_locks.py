"""Orderly consumption only under the queue's broker lock, and nothing lost when a job does not run.

The lock is taken away over real TCP, as another client would: a probe unlocks
the queue in the consumer's name and locks it for a "thief" client id; the
consumer's lock renewal (every second here) then learns it lost the lock. The
paths checked are the "still locked?" test the orderly loop makes before it
hands a job to a worker, the puller's "no pull without the lock", rebalance not
taking a queue someone else holds, and the put-back (rollback) of an orderly job
that could not run or was cancelled, so that no later job commits past it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.consumer import puller
from rmqrun.model import MessageQueue
from rmqrun.supervisor.executor import ExecutorClosedError
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "tests.integration.handlers.lock_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 150))


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.txt"
    monkeypatch.setenv("LOCK_RECORD", str(path))
    return path


def orderly_config(namesrv: str, group: str, topic: str, **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("lock_interval_ms", 1000)
    return consumer_config(namesrv, group, topic, orderly=True, broker_suspend_max_time_ms=300, **kw)


class Thief:
    """A second client that takes queue locks away from the consumer, through the broker."""

    def __init__(self, eb, group: str) -> None:  # type: ignore[no-untyped-def]
        self.eb = eb
        self.group = group
        self.inst = ClientInstance(eb.namesrv_address, instance_name="thief")
        self.client_id = "127.0.0.1@thief"

    async def take(self, mq: MessageQueue, owner: str | None = None) -> None:
        if owner is not None:
            await self.inst.broker.unlock_batch_mq(self.eb.broker_address, self.group, owner, [mq], oneway=False)
        got = await self.inst.broker.lock_batch_mq(self.eb.broker_address, self.group, self.client_id, [mq])
        assert mq in got, f"the thief could not lock {mq}"

    async def give_back(self, mq: MessageQueue) -> None:
        await self.inst.broker.unlock_batch_mq(self.eb.broker_address, self.group, self.client_id, [mq], oneway=False)

    async def close(self) -> None:
        await self.inst.close()


def test_lock_lost_while_a_job_runs_no_further_job_and_no_pull_until_locked_again(
        tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("LOCK_GATE", str(gate))
    pulls: list[float] = []
    real_pull_once = puller._pull_once

    async def counting_pull_once(engine, req, sub):  # type: ignore[no-untyped-def]
        if req.mq.topic == "OL1":
            pulls.append(asyncio.get_running_loop().time())
        await real_pull_once(engine, req, sub)
    monkeypatch.setattr(puller, "_pull_once", counting_pull_once)

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "OL1", 1)
            thief = Thief(eb, "GOL1")
            try:
                async with Running(orderly_config(eb.namesrv_address, "GOL1", "OL1"), pool_config(HANDLER)) as r:
                    engine = r.supervisor.engine
                    assert engine is not None
                    (mq,) = [mq for mq in engine.table if mq.topic == "OL1"]
                    req = engine.table[mq]
                    await wait_for(lambda: Path(str(gate) + ".started").exists(), what="offset 0 in its handler")
                    await produce(eb.namesrv_address, "OL1", 5, start=1)
                    await wait_for(lambda: req.pq.msg_count >= 6, what="offsets 1..5 cached behind the running job")
                    # the lock goes to another client while offset 0's job is in flight
                    await thief.take(mq, owner=engine.instance.client_id)
                    await wait_for(lambda: engine.rebalancer.lock_losses >= 1 and not req.pq.locked, timeout=20,
                                   what="the lock renewal (every second) noticing the loss")
                    lost_at = asyncio.get_running_loop().time()
                    lock_tries: list[bool] = []
                    real_lock = engine.rebalancer.lock

                    async def counting_lock(q: MessageQueue) -> bool:
                        ok = await real_lock(q)
                        if q == mq:
                            lock_tries.append(ok)
                        return ok
                    engine.rebalancer.lock = counting_lock  # type: ignore[method-assign]
                    gate.write_text("go")
                    # the loop finishes offset 0, then asks for the lock (refused) instead of going on
                    await wait_for(lambda: len(lock_tries) >= 2 or len(read_records(record)) > 1,
                                   what="the orderly loop asking for the lock again")
                    assert lock_tries == [False] * len(lock_tries)
                    assert read_records(record) == [(0, 0)], "a job was handed to a worker without the lock"
                    assert [t for t in pulls if t > lost_at + 0.5] == [], "the queue was pulled without its lock"
                    await thief.give_back(mq)
                    await wait_for(lambda: len(read_records(record)) >= 6, what="offsets 1..5 after relocking")
                    await wait_for(lambda: engine.offset_store.read_memory(mq) == 6, what="the commit of 6")
                    assert await r.stop() == 0
                assert read_records(record) == [(0, i) for i in range(6)]
                assert (await committed_offsets(eb, "GOL1", "OL1"))[0] == 6
            finally:
                await thief.close()
    run(main())


def test_rebalance_does_not_take_a_queue_locked_by_another_client(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "OL2", 1)  # creates the topic (2 queues)
            thief = Thief(eb, "GOL2")
            try:
                q0 = MessageQueue("OL2", eb.config.broker_name, 0)
                await thief.take(q0)
                await produce(eb.namesrv_address, "OL2", 9, start=1)
                cfg = orderly_config(eb.namesrv_address, "GOL2", "OL2", rebalance_interval_ms=500)
                async with Running(cfg, pool_config(HANDLER)) as r:
                    engine = r.supervisor.engine
                    assert engine is not None
                    q1 = MessageQueue("OL2", eb.config.broker_name, 1)
                    sizes = {0: 0, 1: 0}
                    for q in (q0, q1):
                        sizes[q.queue_id] = await engine.instance.broker.get_max_offset(eb.broker_address, q)
                    assert sizes[0] > 0 and sizes[1] > 0, sizes
                    await wait_for(lambda: len(read_records(record)) >= sizes[1], what="queue 1 consumed")
                    rebalances = engine.rebalancer.rebalances
                    await wait_for(lambda: engine.rebalancer.rebalances >= rebalances + 2, what="two more rebalances")
                    assert q0 not in engine.table
                    assert all(qid == 1 for qid, _ in read_records(record)), "queue 0 consumed without its lock"
                    await thief.give_back(q0)
                    await wait_for(lambda: len(read_records(record)) >= sizes[0] + sizes[1], what="queue 0 after unlock")
                    assert await r.stop() == 0
                got = read_records(record)
                assert [o for q, o in got if q == 0] == list(range(sizes[0]))
                assert [o for q, o in got if q == 1] == list(range(sizes[1]))
            finally:
                await thief.close()
    run(main())


@pytest.mark.parametrize("fault", ["not_run", "cancelled"])
def test_orderly_job_that_does_not_run_is_put_back_and_nothing_commits_past_it(
        tmp_path: Path, record: Path, fault: str) -> None:
    """The first orderly job fails to run (the executor refuses it) or is cancelled: its messages go
    back first in line, so the queue is consumed in order without a gap and the commit never skips them."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "OL3", 4)
            cfg = orderly_config(eb.namesrv_address, "GOL3", "OL3", consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            faults: list[list[int]] = []
            running = Running(cfg, pool_config(HANDLER))
            executor = running.supervisor.executor  # created with the supervisor, used once it runs
            real_submit = executor.submit  # the orderly service hands its jobs over through it

            def faulty_submit(job):  # type: ignore[no-untyped-def]
                if not faults and job.mq.topic == "OL3":
                    faults.append(list(job.offsets))
                    refused = asyncio.get_running_loop().create_future()
                    if fault == "not_run":
                        refused.set_exception(ExecutorClosedError("refused by the test"))
                    else:
                        refused.cancel()
                    return refused
                return real_submit(job)
            executor.submit = faulty_submit  # type: ignore[method-assign]
            async with running as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: bool(faults), what="the first job refused")
                assert faults[0][0] == 0
                await produce(eb.namesrv_address, "OL3", 4, start=4)  # a put kicks the loop again
                await wait_for(lambda: (0, 7) in read_records(record), what="the last message")
                (mq,) = [mq for mq in engine.table if mq.topic == "OL3"]
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 8, what="the commit of 8")
                assert await r.stop() == 0
            assert read_records(record) == [(0, i) for i in range(8)]
            assert (await committed_offsets(eb, "GOL3", "OL3"))[0] == 8
    run(main())
