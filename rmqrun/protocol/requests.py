"""One spec per request code: who answers it, who sends it, its header and body, and what the ACL needs.

A request code used to be spread over the code table, a header class, the client's call, a processor, the
broker's registry, the ACL's ``elif`` chain over raw field names and the admin-protocol doc. The registry and
the name server now refuse to serve a code without a :class:`RequestSpec` here, the ACL
(:mod:`rmqrun.broker.acl.resources`) asks the spec what a request needs, and ``docs/admin-protocol.md``'s code
table is written from :data:`SPECS` (``scripts/gen_request_reference.py``).

What the ACL needs is named by the attributes of the request's typed header (``consumer_group``, not
``"consumerGroup"``, nor ``"a"`` for SEND_MESSAGE_V2's producer group): a misspelt attribute fails at import.
The values are still read as the strings on the wire, field by field, because 4.9.8's
``PlainAccessValidator`` reads them that way: a request lacking a field the header requires is judged on the
fields it has, except where 4.9.8 decodes the whole header (``strict``), which refuses it.

4.9.8's rules: a group is checked as its retry topic (``%RETRY%group``); SEND_MESSAGE needs its topic: PUB, or
for a retry topic the group's retry topic: SUB (a consumer's send-back; SEND_MESSAGE reads a ``group`` field its
header lacks, so a 4.9.8 broker checks nothing but the signature there, and the embedded broker reads the same
field to answer alike); SEND_BATCH_MESSAGE is not checked per topic (the gap is kept rather than refuse what a
real broker accepts). The POP codes follow 5.x, whose headers declare SUB on their topic (the original one for
a pop retry topic) and group. The admin codes (``admin``) also need an ``admin: true`` account.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from rmqrun.protocol.admin import (
    BrokerNameRequestHeader, CreateTopicRequestHeader, GetConsumeStatsInBrokerHeader, QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmqrun.protocol.bodies import HeartbeatData
from rmqrun.protocol.header_codec import Header
from rmqrun.protocol.headers import (
    V1_NAMES, ConsumeMessageDirectlyResultRequestHeader, ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader, GetConsumerRunningInfoRequestHeader, GetConsumerStatusRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader, NotifyConsumerIdsChangedRequestHeader, PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader, QueryMessageRequestHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    SendMessageRequestHeader, UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rmqrun.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from rmqrun.protocol.pop_batch_ack import decode_batch_ack_body
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.errors import ProtocolError
from rmqrun.topic_names import is_retry_topic, original_topic, retry_topic

#: a processor: whatever the server calls with the connection and the request
Handler = Callable[..., Any]

#: what an ACL account must own of a resource (4.9.8's Permission names)
PUB = "PUB"
SUB = "SUB"


class Caller(str, enum.Enum):
    """Who sends the request."""

    CLIENT = "client"    # a producer or consumer
    ADMIN = "admin"      # mqadmin, the Dashboard, rmqrun's admin commands
    BROKER = "broker"    # broker-internal: a broker to a client or to the name server


class Server(str, enum.Enum):
    """Who answers the request."""

    BROKER = "broker"
    NAMESRV = "namesrv"
    CLIENT = "client"


class RequestSpecError(ProtocolError):
    """A request code served without a spec, or a spec that contradicts itself."""


class RequestUnreadable(ProtocolError):
    """The request's fields or body cannot be read to know what it touches (the ACL refuses it)."""


# --------------------------------------------------------------------------- what the ACL needs

#: A header attribute, or ``EXT + wire name`` for a field the typed header does not have.
EXT = "ext:"


@dataclass(frozen=True, slots=True)
class Topic:
    """The topic in header attribute ``attr`` needs ``access``."""

    attr: str
    access: str = SUB

    def attrs(self) -> tuple[str, ...]:
        return (self.attr,)

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        yield read(self.attr), self.access


