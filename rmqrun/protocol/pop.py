"""POP consumption on the wire (RocketMQ 5.x): headers, the receipt handle, the offset infos (the
batch-ack body is :mod:`rmqrun.protocol.pop_batch_ack`'s).

Field names and encodings follow the 5.3.3 Java classes (``remoting/.../protocol/header/PopMessage*``,
``AckMessageRequestHeader``, ``ChangeInvisibleTime*``, ``Notification*``, ``PollingInfo*``, ``ExtraInfoUtil``,
``body/BatchAck*``, ``BitSetSerializerDeserializer``); the receipt is built as
``MQClientAPIImpl.processPopResponse`` builds it. The 5.x classes live in another package than the 4.9.8
headers of :mod:`.headers`, so these declare no ``JAVA_CLASS`` and write their ext fields in declared order.

The receipt handle (``POP_CK`` property, a.k.a. ``extraInfo``) is eight space-separated fields:
``ckStartOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset``. The retry flag is
``"0"`` for a normal topic, ``"1"`` for the V1 pop retry topic ``%RETRY%<group>_<topic>`` and ``"2"`` for V2
``%RETRY%<group>+<topic>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple

from rmqrun.protocol.header_codec import Header, bool_field, int_field, str_field
from rmqrun.remoting.errors import ProtocolError
from rmqrun.topic_names import is_pop_retry_v2, is_retry_topic, pop_retry_topic

POP_ORDER_REVIVE_QID = 999
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
#: The Java push consumer's POP redelivery delays (seconds), by delay level / reconsume count.
POP_DELAY_LEVELS_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

RETRY_FLAG_NORMAL = "0"
RETRY_FLAG_V1 = "1"
RETRY_FLAG_V2 = "2"
RETRY_FLAGS = (RETRY_FLAG_NORMAL, RETRY_FLAG_V1, RETRY_FLAG_V2)
#: ConsumeInitMode of PopMessageRequestHeader.initMode.
INIT_MODE_MIN = 0
INIT_MODE_MAX = 1
#: Most messages one POP may ask for; more is INVALID_PARAMETER.
POP_MAX_MSG_NUMS = 32

_SEP = " "


# --------------------------------------------------------------------------- headers

@dataclass(kw_only=True, slots=True)
class PopMessageRequestHeader(Header):
    """POP_MESSAGE (200050). ``queue_id`` -1 pops from every readable queue."""

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    max_msg_nums: int = int_field("maxMsgNums")
    invisible_time: int = int_field("invisibleTime")
    poll_time: int = int_field("pollTime")
    born_time: int = int_field("bornTime")
    init_mode: int = int_field("initMode")
    exp_type: str | None = str_field("expType", None)
    exp: str | None = str_field("exp", None)
    order: bool = bool_field("order", False)
    attempt_id: str | None = str_field("attemptId", None)
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class PopMessageResponseHeader(Header):
    pop_time: int = int_field("popTime")
    invisible_time: int = int_field("invisibleTime")
    revive_qid: int = int_field("reviveQid")
    rest_num: int = int_field("restNum")
    start_offset_info: str | None = str_field("startOffsetInfo", None)
    msg_offset_info: str | None = str_field("msgOffsetInfo", None)
    order_count_info: str | None = str_field("orderCountInfo", None)


@dataclass(kw_only=True, slots=True)
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE (200051): ``topic`` is the real topic (the pop retry topic for a revived message)."""

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    extra_info: str = str_field("extraInfo")
    offset: int = int_field("offset")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): ``topic`` is the real topic, as for an ack."""

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    extra_info: str = str_field("extraInfo")
    offset: int = int_field("offset")
    invisible_time: int = int_field("invisibleTime")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class ChangeInvisibleTimeResponseHeader(Header):
    pop_time: int = int_field("popTime")
    invisible_time: int = int_field("invisibleTime")
    revive_qid: int = int_field("reviveQid")


@dataclass(kw_only=True, slots=True)
class NotificationRequestHeader(Header):
    """NOTIFICATION (200054): long-polls until the topic (or its pop retry topic) has a message."""

    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    poll_time: int = int_field("pollTime")
    born_time: int = int_field("bornTime")
    order: bool = bool_field("order", False)
    attempt_id: str | None = str_field("attemptId", None)
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class NotificationResponseHeader(Header):
    has_msg: bool = bool_field("hasMsg")
    polling_full: bool = bool_field("pollingFull", False)


@dataclass(kw_only=True, slots=True)
class PollingInfoRequestHeader(Header):
    consumer_group: str = str_field("consumerGroup")
    topic: str = str_field("topic")
    queue_id: int = int_field("queueId")
    bname: str | None = str_field("bname", None)


@dataclass(kw_only=True, slots=True)
class PollingInfoResponseHeader(Header):
    polling_num: int = int_field("pollingNum")


# --------------------------------------------------------------------------- topics

def retry_flag_of(topic: str) -> str:
    """ExtraInfoUtil.getRetry(topic): "2" for a V2 pop retry topic, "1" for any other ``%RETRY%`` topic."""
    if is_retry_topic(topic):
        return RETRY_FLAG_V2 if is_pop_retry_v2(topic) else RETRY_FLAG_V1
    return RETRY_FLAG_NORMAL


def real_topic(topic: str, group: str, retry_flag: str) -> str:
    """The topic a message really sits in: ``topic`` (the original) or its pop retry topic."""
    if retry_flag == RETRY_FLAG_NORMAL:
        return topic
    if retry_flag == RETRY_FLAG_V1:
        return pop_retry_topic(group, topic)
    if retry_flag == RETRY_FLAG_V2:
        return pop_retry_topic(group, topic, v2=True)
    raise ProtocolError(f"unknown POP retry flag {retry_flag!r} (expected 0, 1 or 2)")


# --------------------------------------------------------------------------- receipt handle

def _int(text: str, what: str, whole: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"POP receipt {whole!r}: {what} {text!r} is not an integer") from None


class ReceiptHandle(NamedTuple):
    """The ``POP_CK`` / ``extraInfo`` string naming one popped message and its checkpoint.

    A named tuple, not a frozen dataclass: a POP consumer builds one per popped message, and a frozen
    dataclass's ``__init__`` (a ``object.__setattr__`` per field) was the largest single cost of decoding a
    pop answer; a tuple is as immutable and hashable, and is built in one C call. Its fields are also read by
    index on the ack path (:func:`rmqrun.protocol.pop_batch_ack.batch_ack_words`)."""

    ck_start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry_flag: str
    broker_name: str
    queue_id: int
    queue_offset: int

    def encode(self) -> str:
        return _SEP.join((str(self.ck_start_offset), str(self.pop_time), str(self.invisible_time),
                          str(self.revive_qid), self.retry_flag, self.broker_name, str(self.queue_id),
                          str(self.queue_offset)))

    @classmethod
    def parse(cls, text: str) -> "ReceiptHandle":
        if not isinstance(text, str):
            raise ProtocolError(f"POP receipt must be a string, got {type(text).__name__}")
        parts = text.split(_SEP)
        if len(parts) == 8 and parts[4] in RETRY_FLAGS:  # the usual receipt, read without a step per field
            try:
                return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5],
                           int(parts[6]), int(parts[7]))
            except ValueError:
                pass  # the checks below say which field is wrong
        if len(parts) != 8:
            raise ProtocolError(f"POP receipt {text!r}: expected 8 space-separated fields, got {len(parts)}")
        if parts[4] not in RETRY_FLAGS:
            raise ProtocolError(f"POP receipt {text!r}: retry flag {parts[4]!r} is not 0, 1 or 2")
        return cls(ck_start_offset=_int(parts[0], "ck offset", text), pop_time=_int(parts[1], "popTime", text),
                   invisible_time=_int(parts[2], "invisibleTime", text),
                   revive_qid=_int(parts[3], "reviveQid", text), retry_flag=parts[4], broker_name=parts[5],
                   queue_id=_int(parts[6], "queueId", text), queue_offset=_int(parts[7], "queueOffset", text))

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QID

    @property
    def visible_at_ms(self) -> int:
        """When the message comes back unless acked (epoch ms)."""
        return self.pop_time + self.invisible_time

    def real_topic(self, topic: str, group: str) -> str:
        """The topic an ACK / CHANGE_MESSAGE_INVISIBLETIME for this message must name."""
        return real_topic(topic, group, self.retry_flag)

    def __str__(self) -> str:
        return self.encode()


def receipt_for(header: PopMessageResponseHeader, *, broker_name: str, retry_flag: str, queue_id: int,
                queue_offset: int, first_offset: int | None = None,
                starts: Mapping[tuple[str, int], int] | None = None) -> ReceiptHandle:
    """The receipt of one message of a POP answer (a normal-topic message, which carries no ``POP_CK``).

    As ``processPopResponse``: the ck start offset is the ``startOffsetInfo`` entry of (retry flag, queue);
    a broker that sends no ``startOffsetInfo`` gets the offset of the first message of that queue in the
    answer (``first_offset``; the message's own offset if not given). ``starts``: the header's
    ``startOffsetInfo`` already parsed (a caller with a whole answer parses it once, not per message).
    """
    if starts is None:
        starts = parse_start_offset_info(header.start_offset_info)
    if starts:
        try:
            start = starts[(retry_flag, queue_id)]
        except KeyError:
            raise ProtocolError(f"POP answer has no startOffsetInfo for retry flag {retry_flag} queue {queue_id}: "
                                f"{header.start_offset_info!r}") from None
    else:
        start = queue_offset if first_offset is None else first_offset
    return ReceiptHandle(ck_start_offset=start, pop_time=header.pop_time, invisible_time=header.invisible_time,
                         revive_qid=header.revive_qid, retry_flag=retry_flag, broker_name=broker_name,
                         queue_id=queue_id, queue_offset=queue_offset)


def receipt_after_change(old: ReceiptHandle, answer: ChangeInvisibleTimeResponseHeader) -> ReceiptHandle:
    """The receipt after CHANGE_MESSAGE_INVISIBLETIME: a one-message checkpoint at the message's offset."""
    return ReceiptHandle(ck_start_offset=old.queue_offset, pop_time=answer.pop_time,
                         invisible_time=answer.invisible_time, revive_qid=answer.revive_qid,
                         retry_flag=old.retry_flag, broker_name=old.broker_name, queue_id=old.queue_id,
                         queue_offset=old.queue_offset)


# --------------------------------------------------------------------------- offset infos

def _entries(text: str | None, what: str) -> list[list[str]]:
    if not text:
        return []
    out = []
    for one in text.split(";"):
        parts = one.split(_SEP)
        if len(parts) != 3:
            raise ProtocolError(f"{what} {text!r}: entry {one!r} is not '<retryFlag> <key> <value>'")
        out.append(parts)
    return out


def _put_once(out: dict, key: Any, value: Any, what: str, text: str) -> None:
    if key in out:
        raise ProtocolError(f"{what} {text!r}: duplicate entry for {key!r}")
    out[key] = value


def encode_start_offset_info(starts: Mapping[tuple[str, int], int]) -> str:
    """ExtraInfoUtil.buildStartOffsetInfo, one entry per (retry flag, queue id)."""
    return ";".join(f"{flag}{_SEP}{qid}{_SEP}{off}" for (flag, qid), off in starts.items())


def parse_start_offset_info(text: str | None) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for flag, qid, off in _entries(text, "startOffsetInfo"):
        _put_once(out, (flag, _int(qid, "queueId", text or "")), _int(off, "offset", text or ""),
                  "startOffsetInfo", text or "")
    return out


def encode_msg_offset_info(offsets: Mapping[tuple[str, int], Iterable[int]]) -> str:
    """ExtraInfoUtil.buildMsgOffsetInfo: the queue offsets of the messages returned, per (retry flag, queue)."""
    return ";".join(f"{flag}{_SEP}{qid}{_SEP}{_join_ints(offs)}" for (flag, qid), offs in offsets.items())


def encode_offset_infos(reads: Iterable[tuple[str, int, int, tuple[int, ...]]]) -> tuple[str, str]:
    """(startOffsetInfo, msgOffsetInfo) of a pop's answer from the queues it read, in order, each as (retry flag,
    queue id, start offset, the offsets handed out): :func:`encode_start_offset_info` and
    :func:`encode_msg_offset_info` of one entry per queue, in one pass (the broker builds both on every pop)."""
    starts: list[str] = []
    msgs: list[str] = []
    for flag, qid, start, offsets in reads:
        head = f"{flag}{_SEP}{qid}{_SEP}"
        starts.append(f"{head}{start}")
        msgs.append(head + ("%d," * len(offsets) % offsets)[:-1])
    return ";".join(starts), ";".join(msgs)


def _join_ints(values: Iterable[int]) -> str:
    """``",".join(map(str, values))`` for ints, in one formatting call (half its cost: a pop's answer lists every
    offset it hands out)."""
    values = tuple(values)
    return ("%d," * len(values) % values)[:-1]


def parse_msg_offset_info(text: str | None) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for flag, qid, offs in _entries(text, "msgOffsetInfo"):
        _put_once(out, (flag, _int(qid, "queueId", text or "")),
                  [_int(o, "offset", text or "") for o in offs.split(",")], "msgOffsetInfo", text or "")
    return out


#: An orderCountInfo key: (retry flag, queue id, queue offset or None for the per-queue entry).
OrderCountKey = tuple[str, int, "int | None"]


def encode_order_count_info(counts: Mapping[OrderCountKey, int]) -> str:
    """buildQueueOffsetOrderCountInfo (``qo<queueId>%<offset>``) and buildQueueIdOrderCountInfo entries."""
    parts = []
    for (flag, qid, offset), count in counts.items():
        key = str(qid) if offset is None else f"qo{qid}%{offset}"
        parts.append(f"{flag}{_SEP}{key}{_SEP}{count}")
    return ";".join(parts)


def parse_order_count_info(text: str | None) -> dict[OrderCountKey, int]:
    out: dict[OrderCountKey, int] = {}
    for flag, key, count in _entries(text, "orderCountInfo"):
        if key.startswith("qo"):
            qid, sep, offset = key[2:].partition("%")
            if not sep:
                raise ProtocolError(f"orderCountInfo {text!r}: key {key!r} is not qo<queueId>%<offset>")
            parsed: OrderCountKey = (flag, _int(qid, "queueId", text or ""), _int(offset, "offset", text or ""))
        else:
            parsed = (flag, _int(key, "queueId", text or ""), None)
        _put_once(out, parsed, _int(count, "count", text or ""), "orderCountInfo", text or "")
    return out


def order_count_for(counts: Mapping[OrderCountKey, int], retry_flag: str, queue_id: int,
                    queue_offset: int) -> int | None:
    """The redelivery count of one message: its own entry, else its queue's (as processPopResponse)."""
    count = counts.get((retry_flag, queue_id, queue_offset))
    if count is None:
        count = counts.get((retry_flag, queue_id, None))
    return count


__all__ = [
    "POP_ORDER_REVIVE_QID", "PROPERTY_POP_CK", "PROPERTY_FIRST_POP_TIME", "POP_DELAY_LEVELS_S",
    "RETRY_FLAG_NORMAL", "RETRY_FLAG_V1", "RETRY_FLAG_V2", "RETRY_FLAGS", "INIT_MODE_MIN", "INIT_MODE_MAX",
    "POP_MAX_MSG_NUMS",
    "PopMessageRequestHeader", "PopMessageResponseHeader", "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader", "ChangeInvisibleTimeResponseHeader", "NotificationRequestHeader",
    "NotificationResponseHeader", "PollingInfoRequestHeader", "PollingInfoResponseHeader",
    "retry_flag_of", "real_topic",
    "ReceiptHandle", "receipt_for", "receipt_after_change",
    "encode_start_offset_info", "parse_start_offset_info", "encode_msg_offset_info", "parse_msg_offset_info",
    "OrderCountKey", "encode_order_count_info", "parse_order_count_info", "order_count_for",
]
