"""Read-only admin answers: what ``mqadmin`` and RocketMQ Dashboard ask a broker to show.

GET_BROKER_RUNTIME_INFO (``brokerStatus``, ``clusterList``), GET_BROKER_CONFIG
(``getBrokerConfig``), GET_TOPIC_STATS_INFO (``topicStatus``),
GET_CONSUMER_CONNECTION_LIST / GET_PRODUCER_CONNECTION_LIST
(``consumerConnection``, ``producerConnection``), GET_CONSUME_STATS
(``consumerProgress``), GET_ALL_PRODUCER_INFO (``producer``), QUERY_CONSUME_QUEUE
(``queryCq``) and QUERY_MESSAGE (``queryMsgByKey``, ``queryMsgByUniqueKey``). Body keys, error codes and remarks are those of the
4.9.8 ``AdminBrokerProcessor`` / ``QueryMessageProcessor`` (see
``../shared/protocol/scenario_g_admin``); maps keyed by a message queue come
out in the iteration order of the Java ``HashMap`` that holds them.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from rmqrun.broker.config import settings_of
from rmqrun.broker.config_names import CONFIG_BLACK_LIST, config_text, java_name
from rmqrun.broker.javamap import JavaPropertyMap
from rmqrun.protocol.java_order import java_hash_set_order, message_queue_hash
from rmqrun.broker.processors.common import BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.store.key_index import KeyIndex
from rmqrun.model import MessageQueue
from rmqrun.protocol.admin import (
    ConsumeQueueData, ProducerInfo, ProducerTableInfo, QueryConsumeQueueRequestHeader, QueryConsumeQueueResponseBody,
)
from rmqrun.protocol.bodies import dumps as fj_dumps
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand

VERSION_DESC = "V4_9_8"
VERSION_CODE = 409
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: BrokerConfig.defaultQueryMaxNum: a unique-key query returns at most this many.
DEFAULT_QUERY_MAX_NUM = 32

def mq_order(mqs: list[MessageQueue]) -> list[MessageQueue]:
    """Iteration order of a default-sized Java ``HashMap`` keyed by these queues."""
    return java_hash_set_order(mqs, lambda mq: message_queue_hash(mq.topic, mq.broker_name, mq.queue_id))  # type: ignore[return-value]


class InspectProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.key_index = KeyIndex(broker.store)

    # ------------------------------------------------------------------ broker

    def broker_config(self) -> dict[str, str]:
        """The broker's settings under their Java names (``getBrokerConfig``)."""
        cfg = self.broker.config
        out = {"brokerName": cfg.broker_name, "brokerId": "0", "brokerRole": "ASYNC_MASTER",
               "brokerIP1": self.broker.address.rsplit(":", 1)[0],  # what clients are told, as in Java
               "namesrvAddr": self.broker.namesrv_address or f"{cfg.namesrv_host}:{cfg.namesrv_port}",
               "listenPort": str(self.broker.server.port), "messageIndexEnable": "true",
               "defaultQueryMaxNum": str(DEFAULT_QUERY_MAX_NUM)}
        for name, value in settings_of(cfg).items():
            out.setdefault(java_name(name), config_text(value))
        # Read by mqadmin exportConfigs / exportMetrics, which fail on a missing key; the values say
        # what this broker does (no filter servers nor slaves).
        out.update({"filterServerNums": "0", "slaveReadEnable": "false",
                    "useTLS": config_text(cfg.tls_cert is not None),
                    "clientCallbackExecutorThreads": str(os.cpu_count() or 1),
                    "configBlackList": ";".join(sorted(CONFIG_BLACK_LIST))})
        return out

    async def get_broker_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.broker_config().items())
        version = self.broker.store.topic_configs.data_version.to_json()
        return answer(cmd, extra={"version": fastjson.dumps(
            {"counter": version["counter"], "timestamp": version["timestamp"]}).decode()},
            body=text.encode(), typed=True)

    def runtime_info(self) -> dict[str, str]:
        b = self.broker
        store = b.store
        stats = b.stats
        data_dir = str(b.config.data_dir)
        try:
            usage = shutil.disk_usage(data_dir)
            ratio = f"{store.disk_used():.2f}"  # as df: reserved blocks are not "used"
            capacity = (f"Total : {usage.total / 2**30:.1f} GiB, Free : {usage.free / 2**30:.1f} GiB.")
        except OSError:
            ratio, capacity = "-1", "Total : 0 B, Free : 0 B."
        up = int(time.time() * 1000) - stats.boot_ms
        days, rem = divmod(up // 1000, 86400)
        hours, rem = divmod(rem, 3600)
        minutes, seconds = divmod(rem, 60)
        puts = stats.put_total
        t = {
            "brokerVersionDesc": VERSION_DESC, "brokerVersion": str(VERSION_CODE),
            "msgPutTotalYesterdayMorning": "0", "msgPutTotalTodayMorning": "0", "msgPutTotalTodayNow": str(puts),
            "msgGetTotalYesterdayMorning": "0", "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(stats.get_total),
            "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0", "queryThreadPoolQueueCapacity": "20000",
            "EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": "0", "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(store.earliest_store_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "bootTimestamp": str(stats.boot_ms),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "putMessageEntireTimeMax": "0", "putMessageTimesTotal": str(puts),
            "putMessageSizeTotal": str(stats.put_bytes),
            "putMessageDistributeTime": "null", "putMessageAverageSize": str(stats.put_bytes / puts if puts else 0.0),
            "putMessageFailedTimes": "0", "putLatency99": "0.00", "putLatency999": "0.00",
            "getMessageEntireTimeMax": "0",
            "putTps": f"{stats.put_tps()}  ",
            "getFoundTps": f"{stats.get_tps()}  ", "getMissTps": f"{stats.miss_tps()}  ",
            "getTransferedTps": f"{stats.get_tps()}  ",
            "getTotalTps": f"{stats.get_tps() + stats.miss_tps()} 0.0 0.0",
            "remainTransientStoreBufferNumbs": str(2**31 - 1),
            "remainHowManyDataToFlush": f"{store.commit_log_max_offset - store.flushed_offset} B",
            "commitLogMinOffset": str(store.commit_log_min_offset),
            "commitLogMaxOffset": str(store.commit_log_max_offset),
            "commitLogDirCapacity": capacity, "commitLogDiskRatio": ratio,
            f"commitLogDiskRatio_{data_dir}/commitlog": ratio, "consumeQueueDiskRatio": ratio,
            "dispatchMaxBuffer": "0",
        }
        pop = self.broker.pop
        c = pop.counters if pop is not None else None
        # POP since start: rmqrun's own keys, not in a 4.9.8 table, so they appear only once the broker has
        # served POP (a broker used as 4.x clients use it answers the 4.9.8 key set, checked against the captures)
        if pop is not None and c is not None and (c.popped or c.acked or c.changed or c.revived or pop.in_flight()):
            t.update({"popMessageNums": str(c.popped), "popAckNums": str(c.acked),
                      "popChangeInvisibleNums": str(c.changed), "popReviveNums": str(c.revived),
                      "popInFlightNums": str(pop.in_flight())})
        return dict(JavaPropertyMap(t.items()).items())

    async def get_broker_runtime_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return answer(cmd, body=fastjson.dumps({"table": self.runtime_info()}), typed=False)

    # ------------------------------------------------------------------ topics

    def topic_stats(self, topic: str) -> dict[MessageQueue, dict[str, int]] | None:
        topics = self.broker.topics
        assert topics is not None
        tc = topics.get(topic)
        if tc is None:
            return None
        store, name = self.broker.store, self.broker.config.broker_name
        table: dict[MessageQueue, dict[str, int]] = {}
        for qid in range(tc.write_queue_nums):
            max_offset = max(store.max_offset(topic, qid), 0)
            last = store.store_time_at(topic, qid, max_offset - 1) if max_offset > 0 else 0
            table[MessageQueue(topic, name, qid)] = {
                "lastUpdateTimestamp": max(last, 0), "maxOffset": max_offset,
                "minOffset": max(store.min_offset(topic, qid), 0)}
        return {mq: table[mq] for mq in mq_order(list(table))}

    async def get_topic_stats_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic")
        if not topic:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null", typed=False)
        table = self.topic_stats(topic)
        if table is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist", typed=False)
        return answer(cmd, body=fj_dumps({"offsetTable": table}), typed=False)

    # ------------------------------------------------------------------ groups

    def consume_stats(self, group: str, topic: str | None = None) -> tuple[float, dict[MessageQueue, dict[str, int]]]:
        """(consume TPS, queue → broker/consumer offsets) as ``ConsumeStats`` (consumerProgress)."""
        b = self.broker
        assert b.topics is not None
        offsets = b.store.consumer_offsets
        topics = [topic] if topic else offsets.topics_of(group)
        online = b.consumers.group(group)
        tps = 0.0
        table: dict[MessageQueue, dict[str, int]] = {}
        for t in topics:
            tc = b.topics.get(t)
            if tc is None:
                continue
            # A topic the online group no longer subscribes to is history, not progress.
            if online is not None and online.subscriptions and t not in online.subscriptions:
                continue
            for qid in range(tc.read_queue_nums):
                broker_offset = max(b.store.max_offset(t, qid), 0)
                consumer_offset = offsets.query(group, t, qid)
                consumer_offset = 0 if consumer_offset is None or consumer_offset < 0 else consumer_offset
                last = b.store.store_time_at(t, qid, consumer_offset - 1) if consumer_offset > 0 else 0
                table[MessageQueue(t, b.config.broker_name, qid)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": max(last, 0)}
            tps += b.stats.consume_tps(group, t)
        return tps, {mq: table[mq] for mq in mq_order(list(table))}

    async def get_consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup")
        if not group:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <consumerGroup> is null", typed=False)
        tps, table = self.consume_stats(group, cmd.ext_fields.get("topic") or None)
        return answer(cmd, body=fj_dumps({"consumeTps": tps, "offsetTable": table}), typed=False)

    async def get_all_subscription_group_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the Dashboard's consumer list starts here."""
        store = self.broker.store.subscription_groups
        version = store.data_version.to_json()
        table = {sgc.group_name: sgc.to_json() for sgc in store.all().values()}
        body = {"dataVersion": {"counter": version["counter"], "timestamp": version["timestamp"]},
                "subscriptionGroupTable": table}
        return answer(cmd, body=fastjson.dumps(body), typed=False)

    async def query_topics_by_consumer(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """QUERY_TOPICS_BY_CONSUMER: the topics a group has offsets for (``whichTopicByConsumer``)."""
        group = cmd.ext_fields.get("group")
        if not group:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <group> is null", typed=False)
        topics = self.broker.store.consumer_offsets.topics_of(group)
        return answer(cmd, body=fastjson.dumps({"brokerAddr": self.broker.address, "topicList": topics}),
                      typed=False)

    async def get_consumer_connection_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("consumerGroup")
        if not group:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <consumerGroup> is null", typed=False)
        info = self.broker.consumers.group(group)
        if info is None:
            return answer(cmd, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online",
                          typed=False)
        body = {
            "connectionSet": [_connection(c) for c in info.channels.values()],
            "consumeFromWhere": info.consume_from_where, "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: s.to_json() for t, s in info.subscriptions.items()},
        }
        return answer(cmd, body=fj_dumps(body), typed=False)

    async def get_producer_connection_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("producerGroup")
        if not group:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <producerGroup> is null", typed=False)
        channels = self.broker.consumers.producers.get(group)
        if not channels:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist", typed=False)
        return answer(cmd, body=fj_dumps({"connectionSet": [_connection(c) for c in channels.values()]}),
                      typed=False)

    async def get_all_producer_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (``mqadmin producer``): every connected producer, by group."""
        now_ms, now = int(time.time() * 1000), time.monotonic()
        table = ProducerTableInfo({group: [
            ProducerInfo(c.client_id, c.conn.name, c.language, c.version,
                         now_ms - int((now - c.last_update) * 1000))
            for c in channels.values()] for group, channels in self.broker.consumers.producers.items() if channels})
        return answer(cmd, body=table.encode(), typed=False)

    # ------------------------------------------------------------------ messages

    async def query_consume_queue(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (``mqadmin queryCq``): raw entries of one queue, and the group's subscription.

        An index outside the queue is SUCCESS with Java's remark, as in 4.9.8; the body still says the
        queue's bounds (Java sends none, and the tool then fails on it).
        """
        try:
            h = parse_header(cmd, QueryConsumeQueueRequestHeader)
        except BadRequest as bad:
            return bad.response
        store = self.broker.store
        entries = store.queue_entries(h.topic, h.queue_id, h.index, max(h.count, 0))
        if entries is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"{h.queue_id}@{h.topic} is not exist!", typed=False)
        body = QueryConsumeQueueResponseBody(store.max_offset(h.topic, h.queue_id),
                                             store.min_offset(h.topic, h.queue_id))
        if h.consumer_group is not None:
            sub = self.broker.consumers.find_subscription(h.consumer_group, h.topic)
            body.subscription_data = sub.to_json() if sub is not None else None
            # Java prints the group's ConsumerFilterData, which a TAG subscription has none of.
            body.filter_data = "null" if sub is not None else f"{h.consumer_group}@{h.topic} is not online!"
        if not body.min_queue_index <= h.index < body.max_queue_index:
            return answer(cmd, remark=f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!",
                          body=body.encode(), typed=False)
        body.queue_data = [ConsumeQueueData(e.commit_log_offset, e.size, e.tags_code) for e in entries]
        return answer(cmd, body=body.encode(), typed=False)

    async def query_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        try:
            topic, key = ext["topic"], ext["key"]
            max_num = int(ext.get("maxNum", DEFAULT_QUERY_MAX_NUM))
            begin, end = int(ext.get("beginTimestamp", 0)), int(ext.get("endTimestamp", 2**63 - 1))
        except KeyError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"the custom field <{exc.args[0]}> is null", typed=False)
        except ValueError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc), typed=False)
        if ext.get(UNIQUE_KEY_QUERY, "").lower() == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        hits = self.key_index.query(topic, key, max_num, begin, end)
        records = [r for r in (self.broker.store.read_at(h.commit_log_offset, h.size) for h in hits) if r]
        header = {"indexLastUpdateTimestamp": self.key_index.last_update_timestamp,
                  "indexLastUpdatePhyoffset": self.key_index.last_update_offset}
        if not records:
            return answer(cmd, ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                          header=header)
        return answer(cmd, header=header, body=b"".join(records))


def _connection(channel: Any) -> dict[str, Any]:
    return {"clientAddr": channel.conn.name, "clientId": channel.client_id, "language": channel.language,
            "version": channel.version}
