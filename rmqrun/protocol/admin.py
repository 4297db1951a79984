"""Headers and bodies of the operator requests ``mqadmin`` sends beyond a client's daily traffic.

Broker: UPDATE_BROKER_CONFIG (properties text), VIEW_BROKER_STATS_DATA (``statsAll``),
GET_BROKER_CONSUME_STATS (``brokerConsumeStats``), QUERY_CONSUME_QUEUE (``queryCq``),
GET_ALL_PRODUCER_INFO (``producer``), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (``exportMetadata``).
Name server: WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER (``wipeWritePerm``,
``addWritePerm``), UPDATE_NAMESRV_CONFIG (``updateNamesrvConfig``).

Field names are those of the 4.9.8 Java classes the tool decodes with (``ViewBrokerStatsDataRequestHeader``,
``BrokerStatsData``, ``ConsumeStatsList``, ``QueryConsumeQueueResponseBody``, ``ProducerTableInfo``, ...):
a missing key there is a NullPointerException or a zero in the tool's output, so each body writes
every field, in fastjson's alphabetical order. Both directions are here because the embedded
broker answers with them and rmqrun's tests (and any Python admin tool) read them back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rmqrun.protocol.bodies import dumps
from rmqrun.protocol.bodies import load_object
from rmqrun.protocol.header_codec import Header, bool_field, int_field, str_field
from rmqrun.topic_names import AUTO_CREATE_TOPIC

#: Names of the statistics VIEW_BROKER_STATS_DATA serves (Java ``Stats``); the key each is kept under.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"      # key: topic
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"      # key: topic
GROUP_GET_NUMS = "GROUP_GET_NUMS"      # key: topic@group
GROUP_GET_SIZE = "GROUP_GET_SIZE"      # key: topic@group
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"    # key: topic@group (messages a group sent back)
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"    # key: cluster name
BROKER_GET_NUMS = "BROKER_GET_NUMS"    # key: cluster name


def stats_key(topic: str, group: str) -> str:
    """``BrokerStatsManager.buildStatsKey(topic, group)``: how ``statsAll`` names a group's gets."""
    return f"{topic}@{group}"


# --------------------------------------------------------------------------- headers

