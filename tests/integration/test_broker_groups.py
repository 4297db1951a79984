"""Consumer groups (heartbeat, NOTIFY_CONSUMER_IDS_CHANGED, expiry) and orderly queue locks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import ConsumerListBody
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client

pytestmark = pytest.mark.timeout(60)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 45))


async def _members(c: Client, group: str) -> list[str]:
    resp = await c.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    if resp.code != ResponseCode.SUCCESS:
        return []
    return sorted(ConsumerListBody.from_json(resp.body or b"{}").consumer_id_list)


async def _wait_notified(c: Client, timeout: float = 3.0) -> None:
    await asyncio.wait_for(c.notified.wait(), timeout)
    c.notified.clear()


def test_members_are_notified_when_one_joins_and_leaves(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            a = await Client.connect(eb.namesrv_address, eb.broker_address)
            b = await Client.connect(eb.namesrv_address, eb.broker_address)
            await a.heartbeat("a@1", "G", {"T": "*", "%RETRY%G": "*"})
            await _wait_notified(a)  # a new member is told too (it rebalances at once)
            assert await _members(a, "G") == ["a@1"]
            # The heartbeat created the group's retry topic: it has a route before any send-back.
            retry_route = fastjson.loads((await a.route("%RETRY%G")).body)
            assert retry_route["queueDatas"][0]["readQueueNums"] == 1
            assert retry_route["queueDatas"][0]["perm"] == 6

            await b.heartbeat("b@2", "G", {"T": "*", "%RETRY%G": "*"})
            await _wait_notified(a)
            await _wait_notified(b)
            assert a.notifications[-1] == "G"
            assert await _members(a, "G") == ["a@1", "b@2"]

            # A repeated heartbeat with nothing new notifies nobody.
            await b.heartbeat("b@2", "G", {"T": "*", "%RETRY%G": "*"})
            await asyncio.sleep(0.3)
            assert not a.notified.is_set()

            # Clean leave: UNREGISTER_CLIENT.
            resp = await b.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "b@2", "consumerGroup": "G"})
            assert resp.code == ResponseCode.SUCCESS
            await _wait_notified(a)
            assert await _members(a, "G") == ["a@1"]

            # Dirty leave: the connection just closes.
            await b.heartbeat("b@2", "G", {"T": "*"})
            await _wait_notified(a)
            await b.close()
            await _wait_notified(a)
            assert await _members(a, "G") == ["a@1"]

            await a.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "a@1", "consumerGroup": "G"})
            empty = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
            assert (empty.code, empty.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, G")
            await a.close()

    run(main())


def test_silent_members_expire_and_the_rest_are_told(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", channel_expired_ms=1200, channel_scan_interval_ms=200) as eb:
            a = await Client.connect(eb.namesrv_address, eb.broker_address)
            b = await Client.connect(eb.namesrv_address, eb.broker_address)
            await a.heartbeat("a@1", "G", {"T": "*"})
            await b.heartbeat("b@2", "G", {"T": "*"})
            await asyncio.sleep(0.2)
            a.notified.clear()
            # a keeps heart-beating, b falls silent.
            for _ in range(8):
                await asyncio.sleep(0.25)
                await a.heartbeat("a@1", "G", {"T": "*"})
            assert await _members(a, "G") == ["a@1"]
            assert a.notified.is_set()
            # The broker closed the silent member's connection, as RocketMQ does.
            assert b.broker.closed
            await a.close()
            await b.close()

    run(main())


def test_queue_locks_are_exclusive_per_group_and_expire(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", lock_max_live_ms=800) as eb:
            a = await Client.connect(eb.namesrv_address, eb.broker_address)
            b = await Client.connect(eb.namesrv_address, eb.broker_address)
            q = [MessageQueue("T", "broker-a", i) for i in range(4)]
            assert sorted(await a.lock("G", "a@1", q[:3])) == q[:3]
            assert await b.lock("G", "b@2", q[1:]) == [q[3]]  # only the free one
            assert sorted(await b.lock("OtherGroup", "b@2", q)) == q  # locks are per group
            # Renewal keeps a lock alive past the expiry.
            for _ in range(3):
                await asyncio.sleep(0.4)
                assert sorted(await a.lock("G", "a@1", q[:2])) == q[:2]
            # q[2] was not renewed: expired, so b may take it; q[0], q[1] are still a's.
            assert sorted(await b.lock("G", "b@2", q[:3])) == [q[2]]
            # Only the owner can unlock.
            await b.unlock("G", "b@2", q[:2])
            assert await b.lock("G", "b@2", q[:1]) == []
            await a.unlock("G", "a@1", q[:2])
            assert sorted(await b.lock("G", "b@2", q[:2])) == q[:2]
            await a.close()
            await b.close()

    run(main())


def test_lock_answer_is_the_java_hash_set_order(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            a = await Client.connect(eb.namesrv_address, eb.broker_address)
            mqs = [MessageQueue("ScnC_Topic", "broker-a", 0), MessageQueue("ScnC_Topic", "broker-a", 1),
                   MessageQueue("%RETRY%CG_scnc", "broker-a", 0), MessageQueue("ScnC_Topic", "broker-a", 2),
                   MessageQueue("ScnC_Topic", "broker-a", 3)]
            body = (await a.call(RequestCode.LOCK_BATCH_MQ, body=(
                b'{"clientId":"192.0.2.2@orderly-c1","consumerGroup":"CG_scnc","mqSet":['
                + b",".join(b'{"brokerName":"broker-a","queueId":%d,"topic":"%s"}' % (m.queue_id, m.topic.encode())
                            for m in mqs) + b"]}"))).body
            # Byte for byte what the real broker answered in scenario c (frame 131).
            assert body == (b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"%RETRY%CG_scnc"},'
                            b'{"brokerName":"broker-a","queueId":0,"topic":"ScnC_Topic"},'
                            b'{"brokerName":"broker-a","queueId":1,"topic":"ScnC_Topic"},'
                            b'{"brokerName":"broker-a","queueId":2,"topic":"ScnC_Topic"},'
                            b'{"brokerName":"broker-a","queueId":3,"topic":"ScnC_Topic"}]}')
            await a.close()

    run(main())