@dataclass(frozen=True, slots=True)
class Group:
    """The consumer group in header attribute ``attr``: its retry topic needs SUB."""

    attr: str

    def attrs(self) -> tuple[str, ...]:
        return (self.attr,)

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        yield group_resource(read(self.attr)), SUB


@dataclass(frozen=True, slots=True)
class SendTopic:
    """A send: the topic needs PUB; a send to a retry topic instead needs the group's retry topic: SUB."""

    topic: str
    group: str

    def attrs(self) -> tuple[str, ...]:
        return (self.topic, self.group)

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        topic = read(self.topic)
        if topic is not None and is_retry_topic(topic):
            yield group_resource(read(self.group)), SUB
        else:
            yield topic, PUB


@dataclass(frozen=True, slots=True)
class PopTopic:
    """A POP request: the topic (the original one of a pop retry topic) and the group, both SUB."""

    topic: str = "topic"
    group: str = "consumer_group"

    def attrs(self) -> tuple[str, ...]:
        return (self.topic, self.group)

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        yield from _pop_needs(read(self.topic), read(self.group))


def _pop_needs(topic: str | None, group: str | None) -> Iterator[tuple[str | None, str]]:
    if topic is not None and group is not None:
        topic = original_topic(topic, group)
    yield topic, SUB
    yield group_resource(group), SUB


@dataclass(frozen=True, slots=True)
class HeartbeatGroups:
    """HEART_BEAT's body: every consumer group's retry topic and each topic it subscribes, SUB."""

    def attrs(self) -> tuple[str, ...]:
        return ()

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        try:
            data = HeartbeatData.from_json(read.body or b"")
        except Exception as exc:  # whatever the body's fault, the request cannot be judged: refused
            raise RequestUnreadable(f"heartbeat body unreadable: {exc}") from exc
        for consumer in data.consumer_data_set:
            yield group_resource(consumer.group_name), SUB
            for sub in consumer.subscription_data_set:
                topic = sub.get("topic") if isinstance(sub, dict) else getattr(sub, "topic", None)
                yield (None if topic is None else str(topic)), SUB


@dataclass(frozen=True, slots=True)
class BatchAcks:
    """BATCH_ACK_MESSAGE's body: every ack's topic and group as a POP request's."""

    def attrs(self) -> tuple[str, ...]:
        return ()

    def resolve(self, read: "_Reader") -> Iterator[tuple[str | None, str]]:
        try:
            _, acks = decode_batch_ack_body(read.body or b"")
        except Exception as exc:  # the acks cannot be judged: refused
            raise RequestUnreadable(f"batch ack body unreadable: {exc}") from exc
        for ack in acks:
            yield from _pop_needs(ack.topic, ack.consumer_group)


Need = Topic | Group | SendTopic | PopTopic | HeartbeatGroups | BatchAcks


def group_resource(group: str | None) -> str | None:
    """The resource a group is checked as, its retry topic (None: no group named)."""
    return None if group is None else retry_topic(group)


class _Reader:
    """Reads a header attribute's value as the string on the wire (None when absent)."""

    def __init__(self, spec: "RequestSpec", ext: Mapping[str, str], body: bytes | None) -> None:
        self.ext = {V1_NAMES[k]: v for k, v in ext.items() if k in V1_NAMES} if spec.v2_names else ext
        self.wire = spec.wire_names()
        self.body = body

    def __call__(self, attr: str) -> str | None:
        name = attr[len(EXT):] if attr.startswith(EXT) else self.wire[attr]
        return self.ext.get(name)


# --------------------------------------------------------------------------- the spec

