"""The puller's less travelled paths, end to end: client-side tag re-filter, OFFSET_ILLEGAL, refused pulls.

Embedded broker over real TCP, real worker processes. Faults are made the way a
real broker makes them: a committed offset past the end of the queue (the broker
answers PULL_OFFSET_MOVED), tags whose Java hash codes collide (the broker's
tags-code filter lets both through), and pulls answered SYSTEM_ERROR by a hook in
the broker's request table.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.processors.common import answer
from rmqrun.broker.store.tags_code import java_string_hash
from rmqrun.client.instance import ClientInstance
from rmqrun.consumer.push import PushConsumer
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "workers.orderly_record:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def _config(namesrv: str, group: str, topic: str, **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("broker_suspend_max_time_ms", 300)
    return consumer_config(namesrv, group, topic, **kw)


def test_tags_with_colliding_hash_codes_are_filtered_by_the_client(tmp_path: Path, record: Path) -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # the broker cannot tell them apart

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "PE1", 10, tags=["Aa", "BB"])
            async with Running(_config(eb.namesrv_address, "GPE1", "PE1", tags="Aa"), pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "PE1"]
                # the whole queue (both tags) passed the consumer: the commit is at its end
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the commit at 10")
                assert await r.stop() == 0
            assert read_records(record) == [(0, i) for i in range(0, 10, 2)], "only tag Aa reaches the handler"
            assert (await committed_offsets(eb, "GPE1", "PE1"))[0] == 10
    run(main())


def test_offset_illegal_drops_the_queue_until_the_offset_is_corrected(tmp_path: Path, record: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed offset past the queue's end: the broker answers PULL_OFFSET_MOVED; the consumer pulls
    nothing more from that queue until it has stored the broker's offset (10 s later, as Java) and
    taken the queue again, then consumes from there."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "PE2", 5)
            mq = MessageQueue("PE2", eb.config.broker_name, 0)
            probe = ClientInstance(eb.namesrv_address, instance_name="probe")
            try:
                await probe.broker.update_consumer_offset(eb.broker_address, "GPE2", mq, 1000)
            finally:
                await probe.close()
            calls: list[int] = []
            seen_at_correction: list[list[tuple[int, int]]] = []
            real = PushConsumer.handle_offset_illegal

            async def spying(self, req):  # type: ignore[no-untyped-def]
                calls.append(req.next_offset)
                await real(self, req)
                seen_at_correction.append(read_records(record))
            monkeypatch.setattr(PushConsumer, "handle_offset_illegal", spying)
            async with Running(_config(eb.namesrv_address, "GPE2", "PE2"), pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: bool(calls) or bool(read_records(record)), timeout=30,
                               what="the pull at offset 1000 answered")
                assert calls == [5], f"OFFSET_ILLEGAL moving the queue to its end (5) expected, got {calls}"
                await produce(eb.namesrv_address, "PE2", 3, start=5)  # offsets 5..7, during the 10 s wait
                await wait_for(lambda: bool(seen_at_correction), timeout=40, what="the offset correction")
                assert seen_at_correction[0] == [], "the queue was consumed while its offset was illegal"
                await wait_for(lambda: len(read_records(record)) >= 3, what="offsets 5..7 after the correction")
                new = next(m for m in engine.table if m.topic == "PE2")
                await wait_for(lambda: engine.offset_store.read_memory(new) == 8, what="the commit at 8")
                assert await r.stop() == 0
            assert read_records(record) == [(0, 5), (0, 6), (0, 7)], "consumption resumes at the broker's offset"
            assert (await committed_offsets(eb, "GPE2", "PE2"))[0] == 8
    run(main())


def test_refused_pulls_are_retried_and_nothing_is_lost(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "PE3", 20)
            refused = [0]
            real_pull = eb.broker.processors.pull.pull

            async def pull(conn, cmd):  # type: ignore[no-untyped-def]
                topic = cmd.ext_fields.get("topic") or ""
                if topic == "PE3" and refused[0] < 6:
                    refused[0] += 1
                    return answer(cmd, ResponseCode.SYSTEM_ERROR, "refused by the test")
                return await real_pull(conn, cmd)
            eb.broker.server.register(RequestCode.PULL_MESSAGE, pull)
            async with Running(_config(eb.namesrv_address, "GPE3", "PE3"), pool_config(HANDLER)) as r:
                await wait_for(lambda: len(read_records(record)) >= 20, what="all 20 messages")
                assert refused[0] == 6
                engine = r.supervisor.engine
                assert engine is not None
                mqs = [mq for mq in engine.table if mq.topic == "PE3"]
                sizes = {mq.queue_id: await engine.instance.broker.get_max_offset(eb.broker_address, mq) for mq in mqs}
                await wait_for(lambda: all(engine.offset_store.read_memory(mq) == sizes[mq.queue_id] for mq in mqs),
                               what="every queue committed to its end")
                assert await r.stop() == 0
            assert sorted(read_records(record)) == sorted((q, o) for q, n in sizes.items() for o in range(n))
    run(main())


def test_broker_flow_control_is_retried_after_its_short_delay_not_the_error_delay(tmp_path: Path, record: Path) -> None:
    """FLOW_CONTROL answers back off 20 ms (Java's PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL), not the 1 s
    error delay. The error delay is set to 30 s here, so one flow-control answer taken for an error would hold
    the queue far past this test's wait."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "PE4", 10)
            refused = [0]
            real_pull = eb.broker.processors.pull.pull

            async def pull(conn, cmd):  # type: ignore[no-untyped-def]
                if (cmd.ext_fields.get("topic") or "") == "PE4" and refused[0] < 10:
                    refused[0] += 1
                    return answer(cmd, ResponseCode.FLOW_CONTROL, "too many requests by the test")
                return await real_pull(conn, cmd)
            eb.broker.server.register(RequestCode.PULL_MESSAGE, pull)
            cfg = _config(eb.namesrv_address, "GPE4", "PE4", pull_time_delay_ms_when_exception=30_000)
            async with Running(cfg, pool_config(HANDLER)) as r:
                await wait_for(lambda: len(read_records(record)) >= 10, timeout=25,
                               what="all 10 messages after 10 flow-control answers")
                assert refused[0] == 10
                assert await r.stop() == 0
            assert sorted(read_records(record)) == [(0, i) for i in range(10)]
    run(main())


def test_a_pull_refused_for_its_subscription_asks_for_a_heartbeat(tmp_path: Path, record: Path) -> None:
    """SUBSCRIPTION_NOT_LATEST: the broker has not seen this subscription yet. The consumer heartbeats at once
    (the periodic heartbeat is set to 10 minutes here, so only the refusal can cause one) and pulls again."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "PE5", 5)
            refused = [0]
            heartbeats_after_refusal = [0]
            real_pull = eb.broker.processors.pull.pull
            server = eb.broker.server
            real_heartbeat = server.processors[RequestCode.HEART_BEAT]

            async def pull(conn, cmd):  # type: ignore[no-untyped-def]
                if (cmd.ext_fields.get("topic") or "") == "PE5" and refused[0] < 2:
                    refused[0] += 1
                    return answer(cmd, ResponseCode.SUBSCRIPTION_NOT_LATEST, "the subscription is not latest")
                return await real_pull(conn, cmd)

            async def heartbeat(conn, cmd):  # type: ignore[no-untyped-def]
                if refused[0]:
                    heartbeats_after_refusal[0] += 1
                return await real_heartbeat(conn, cmd)
            server.register(RequestCode.PULL_MESSAGE, pull)
            server.register(RequestCode.HEART_BEAT, heartbeat)
            cfg = _config(eb.namesrv_address, "GPE5", "PE5", heartbeat_interval_ms=600_000,
                          pull_time_delay_ms_when_exception=200)
            async with Running(cfg, pool_config(HANDLER)) as r:
                await wait_for(lambda: len(read_records(record)) >= 5, what="all 5 messages")
                assert refused[0] == 2
                assert heartbeats_after_refusal[0] >= 1, "no heartbeat followed the refused pulls"
                assert await r.stop() == 0
            assert sorted(read_records(record)) == [(0, i) for i in range(5)]
    run(main())


def test_a_queue_whose_pull_hangs_past_the_idle_limit_is_dropped_and_taken_again(tmp_path: Path, record: Path) -> None:
    """Java's isPullExpired recovery: a queue not pulled for pullMaxIdleTime (120 s; 1.5 s here, set on the
    live process queue) is dropped by the next rebalance and created afresh, so a pull lost somewhere
    cannot stop a queue for good; what the new pull brings is consumed once."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "PE6", 5)
            hang = [True]
            release = asyncio.Event()
            real_pull = eb.broker.processors.pull.pull

            async def pull(conn, cmd):  # type: ignore[no-untyped-def]
                if (cmd.ext_fields.get("topic") or "") == "PE6" and hang[0]:
                    await release.wait()  # a pull the broker never answers in time
                return await real_pull(conn, cmd)
            eb.broker.server.register(RequestCode.PULL_MESSAGE, pull)
            cfg = _config(eb.namesrv_address, "GPE6", "PE6", rebalance_interval_ms=300)
            async with Running(cfg, pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "PE6"]
                first = engine.table[mq]
                first.pq.pull_max_idle_ms = 1500
                await wait_for(lambda: engine.table.get(mq) is not None and engine.table[mq] is not first,
                               timeout=30, what="the idle queue dropped and taken again")
                assert first.pq.dropped
                assert read_records(record) == []
                hang[0] = False
                release.set()
                await wait_for(lambda: len(read_records(record)) >= 5, what="the five messages")
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 5, what="the commit at 5")
                assert await r.stop() == 0
            assert sorted(read_records(record)) == [(0, i) for i in range(5)], "each once"
    run(main())
