"""Typed custom headers: the ``extFields`` of each request and response.

Java turns a header object into ``extFields`` by ``toString()``-ing every
non-null field (``makeCustomHeaderToNet``) and back by parsing the strings,
refusing a missing ``@CFNotNull`` field. Each class here declares its fields
once, with the exact wire name and kind, and gets both directions from
:class:`Header`:

* :meth:`Header.to_ext` writes every field that is not ``None`` as a string
  (booleans as ``true``/``false``), like Java;
* :meth:`Header.from_ext` is tolerant where peers differ: values may be
  numbers (the C++ client sends some as JSON numbers), unknown keys (ACL
  signatures, ``ReqT``) are ignored, a missing optional field keeps its
  default; a missing required field raises :class:`ProtocolError` naming it.

Field sets are those of the 4.9.8 Java classes in
``common/.../protocol/header/``; ``bname`` is the broker name 4.9.8 adds to
every ``RpcRequestHeader`` subclass (the captures show it on the wire).

The embedded broker parses requests with ``from_ext`` and answers with
``to_ext``, so both directions are exercised against the captured frames.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from typing import Any, ClassVar, Mapping, TypeVar

from rmqrun.client.subscription import java_hash_set_order
from rmqrun.remoting.errors import MissingFieldError, ProtocolError
from rmqrun.remoting.message import java_string_hash

T = TypeVar("T", bound="Header")

_STR, _INT, _BOOL = "str", "int", "bool"


def _field(wire: str, kind: str, default: Any = MISSING) -> Any:
    meta = {"wire": wire, "kind": kind}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def str_field(wire: str, default: Any = MISSING) -> Any:
    """A string field; no default means required."""
    return _field(wire, _STR, default)


def int_field(wire: str, default: Any = MISSING) -> Any:
    """An integer field (Java Integer or Long); no default means required."""
    return _field(wire, _INT, default)


def bool_field(wire: str, default: Any = MISSING) -> Any:
    """A boolean field. Java primitive booleans default to False and are always sent."""
    return _field(wire, _BOOL, default)


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: str
    required: bool


def format_value(value: Any, kind: str) -> str:
    if kind == _BOOL:
        return "true" if value else "false"
    if kind == _INT:
        return str(int(value))
    return str(value)


def parse_value(raw: Any, kind: str, where: str) -> Any:
    """One ext value to its Python type; numbers and strings are both accepted."""
    if kind == _STR:
        return raw if isinstance(raw, str) else format_value(raw, _BOOL if isinstance(raw, bool) else _STR)
    if kind == _INT:
        if isinstance(raw, bool):
            return int(raw)
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ProtocolError(f"{where}: {raw!r} is not an integer") from None
    # Java's Boolean.parseBoolean: only "true" (any case) is true. "1" is
    # accepted too because the C++ client writes flags as 0/1.
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (int, float)):
        return raw != 0
    text = str(raw).strip().lower()
    return text == "true" or text == "1"


_ORDER_CACHE: dict[tuple[str, ...], tuple[str, ...]] = {}


def java_map_order(ext: dict[str, str]) -> dict[str, str]:
    """``ext`` re-keyed in the iteration order of a Java ``HashMap`` filled in this order.

    Java keeps ``extFields`` in a HashMap and a JSON header lists them in its
    iteration order (by String.hashCode bucket), so emitting that order makes
    our JSON frames byte-identical to a Java peer's. (A binary frame of a
    "fast codes" header lists the declared order instead: :meth:`Header.to_ext_declared`.)
    """
    keys = tuple(ext)
    order = _ORDER_CACHE.get(keys)
    if order is None:
        order = tuple(java_hash_set_order(keys, java_string_hash))
        if len(_ORDER_CACHE) < 4096:
            _ORDER_CACHE[keys] = order
    return {k: ext[k] for k in order}


JAVA_HEADER_PACKAGE = "org.apache.rocketmq.common.protocol.header."
JAVA_RPC_REQUEST_HEADER = "org.apache.rocketmq.common.rpc.RpcRequestHeader"


@lru_cache(maxsize=None)
def java_field_order(java_class: str, names: tuple[tuple[str, bool], ...]) -> tuple[str, ...]:
    """The order Java's ``makeCustomHeaderToNet`` puts a header's fields into ``extFields``.

    It walks a ``HashSet<Field>`` of the class's and its superclasses' fields, and a
    Field hashes as ``declaringClass.getName().hashCode() ^ name.hashCode()``. That
    order only shows when two keys share a HashMap bucket, but then it decides
    which comes first. ``names`` are (field name, declared in RpcRequestHeader).
    """
    items = [(JAVA_RPC_REQUEST_HEADER if in_base else java_class, name) for name, in_base in names]
    ordered = java_hash_set_order(items, lambda it: java_string_hash(it[0]) ^ java_string_hash(it[1]))
    return tuple(name for _, name in ordered)


class Header:
    """Base of every custom header; subclasses are keyword-only dataclasses.

    ``JAVA_CLASS`` names the 4.9.8 class (for the ext-field order, see
    :meth:`to_ext`); ``JAVA_EXTRAS`` are keys a Java processor adds to the
    command before the header is written (e.g. the send answer's MSG_REGION).
    """

    __slots__ = ()
    _specs: ClassVar[tuple[_Spec, ...]]
    JAVA_CLASS: ClassVar[str | None] = None
    JAVA_EXTRAS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def specs(cls) -> tuple[_Spec, ...]:
        specs = cls.__dict__.get("_specs")
        if not specs:
            specs = tuple(
                _Spec(f.name, f.metadata["wire"], f.metadata["kind"],
                      f.default is MISSING and f.default_factory is MISSING)  # type: ignore[misc]
                for f in fields(cls)  # type: ignore[arg-type]
                if "wire" in f.metadata
            )
            cls._specs = specs
        return specs

    def to_ext(self) -> dict[str, str]:
        """The ext fields, in Java HashMap order (what a Java JSON frame shows)."""
        return self._java_ordered(self.to_ext_declared(), self.JAVA_CLASS, None)

    @classmethod
    def _java_ordered(cls, declared: dict[str, str], java_class: str | None,
                      rename: dict[str, str] | None) -> dict[str, str]:
        if java_class is None:
            return declared
        names = [(rename.get(s.wire, s.wire) if rename else s.wire, s.wire == "bname" and not rename)
                 for s in cls.specs() if s.wire not in cls.JAVA_EXTRAS]
        if rename is not None and "bname" in rename:
            names.append(("bname", True))  # V2 inherits an (always null) bname besides its own "n"
        order = cls.JAVA_EXTRAS + java_field_order(JAVA_HEADER_PACKAGE + java_class, tuple(names))
        return java_map_order({k: declared[k] for k in order if k in declared})

    def to_ext_declared(self) -> dict[str, str]:
        """The ext fields in declaration order (a Java binary frame of a fast-codes header)."""
        out: dict[str, str] = {}
        for spec in self.specs():
            value = getattr(self, spec.attr)
            if value is None:
                if spec.required:
                    raise ProtocolError(f"{type(self).__name__}: required field {spec.wire!r} is None")
                continue
            out[spec.wire] = format_value(value, spec.kind)
        return out

    @classmethod
    def from_ext(cls: type[T], ext: Mapping[str, Any] | None) -> T:
        ext = ext or {}
        kwargs: dict[str, Any] = {}
        for spec in cls.specs():
            raw = ext.get(spec.wire)
            if raw is None:
                if spec.required:
                    raise MissingFieldError(cls.__name__, spec.wire)
                continue
            kwargs[spec.attr] = parse_value(raw, spec.kind, f"{cls.__name__}.{spec.wire}")
        return cls(**kwargs)


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


# Bodies live in bodies.py; re-exported so one import covers the protocol types.
from rmqrun.client.bodies import (  # noqa: E402
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    GetConsumerStatusBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    ProducerData,
    ResetOffsetBody,
    UnlockBatchRequestBody,
)

__all__ = [
    "Header", "java_map_order", "java_field_order", "str_field", "int_field", "bool_field", "V2_NAMES", "V1_NAMES", "format_value", "parse_value",
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
    "ConsumeFromWhere", "ConsumerData", "ConsumerListBody", "ConsumeType", "GetConsumerStatusBody",
    "HeartbeatData", "LockBatchRequestBody", "LockBatchResponseBody", "MessageModel", "ProducerData",
    "ResetOffsetBody", "UnlockBatchRequestBody",
]
