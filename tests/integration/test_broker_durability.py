"""Durability: a clean restart keeps everything; kill -9 loses no message acknowledged under sync flush."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import BrokerProcess, EmbeddedBroker
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import RemotingError
from tests.integration.broker_kit import Client, drain

pytestmark = pytest.mark.timeout(120)


def run(coro, timeout: float = 100):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_restart_keeps_messages_offsets_topics_groups_and_pending_delays(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def first_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 3s") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            created = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Sized", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", "defaultTopic": "TBW102"})
            assert (created.code, created.remark) == (ResponseCode.SUCCESS, "not set any response code")
            for i in range(10):
                assert (await c.send("Sized", b"m%d" % i, queue_id=i % 2)).code == ResponseCode.SUCCESS
            await c.send("Sized", b"delayed", queue_id=0, props={"DELAY": "2"})  # due 3 s later
            await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Sized",
                                                              "queueId": "1", "commitOffset": "3"})
            await c.heartbeat("c@1", "G", {"Sized": "*"})
            await c.close()

    async def second_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 3s") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            route = fastjson.loads((await c.route("Sized")).body)["queueDatas"][0]
            assert (route["readQueueNums"], route["writeQueueNums"]) == (2, 2)
            assert fastjson.loads((await c.route("%RETRY%G")).body)["queueDatas"][0]["readQueueNums"] == 1
            offset = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Sized",
                                                                      "queueId": "1"})
            assert offset.ext_fields == {"offset": "3"}
            await c.heartbeat("c@2", "G", {"Sized": "*"})
            got = await drain(c, "G", "Sized", 2, expect=11, deadline_s=10)
            assert sorted(m.body for m in got) == sorted([b"m%d" % i for i in range(10)] + [b"delayed"])
            # New messages continue the queues where they stopped.
            resp = await c.send("Sized", b"after", queue_id=1)
            assert resp.ext_fields["queueOffset"] == "5"
            await c.close()

    run(first_life())
    run(second_life())


async def _produce(addr_ns: str, addr_broker: str, acked: list[bytes], stop: asyncio.Event, worker: int) -> None:
    c = await Client.connect(addr_ns, addr_broker)
    i = 0
    try:
        while not stop.is_set():
            body = b"w%d-%d" % (worker, i)
            try:
                resp = await c.send("Crash", body)
            except RemotingError:
                return  # the broker died mid-request: this one was never acknowledged
            if resp.code == ResponseCode.SUCCESS:
                acked.append(body)
            i += 1
    finally:
        await c.close()


def test_kill_9_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    acked: list[bytes] = []

    async def stream_then_kill(bp: BrokerProcess) -> None:
        stop = asyncio.Event()
        producers = [asyncio.create_task(_produce(bp.namesrv_address, bp.broker_address, acked, stop, w))
                     for w in range(4)]
        deadline = time.monotonic() + 20
        while len(acked) < 300 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        bp.kill()  # SIGKILL while four producers are mid-request
        stop.set()
        await asyncio.gather(*producers, return_exceptions=True)

    bp = BrokerProcess(data, flush_mode="sync").start()
    try:
        run(stream_then_kill(bp))
    finally:
        bp.kill()
    assert len(acked) >= 300, "the producers should have got well into their stream before the kill"

    async def check(bp2: BrokerProcess) -> None:
        c = await Client.connect(bp2.namesrv_address, bp2.broker_address)
        await c.heartbeat("c@1", "G", {"Crash": "*"})
        got = await drain(c, "G", "Crash", 4, expect=len(acked), deadline_s=20, to_the_end=True)
        stored = {m.body for m in got}
        lost = [b for b in acked if b not in stored]
        assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
        # stored but never acknowledged: at most the one request each producer had in flight
        assert len(stored - set(acked)) <= 4
        assert len(got) == len(stored), "each stored message exactly once"
        await c.close()

    with BrokerProcess(data, flush_mode="sync") as bp2:
        run(check(bp2))
