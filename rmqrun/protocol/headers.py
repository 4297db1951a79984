"""Typed custom headers: the ``extFields`` of each request and response.

Each class declares its fields with the exact wire name and kind (the codec is
:class:`~rmqrun.protocol.header_codec.Header`). Field sets are those of the
4.9.8 Java classes in ``common/.../protocol/header/``; ``bname`` is the broker
name 4.9.8 adds to every ``RpcRequestHeader`` subclass (the captures show it on
the wire).

The embedded broker parses requests with ``from_ext`` and answers with
``to_ext``, so both directions are exercised against the captured frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rmqrun.protocol.header_codec import Header, bool_field, int_field, str_field

# --------------------------------------------------------------------------- send

#: SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE rename the v1 fields to single letters,
#: in this order (SendMessageRequestHeaderV2); ``l`` is maxReconsumeTimes.
V2_NAMES: dict[str, str] = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d",
    "queueId": "e", "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i",
    "reconsumeTimes": "j", "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m", "bname": "n",
}
V1_NAMES: dict[str, str] = {v: k for k, v in V2_NAMES.items()}


@dataclass(kw_only=True, slots=True)
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (full names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (``a``..``n``)."""

    JAVA_CLASS = "SendMessageRequestHeader"
    producer_group: str = str_field("producerGroup")
    topic: str = str_field("topic")
    default_topic: str = str_field("defaultTopic")
    default_topic_queue_nums: int = int_field("defaultTopicQueueNums")
    queue_id: int = int_field("queueId")
    sys_flag: int = int_field("sysFlag")
    born_timestamp: int = int_field("bornTimestamp")
    flag: int = int_field("flag")
    properties: str | None = str_field("properties", None)
    reconsume_times: int | None = int_field("reconsumeTimes", None)
    unit_mode: bool = bool_field("unitMode", False)
    batch: bool = bool_field("batch", False)
    max_reconsume_times: int | None = int_field("maxReconsumeTimes", None)
    bname: str | None = str_field("bname", None)

    def to_ext(self, *, v2: bool = False) -> dict[str, str]:  # type: ignore[override]
        if v2:
            return self._java_ordered(self.to_ext_declared(v2=True), "SendMessageRequestHeaderV2", V2_NAMES)
        return self._java_ordered(self.to_ext_declared(), self.JAVA_CLASS, None)

    def to_ext_declared(self, *, v2: bool = False) -> dict[str, str]:  # type: ignore[override]
        ext = Header.to_ext_declared(self)
        if not v2:
            return ext
        return {V2_NAMES[k]: v for k, v in ext.items()}

    def to_ext_v2(self) -> dict[str, str]:
        return self.to_ext(v2=True)

    @classmethod
    def from_ext(cls, ext: Mapping[str, Any] | None) -> "SendMessageRequestHeader":  # type: ignore[override]
        """Either form: single-letter keys are recognised by ``b`` (topic) without ``topic``."""
        ext = ext or {}
        if "b" in ext and "topic" not in ext:
            return cls.from_ext_v2(ext)
        return Header.from_ext.__func__(cls, ext)  # type: ignore[attr-defined]

    @classmethod
    def from_ext_v2(cls, ext: Mapping[str, Any]) -> "SendMessageRequestHeader":
        renamed = {V1_NAMES[k]: v for k, v in ext.items() if k in V1_NAMES}
        return Header.from_ext.__func__(cls, renamed)  # type: ignore[attr-defined]


@dataclass(kw_only=True, slots=True)
class SendMessageResponseHeader(Header):
    """The send answer; ``MSG_REGION`` and ``TRACE_ON`` are added by the broker beside the header."""

    JAVA_CLASS = "SendMessageResponseHeader"
    JAVA_EXTRAS = ("MSG_REGION", "TRACE_ON")  # SendMessageProcessor adds these first

    msg_id: str = str_field("msgId")
    queue_id: int = int_field("queueId")
    queue_offset: int = int_field("queueOffset")
    transaction_id: str | None = str_field("transactionId", None)
    trace_on: bool | None = bool_field("TRACE_ON", None)
    msg_region: str | None = str_field("MSG_REGION", None)


# --------------------------------------------------------------------------- pull

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8
PULL_FLAG_LITE_PULL = 0x10