@dataclass(kw_only=True, slots=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (``mqadmin updateTopic``): the topic's queues, permission and flags."""

    topic: str = str_field("topic")
    default_topic: str = str_field("defaultTopic", AUTO_CREATE_TOPIC)
    read_queue_nums: int = int_field("readQueueNums")
    write_queue_nums: int = int_field("writeQueueNums")
    perm: int = int_field("perm")
    topic_filter_type: str = str_field("topicFilterType", "SINGLE_TAG")
    topic_sys_flag: int | None = int_field("topicSysFlag", None)
    order: bool = bool_field("order", False)


@dataclass(kw_only=True, slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA: one statistic (``TOPIC_PUT_NUMS``, ...) of one key."""

    stats_name: str = str_field("statsName")
    stats_key: str = str_field("statsKey")


@dataclass(kw_only=True, slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS: ``isOrder`` keeps only ordered topics (``brokerConsumeStats -o``)."""

    is_order: bool = bool_field("isOrder", False)


@dataclass(kw_only=True, slots=True)
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE: ``count`` entries of one queue from ``index``; a group adds its subscription."""

    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    index: int = int_field("index")
    count: int = int_field("count")
    consumer_group: str | None = str_field("consumerGroup", None)


@dataclass(kw_only=True, slots=True)
class BrokerNameRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER: which broker's routes to change."""

    broker_name: str = str_field("brokerName")


@dataclass(kw_only=True, slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int = int_field("wipeTopicCount")


@dataclass(kw_only=True, slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int = int_field("addTopicCount")


# --------------------------------------------------------------------------- properties bodies

def properties_text(props: Mapping[str, Any]) -> str:
    """``MixAll.properties2String``: one ``key=value`` line each (what UPDATE_*_CONFIG carry)."""
    return "".join(f"{k}={v}\n" for k, v in props.items())


def parse_properties(text: str) -> dict[str, str]:
    """``MixAll.string2Properties`` for the form the tools write: one ``key=value`` a line.

    As ``java.util.Properties`` reads a line: blank lines and ``#``/``!`` comments are skipped, the key
    ends at the first ``=``, ``:`` or blank, and the value is the rest after that separator (blanks
    around it dropped). Backslash escapes are not interpreted (the tools never write them).
    """
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = _PROPERTY_LINE.match(line)
        assert m is not None  # the pattern matches any line
        out[m.group(1)] = m.group(2)
    return out


_PROPERTY_LINE = re.compile(r"([^=:\s]*)\s*[=:]?\s*(.*)$")


# --------------------------------------------------------------------------- bodies

@dataclass(slots=True)
class StatsWindow:
    """``BrokerStatsItem``: the sum over a window, per second, and per call (``avgpt``)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> "StatsWindow":
        obj = obj or {}
        return cls(int(obj.get("sum", 0)), float(obj.get("tps", 0.0)), float(obj.get("avgpt", 0.0)))


@dataclass(slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA's answer: the last minute, hour and day of one statistic."""

    stats_minute: StatsWindow = field(default_factory=StatsWindow)
    stats_hour: StatsWindow = field(default_factory=StatsWindow)
    stats_day: StatsWindow = field(default_factory=StatsWindow)

    def encode(self) -> bytes:
        return dumps({"statsDay": self.stats_day, "statsHour": self.stats_hour, "statsMinute": self.stats_minute})

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "BrokerStatsData":
        obj = load_object(data)
        return cls(StatsWindow.from_json(obj.get("statsMinute")), StatsWindow.from_json(obj.get("statsHour")),
                   StatsWindow.from_json(obj.get("statsDay")))


@dataclass(slots=True)
class TopicList:
    """``TopicList``: GET_SYSTEM_TOPIC_LIST_FROM_BROKER / _FROM_NS (``brokerAddr`` only from a name server)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {}
        if self.broker_addr is not None:
            out["brokerAddr"] = self.broker_addr
        out["topicList"] = self.topic_list
        return dumps(out)

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "TopicList":
        obj = load_object(data)
        return cls([str(t) for t in obj.get("topicList") or ()], obj.get("brokerAddr"))


@dataclass(slots=True)
class ProducerInfo:
    """One producer connection of GET_ALL_PRODUCER_INFO (``mqadmin producer``)."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "language": self.language,
                "lastUpdateTimestamp": self.last_update_timestamp, "remoteIP": self.remote_ip,
                "version": self.version}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ProducerInfo":
        return cls(str(obj["clientId"]), str(obj.get("remoteIP", "")), str(obj.get("language", "")),
                   int(obj.get("version", 0)), int(obj.get("lastUpdateTimestamp", 0)))


@dataclass(slots=True)
class ProducerTableInfo:
    """``ProducerTableInfo``: producer group → its connected producers."""

    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps({"data": self.data})

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "ProducerTableInfo":
        obj = load_object(data)
        return cls({str(g): [ProducerInfo.from_json(p) for p in ps] for g, ps in (obj.get("data") or {}).items()})


@dataclass(slots=True)
class ConsumeQueueData:
    """One consume-queue entry as ``queryCq`` prints it (``ConsumeQueueData``)."""

    physic_offset: int
    physic_size: int
    tags_code: int
    eval: bool = False

    def to_json(self) -> dict[str, Any]:
        # extendDataJson, bitMap and msg stay null without a consume-queue extension, as in Java.
        return {"eval": self.eval, "physicOffset": self.physic_offset, "physicSize": self.physic_size,
                "tagsCode": self.tags_code}


@dataclass(slots=True)
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE's answer; ``subscription_data`` / ``filter_data`` only when a group was named."""

    max_queue_index: int
    min_queue_index: int
    queue_data: list[ConsumeQueueData] | None = None
    subscription_data: Mapping[str, Any] | None = None
    filter_data: str | None = None

    def encode(self) -> bytes:
        out: dict[str, Any] = {}
        if self.filter_data is not None:
            out["filterData"] = self.filter_data
        out["maxQueueIndex"] = self.max_queue_index
        out["minQueueIndex"] = self.min_queue_index
        if self.queue_data is not None:
            out["queueData"] = self.queue_data
        if self.subscription_data is not None:
            out["subscriptionData"] = self.subscription_data
        return dumps(out)
