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
import operator
from dataclasses import dataclass, field
from typing import Sequence

from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.remoting.message_props import java_string_hash
from rmqrun.topic_names import TRACE_TOPIC

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
#: TopicValidator.RMQ_SYS_TRACE_TOPIC, the default trace topic
DEFAULT_TRACE_TOPIC = TRACE_TOPIC
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


def _n(value: str | None) -> str:
    return JAVA_NULL if value is None else value


def _b(value: bool) -> str:
    return "true" if value else "false"


def encode_context(ctx: TraceContext) -> TraceTransfer:
    """TraceDataEncoder.encoderFromContextBean (LOCAL access channel: SubAfter carries timestamp and group).

    Written with f-strings, field by field in Java's order: this runs for every traced message."""
    t = ctx.trace_type
    c, f = CONTENT_SPLITOR, FIELD_SPLITOR
    if t is TraceType.PUB:
        b = ctx.beans[0]
        data = (f"Pub{c}{ctx.timestamp}{c}{_n(ctx.region_id)}{c}{_n(ctx.group)}{c}{_n(b.topic)}{c}{_n(b.msg_id)}"
                f"{c}{_n(b.tags)}{c}{_n(b.keys)}{c}{_n(b.store_host)}{c}{b.body_length}{c}{ctx.cost_time}"
                f"{c}{int(b.msg_type)}{c}{_n(b.offset_msg_id)}{c}{_b(ctx.success)}{f}")
    elif t is TraceType.SUB_BEFORE:
        head = f"SubBefore{c}{ctx.timestamp}{c}{_n(ctx.region_id)}{c}{_n(ctx.group)}{c}{_n(ctx.request_id)}{c}"
        data = "".join(f"{head}{_n(b.msg_id)}{c}{b.retry_times}{c}{_n(b.keys)}{f}" for b in ctx.beans)
    elif t is TraceType.SUB_AFTER:
        tail = f"{c}{int(ctx.context_code)}{c}{ctx.timestamp}{c}{_n(ctx.group)}{f}"
        mid = f"{c}{ctx.cost_time}{c}{_b(ctx.success)}{c}"
        data = "".join(f"SubAfter{c}{_n(ctx.request_id)}{c}{_n(b.msg_id)}{mid}{_n(b.keys)}{tail}"
                       for b in ctx.beans)
    else:
        raise ValueError(f"rmqrun does not write {t.value} trace records")
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(_n(b.msg_id))
        if b.keys:
            keys.extend(b.keys.split(KEY_SEPARATOR))
    # in the order given: HashSet order is computed once per trace message (trace_keys)
    return TraceTransfer(data, list(dict.fromkeys(keys)))


#: 31**k mod 2**32 for k < 128: a Java String hash of an ASCII string as one C-level dot product
_POWERS = [pow(31, k, 1 << 32) for k in range(127, -1, -1)]


def _string_hash(text: str) -> int:
    """``String.hashCode()``, fast for the ASCII ids and keys trace messages carry (else the general one)."""
    n = len(text)
    if n > 128 or not text.isascii():
        return java_string_hash(text)
    h = sum(map(operator.mul, text.encode("ascii"), _POWERS[128 - n:])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def trace_keys(transfers: Sequence[TraceTransfer]) -> str:
    """The KEYS of the trace message carrying ``transfers`` (AsyncDataSendTask: one HashSet, space-joined)."""
    hashes: dict[str, int] = {}
    for t in transfers:
        for k in t.keys:
            if k not in hashes:
                hashes[k] = _string_hash(k)
    # each record's own set first (TraceTransferBean.transKey), in whose order they join the message's set:
    # keys sharing a bucket keep that order
    each = (java_hash_set_order(t.keys, hashes.__getitem__) for t in transfers)
    return KEY_SEPARATOR.join(java_hash_set_order(itertools.chain.from_iterable(each), hashes.__getitem__))


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
