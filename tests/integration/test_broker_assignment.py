"""QUERY_ASSIGNMENT and the message-request-mode table on the embedded broker, over real TCP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.admin import TopicConfig
from rmqrun.client.assignment import AssignmentClient
from rmqrun.model import MessageQueue
from rmqrun.protocol.assignment import (
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rmqrun.protocol.bodies import MessageModel
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import ConnectionPool
from rmqrun.remoting.errors import NoPermissionError, SubscriptionError, TopicNotExistError
from tests.integration.broker_kit import Client

pytestmark = pytest.mark.timeout(90)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _topic(c: Client, name: str, queues: int) -> None:
    resp = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, TopicConfig(name, queues, queues).to_ext())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _query(c: Client, client_id: str, *, topic: str = "T", strategy: str = "AVG",
                 model: MessageModel = MessageModel.CLUSTERING) -> list[tuple[int, str]] | None:
    body = QueryAssignmentRequestBody(topic, "G", client_id, strategy, model).encode()
    resp = await c.call(RequestCode.QUERY_ASSIGNMENT, body=body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    got = QueryAssignmentResponseBody.decode(resp.body or b"{}").assignments
    if got is None:
        return None
    assert all(a.message_queue.topic == topic and a.message_queue.broker_name == "broker-a" for a in got)
    return sorted((a.message_queue.queue_id, a.mode.value) for a in got)


def test_pull_then_pop_assignments_and_the_mode_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await _topic(c, "T", 4)
            members = []  # one connection per client id: the broker knows a client by its channel
            for cid in ("a@1", "b@2", "c@3"):
                members.append(await Client.connect(eb.namesrv_address, eb.broker_address))
                assert (await members[-1].heartbeat(cid, "G", {"T": "*"})).code == ResponseCode.SUCCESS
            # Default PULL: AVG over the live clients, each queue owned once.
            pull = {cid: await _query(c, cid) for cid in ("a@1", "b@2", "c@3")}
            assert pull == {"a@1": [(0, "PULL"), (1, "PULL")], "b@2": [(2, "PULL")], "c@3": [(3, "PULL")]}
            assert await _query(c, "a@1", strategy="AVG_BY_CIRCLE") == [(0, "PULL"), (3, "PULL")]
            # An answer Java's client reads as "keep what you have": strategy or topic unknown.
            assert await _query(c, "a@1", strategy="CONSISTENT_HASH") is None
            assert await _query(c, "a@1", topic="NOPE") is None
            assert await _query(c, "a@1", model=MessageModel.BROADCASTING) == [(q, "PULL") for q in range(4)]

            pool = ConnectionPool()
            try:
                ac = AssignmentClient(pool)
                await ac.set_message_request_mode(eb.broker_address, "T", "G", MessageRequestMode.POP)
                assert [(a.message_queue.queue_id, a.mode, a.pop_all_queues)
                        for a in await ac.query_assignment(eb.broker_address, "T", "G", "b@2") or []] == \
                    [(-1, MessageRequestMode.POP, True)]
                # popShareQueueNum 1 of 3 clients: own share plus the next client's.
                await ac.set_message_request_mode(eb.broker_address, "T", "G", "POP", pop_share_queue_num=1)
                assert await _query(c, "c@3") == [(0, "POP"), (1, "POP"), (3, "POP")]
                table = await ac.message_request_modes(eb.broker_address)
                assert table.modes == {"T": {"G": SetMessageRequestModeRequestBody(
                    "T", "G", MessageRequestMode.POP, 1)}}
            finally:
                await pool.close()
            for m in [c, *members]:
                await m.close()

        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.heartbeat("a@1", "G", {"T": "*"})
            # Persisted: one live client, share 1 >= clients - 1, so it pops every queue.
            assert await _query(c, "a@1") == [(-1, "POP")]
            resp = await c.call(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
            assert resp.code == ResponseCode.SUCCESS
            assert resp.body == (b'{"messageRequestModeMap":{"T":{"G":{"consumerGroup":"G","mode":"POP",'
                                 b'"popShareQueueNum":1,"topic":"T"}}}}')
            await c.close()

    run(main())


def test_set_mode_refusals(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", auto_create_subscription_group=False) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await _topic(c, "T", 2)
            pool = ConnectionPool()
            try:
                ac = AssignmentClient(pool)
                with pytest.raises(NoPermissionError, match="retry topic is not allowed"):
                    await ac.set_message_request_mode(eb.broker_address, "%RETRY%G", "G", MessageRequestMode.POP)
                with pytest.raises(TopicNotExistError, match=r"topic\[NOPE\] not exist"):
                    await ac.set_message_request_mode(eb.broker_address, "NOPE", "G", MessageRequestMode.POP)
                with pytest.raises(SubscriptionError, match="subscription group does not exist"):
                    await ac.set_message_request_mode(eb.broker_address, "T", "G", MessageRequestMode.POP)
                assert (await ac.message_request_modes(eb.broker_address)).modes == {}
            finally:
                await pool.close()
            bad = await c.call(RequestCode.SET_MESSAGE_REQUEST_MODE, body=b'{"topic":"T","mode":"SIDEWAYS"}')
            assert bad.code == ResponseCode.SYSTEM_ERROR and "SIDEWAYS" in (bad.remark or "")
            bad = await c.call(RequestCode.QUERY_ASSIGNMENT, body=b"[")
            assert bad.code == ResponseCode.SYSTEM_ERROR
            await c.close()

    run(main())


def test_retry_topic_assignment_is_always_pull(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.heartbeat("a@1", "G", {"T": "*", "%RETRY%G": "*"})  # creates %RETRY%G with one queue
            assert await _query(c, "a@1", topic="%RETRY%G") == [(0, "PULL")]
            assert MessageQueue("%RETRY%G", "broker-a", 0)  # the queue the client then pulls
            await c.close()

    run(main())
