"""The rest of mqadmin against the embedded broker (issue #22 item 6), one test per request code.

Each request is sent as the 4.9.8 Java tool sends it (``MQClientAPIImpl``: header fields, body) over a
real TCP connection, and the answer is checked for what the Java tool reads of it: the response code,
the ext fields of its response header and the body's keys under the Java classes' field names.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.admin import (
    BrokerStatsData, ProducerTableInfo, TopicList, parse_properties, properties_text, stats_key,
)
from rmqrun.protocol.bodies import HeartbeatData, ProducerData
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from tests.integration.broker_kit import Client, messages, send_ext
from tests.waiting import eventually_async

MAX_TS = str(2**63 - 1)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))  # type: ignore[arg-type]


def with_broker(tmp_path: Path, body: Callable[[EmbeddedBroker, Client], Awaitable[None]],
                **settings: Any) -> None:
    async def main() -> None:
        eb = EmbeddedBroker(tmp_path / "data", **settings)
        await eb.start()
        c = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            await body(eb, c)
        finally:
            await c.close()
            await eb.stop()
    run(main())


async def broker_config(c: Client) -> dict[str, str]:
    resp = await c.call(R.GET_BROKER_CONFIG)
    assert resp.code == ResponseCode.SUCCESS
    return parse_properties((resp.body or b"").decode())


async def send_n(c: Client, topic: str, n: int, *, queue_id: int = 0, tags: str | None = None) -> None:
    for i in range(n):
        resp = await c.send(topic, f"m-{i}".encode(), queue_id=queue_id, tags=tags)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


# --------------------------------------------------------------------------- UPDATE_BROKER_CONFIG (25)

def test_update_broker_config_applies_live_settings_and_refuses_what_it_cannot_apply(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        # MQClientAPIImpl.updateBrokerConfig: no header, the properties text as body
        ok = await c.call(R.UPDATE_BROKER_CONFIG, body=properties_text({"shortPollingTimeMills": "250"}).encode())
        assert (ok.code, ok.remark) == (ResponseCode.SUCCESS, None)
        assert (await broker_config(c))["shortPollingTimeMills"] == "250"
        assert eb.broker.config.short_polling_ms == 250

        black = await c.call(R.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/tmp/x\n")
        assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        restart = await c.call(R.UPDATE_BROKER_CONFIG, body=b"listenPort=1\nshortPollingTimeMills=7\n")
        assert restart.code == ResponseCode.SYSTEM_ERROR and "listenPort" in (restart.remark or "")
        bad = await c.call(R.UPDATE_BROKER_CONFIG, body=b"longPollingEnable=maybe\n")
        assert bad.code == ResponseCode.SYSTEM_ERROR and "longPollingEnable" in (bad.remark or "")
        assert eb.broker.config.short_polling_ms == 250 and eb.broker.config.long_polling, "nothing of a refusal"
        # a Java-only setting is ignored, as a Java broker ignores a name it has no field for
        java_only = await c.call(R.UPDATE_BROKER_CONFIG, body=b"sendMessageThreadPoolNums=4\n")
        assert java_only.code == ResponseCode.SUCCESS
    with_broker(tmp_path, body)


def test_broker_permission_read_only_takes_writes_away_from_routes_and_write_only_refuses_pulls(
        tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "PermT", 1)
        await c.heartbeat("perm@1", "PermG", {"PermT": "*"})
        route_perm = lambda r: fastjson.loads(r.body)["queueDatas"][0]["perm"]  # noqa: E731
        assert route_perm(await c.route("PermT")) == 6
        ro = await c.call(R.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        assert ro.code == ResponseCode.SUCCESS
        assert route_perm(await c.route("PermT")) == 4
        assert (await broker_config(c))["brokerPermission"] == "4"
        # an ordered topic's sends are refused (Java's msgCheck); the others' routes already send them elsewhere
        created = await c.call(R.UPDATE_AND_CREATE_TOPIC, {"topic": "PermOrdT", "readQueueNums": "1",
                                                           "writeQueueNums": "1", "perm": "6", "order": "true"})
        assert created.code == ResponseCode.SUCCESS
        ordered = await c.send("PermOrdT", b"x", queue_id=0)
        assert (ordered.code, ordered.remark) == (ResponseCode.NO_PERMISSION,
                                                  f"the broker[{eb.config.store_host}] sending message is forbidden")
        assert (await c.send("PermT", b"y", queue_id=0)).code == ResponseCode.SUCCESS
        await c.call(R.UPDATE_BROKER_CONFIG, body=b"brokerPermission=2\n")
        refused = await c.pull("PermG", "PermT", 0, 0)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert refused.remark == f"the broker[{eb.config.store_host}] pulling message is forbidden"
        await c.call(R.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")
        assert route_perm(await c.route("PermT")) == 6
        assert len(messages(await c.pull("PermG", "PermT", 0, 0))) == 2
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- GET_BROKER_CONFIG for exportConfigs

def test_broker_config_has_every_key_export_configs_and_export_metrics_read(tmp_path: Path) -> None:
    """ExportConfigsCommand.needBrokerProprties puts each key into a Properties (null: NullPointerException)."""
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        cfg = await broker_config(c)
        needed = ["brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
                  "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName",
                  "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable",
                  "autoCreateSubscriptionGroup", "clientCallbackExecutorThreads"]
        assert [k for k in needed if k not in cfg] == []
        assert cfg["useTLS"] == "false" and cfg["flushDiskType"] == "SYNC_FLUSH"
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- VIEW_BROKER_STATS_DATA (315)

def test_view_broker_stats_data_shows_real_put_and_get_rates_for_stats_all(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "StatT", 12, queue_id=1)
        hb = await c.heartbeat("stat@1", "StatG", {"StatT": "*"})
        assert hb.code == ResponseCode.SUCCESS
        assert len(messages(await c.pull("StatG", "StatT", 1, 0))) == 12

        async def stats(name: str, key: str) -> BrokerStatsData:
            # MQClientAPIImpl.viewBrokerStatsData: ViewBrokerStatsDataRequestHeader{statsName, statsKey}
            resp = await c.call(R.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            raw = fastjson.loads(resp.body)
            assert set(raw) == {"statsMinute", "statsHour", "statsDay"}
            assert all(set(raw[w]) == {"sum", "tps", "avgpt"} for w in raw)
            return BrokerStatsData.from_json(raw)

        put = await stats("TOPIC_PUT_NUMS", "StatT")
        assert put.stats_minute.sum == put.stats_hour.sum == put.stats_day.sum == 12
        assert put.stats_minute.tps > 0 and put.stats_minute.avgpt == 1.0  # one message per put call
        got = await stats("GROUP_GET_NUMS", stats_key("StatT", "StatG"))
        assert got.stats_minute.sum == 12 and got.stats_minute.tps > 0 and got.stats_minute.avgpt == 12.0
        size = await stats("TOPIC_PUT_SIZE", "StatT")
        assert size.stats_minute.sum > 12 * len(b"m-0")
        assert (await stats("BROKER_PUT_NUMS", eb.config.cluster_name)).stats_day.sum == 12
        batch = await c.call(R.SEND_BATCH_MESSAGE, send_ext("StatT", queue_id=0, batch=True),
                             encode_batch([BatchItem(b"b1", {}), BatchItem(b"b2", {})]))
        assert batch.code == ResponseCode.SUCCESS, batch.remark
        after = await stats("TOPIC_PUT_NUMS", "StatT")
        assert (after.stats_minute.sum, after.stats_minute.avgpt) == (14, 14 / 13)  # 13 put calls
        # a delayed message counts under the schedule topic, once (exportMetrics' scheduleInTps), not when due
        delayed = await c.send("DelayT", b"later", queue_id=0, props={"DELAY": "1"})
        assert delayed.code == ResponseCode.SUCCESS
        assert (await stats("TOPIC_PUT_NUMS", "SCHEDULE_TOPIC_XXXX")).stats_minute.sum == 1
        await eventually_async(lambda: eb.broker.store.max_offset("DelayT", 0) == 1, what="the delivery when due")
        gone = await c.call(R.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "DelayT"})
        assert gone.code == ResponseCode.SYSTEM_ERROR, "the due delivery is not a producer's send"

        missing = await c.call(R.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "NoSuchT"})
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                                  "The stats <TOPIC_PUT_NUMS> <NoSuchT> not exist")
        no_key = await c.call(R.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS"})
        assert (no_key.code, no_key.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <statsKey> is null")
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- GET_BROKER_CONSUME_STATS (317)

def test_broker_consume_stats_lists_every_group_with_its_lag(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "LagT", 5, queue_id=0)
        await c.heartbeat("lag@1", "LagG", {"LagT": "*"})
        await c.pull("LagG", "LagT", 0, 0, commit_offset=None)
        commit = await c.call(R.UPDATE_CONSUMER_OFFSET,
                              {"consumerGroup": "LagG", "topic": "LagT", "queueId": "0", "commitOffset": "2"})
        assert commit.code == ResponseCode.SUCCESS
        for is_order, expect_topics in (("false", ["LagT"]), ("true", [])):
            # MQClientAPIImpl.fetchConsumeStatsInBroker: GetConsumeStatsInBrokerHeader{isOrder}
            resp = await c.call(R.GET_BROKER_CONSUME_STATS, {"isOrder": is_order})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            raw = fastjson.loads(resp.body)
            assert set(raw) == {"brokerAddr", "consumeStatsList", "totalDiff"} and raw["brokerAddr"] == eb.broker_address
            by_group = {g: stats for entry in raw["consumeStatsList"] for g, stats in entry.items()}
            assert "LagG" in by_group
            tables = [s["offsetTable"] for s in by_group["LagG"]]
            assert all(set(s) == {"consumeTps", "offsetTable"} for s in by_group["LagG"])
            topics = sorted({fastjson.object_key(k)["topic"] for t in tables for k in t})
            assert topics == expect_topics
            if expect_topics:
                q0 = next(v for t in tables for k, v in t.items() if fastjson.object_key(k)["queueId"] == 0)
                assert (q0["brokerOffset"], q0["consumerOffset"]) == (5, 2) and q0["lastTimestamp"] > 0
                assert raw["totalDiff"] >= 3
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- QUERY_CONSUME_QUEUE (321)

def test_query_consume_queue_shows_entries_and_the_groups_subscription(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "CqT", 4, queue_id=2, tags="TagA")
        await c.heartbeat("cq@1", "CqG", {"CqT": "TagA"})
        # MQClientAPIImpl.queryConsumeQueue: QueryConsumeQueueRequestHeader{topic, queueId, index, count, consumerGroup}
        resp = await c.call(R.QUERY_CONSUME_QUEUE, {"topic": "CqT", "queueId": "2", "index": "1", "count": "2",
                                                    "consumerGroup": "CqG"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        raw = fastjson.loads(resp.body)
        assert (raw["maxQueueIndex"], raw["minQueueIndex"]) == (4, 0)
        assert raw["subscriptionData"]["topic"] == "CqT" and raw["subscriptionData"]["subString"] == "TagA"
        assert raw["filterData"] == "null"
        assert len(raw["queueData"]) == 2
        assert all({"physicOffset", "physicSize", "tagsCode", "eval"} <= set(e) for e in raw["queueData"])
        first, second = raw["queueData"]
        assert second["physicOffset"] == first["physicOffset"] + first["physicSize"]
        view = await c.call(R.VIEW_MESSAGE_BY_ID, {"offset": str(first["physicOffset"])})
        assert messages(view)[0].body == b"m-1"

        offline = fastjson.loads((await c.call(R.QUERY_CONSUME_QUEUE, {
            "topic": "CqT", "queueId": "2", "index": "0", "count": "1", "consumerGroup": "NobodyG"})).body)
        assert offline["filterData"] == "NobodyG@CqT is not online!" and "subscriptionData" not in offline
        past = await c.call(R.QUERY_CONSUME_QUEUE, {"topic": "CqT", "queueId": "2", "index": "9", "count": "1"})
        assert past.code == ResponseCode.SUCCESS and past.remark == "Index 9 of 2@CqT is not exist!"
        assert "queueData" not in fastjson.loads(past.body)
        none = await c.call(R.QUERY_CONSUME_QUEUE, {"topic": "CqT", "queueId": "7", "index": "0", "count": "1"})
        assert (none.code, none.remark) == (ResponseCode.SYSTEM_ERROR, "7@CqT is not exist!")
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- GET_ALL_PRODUCER_INFO (328)

def test_all_producer_info_lists_connected_producers_by_group(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        before = int(time.time() * 1000)
        hb = await c.call(R.HEART_BEAT, body=HeartbeatData("prod@1", producer_data_set=[ProducerData("ProdG")]).encode())
        assert hb.code == ResponseCode.SUCCESS
        resp = await c.call(R.GET_ALL_PRODUCER_INFO)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        raw = fastjson.loads(resp.body)
        assert set(raw["data"]["ProdG"][0]) == {"clientId", "remoteIP", "language", "version", "lastUpdateTimestamp"}
        info = ProducerTableInfo.from_json(raw).data["ProdG"][0]
        assert (info.client_id, info.language) == ("prod@1", "JAVA")
        assert info.remote_ip.startswith("127.0.0.1:")
        assert before - 1000 <= info.last_update_timestamp <= int(time.time() * 1000)
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)

def test_system_topic_list_from_broker_is_what_export_metadata_leaves_out(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        resp = await c.call(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        assert resp.code == ResponseCode.SUCCESS
        topics = TopicList.from_json(resp.body or b"").topic_list
        assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "OFFSET_MOVED_EVENT"} <= set(topics)
        assert len(topics) == 9
    with_broker(tmp_path, body)


# --------------------------------------------------------------------------- clean-ups (306, 316, 329)

def test_clean_unused_topic_and_expired_consume_queues_remove_only_queues_without_a_topic(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "KeepT", 2)
        await send_n(c, "OrphanT", 2)
        store = eb.broker.store
        assert eb.broker.topics is not None
        eb.broker.topics.delete("OrphanT")  # the config is gone, its queues stay (as after a hand-edited topics.json)
        for code in (R.CLEAN_EXPIRED_CONSUMEQUEUE, R.CLEAN_UNUSED_TOPIC):
            resp = await c.call(code)
            assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
            if code == R.CLEAN_EXPIRED_CONSUMEQUEUE:  # OrphanT's queue still holds readable messages
                assert ("OrphanT", 0) in store.queues()
        assert ("OrphanT", 0) not in store.queues()
        assert ("KeepT", 0) in store.queues() and store.max_offset("KeepT", 0) == 2
    with_broker(tmp_path, body)


def test_delete_expired_commit_log_deletes_expired_files_now_whatever_the_hour(tmp_path: Path) -> None:
    hour = (time.localtime().tm_hour + 12) % 24  # delete_when is far from now: only the request deletes
    settings = {"segment_size": 4096, "max_message_size": 1024, "delete_when": f"{hour:02d}"}  # 72 h reserved

    async def body(eb: EmbeddedBroker, c: Client) -> None:
        big = b"x" * 900
        for _ in range(16):
            assert (await c.send("OldT", big, queue_id=0)).code == ResponseCode.SUCCESS
        log_dir = eb.config.data_dir / "commitlog"
        files = sorted(log_dir.iterdir())
        assert len(files) >= 3
        old = time.time() - 2 * 3600
        for f in files[:2]:
            os.utime(f, (old, old))
        kept = await c.call(R.DELETE_EXPIRED_COMMITLOG)
        assert kept.code == ResponseCode.SUCCESS and sorted(log_dir.iterdir()) == files, "2 h old, 72 h reserved"
        # updateBrokerConfig fileReservedTime reaches the store's retention at once, as on a Java broker
        fewer = await c.call(R.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=1\n")
        assert fewer.code == ResponseCode.SUCCESS, fewer.remark
        resp = await c.call(R.DELETE_EXPIRED_COMMITLOG)
        assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
        assert sorted(log_dir.iterdir()) == files[2:], "exactly the two expired files"
        assert eb.broker.store.min_offset("OldT", 0) > 0, "the consume queue followed"
        again = await c.call(R.DELETE_EXPIRED_COMMITLOG)
        assert again.code == ResponseCode.SUCCESS and sorted(log_dir.iterdir()) == files[2:]
    with_broker(tmp_path, body, **settings)


# --------------------------------------------------------------------------- the export commands' reads

def test_export_metadata_and_export_metrics_find_and_parse_everything_they_read(tmp_path: Path) -> None:
    """ExportMetadataCommand / ExportMetricsCommand's reads, parsed as the Java tool parses them."""
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        await send_n(c, "UserT", 2)
        await c.heartbeat("exp@1", "ExpG", {"UserT": "*"})
        # getUserTopicConfig: GET_ALL_TOPIC_CONFIG minus GET_SYSTEM_TOPIC_LIST_FROM_BROKER minus %RETRY%/%DLQ%
        table = fastjson.loads((await c.call(R.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
        system = set(TopicList.from_json((await c.call(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body or b"").topic_list)
        user = {t for t in table if t not in system and not t.startswith(("%RETRY%", "%DLQ%"))}
        assert "UserT" in user and "%RETRY%ExpG" in table and not user & system
        assert not {t for t in user if t.startswith("rmq_sys_") or t == "SCHEDULE_TOPIC_XXXX"}
        # getRuntimeQuota: Double.parseDouble(putTps.split(" ")[0]), Long.parseLong of the day totals
        kv = fastjson.loads((await c.call(R.GET_BROKER_RUNTIME_INFO)).body)["table"]
        for key in ("putTps", "getTransferedTps"):
            float(kv[key].split(" ")[0])
        for key in ("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning", "msgGetTotalTodayMorning",
                    "msgGetTotalYesterdayMorning"):
            int(kv[key])
        assert {"commitLogDiskRatio", "consumeQueueDiskRatio", "putMessageAverageSize"} <= set(kv)
        int((await broker_config(c))["clientCallbackExecutorThreads"])
        # no transaction half topic here: the tool catches the error and counts 0, as against a Java broker
        half = await c.call(R.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS",
                                                      "statsKey": "RMQ_SYS_TRANS_HALF_TOPIC"})
        assert half.code == ResponseCode.SYSTEM_ERROR
    with_broker(tmp_path, body)
