"""Typed admin calls, the ones ``mqadmin`` sends (``MQClientAPIImpl`` behind ``DefaultMQAdminExt``).

Topic configuration (UPDATE_AND_CREATE_TOPIC, GET_ALL_TOPIC_CONFIG,
DELETE_TOPIC_IN_BROKER / _IN_NAMESRV), the name server's topic list,
cluster table and KV table (PUT/GET/DELETE_KV_CONFIG: ORDER_TOPIC_CONFIG),
per-queue statistics (GET_TOPIC_STATS_INFO), a group's
consume statistics (GET_CONSUME_STATS), who consumes a topic
(QUERY_TOPIC_CONSUME_BY_WHO), what a group's online clients subscribe to
(GET_CONSUMER_CONNECTION_LIST), a client's running info asked through its
broker (GET_CONSUMER_RUNNING_INFO, ``mqadmin consumerStatus``), one named
broker statistic (VIEW_BROKER_STATS_DATA) and the online offset reset
(INVOKE_BROKER_TO_RESET_OFFSET). Each call builds the request the 4.9.8 Java
tools send and returns a typed result; a failing answer raises
``error_for_code``, whose ``code`` lets callers tell "not supported" or
"consumer not online" from a real failure.

Stateless, like :class:`rmqrun.client.broker.BrokerClient`: it borrows a
connection pool and a name-server client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rmqrun.client.namesrv import NameServerClient
from rmqrun.client.route import MASTER_ID, PERM_READ, PERM_WRITE, BrokerData
from rmqrun.model import MessageQueue
from rmqrun.protocol.admin import BrokerStatsData
from rmqrun.protocol.bodies import load_object, message_queue_from, message_queue_table
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import ConnectionPool
from rmqrun.remoting.errors import ProtocolError, RemotingError, error_for_code
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.topic_names import AUTO_CREATE_TOPIC

ADMIN_TIMEOUT = 5.0  # DefaultMQAdminExt's timeoutMillis
#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG: topic -> "brokerName:writeQueueNums;..." of ordered topics
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
DEFAULT_TOPIC = AUTO_CREATE_TOPIC


@dataclass(slots=True)
class TopicConfig:
    """A broker's TopicConfig, as UPDATE_AND_CREATE_TOPIC carries it and GET_ALL_TOPIC_CONFIG lists it."""

    topic: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    order: bool = False
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0

    def to_ext(self) -> dict[str, str]:
        return {"topic": self.topic, "defaultTopic": DEFAULT_TOPIC, "readQueueNums": str(self.read_queue_nums),
                "writeQueueNums": str(self.write_queue_nums), "perm": str(self.perm),
                "topicFilterType": self.topic_filter_type, "topicSysFlag": str(self.topic_sys_flag),
                "order": str(self.order).lower()}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "TopicConfig":
        return cls(str(obj["topicName"]), int(obj.get("readQueueNums", 0)), int(obj.get("writeQueueNums", 0)),
                   int(obj.get("perm", 0)), bool(obj.get("order", False)),
                   str(obj.get("topicFilterType", "SINGLE_TAG")), int(obj.get("topicSysFlag", 0)))


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of GET_TOPIC_STATS_INFO (TopicOffset)."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(frozen=True, slots=True)
class ConsumeProgress:
    """One queue of GET_CONSUME_STATS (OffsetWrapper). The broker writes 0 for "no stored offset"."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int


@dataclass(slots=True)
class ConsumeStats:
    offset_table: dict[MessageQueue, ConsumeProgress] = field(default_factory=dict)
    consume_tps: float = 0.0


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: the group's online clients as one broker sees them.

    Only what callers read is kept: the client ids, the topics of the
    subscription table (the group's subscriptions, merged by the broker) and
    the consume type of the group's latest heartbeat (``CONSUME_PASSIVELY``:
    push consumers; ``CONSUME_ACTIVELY``: pull consumers).
    """

    client_ids: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()
    consume_type: str = ""


