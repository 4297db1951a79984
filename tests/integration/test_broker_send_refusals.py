"""Sends and send-backs the embedded broker refuses, answered with Java 4.9.8's codes and remarks.

Raw frames over TCP (the requests a Java client builds), so the broker's wire
answers are pinned independently of rmqrun's client. After every refusal the
broker still serves the connection, and nothing was stored.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from tests.integration.broker_kit import Client, drain, send_ext


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


ILLEGAL = "the message is illegal, maybe msg body or properties length not matched"


async def _group(c: Client, name: str, **fields: object) -> None:
    import json
    body = json.dumps({"groupName": name, **fields}).encode()
    made = await c.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert made.code == ResponseCode.SUCCESS, made.remark


async def _send_back(c: Client, group: str, offset: int) -> object:
    return await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": str(offset), "group": group, "delayLevel": "0", "originMsgId": "X", "originTopic": "T",
        "unitMode": "false", "bname": "broker-a", "maxReconsumeTimes": "16"})


def test_without_auto_create_only_retry_topics_are_created_on_send(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", auto_create_topic=False) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                refused = await c.send("NeverCreated", b"m")
                assert refused.code == ResponseCode.TOPIC_NOT_EXIST
                assert refused.remark.startswith("topic[NeverCreated] not exist, apply first please!")
                assert eb.broker.topics.get("NeverCreated") is None
                # a consumer's re-published retry message creates its retry topic, with one queue
                await _group(c, "GR")
                made = await c.send("%RETRY%GR", b"again", queue_id=0, reconsume_times=1)
                assert made.code == ResponseCode.SUCCESS, made.remark
                tc = eb.broker.topics.get("%RETRY%GR")
                assert tc is not None and (tc.read_queue_nums, tc.write_queue_nums) == (1, 1)
            finally:
                await c.close()
    run(main())


def test_retry_sends_and_send_backs_of_an_unknown_group_are_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", auto_create_subscription_group=False) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                assert (await c.send("T", b"m", queue_id=0)).code == ResponseCode.SUCCESS
                retry = await c.send("%RETRY%Ghost", b"m", reconsume_times=1)
                assert retry.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
                assert retry.remark.startswith("subscription group not exist, Ghost")
                back = await _send_back(c, "Ghost", 0)
                assert back.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST  # type: ignore[attr-defined]
                # (as in Java, msgCheck created the retry topic from TBW102 before the group was looked up)
                assert eb.broker.store.max_offset("%RETRY%Ghost", 0) == 0, "nothing stored"
            finally:
                await c.close()
    run(main())


def test_send_back_edges(tmp_path: Path) -> None:
    """No retry queues: accepted and dropped (Java answers SUCCESS); a read-only retry topic: NO_PERMISSION;
    an offset inside a record (not at its start): SYSTEM_ERROR naming the offset."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                assert (await c.send("T", b"payload", queue_id=0)).code == ResponseCode.SUCCESS
                await _group(c, "NoRetry", retryQueueNums=0)
                dropped = await _send_back(c, "NoRetry", 0)
                assert dropped.code == ResponseCode.SUCCESS  # type: ignore[attr-defined]
                assert eb.broker.topics.get("%RETRY%NoRetry") is None, "nothing created or stored"

                await _group(c, "ReadOnly")
                made = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": "%RETRY%ReadOnly", "readQueueNums": "1", "writeQueueNums": "1", "perm": "4",
                    "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
                    "defaultTopic": "TBW102"})
                assert made.code == ResponseCode.SUCCESS
                forbidden = await _send_back(c, "ReadOnly", 0)
                assert (forbidden.code, forbidden.remark) == (  # type: ignore[attr-defined]
                    ResponseCode.NO_PERMISSION, "the topic[%RETRY%ReadOnly] sending message is forbidden")

                await _group(c, "G")
                inside = await _send_back(c, "G", 7)
                assert inside.code == ResponseCode.SYSTEM_ERROR  # type: ignore[attr-defined]
                assert inside.remark.startswith("look message by offset failed, 7")  # type: ignore[attr-defined]
                assert eb.broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 0, "nothing was scheduled"
            finally:
                await c.close()
    run(main())


def test_batches_the_broker_cannot_take_are_message_illegal(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                body = encode_batch([BatchItem(b"a", {}), BatchItem(b"b", {})])
                too_long = await c.call(RequestCode.SEND_BATCH_MESSAGE, send_ext("L" * 128, queue_id=0, batch=True),
                                        body)
                assert (too_long.code, too_long.remark) == (ResponseCode.SYSTEM_ERROR,
                                                            "The specified topic is longer than topic max length.")
                delayed = await c.call(RequestCode.SEND_BATCH_MESSAGE,
                                       send_ext("B", queue_id=0, batch=True, props={"DELAY": "2"}), body)
                assert delayed.code == ResponseCode.MESSAGE_ILLEGAL and delayed.remark.startswith(ILLEGAL)
                empty = await c.call(RequestCode.SEND_BATCH_MESSAGE, send_ext("B", queue_id=0, batch=True), b"")
                assert empty.code == ResponseCode.MESSAGE_ILLEGAL and empty.remark.startswith(ILLEGAL)
                ok = await c.call(RequestCode.SEND_BATCH_MESSAGE, send_ext("B", queue_id=0, batch=True), body)
                assert ok.code == ResponseCode.SUCCESS, ok.remark
                await c.heartbeat("c@1", "GB", {"B": "*"})
                got = await drain(c, "GB", "B", 1, expect=2)
                assert [m.body for m in got] == [b"a", b"b"], "only the good batch was stored"
            finally:
                await c.close()
    run(main())