@dataclass(frozen=True, slots=True)
class RequestSpec:
    """Everything rmqrun knows of one request code."""

    code: R
    caller: Caller
    served_by: frozenset[Server]
    header: type[Header] | None = None
    #: Java's body class (or what the body is), None without a body
    body: str | None = None
    #: the resources the request needs, in the order the ACL checks them (the first refused names the refusal)
    needs: tuple[Need, ...] = ()
    #: 4.9.8 decodes the whole header before judging: a missing required field is refused
    strict: bool = False
    #: only an ``admin: true`` account may send it (4.9.8's Permission.ADMIN_CODE)
    admin: bool = False
    #: the header's fields go by SendMessageRequestHeaderV2's single letters
    v2_names: bool = False
    _wire: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.strict and self.header is None:
            raise RequestSpecError(f"{self.code.name}: strict needs a typed header")
        wire = self.wire_names()
        for need in self.needs:
            for attr in need.attrs():
                if not attr.startswith(EXT) and attr not in wire:
                    raise RequestSpecError(f"{self.code.name}: the ACL needs {attr!r}, which "
                                           f"{getattr(self.header, '__name__', 'no header')} does not have")

    def wire_names(self) -> dict[str, str]:
        """Header attribute -> the wire name it is read under."""
        if not self._wire and self.header is not None:
            self._wire.update({s.attr: s.wire for s in self.header.specs()})
        return self._wire

    def required_fields(self) -> tuple[str, ...]:
        """The wire names a strict ACL check refuses a request without."""
        if not self.strict or self.header is None:
            return ()
        return tuple(s.wire for s in self.header.specs() if s.required)

    def acl_needs(self, ext: Mapping[str, str], body: bytes | None) -> list[tuple[str, str]]:
        """(resource, PUB or SUB) in check order; :class:`RequestUnreadable` when it cannot be judged."""
        if not ext:
            return []  # no fields at all: 4.9.8 looks no further (only a white address can let it in)
        for name in self.required_fields():
            if ext.get(name) is None:
                raise RequestUnreadable(f"the custom field <{name}> is null")
        read = _Reader(self, ext, body)
        return [(resource, access) for need in self.needs for resource, access in need.resolve(read)
                if resource is not None]


_B, _N, _C = frozenset({Server.BROKER}), frozenset({Server.NAMESRV}), frozenset({Server.CLIENT})
_NONE: frozenset[Server] = frozenset()
_CLI, _ADM, _BRK = Caller.CLIENT, Caller.ADMIN, Caller.BROKER
_POP = (PopTopic(),)


def _s(code: R, caller: Caller, served_by: frozenset[Server], header: type[Header] | None = None,
       body: str | None = None, *needs: Need, **flags: bool) -> RequestSpec:
    return RequestSpec(code, caller, served_by, header, body, tuple(needs), **flags)


