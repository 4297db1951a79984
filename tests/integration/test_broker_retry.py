"""Send-back, the retry topic, delay levels and the DLQ (with a fast test-only delay table)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client, drain, messages

pytestmark = pytest.mark.timeout(90)

FAST = " ".join(["1s"] * 18)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 75))


async def _consume_one(c: Client, topic: str = "T") -> "object":
    await c.heartbeat("c@1", "G", {topic: "*", "%RETRY%G": "*"})
    got = await drain(c, "G", topic, 4, expect=1)
    assert len(got) == 1
    return got[0]


async def _send_back(c: Client, msg, *, delay_level: int = 0, max_times: int | None = 16):  # type: ignore[no-untyped-def]
    ext = {"offset": str(msg.commit_log_offset), "group": "G", "delayLevel": str(delay_level),
           "originMsgId": msg.msg_id, "originTopic": "T", "unitMode": "false", "bname": "broker-a"}
    if max_times is not None:
        ext["maxReconsumeTimes"] = str(max_times)
    return await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)


def test_send_back_goes_to_the_retry_topic_and_comes_back_after_the_delay(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels=FAST) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.send("T", b"payload", tags="TagA", keys="k1",
                         props={"idx": "7", "UNIQ_KEY": "FD000000000000000000000000000002611B4E0E2F2A6C09D6E80000"})
            original = await _consume_one(c)
            sent_at = time.monotonic()
            resp = await _send_back(c, original)
            assert (resp.code, resp.remark, resp.ext_fields) == (ResponseCode.SUCCESS, None, {})
            # Level 3 (3 + reconsumeTimes 0) is queue 2 of the schedule topic until it is due.
            assert eb.broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
            immediately = await c.pull("G", "%RETRY%G", 0, 0)
            assert immediately.code == ResponseCode.PULL_NOT_FOUND
            retried = await drain(c, "G", "%RETRY%G", 1, expect=1)
            waited = time.monotonic() - sent_at
            assert 0.8 < waited < 4, waited
            msg = retried[0]
            assert msg.body == b"payload" and msg.reconsume_times == 1
            assert msg.born_timestamp == original.born_timestamp and msg.born_host == original.born_host
            assert msg.msg_id == original.msg_id  # UNIQ_KEY survives
            # Properties exactly as the real broker leaves them (scenario b, frame 121).
            assert list(msg.properties) == ["REAL_TOPIC", "ORIGIN_MESSAGE_ID", "RETRY_TOPIC", "KEYS", "idx",
                                            "UNIQ_KEY", "CLUSTER", "WAIT", "DELAY", "TAGS", "REAL_QID"]
            assert msg.properties["ORIGIN_MESSAGE_ID"] == original.offset_msg_id
            assert msg.properties["RETRY_TOPIC"] == "T"
            assert (msg.properties["WAIT"], msg.properties["DELAY"], msg.properties["REAL_QID"]) == ("false", "3", "0")
            route = fastjson.loads((await c.route("%RETRY%G")).body)["queueDatas"][0]
            assert (route["readQueueNums"], route["writeQueueNums"], route["perm"]) == (1, 1, 6)
            await c.close()

    run(main())


def test_dlq_once_max_reconsume_times_is_used_up(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels=FAST) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.send("T", b"poison", tags="TagA")
            first = await _consume_one(c)
            assert (await _send_back(c, first, max_times=2)).code == ResponseCode.SUCCESS
            again = (await drain(c, "G", "%RETRY%G", 1, expect=1))[0]
            assert again.reconsume_times == 1
            assert (await _send_back(c, again, max_times=2)).code == ResponseCode.SUCCESS
            third = (await drain(c, "G", "%RETRY%G", 1, expect=2))[-1]
            assert third.reconsume_times == 2
            # reconsumeTimes (2) >= maxReconsumeTimes (2): straight to the DLQ, no delay.
            assert (await _send_back(c, third, max_times=2)).code == ResponseCode.SUCCESS
            dlq_route = fastjson.loads((await c.route("%DLQ%G")).body)["queueDatas"][0]
            assert (dlq_route["readQueueNums"], dlq_route["perm"]) == (1, 6)
            await c.heartbeat("c@1", "G", {"T": "*", "%RETRY%G": "*", "%DLQ%G": "*"})
            dead = messages(await c.pull("G", "%DLQ%G", 0, 0))
            assert [m.body for m in dead] == [b"poison"]
            assert dead[0].reconsume_times == 3 and dead[0].properties["DELAY"] == "0"
            assert dead[0].properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id
            # delayLevel -1 (the client's "straight to DLQ") skips the retries.
            await c.send("T", b"hopeless", tags="TagA", queue_id=0)
            hopeless = [m for m in await drain(c, "G", "T", 4, expect=2) if m.body == b"hopeless"][0]
            assert (await _send_back(c, hopeless, delay_level=-1)).code == ResponseCode.SUCCESS
            assert [m.body for m in messages(await c.pull("G", "%DLQ%G", 0, 1))] == [b"hopeless"]
            # A message id that names no message.
            bogus = await c.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": "987654321", "group": "G",
                                                                      "delayLevel": "0"})
            assert (bogus.code, bogus.remark) == (ResponseCode.SYSTEM_ERROR, "look message by offset failed, 987654321")
            await c.close()

    run(main())


def test_retry_topic_send_past_max_goes_to_the_dlq(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels=FAST) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.heartbeat("c@1", "G", {"%RETRY%G": "*", "%DLQ%G": "*"})
            # The Java client's fallback when send-back fails: a normal send to %RETRY%group.
            resp = await c.send("%RETRY%G", b"fallback", queue_id=0, reconsume_times=5, max_reconsume_times=5,
                                props={"RETRY_TOPIC": "T", "DELAY": "8"})
            assert resp.code == ResponseCode.SUCCESS
            dead = messages(await c.pull("G", "%DLQ%G", 0, 0))
            assert [m.body for m in dead] == [b"fallback"]
            await c.close()

    run(main())


def test_delayed_message_is_delivered_to_its_topic_when_due(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels="1s 2s 3s") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.heartbeat("c@1", "G", {"D": "*"})
            await c.send("D", b"now", queue_id=0)
            resp = await c.send("D", b"later", queue_id=0, props={"DELAY": "2"})
            # Like RocketMQ: the answer names the schedule queue's offset, not the topic's.
            assert resp.ext_fields["queueId"] == "0" and resp.ext_fields["queueOffset"] == "0"
            assert eb.broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 1) == 1
            got = await drain(c, "G", "D", 1, expect=2)
            assert [m.body for m in got] == [b"now", b"later"]
            later = got[1]
            # stored in D when due, by the broker's own stamps (its level's 2 s after the send it keeps the
            # born time of), not by how long the test waited
            assert later.store_timestamp - later.born_timestamp >= 2000, (later.born_timestamp, later.store_timestamp)
            assert later.properties["REAL_TOPIC"] == "D" and later.properties["DELAY"] == "2"
            assert later.properties["WAIT"] == "true"  # re-serialised from the map that kept it
            # A level past the table is clamped to the last one.
            resp = await c.send("D", b"clamped", queue_id=0, props={"DELAY": "99"})
            assert resp.code == ResponseCode.SUCCESS
            assert eb.broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
            await c.close()

    run(main())
