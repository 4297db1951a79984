"""Message-trace records as the 4.9.8 Java client writes them (``client/trace/TraceDataEncoder``).

A client with ``enableMsgTrace`` sends, to ``RMQ_SYS_TRACE_TOPIC`` (or a custom trace topic), messages whose
body is a run of trace records: a ``Pub`` per sent message, a ``SubBefore`` and a ``SubAfter`` per consumed
message. ``mqadmin queryMsgTraceById`` and the Dashboard find them with a QUERY_MESSAGE by key on the trace
topic: each trace message's KEYS hold the traced messages' ids and keys. This module is that text format both
ways (no I/O), so what rmqrun writes decodes in Java's ``decoderFromTraceDataString`` field for field:

* fields are separated by ``\\x01`` (CONTENT_SPLITOR), records end with ``\\x02`` (FIELD_SPLITOR);
* a Java ``null`` (a message without tags or keys, a store host never set) is written as the text ``null``,
  because ``StringBuilder.append(null)`` does that; :data:`JAVA_NULL` keeps that explicit;
* booleans are ``true``/``false``; a message type and a context code are enum ordinals;
* decoding splits as Java's ``String.split`` does (trailing empty fields dropped) and accepts the older and
  newer record lengths the Java decoder accepts (Pub of 13, 14 or 15+ fields, SubAfter of 6, 7 or 9+).

The trace message's keys (:func:`trace_keys`) are the set Java builds: each traced message's id and each of
its keys, in ``java.util.HashSet`` order, joined by spaces.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.remoting.message_props import java_string_hash

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
#: TopicValidator.RMQ_SYS_TRACE_TOPIC, the default trace topic
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: what Java's StringBuilder writes for a null String
JAVA_NULL = "null"
#: MessageConst.KEY_SEPARATOR
KEY_SEPARATOR = " "
#: TraceConstants.GROUP_NAME_PREFIX: the trace producer's group is ``<prefix>-<group>-<type>-<n>``
TRACE_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
#: MessageConst.PROPERTY_TRACE_SWITCH: a message carrying ``false`` is not traced by consumers
PROPERTY_TRACE_SWITCH = "TRACE_ON"
#: MessageConst.PROPERTY_MSG_REGION: the region the broker stamped on the message
PROPERTY_MSG_REGION = "MSG_REGION"


class TraceType(str, enum.Enum):
    """TraceType; the record's first field is the name."""

    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class MessageType(enum.IntEnum):
    """common.message.MessageType, written as its ordinal."""

    NORMAL = 0
    TRANS_HALF = 1
    TRANS_COMMIT = 2
    DELAY = 3


class ContextCode(enum.IntEnum):
    """ConsumeReturnType, whose ordinal is a SubAfter's context code."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    """One traced message (TraceBean). ``None`` is Java's null (written ``null``)."""

    msg_id: str | None = ""
    topic: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    body_length: int = 0
    retry_times: int = 0
    offset_msg_id: str | None = ""
    msg_type: MessageType = MessageType.NORMAL
    #: only read from a Pub of 15+ fields (older writers); 4.9.8 never writes it
    client_host: str | None = None


@dataclass(slots=True)
class TraceContext:
    """One trace event (TraceContext): a Pub of one message, a SubBefore/SubAfter of a consumed batch."""

    trace_type: TraceType
    timestamp: int = 0
    region_id: str | None = ""
    group: str | None = ""
    request_id: str | None = ""
    cost_time: int = 0
    success: bool = True
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)


@dataclass(slots=True)
class TraceTransfer:
    """TraceTransferBean: a context's records as text, and the keys the trace message is found by."""

    data: str
    keys: list[str]


def _s(value: object) -> str:
    if value is None:
        return JAVA_NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.IntEnum):
        return str(int(value))
    return str(value)


def _record(fields: Iterable[object], end: str = FIELD_SPLITOR) -> str:
    return CONTENT_SPLITOR.join(_s(f) for f in fields) + end