def pull_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool,
                  class_filter: bool = False, lite_pull: bool = False) -> int:
    """PullSysFlag.buildSysFlag."""
    return ((PULL_FLAG_COMMIT_OFFSET if commit_offset else 0) | (PULL_FLAG_SUSPEND if suspend else 0)
            | (PULL_FLAG_SUBSCRIPTION if subscription else 0) | (PULL_FLAG_CLASS_FILTER if class_filter else 0)
            | (PULL_FLAG_LITE_PULL if lite_pull else 0))


@dataclass(kw_only=True, slots=True)
class PullMessageRequestHeader(Header):
    JAVA_CLASS = "PullMessageRequestHeader"

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    queue_offset: int = int_field("queueOffset")
    max_msg_nums: int = int_field("maxMsgNums")
    sys_flag: int = int_field("sysFlag")
    commit_offset: int = int_field("commitOffset")
    suspend_timeout_millis: int = int_field("suspendTimeoutMillis")
    subscription: str | None = str_field("subscription", None)
    sub_version: int = int_field("subVersion")
    expression_type: str | None = str_field("expressionType", None)
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class PullMessageResponseHeader(Header):
    """Also carried by PULL_NOT_FOUND / PULL_RETRY_IMMEDIATELY / PULL_OFFSET_MOVED answers."""

    JAVA_CLASS = "PullMessageResponseHeader"
    suggest_which_broker_id: int = int_field("suggestWhichBrokerId")
    next_begin_offset: int = int_field("nextBeginOffset")
    min_offset: int = int_field("minOffset")
    max_offset: int = int_field("maxOffset")


# --------------------------------------------------------------------------- offsets