_SPECS: tuple[RequestSpec, ...] = (
    # sending and consuming
    _s(R.SEND_MESSAGE, _CLI, _B, SendMessageRequestHeader, "message body", SendTopic("topic", EXT + "group")),
    _s(R.SEND_MESSAGE_V2, _CLI, _B, SendMessageRequestHeader, "message body", SendTopic("topic", "producer_group"),
       v2_names=True),
    _s(R.SEND_BATCH_MESSAGE, _CLI, _B, SendMessageRequestHeader, "MessageBatch", v2_names=True),
    _s(R.CONSUMER_SEND_MSG_BACK, _CLI, _B, ConsumerSendMsgBackRequestHeader, None, Group("group")),
    _s(R.PULL_MESSAGE, _CLI, _B, PullMessageRequestHeader, None, Topic("topic"), Group("consumer_group")),
    _s(R.LITE_PULL_MESSAGE, _CLI, _NONE, PullMessageRequestHeader),
    _s(R.QUERY_CONSUMER_OFFSET, _CLI, _B, QueryConsumerOffsetRequestHeader),
    _s(R.UPDATE_CONSUMER_OFFSET, _CLI, _B, UpdateConsumerOffsetRequestHeader, None,
       Group("consumer_group"), Topic("topic"), strict=True),
    _s(R.GET_MAX_OFFSET, _CLI, _B, GetMaxOffsetRequestHeader),
    _s(R.GET_MIN_OFFSET, _CLI, _B, GetMinOffsetRequestHeader),
    _s(R.SEARCH_OFFSET_BY_TIMESTAMP, _CLI, _B, SearchOffsetRequestHeader),
    _s(R.GET_EARLIEST_MSG_STORETIME, _CLI, _B, GetEarliestMsgStoretimeRequestHeader),
    _s(R.HEART_BEAT, _CLI, _B, None, "HeartbeatData", HeartbeatGroups()),
    _s(R.UNREGISTER_CLIENT, _CLI, _B, UnregisterClientRequestHeader, None, Group("consumer_group"), strict=True),
    _s(R.GET_CONSUMER_LIST_BY_GROUP, _CLI, _B, GetConsumerListByGroupRequestHeader, None,
       Group("consumer_group"), strict=True),
    _s(R.CHECK_CLIENT_CONFIG, _CLI, _B, None, "CheckClientRequestBody"),
    _s(R.LOCK_BATCH_MQ, _CLI, _B, None, "LockBatchRequestBody"),
    _s(R.UNLOCK_BATCH_MQ, _CLI, _B, None, "UnlockBatchRequestBody"),
    _s(R.END_TRANSACTION, _CLI, _NONE),
    _s(R.QUERY_ASSIGNMENT, _CLI, _B, None, "QueryAssignmentRequestBody"),
    _s(R.GET_ROUTEINFO_BY_TOPIC, _CLI, _N, GetRouteInfoRequestHeader),
    _s(R.GET_KV_CONFIG, _CLI, _N),
    # POP (5.x)
    _s(R.POP_MESSAGE, _CLI, _B, PopMessageRequestHeader, None, *_POP),
    _s(R.ACK_MESSAGE, _CLI, _B, AckMessageRequestHeader, None, *_POP),
    _s(R.CHANGE_MESSAGE_INVISIBLETIME, _CLI, _B, ChangeInvisibleTimeRequestHeader, None, *_POP),
    _s(R.NOTIFICATION, _CLI, _B, NotificationRequestHeader, None, *_POP),
    _s(R.POLLING_INFO, _CLI, _B, PollingInfoRequestHeader, None, *_POP),
    _s(R.BATCH_ACK_MESSAGE, _CLI, _B, None, "BatchAckMessageRequestBody", BatchAcks()),
    _s(R.PEEK_MESSAGE, _CLI, _NONE),
    _s(R.POP_ROLLBACK, _CLI, _NONE),
    # the broker asks a client
    _s(R.NOTIFY_CONSUMER_IDS_CHANGED, _BRK, _C, NotifyConsumerIdsChangedRequestHeader),
    _s(R.CHECK_TRANSACTION_STATE, _BRK, _NONE),
    _s(R.RESET_CONSUMER_CLIENT_OFFSET, _BRK, _C, ResetOffsetRequestHeader, "ResetOffsetBody"),
    _s(R.GET_CONSUMER_STATUS_FROM_CLIENT, _BRK, _C, GetConsumerStatusRequestHeader),
    _s(R.PUSH_REPLY_MESSAGE_TO_CLIENT, _BRK, _NONE),
    # broker to broker / name server (not served here: the embedded name server is handed its brokers)
    _s(R.REGISTER_BROKER, _BRK, _NONE),
    _s(R.UNREGISTER_BROKER, _BRK, _NONE),
    _s(R.GET_ALL_CONSUMER_OFFSET, _BRK, _NONE),
    _s(R.GET_ALL_DELAY_OFFSET, _BRK, _NONE),
    # admin: topics, groups, configuration
    _s(R.UPDATE_AND_CREATE_TOPIC, _ADM, _B, CreateTopicRequestHeader, admin=True),
    _s(R.DELETE_TOPIC_IN_BROKER, _ADM, _B, None, admin=True),
    _s(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, _ADM, _B, None, "SubscriptionGroupConfig", admin=True),
    _s(R.DELETE_SUBSCRIPTIONGROUP, _ADM, _B, None, admin=True),
    _s(R.UPDATE_BROKER_CONFIG, _ADM, _B, None, "properties text", admin=True),
    _s(R.GET_ALL_TOPIC_CONFIG, _ADM, _B),
    _s(R.GET_TOPIC_CONFIG, _ADM, _B),
    _s(R.GET_BROKER_CONFIG, _ADM, _B),
    _s(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, _ADM, _B),
    _s(R.SET_MESSAGE_REQUEST_MODE, _ADM, _B, None, "SetMessageRequestModeRequestBody"),
    _s(R.GET_ALL_MESSAGE_REQUEST_MODE, _ADM, _B),
    _s(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, _ADM, _B),
    # admin: inspection
    _s(R.GET_BROKER_RUNTIME_INFO, _ADM, _B),
    _s(R.GET_TOPIC_STATS_INFO, _ADM, _B),
    _s(R.GET_CONSUMER_CONNECTION_LIST, _ADM, _B),
    _s(R.GET_PRODUCER_CONNECTION_LIST, _ADM, _B),
    _s(R.GET_CONSUME_STATS, _ADM, _B),
    _s(R.GET_ALL_PRODUCER_INFO, _ADM, _B),
    _s(R.QUERY_TOPIC_CONSUME_BY_WHO, _ADM, _B),
    _s(R.QUERY_TOPICS_BY_CONSUMER, _ADM, _B),
    _s(R.QUERY_MESSAGE, _ADM, _B, QueryMessageRequestHeader, None, Topic("topic")),
    _s(R.VIEW_MESSAGE_BY_ID, _ADM, _B, ViewMessageRequestHeader),
    _s(R.QUERY_CONSUME_QUEUE, _ADM, _B, QueryConsumeQueueRequestHeader),
    _s(R.VIEW_BROKER_STATS_DATA, _ADM, _B, ViewBrokerStatsDataRequestHeader),
    _s(R.GET_BROKER_CONSUME_STATS, _ADM, _B, GetConsumeStatsInBrokerHeader),
    # admin: asking the clients through the broker
    _s(R.INVOKE_BROKER_TO_RESET_OFFSET, _ADM, _B, ResetOffsetRequestHeader),
    _s(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, _ADM, _B, GetConsumerStatusRequestHeader),
    _s(R.GET_CONSUMER_RUNNING_INFO, _ADM, _B | _C, GetConsumerRunningInfoRequestHeader),
    _s(R.CONSUME_MESSAGE_DIRECTLY, _ADM, _B | _C, ConsumeMessageDirectlyResultRequestHeader),
    # admin: maintenance
    _s(R.CLEAN_EXPIRED_CONSUMEQUEUE, _ADM, _B),
    _s(R.CLEAN_UNUSED_TOPIC, _ADM, _B),
    _s(R.DELETE_EXPIRED_COMMITLOG, _ADM, _B),
    # admin: the name server
    _s(R.GET_BROKER_CLUSTER_INFO, _ADM, _N),
    _s(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, _ADM, _N),
    _s(R.DELETE_TOPIC_IN_NAMESRV, _ADM, _N),
    _s(R.GET_NAMESRV_CONFIG, _ADM, _N),
    _s(R.UPDATE_NAMESRV_CONFIG, _ADM, _N, None, "properties text"),
    _s(R.PUT_KV_CONFIG, _ADM, _N),
    _s(R.DELETE_KV_CONFIG, _ADM, _N),
    _s(R.GET_KVLIST_BY_NAMESPACE, _ADM, _N),
    _s(R.WIPE_WRITE_PERM_OF_BROKER, _ADM, _N, BrokerNameRequestHeader),
    _s(R.ADD_WRITE_PERM_OF_BROKER, _ADM, _N, BrokerNameRequestHeader),
    _s(R.GET_SYSTEM_TOPIC_LIST_FROM_NS, _ADM, _N),
)