def encode_context(ctx: TraceContext) -> TraceTransfer:
    """TraceDataEncoder.encoderFromContextBean (LOCAL access channel: SubAfter carries timestamp and group)."""
    t = ctx.trace_type
    if t is TraceType.PUB:
        b = ctx.beans[0]
        data = _record((t.value, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id, b.tags, b.keys,
                        b.store_host, b.body_length, ctx.cost_time, b.msg_type, b.offset_msg_id, ctx.success))
    elif t is TraceType.SUB_BEFORE:
        data = "".join(_record((t.value, ctx.timestamp, ctx.region_id, ctx.group, ctx.request_id, b.msg_id,
                                b.retry_times, b.keys)) for b in ctx.beans)
    elif t is TraceType.SUB_AFTER:
        data = "".join(_record((t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                                ctx.context_code, ctx.timestamp, ctx.group)) for b in ctx.beans)
    else:
        raise ValueError(f"rmqrun does not write {t.value} trace records")
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(_s(b.msg_id))
        if b.keys:
            keys.extend(b.keys.split(KEY_SEPARATOR))
    return TraceTransfer(data, java_hash_set_order(keys, java_string_hash))


def trace_keys(transfers: Sequence[TraceTransfer]) -> str:
    """The KEYS of the trace message carrying ``transfers`` (AsyncDataSendTask: one HashSet, space-joined)."""
    return KEY_SEPARATOR.join(java_hash_set_order(itertools.chain.from_iterable(t.keys for t in transfers),
                                                  java_string_hash))


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)``: trailing empty strings dropped (an empty input gives ``[""]``)."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def _decode_pub(line: list[str]) -> TraceContext:
    bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                     body_length=int(line[9]), msg_type=MessageType(int(line[11])))
    ctx = TraceContext(TraceType.PUB, timestamp=int(line[1]), region_id=line[2], group=line[3],
                       cost_time=int(line[10]), beans=[bean])
    if len(line) == 13:
        ctx.success = _bool(line[12])
    elif len(line) >= 14:
        bean.offset_msg_id = line[12]
        ctx.success = _bool(line[13])
        if len(line) >= 15:
            bean.client_host = line[14]
    return ctx


def _decode_sub_before(line: list[str]) -> TraceContext:
    bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7] if len(line) > 7 else "")
    return TraceContext(TraceType.SUB_BEFORE, timestamp=int(line[1]), region_id=line[2], group=line[3],
                        request_id=line[4], beans=[bean])


def _decode_sub_after(line: list[str]) -> TraceContext:
    bean = TraceBean(msg_id=line[2], keys=line[5])
    ctx = TraceContext(TraceType.SUB_AFTER, request_id=line[1], cost_time=int(line[3]), success=_bool(line[4]),
                       beans=[bean], timestamp=0, group="", region_id="")
    if len(line) >= 7:
        ctx.context_code = int(line[6])
    if len(line) >= 9:
        ctx.timestamp = int(line[7])
        ctx.group = line[8]
    return ctx


_DECODERS = {TraceType.PUB.value: _decode_pub, TraceType.SUB_BEFORE.value: _decode_sub_before,
             TraceType.SUB_AFTER.value: _decode_sub_after}


def decode_trace_data(data: str) -> list[TraceContext]:
    """TraceDataEncoder.decoderFromTraceDataString: every Pub/SubBefore/SubAfter record of a trace body.

    Records of another type (EndTransaction) are skipped. A malformed record raises ValueError naming it.
    """
    out: list[TraceContext] = []
    if not data:
        return out
    for record in _java_split(data, FIELD_SPLITOR):
        line = _java_split(record, CONTENT_SPLITOR)
        decoder = _DECODERS.get(line[0])
        if decoder is None:
            continue
        try:
            out.append(decoder(line))
        except (IndexError, ValueError) as exc:
            raise ValueError(f"malformed {line[0]} trace record {record!r}: {exc}") from None
    return out
