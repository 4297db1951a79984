"""Topic route data from the name server, and the queues it implies.

A route lists, per broker name, how many read and write queues the topic has
and with which permissions (``queueDatas``), and the addresses of each
broker's members by broker id (``brokerDatas``; id 0 is the master). Name
servers older than 4.9.4, or any name server answering a client that
announces a version below 401, write ``brokerAddrs`` with bare integer keys;
:meth:`TopicRouteData.from_json` reads both forms and :meth:`to_json` writes
either, so the embedded name server can answer old clients the way they
expect.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from rmqrun.model import MessageQueue
from rmqrun.remoting import fastjson
from rmqrun.remoting.errors import ProtocolError

# PermName bits.
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1

MASTER_ID = 0


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: ``RW-`` style, as mqadmin prints it."""
    return ("R" if is_readable(perm) else "-") + ("W" if is_writeable(perm) else "-") + (
        "X" if is_inherited(perm) else "-")


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "QueueData":
        return cls(str(obj["brokerName"]), int(obj.get("readQueueNums", 0)), int(obj.get("writeQueueNums", 0)),
                   int(obj.get("perm", 0)), int(obj.get("topicSysFlag", 0)))


@dataclass(slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def master_address(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_address(self) -> str | None:
        """BrokerData.selectBrokerAddr: the master if there is one, else any member."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None:
            return master
        if not self.broker_addrs:
            return None
        return random.choice(list(self.broker_addrs.values()))

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
                "brokerName": self.broker_name, "cluster": self.cluster}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "BrokerData":
        addrs = obj.get("brokerAddrs") or {}
        if not isinstance(addrs, Mapping):
            raise ProtocolError(f"brokerAddrs is not a map: {addrs!r}")
        return cls(str(obj.get("cluster", "")), str(obj["brokerName"]),
                   {int(k): str(v) for k, v in addrs.items()})


@dataclass(slots=True)
class TopicRouteData:
    """The GET_ROUTEINFO_BY_TOPIC answer. ``topic`` is not on the wire; callers set it."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    topic: str = ""

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], topic: str = "") -> "TopicRouteData":
        obj = data if isinstance(data, Mapping) else fastjson.loads(data)
        if not isinstance(obj, Mapping):
            raise ProtocolError("route body is not a JSON object")
        try:
            return cls(
                queue_datas=[QueueData.from_json(q) for q in obj.get("queueDatas") or ()],
                broker_datas=[BrokerData.from_json(b) for b in obj.get("brokerDatas") or ()],
                order_topic_conf=obj.get("orderTopicConf") or None,
                filter_server_table={str(k): [str(a) for a in v]
                                     for k, v in (obj.get("filterServerTable") or {}).items()},
                topic=topic,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProtocolError(f"malformed route data: {exc!r}") from exc

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"brokerDatas": [b.to_json() for b in self.broker_datas],
                               "filterServerTable": self.filter_server_table}
        if self.order_topic_conf:
            out["orderTopicConf"] = self.order_topic_conf
        out["queueDatas"] = [q.to_json() for q in self.queue_datas]
        return out

    def to_json(self, *, standard: bool = True) -> bytes:
        """The body as a 4.9.8 name server writes it: strict JSON for clients of
        version >= 401 (``standard``), bare integer broker-id keys otherwise."""
        if standard:
            return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        obj = self.to_dict()
        for b in obj["brokerDatas"]:
            b["brokerAddrs"] = {int(k): v for k, v in b["brokerAddrs"].items()}
        return fastjson.dumps(obj, unquoted_int_keys=True)

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def master_address(self, broker_name: str) -> str | None:
        data = self.broker(broker_name)
        return data.master_address if data else None

    @property
    def ok(self) -> bool:
        """Whether the route names at least one queue (TopicPublishInfo.ok for the publish side)."""
        return bool(self.queue_datas)


def subscribe_queues(route: TopicRouteData, topic: str | None = None) -> list[MessageQueue]:
    """Queues a consumer may pull: ``0..readQueueNums-1`` of every readable broker
    (MQClientInstance.topicRouteData2TopicSubscribeInfo), sorted like Java sorts them."""
    name = topic if topic is not None else route.topic
    out = [MessageQueue(name, q.broker_name, i)
           for q in route.queue_datas if is_readable(q.perm) for i in range(q.read_queue_nums)]
    return sorted(set(out))


def publish_queues(route: TopicRouteData, topic: str | None = None) -> list[MessageQueue]:
    """Queues a producer may send to (topicRouteData2TopicPublishInfo).

    With an ``orderTopicConf`` (``"broker-a:4;broker-b:4"``) that list decides.
    Otherwise: writable brokers in broker-name order that have a master,
    ``0..writeQueueNums-1`` each, in that order (round robin walks it).
    """
    name = topic if topic is not None else route.topic
    out: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            broker, sep, nums = item.partition(":")
            if sep and nums.strip().isdigit():
                out.extend(MessageQueue(name, broker, i) for i in range(int(nums)))
        return out
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not is_writeable(q.perm):
            continue
        broker = route.broker(q.broker_name)
        if broker is None or broker.master_address is None:
            continue
        out.extend(MessageQueue(name, q.broker_name, i) for i in range(q.write_queue_nums))
    return out


def limit_queue_nums(route: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """The default-topic (TBW102) route a producer uses for a topic that does not exist
    yet: every broker's queue counts capped at ``defaultTopicQueueNums``, as
    ``updateTopicRouteInfoFromNameServer(topic, isDefault=true)`` does."""
    return TopicRouteData(
        queue_datas=[QueueData(q.broker_name, min(queue_nums, q.read_queue_nums), min(queue_nums, q.read_queue_nums),
                               q.perm, q.topic_sys_flag) for q in route.queue_datas],
        broker_datas=[BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in route.broker_datas],
        order_topic_conf=route.order_topic_conf,
        filter_server_table=dict(route.filter_server_table),
        topic=route.topic,
    )