def _index(specs: Iterable[RequestSpec]) -> dict[int, RequestSpec]:
    out: dict[int, RequestSpec] = {}
    for spec in specs:
        if int(spec.code) in out:
            raise RequestSpecError(f"{spec.code.name} has two specs")
        out[int(spec.code)] = spec
    return out


#: request code -> its spec
SPECS: dict[int, RequestSpec] = _index(_SPECS)


def spec_of(code: int) -> RequestSpec | None:
    """The code's spec; None for a code rmqrun knows nothing of (the ACL checks only its signature)."""
    return SPECS.get(int(code))


def served_spec(code: int, server: Server) -> RequestSpec:
    """The spec of a code ``server`` is about to serve; :class:`RequestSpecError` when it has none or says
    another side answers it (so a served code cannot be added without its spec)."""
    spec = SPECS.get(int(code))
    if spec is None:
        raise RequestSpecError(f"request code {int(code)} is served by the {server.value} but has no RequestSpec "
                               "in rmqrun/protocol/requests.py")
    if server not in spec.served_by:
        raise RequestSpecError(f"{spec.code.name} is served by the {server.value}, but its spec says "
                               f"{sorted(s.value for s in spec.served_by) or 'nobody'}")
    return spec


def admin_codes() -> frozenset[int]:
    """The codes only an ``admin: true`` account may send."""
    return frozenset(code for code, spec in SPECS.items() if spec.admin)