@dataclass(slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: brokers by name, broker names by cluster."""

    brokers: dict[str, BrokerData] = field(default_factory=dict)
    clusters: dict[str, list[str]] = field(default_factory=dict)

    def master_addresses(self, cluster: str) -> list[str]:
        """CommandUtil.fetchMasterAddrByClusterName: every master of ``cluster``, sorted."""
        out = []
        for name in self.clusters.get(cluster, []):
            bd = self.brokers.get(name)
            if bd is not None and MASTER_ID in bd.broker_addrs:
                out.append(bd.broker_addrs[MASTER_ID])
        return sorted(out)

    def all_masters(self) -> list[str]:
        return sorted(bd.broker_addrs[MASTER_ID] for bd in self.brokers.values() if MASTER_ID in bd.broker_addrs)

    def broker_name_of(self, addr: str) -> str | None:
        for bd in self.brokers.values():
            if addr in bd.broker_addrs.values():
                return bd.broker_name
        return None


def _stats_table(obj: Any) -> dict[MessageQueue, dict[str, Any]]:
    if not isinstance(obj, Mapping):
        return {}
    return {message_queue_from(k): dict(v) for k, v in obj.items()}


class AdminClient:
    """Admin requests to brokers (by address) and to the name servers."""

    def __init__(self, pool: ConnectionPool, namesrv: NameServerClient, *, timeout: float = ADMIN_TIMEOUT) -> None:
        self.pool = pool
        self.namesrv = namesrv
        self.timeout = timeout

    async def _broker(self, addr: str, code: int, ext: dict[str, str] | None = None,
                      body: bytes | None = None) -> RemotingCommand:
        resp = await self.pool.request(addr, RemotingCommand(code, ext or {}, body=body), self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, code)
        return resp

    async def _namesrv(self, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
        resp = await self.namesrv.request(RemotingCommand(code, ext or {}), self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, code)
        return resp

    # ----------------------------------------------------------------- name server

    async def cluster_info(self) -> ClusterInfo:
        body = load_object((await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)).body or b"{}")
        try:
            brokers = {str(k): BrokerData.from_json(v) for k, v in (body.get("brokerAddrTable") or {}).items()}
            clusters = {str(k): sorted(str(n) for n in v) for k, v in (body.get("clusterAddrTable") or {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed cluster info: {exc!r}") from exc
        return ClusterInfo(brokers, clusters)

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (refused by name servers with enableAllTopicList=false)."""
        body = load_object((await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body or b"{}")
        return sorted(str(t) for t in body.get("topicList") or ())

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None = None) -> None:
        ext = {"topic": topic}
        if cluster:
            ext["clusterName"] = cluster
        await self._namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)

    async def _every_namesrv(self, code: int, ext: dict[str, str]) -> None:
        """Send to every name server (each keeps its own KV table), as ``putKVConfigValue`` does:
        all are tried, and the last refusal is raised once they have been."""
        failed: BaseException | None = None
        for addr in self.namesrv.addresses:
            try:
                resp = await self.pool.request(addr, RemotingCommand(code, dict(ext)), self.timeout)
            except RemotingError as exc:
                failed = exc
                continue
            if resp.code != ResponseCode.SUCCESS:
                failed = error_for_code(resp.code, resp.remark, code)
        if failed is not None:
            raise failed

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG on every name server (``mqadmin updateKvConfig``, ``updateTopic -o``)."""
        await self._every_namesrv(RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG from one name server; None when it has no such item (QUERY_NOT_FOUND)."""
        resp = await self.namesrv.request(
            RemotingCommand(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}), self.timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, RequestCode.GET_KV_CONFIG)
        return resp.ext_fields.get("value")

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG on every name server (``mqadmin deleteKvConfig``)."""
        await self._every_namesrv(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    # ----------------------------------------------------------------- topics on a broker

    async def create_or_update_topic(self, addr: str, config: TopicConfig) -> None:
        await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, config.to_ext())

    async def topic_configs(self, addr: str) -> dict[str, TopicConfig]:
        body = load_object((await self._broker(addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body or b"{}")
        table = body.get("topicConfigTable") or {}
        return {str(name): TopicConfig.from_json(obj) for name, obj in table.items()}

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})

    async def topic_stats(self, addr: str, topic: str) -> dict[MessageQueue, QueueStats]:
        body = load_object((await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})).body or b"{}")
        return {mq: QueueStats(int(v.get("minOffset", 0)), int(v.get("maxOffset", 0)),
                               int(v.get("lastUpdateTimestamp", 0)))
                for mq, v in _stats_table(body.get("offsetTable")).items()}

    # ----------------------------------------------------------------- consumer groups

    async def consume_stats(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        ext = {"consumerGroup": group}
        if topic:
            ext["topic"] = topic
        body = load_object((await self._broker(addr, RequestCode.GET_CONSUME_STATS, ext)).body or b"{}")
        table = {mq: ConsumeProgress(int(v.get("brokerOffset", 0)), int(v.get("consumerOffset", 0)),
                                     int(v.get("lastTimestamp", 0)))
                 for mq, v in _stats_table(body.get("offsetTable")).items()}
        return ConsumeStats(table, float(body.get("consumeTps", 0.0)))

    async def reset_offset_online(self, addr: str, group: str, topic: str, timestamp: int, *,
                                  force: bool = True) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the broker computes each queue's offset for ``timestamp``
        (ms; -1: the max offset), sends them to every online client of the group and answers the
        table. Raises with code CONSUMER_NOT_ONLINE (206) when no client of the group is online."""
        ext = {"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": str(force).lower()}
        resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        return message_queue_table(load_object(resp.body).get("offsetTable")) if resp.body else {}

    async def consumer_groups_of_topic(self, addr: str, topic: str) -> frozenset[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups that broker has consumers or offsets of ``topic`` for
        (``mqadmin topicStatus``'s older sibling; what ``rmqrun status`` asks brokers without
        GET_CONSUME_STATS)."""
        body = load_object((await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})).body
                     or b"{}")
        return frozenset(str(g) for g in body.get("groupList") or ())

    async def consumer_connection(self, addr: str, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST; raises (CONSUMER_NOT_ONLINE, 206) when no client of the group is
        online there. An empty answer is an empty connection."""
        resp = await self._broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        if not resp.body:
            return ConsumerConnection()
        body = load_object(resp.body)
        ids = frozenset(str(c.get("clientId", "")) for c in body.get("connectionSet") or ()
                        if isinstance(c, Mapping))
        return ConsumerConnection(ids, frozenset(str(t) for t in body.get("subscriptionTable") or {}),
                                  str(body.get("consumeType") or ""))

    async def consumer_running_info(self, addr: str, group: str, client_id: str, *,
                                    jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO through the broker the client is connected to (``mqadmin consumerStatus``):
        the client's ConsumerRunningInfo as a JSON object (``properties``, ``mqTable``, POP clients'
        ``mqPopTable``, ...). Raises when the client is not online there or does not answer."""
        ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": str(jstack).lower()}
        resp = await self._broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        return load_object(resp.body or b"{}")

    async def stats_data(self, addr: str, name: str, key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA: one named statistic (``POP_REVIVE_NUMS`` of ``topic@group``, ...) over the
        last minute, hour and day. A statistic the broker never wrote (or does not keep) raises SYSTEM_ERROR."""
        resp = await self._broker(addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
        return BrokerStatsData.from_json(resp.body or b"{}")