@dataclass(kw_only=True, slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    JAVA_CLASS = "QueryConsumerOffsetRequestHeader"

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    JAVA_CLASS = "UpdateConsumerOffsetRequestHeader"

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    commit_offset: int = int_field("commitOffset")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class GetMaxOffsetRequestHeader(Header):
    JAVA_CLASS = "GetMaxOffsetRequestHeader"

    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class GetMinOffsetRequestHeader(Header):
    JAVA_CLASS = "GetMinOffsetRequestHeader"

    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class GetEarliestMsgStoretimeRequestHeader(Header):
    JAVA_CLASS = "GetEarliestMsgStoretimeRequestHeader"

    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class SearchOffsetRequestHeader(Header):
    JAVA_CLASS = "SearchOffsetRequestHeader"

    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    timestamp: int = int_field("timestamp")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class OffsetResponseHeader(Header):
    """``offset``: the answer of QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP."""

    JAVA_CLASS = "QueryConsumerOffsetResponseHeader"
    offset: int = int_field("offset")


QueryConsumerOffsetResponseHeader = OffsetResponseHeader
GetMaxOffsetResponseHeader = OffsetResponseHeader
GetMinOffsetResponseHeader = OffsetResponseHeader
SearchOffsetResponseHeader = OffsetResponseHeader


@dataclass(kw_only=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    JAVA_CLASS = "GetEarliestMsgStoretimeResponseHeader"

    timestamp: int = int_field("timestamp")


# --------------------------------------------------------------------------- messages

@dataclass(kw_only=True, slots=True)
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID: ``offset`` is the commit-log offset decoded from the offset message id."""

    JAVA_CLASS = "ViewMessageRequestHeader"
    offset: int = int_field("offset")


@dataclass(kw_only=True, slots=True)
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE: messages of ``topic`` indexed under ``key`` and stored in [begin, end] (epoch ms).

    A query by unique key adds the ``_UNIQUE_KEY_QUERY`` ext field beside these (not a header field
    in Java either): the broker then answers up to its own ``defaultQueryMaxNum``.
    """

    JAVA_CLASS = "QueryMessageRequestHeader"
    topic: str = str_field("topic")
    key: str = str_field("key")
    max_num: int = int_field("maxNum")
    begin_timestamp: int = int_field("beginTimestamp")
    end_timestamp: int = int_field("endTimestamp")


@dataclass(kw_only=True, slots=True)
class QueryMessageResponseHeader(Header):
    """How far the broker's key index had got when it answered."""

    JAVA_CLASS = "QueryMessageResponseHeader"
    index_last_update_timestamp: int = int_field("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = int_field("indexLastUpdatePhyoffset")


@dataclass(kw_only=True, slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    JAVA_CLASS = "ConsumerSendMsgBackRequestHeader"

    offset: int = int_field("offset")
    group: str = str_field("group")
    delay_level: int = int_field("delayLevel")
    origin_msg_id: str | None = str_field("originMsgId", None)
    origin_topic: str | None = str_field("originTopic", None)
    unit_mode: bool = bool_field("unitMode", False)
    max_reconsume_times: int | None = int_field("maxReconsumeTimes", None)
    bname: str | None = str_field("bname", None)


# --------------------------------------------------------------------------- clients and groups

@dataclass(kw_only=True, slots=True)
class UnregisterClientRequestHeader(Header):
    JAVA_CLASS = "UnregisterClientRequestHeader"

    client_id: str = str_field("clientID")
    producer_group: str | None = str_field("producerGroup", None)
    consumer_group: str | None = str_field("consumerGroup", None)


@dataclass(kw_only=True, slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    JAVA_CLASS = "GetConsumerListByGroupRequestHeader"

    consumer_group: str = str_field("consumerGroup")


@dataclass(kw_only=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    JAVA_CLASS = "NotifyConsumerIdsChangedRequestHeader"

    consumer_group: str = str_field("consumerGroup")


@dataclass(kw_only=True, slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    JAVA_CLASS = "GetConsumerRunningInfoRequestHeader"

    consumer_group: str = str_field("consumerGroup")
    client_id: str = str_field("clientId")
    jstack_enable: bool = bool_field("jstackEnable", False)


@dataclass(kw_only=True, slots=True)
class ResetOffsetRequestHeader(Header):
    """RESET_CONSUMER_CLIENT_OFFSET (broker → client) and INVOKE_BROKER_TO_RESET_OFFSET."""

    JAVA_CLASS = "ResetOffsetRequestHeader"
    topic: str = str_field("topic")
    group: str = str_field("group")
    timestamp: int = int_field("timestamp")
    is_force: bool = bool_field("isForce")


@dataclass(kw_only=True, slots=True)
class GetConsumerStatusRequestHeader(Header):
    """GET_CONSUMER_STATUS_FROM_CLIENT (broker → client) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS."""

    JAVA_CLASS = "GetConsumerStatusRequestHeader"
    topic: str = str_field("topic")
    group: str = str_field("group")
    client_addr: str | None = str_field("clientAddr", None)


@dataclass(kw_only=True, slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY; the body is one stored-message record."""

    JAVA_CLASS = "ConsumeMessageDirectlyResultRequestHeader"
    consumer_group: str = str_field("consumerGroup")
    client_id: str | None = str_field("clientId", None)
    msg_id: str | None = str_field("msgId", None)
    broker_name: str | None = str_field("brokerName", None)


# --------------------------------------------------------------------------- name server

@dataclass(kw_only=True, slots=True)
class GetRouteInfoRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC. Java 4.9.8 never sets ``acceptStandardJsonOnly``; version >= 401 suffices."""

    JAVA_CLASS = "namesrv.GetRouteInfoRequestHeader"
    topic: str = str_field("topic")
    accept_standard_json_only: bool | None = bool_field("acceptStandardJsonOnly", None)


__all__ = [
    "V2_NAMES", "V1_NAMES",
    "SendMessageRequestHeader", "SendMessageResponseHeader",
    "PULL_FLAG_COMMIT_OFFSET", "PULL_FLAG_SUSPEND", "PULL_FLAG_SUBSCRIPTION", "PULL_FLAG_CLASS_FILTER",
    "PULL_FLAG_LITE_PULL", "pull_sys_flag", "PullMessageRequestHeader", "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader", "UpdateConsumerOffsetRequestHeader", "GetMaxOffsetRequestHeader",
    "GetMinOffsetRequestHeader", "GetEarliestMsgStoretimeRequestHeader", "SearchOffsetRequestHeader",
    "OffsetResponseHeader", "QueryConsumerOffsetResponseHeader", "GetMaxOffsetResponseHeader",
    "GetMinOffsetResponseHeader", "SearchOffsetResponseHeader", "GetEarliestMsgStoretimeResponseHeader",
    "ViewMessageRequestHeader", "ConsumerSendMsgBackRequestHeader", "UnregisterClientRequestHeader",
    "GetConsumerListByGroupRequestHeader", "NotifyConsumerIdsChangedRequestHeader",
    "GetConsumerRunningInfoRequestHeader", "ResetOffsetRequestHeader", "GetConsumerStatusRequestHeader",
    "ConsumeMessageDirectlyResultRequestHeader", "GetRouteInfoRequestHeader",
]