def register_served(register: Callable[[int, Handler], None], server: Server,
                    table: Mapping[R, Handler]) -> None:
    """``register(code, handler)`` for every entry of ``table``, each code first checked by :func:`served_spec`."""
    for code, handler in table.items():
        served_spec(code, server)
        register(int(code), handler)


# --------------------------------------------------------------------------- the doc's table

#: the lines around the generated table in docs/admin-protocol.md
TABLE_BEGIN = "<!-- request-codes: written by scripts/gen_request_reference.py from rmqrun/protocol/requests.py -->"
TABLE_END = "<!-- /request-codes -->"


def _need_text(need: Need) -> str:
    if isinstance(need, Topic):
        return f"topic `{need.attr}`: {need.access}"
    if isinstance(need, Group):
        return f"group `{need.attr}`: SUB"
    if isinstance(need, SendTopic):
        return f"topic `{need.topic}`: PUB (a retry topic: group `{need.group}`: SUB)"
    if isinstance(need, PopTopic):
        return f"topic `{need.topic}` (original of a pop retry topic): SUB, group `{need.group}`: SUB"
    if isinstance(need, HeartbeatGroups):
        return "every consumer group and subscribed topic of the body: SUB"
    return "every ack's topic and group of the body: SUB"


def acl_text(spec: RequestSpec) -> str:
    """What the ACL checks of a request, in words."""
    parts = [_need_text(n) for n in spec.needs]
    if spec.strict:
        parts.append("required header fields present")
    if spec.admin:
        parts.append("an admin account")
    return "; ".join(parts) or "signature"


def markdown_table() -> str:
    """Every request code as one row of docs/admin-protocol.md's table, markers included."""
    rows = [TABLE_BEGIN, "",
            "| code | name | sent by | answered by | header | body | the ACL needs |",
            "|---|---|---|---|---|---|---|"]
    for spec in sorted(SPECS.values(), key=lambda s: int(s.code)):
        served = ", ".join(s.value for s in Server if s in spec.served_by) or "(not served)"
        header = f"`{spec.header.__name__}`" + (" (V2 names)" if spec.v2_names else "") if spec.header else ""
        rows.append(f"| {int(spec.code)} | {spec.code.name} | {spec.caller.value} | {served} | {header} | "
                    f"{spec.body or ''} | {acl_text(spec)} |")
    rows += ["", TABLE_END]
    return "\n".join(rows) + "\n"
