"""The embedded broker over real TCP: routes, auto-create, send, pull, filters, offsets, bad input."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand, SerializeType
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from rmqrun.remoting.msg_id import decode_offset_msg_id
from tests.integration.broker_kit import Client, drain, messages, pull_ext

pytestmark = pytest.mark.timeout(60)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 45))


async def _with_broker(tmp: Path, body, **settings):
    async with EmbeddedBroker(tmp / "data", **settings) as eb:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            return await body(eb, client)
        finally:
            await client.close()


def test_auto_create_on_first_send_and_route_like_a_real_cluster(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        missing = await c.route("Fresh")
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert missing.remark == ("No topic route info in name server for the topic: Fresh\n"
                                  "See http://rocketmq.apache.org/docs/faq/ for further details.")
        tbw = fastjson.loads((await c.route("TBW102")).body)
        assert tbw["queueDatas"] == [{"brokerName": "broker-a", "perm": 7, "readQueueNums": 8,
                                      "topicSysFlag": 0, "writeQueueNums": 8}]
        sent = await c.send("Fresh", b"x", tags="TagA")
        assert sent.code == ResponseCode.SUCCESS
        assert set(sent.ext_fields) == {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
        store_addr, phys = decode_offset_msg_id(sent.ext_fields["msgId"])
        assert store_addr == eb.broker_address and phys == 0
        route = await c.route("Fresh")
        assert route.body == (
            b'{"brokerDatas":[{"brokerAddrs":{"0":"%s"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
            b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
            b'"topicSysFlag":0,"writeQueueNums":4}]}' % eb.broker_address.encode())
        old = await c.route("Fresh", version=63)  # the C++ client's version: fastjson's bare integer keys
        assert b'"brokerAddrs":{0:"' in old.body
        names = fastjson.loads((await c.namesrv.request(
            RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 5)).body)["topicList"]
        assert {"Fresh", "TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a"} <= set(names)

    run(_with_broker(tmp_path, body))


def test_send_pull_round_trip_with_tag_filter(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        for i in range(12):
            resp = await c.send("T", f"m{i}".encode(), tags=("TagA", "TagB", "TagC")[i % 3], keys=f"k{i}",
                                queue_id=0, props={"idx": str(i)})
            assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueOffset"] == str(i)
        # No heartbeat yet: the broker does not know the group's subscription.
        early = await c.pull("CG", "T", 0, 0)
        assert early.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        assert early.remark.startswith("the consumer's group info not exist")
        assert (await c.heartbeat("c1@1", "CG", {"T": "TagA || TagC"})).code == ResponseCode.SUCCESS
        resp = await c.pull("CG", "T", 0, 0)
        assert resp.remark == "FOUND"
        got = messages(resp)
        assert [m.body for m in got] == [f"m{i}".encode() for i in range(12) if i % 3 != 1]
        assert resp.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "12", "maxOffset": "12",
                                   "minOffset": "0"}
        first = got[0]
        # Stored as the real broker stores: WAIT dropped, CLUSTER added, in Java HashMap order.
        assert list(first.properties) == ["KEYS", "idx", "CLUSTER", "TAGS"]
        assert first.store_host == eb.broker_address and first.born_host.startswith("127.0.0.1:")
        # A subscription sent with the pull (the C++ client's way) wins over the heartbeat's.
        only_b = messages(await c.pull("CG", "T", 0, 0, subscription="TagB"))
        assert [m.tags for m in only_b] == ["TagB"] * 4
        # Everything filtered out: retry at once from further on, not a long poll.
        none = await c.pull("CG", "T", 0, 10, subscription="TagZ", suspend_ms=5000)
        assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and none.remark == "NO_MATCHED_MESSAGE"
        assert none.ext_fields["nextBeginOffset"] == "12"

    run(_with_broker(tmp_path, body))


def test_pull_is_capped_at_32_and_offsets_out_of_range_are_answered(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        for i in range(40):
            assert (await c.send("Cap", b"%d" % i, queue_id=1)).code == ResponseCode.SUCCESS
        await c.heartbeat("c1@1", "CG", {"Cap": "*"})
        big = await c.pull("CG", "Cap", 1, 0, max_nums=100)
        assert len(messages(big)) == 32 and big.ext_fields["nextBeginOffset"] == "32"
        at_end = await c.pull("CG", "Cap", 1, 40)
        assert (at_end.code, at_end.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
        beyond = await c.pull("CG", "Cap", 1, 1040)
        assert (beyond.code, beyond.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
        assert beyond.ext_fields["nextBeginOffset"] == "40"
        empty_q = await c.pull("CG", "Cap", 2, 7)
        assert (empty_q.code, empty_q.remark) == (ResponseCode.PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE")
        assert empty_q.ext_fields["nextBeginOffset"] == "0"
        bad_queue = await c.pull("CG", "Cap", 9, 0)
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[9] is illegal" in bad_queue.remark
        no_topic = await c.pull("CG", "Nope", 0, 0)
        assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST
        # A consumer far behind (its batch starts "on disk") gets RocketMQ's smaller on-disk batches.
        eb.broker.memory_window = 0
        behind = await c.pull("CG", "Cap", 1, 0, max_nums=32)
        assert len(messages(behind)) == 8 and behind.ext_fields["nextBeginOffset"] == "8"
        eb.broker.memory_window = 1 << 40
        # The subscription the broker knows is older than the client's: not latest.
        stale = await c.pull("CG", "Cap", 1, 0, sub_version=int(time.time() * 1000) + 60_000)
        assert (stale.code, stale.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                              "the consumer's subscription not latest")

    run(_with_broker(tmp_path, body))


def test_consumer_and_queue_offsets(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        times = []
        for i in range(5):
            await c.send("Off", b"%d" % i, queue_id=0)
            times.append(int(time.time() * 1000))
            await asyncio.sleep(0.02)
        q = {"topic": "Off", "queueId": "0"}
        # No stored offset, but message 0 is still there: the broker says 0 (FACTS 1.4).
        first = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", **q})
        assert (first.code, first.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
        await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "CG", "commitOffset": "3", **q})
        again = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", **q})
        assert again.ext_fields == {"offset": "3"}
        # Piggy-backed commit on a pull (commit bit), stored even for a pull that finds nothing new.
        await c.heartbeat("c1@1", "CG", {"Off": "*"})
        await c.pull("CG", "Off", 0, 5, commit_offset=4)
        assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", **q})).ext_fields == {"offset": "4"}
        assert (await c.call(RequestCode.GET_MAX_OFFSET, q)).ext_fields == {"offset": "5"}
        assert (await c.call(RequestCode.GET_MIN_OFFSET, q)).ext_fields == {"offset": "0"}
        stored = [m.store_timestamp for m in messages(await c.pull("CG", "Off", 0, 0))]
        exact = await c.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(stored[2])})
        assert exact.ext_fields == {"offset": "2"}
        # Between two messages: the nearer one (4.9.8's rule, not "the first at or after").
        near_1 = await c.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(stored[1] + 2)})
        assert near_1.ext_fields == {"offset": "1"}
        near_2 = await c.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(stored[2] - 2)})
        assert near_2.ext_fields == {"offset": "2"}
        future = await c.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(times[-1] + 3_600_000)})
        assert future.ext_fields == {"offset": "4"}  # the last message, as 4.9.8 answers
        past = await c.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": "1"})
        assert past.ext_fields == {"offset": "0"}
        earliest = await c.call(RequestCode.GET_EARLIEST_MSG_STORETIME, q)
        assert times[0] - 1000 < int(earliest.ext_fields["timestamp"]) <= times[0]

    run(_with_broker(tmp_path, body))


def test_query_offset_not_found_when_the_first_message_is_no_longer_in_memory(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        q = {"consumerGroup": "CG", "topic": "Old", "queueId": "0"}
        await c.send("Old", b"a", queue_id=0)
        assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, q)).ext_fields == {"offset": "0"}
        eb.broker.memory_window = 0  # as if the log had grown past 40 % of RAM since message 0
        await c.send("Old", b"b", queue_id=0)
        resp = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
        assert (resp.code, resp.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
        # A typed (empty) response header: JSON says "extFields":{} like the Java broker.
        assert resp.ext_fields == {} and resp.empty_ext_present
        empty_queue = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "queueId": "1"})
        assert empty_queue.ext_fields == {"offset": "0"}

    run(_with_broker(tmp_path, body))


def test_batch_send_stores_each_message(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        items = [BatchItem(b"b%d" % i, {"KEYS": f"bk{i}", "UNIQ_KEY": f"U{i}", "WAIT": "true", "TAGS": "TagBatch"})
                 for i in range(4)]
        ext = {"a": "PG", "b": "Batch", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1", "h": "0",
               "i": "WAIT\x01true", "j": "0", "k": "false", "m": "true", "n": "broker-a"}
        resp = await c.call(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(items))
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueOffset"] == "0"
        ids = resp.ext_fields["msgId"].split(",")
        assert len(ids) == 4
        await c.heartbeat("c1@1", "CG", {"Batch": "TagBatch"})
        got = messages(await c.pull("CG", "Batch", 3, 0))
        assert [m.body for m in got] == [b"b0", b"b1", b"b2", b"b3"]
        assert [m.offset_msg_id for m in got] == ids
        assert got[2].properties["KEYS"] == "bk2" and got[2].properties["CLUSTER"] == "DefaultCluster"

    run(_with_broker(tmp_path, body))


def test_v1_headers_and_cpp_style_numbers_are_accepted(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        ext = {"producerGroup": "PG", "topic": "V1", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": "2", "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
               "properties": "TAGS\x01TagA\x02WAIT\x01true\x02", "reconsumeTimes": "0", "unitMode": "0",
               "batch": "0"}
        resp = await c.call(RequestCode.SEND_MESSAGE, ext, b"v1")
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueId"] == "2"
        pulled = messages(await c.call(RequestCode.PULL_MESSAGE, {
            **pull_ext("CG", "V1", 2, 0, subscription="TagA"), "AccessKey": "", "OnsChannel": "ALIYUN"}))
        assert pulled[0].body == b"v1"

    run(_with_broker(tmp_path, body))


def test_bad_input_gets_answers_and_a_bad_frame_closes_only_its_connection(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        unknown = await c.call(9999)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        missing = await c.call(RequestCode.PULL_MESSAGE, {"consumerGroup": "CG", "topic": "T"})
        assert missing.code == ResponseCode.SYSTEM_ERROR and "<queueId>" in missing.remark
        not_a_number = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "zero"})
        assert not_a_number.code == ResponseCode.SYSTEM_ERROR
        bad_hb = await c.call(RequestCode.HEART_BEAT, body=b"{not json")
        assert bad_hb.code == ResponseCode.SYSTEM_ERROR
        bad_topic = await c.send("bad topic!", b"x")
        assert bad_topic.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in bad_topic.remark
        forbidden = await c.send("SCHEDULE_TOPIC_XXXX", b"x")
        assert forbidden.code == ResponseCode.NO_PERMISSION
        bad_batch = await c.call(RequestCode.SEND_BATCH_MESSAGE,
                                 {**{k: v for k, v in pull_ext("x", "B", 0, 0).items() if False},
                                  "a": "PG", "b": "B", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1",
                                  "h": "0", "m": "true"}, b"\x00\x00\x00\x05garbage")
        assert bad_batch.code == ResponseCode.MESSAGE_ILLEGAL
        # Binary (ROCKETMQ) headers are answered in kind.
        binary = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"},
                              serialize_type=SerializeType.ROCKETMQ)
        assert binary.serialize_type == SerializeType.ROCKETMQ and binary.ext_fields == {"offset": "0"}
        # A frame that is not a frame: that connection closes, the other keeps working.
        host, port = eb.broker_address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(struct.pack(">iI", 12, (7 << 24) | 4) + b"junkjunk")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert (await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})).code == ResponseCode.SUCCESS

    run(_with_broker(tmp_path, body))


def test_many_messages_across_queues_none_lost(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await asyncio.gather(*(c.send("Many", b"%d" % i) for i in range(400)))
        await c.heartbeat("c1@1", "CG", {"Many": "*"})
        got = await drain(c, "CG", "Many", 4, expect=400)
        assert sorted(int(m.body) for m in got) == list(range(400))
        assert {m.queue_id for m in got} == {0, 1, 2, 3}

    run(_with_broker(tmp_path, body, flush_mode="async"))


def test_a_group_that_may_not_broadcast_is_refused_to_a_broadcasting_consumer(tmp_path: Path) -> None:
    """``mqadmin updateSubGroup -d false`` (consumeBroadcastEnable): a consumer heartbeating as BROADCASTING
    whose pulls rely on that heartbeat's subscription is refused, NO_PERMISSION naming the group; the same
    group consumed in clustering mode is served."""
    from rmqrun.broker.store.subscription_groups import SubscriptionGroupConfig
    from rmqrun.protocol.bodies import ConsumerData, HeartbeatData, MessageModel
    from rmqrun.protocol.subscription import SubscriptionData

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("TB", b"x", queue_id=0)).code == ResponseCode.SUCCESS
            cfg = SubscriptionGroupConfig("GB", consume_broadcast_enable=False)
            made = await c.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumps(cfg.to_json()))
            assert made.code == ResponseCode.SUCCESS, made.remark

            async def heartbeat(model: MessageModel) -> None:
                data = HeartbeatData("cid-b", consumer_data_set=[ConsumerData(
                    "GB", message_model=model, subscription_data_set=[SubscriptionData.build("TB", "*")])])
                assert (await c.call(RequestCode.HEART_BEAT, body=data.encode())).code == ResponseCode.SUCCESS

            await heartbeat(MessageModel.BROADCASTING)
            refused = await c.pull("GB", "TB", 0, 0)
            assert refused.code == ResponseCode.NO_PERMISSION, (refused.code, refused.remark)
            assert refused.remark == "the consumer group[GB] can not consume by broadcast way"
            await heartbeat(MessageModel.CLUSTERING)
            served = await c.pull("GB", "TB", 0, 0)
            assert served.code == ResponseCode.SUCCESS and [m.body for m in messages(served)] == [b"x"]
            await c.close()

    run(main())
