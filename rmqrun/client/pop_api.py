"""The client half of RocketMQ 5.x POP: pop, ack, batch ack and change-invisible calls.

Each call builds the request the Java 5.x client sends (``MQClientAPIImpl``
``popMessageAsync`` / ``ackMessageAsync`` / ``batchAckMessageAsync`` /
``changeInvisibleTimeAsync``) and turns the answer into a typed result.

A pop answer is a pull-style body (stored records, concatenated) plus a header
that says when the messages were popped and for how long they stay invisible.
Every message needs a *receipt* (the ``POP_CK`` string) to be acknowledged or
to have its invisibility changed: for a message from a pop retry topic the
broker puts it in the record's properties; for any other the client builds it
from the response header (``protocol.pop.receipt_for``), as
``MQClientAPIImpl.processPopResponse`` does. The records travel on to workers
undecoded, as in pull mode; only their fixed fields and properties are read here.

A broker that does not know POP (RocketMQ 4.x: REQUEST_CODE_NOT_SUPPORTED)
raises :class:`PopNotSupportedError`, which says what is needed.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Sequence

from rmqrun.client.broker import PULL_TIMEOUT, BrokerClient
from rmqrun.client.pop_message import PoppedMessage, PopRun, RunReceipts, _new_tuple, _property
from rmqrun.protocol.pop import (
    POP_MAX_MSG_NUMS,
    PROPERTY_POP_CK,
    RETRY_FLAG_NORMAL,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
    order_count_for,
    parse_order_count_info,
    parse_start_offset_info,
    real_topic,
    receipt_after_change,
    receipt_for,
    retry_flag_of,
)
from rmqrun.protocol.pop_batch_ack import batch_ack_words, encode_batch_ack_checkpoints, run_word
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import BrokerError, error_for_code
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import (
    MAGIC_V1, MAGIC_V2, SYSFLAG_BORNHOST_V6, SYSFLAG_STOREHOST_V6, record_ids, scan_spans, store_timestamp_pos,
)
from rmqrun.topic_names import is_retry_topic

#: the Java client's timeout for ack and change-invisible calls (DefaultMQPushConsumerImpl.ASYNC_TIMEOUT)
ACK_TIMEOUT = 3.0
#: a pop is answered within its poll time; the socket waits this much longer (Java: pollTime + 3 s ... 30 s)
POP_TIMEOUT_SLACK = 15.0
#: distinct pop request headers kept (one per assignment and settings); more and the cache starts over
_POP_HEADERS_KEPT = 256


class PopNotSupportedError(BrokerError):
    """The broker does not serve POP: it is older than RocketMQ 5.x."""


def _not_supported(exc: BrokerError, addr: str, what: str) -> PopNotSupportedError:
    return PopNotSupportedError(exc.code, f"broker {addr} does not support {what}: POP needs RocketMQ 5.x "
                                          f"(use --consume-mode pull with this broker)", exc.request_code)


class PopStatus(str, Enum):
    FOUND = "FOUND"
    #: nothing to pop within the poll time (POLLING_TIMEOUT, or PULL_NOT_FOUND)
    NO_NEW_MSG = "NO_NEW_MSG"
    #: the broker holds too many long polls already; try again shortly
    POLLING_FULL = "POLLING_FULL"


class AckStatus(str, Enum):
    OK = "OK"
    #: the broker no longer knows the message at that receipt (revived, offset gone): nothing to do
    NO_EXIST = "NO_EXIST"


@dataclass(slots=True)
class PopResult:
    status: PopStatus
    messages: list[PoppedMessage] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0
    #: set when every message is the usual kind (:func:`_plain_records`: of this one topic, acked under it, not
    #: from the pop retry topic): the consumer then skips its per-message look at flags and topics
    plain_topic: str | None = None


#: what the answer decoder reads of a record beside scan_spans' fields: magic, sysFlag and, for a record
#: with both hosts IPv4, storeTimestamp (at byte 56) and reconsumeTimes (at byte 72)
_MAGIC_FLAG_STORED_RECONSUME = struct.Struct(">4xi28xi16xq8xi")
_LONG = struct.Struct(">q")
#: a record with both hosts IPv4, in one unpack: totalSize, magic, queueId, queueOffset, sysFlag,
#: storeTimestamp, reconsumeTimes, bodyLength (what _plain_records reads of each)
_PLAIN_V4 = struct.Struct(">ii4xi4xq8xi16xq8xi8xi")
_SHORT = struct.Struct(">h")
_V4_TOPIC_AT = 88  # a record with both hosts IPv4: where the topic (length) starts, after the body
_HOSTS_V6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
_B_POP_CK = PROPERTY_POP_CK.encode()
def _topic_and_reconsume(body: bytes, pos: int, body_len: int) -> tuple[bytes, int]:
    """The raw topic and reconsumeTimes of the record at ``pos`` (scan_spans has checked its lengths)."""
    magic, sys_flag, _stored, reconsume = _MAGIC_FLAG_STORED_RECONSUME.unpack_from(body, pos)
    if sys_flag & _HOSTS_V6:
        ids = record_ids(body, pos)
        return ids.topic.encode("utf-8"), ids.reconsume_times
    p = pos + _V4_TOPIC_AT + body_len
    if magic == MAGIC_V1:
        return body[p + 1:p + 1 + body[p]], reconsume
    (topic_len,) = _SHORT.unpack_from(body, p)
    return body[p + 2:p + 2 + topic_len], reconsume


def _plain_records(body: bytes, header: PopMessageResponseHeader, broker_name: str,
                   make: "type[PoppedMessage]" = PoppedMessage) -> list[PoppedMessage] | None:
    """The usual pop answer's records read in one pass, each with one unpack; None for anything else.

    Usual: every record of one topic, both hosts IPv4, no ``POP_CK`` in its properties (not from the pop
    retry topic), a ``startOffsetInfo`` entry for each queue, no orderly counts (the caller checks), and
    every length where :func:`scan_spans` wants it. Any record that is not so sends the whole answer to
    :func:`_records` (one pass more, which also raises the errors a bad record deserves), so a record is
    never read two ways. What this saves per message is scan_spans' tuple and the second unpack of its
    fields: the decode was a fifth of a no-op POP consumer's supervisor time."""
    n = len(body)
    if n < _V4_TOPIC_AT or not header.start_offset_info:
        return None
    unpack = _PLAIN_V4.unpack_from
    total, magic, _q, _o, sys_flag, _s, _r, body_len = unpack(body, 0)
    at = _V4_TOPIC_AT + body_len
    if magic != MAGIC_V1 and magic != MAGIC_V2 or sys_flag & _HOSTS_V6 or body_len < 0 or at + 2 > min(n, total):
        return None
    head = 1 if magic == MAGIC_V1 else 2
    field = body[at:at + head + (body[at] if head == 1 else _SHORT.unpack_from(body, at)[0])]  # its length too
    topic = field[head:].decode("utf-8", "replace")
    flag = retry_flag_of(topic)
    if flag != RETRY_FLAG_NORMAL:
        return None
    starts = parse_start_offset_info(header.start_offset_info)
    pop_time, invisible_time, revive_qid = header.pop_time, header.invisible_time, header.revive_qid
    view = memoryview(body)
    out: list[PoppedMessage] = []
    append = out.append
    find, startswith = body.find, body.startswith
    field_len = len(field)
    make = make.of_run
    run_queue, run = -1, None
    pos = 0
    try:
        while pos < n:
            total, magic2, queue_id, queue_offset, sys_flag, stored, reconsume, body_len = unpack(body, pos)
            end = pos + total
            at = pos + _V4_TOPIC_AT + body_len
            p = at + field_len + 2  # where the properties start, if the topic is the first record's
            if (magic2 != magic or sys_flag & _HOSTS_V6 or body_len < 0 or end > n or p > end
                    or not startswith(field, at) or body[p - 2] >= 0x80 or body[p - 2] << 8 | body[p - 1] != end - p
                    or find(_B_POP_CK, p, end) >= 0):
                return None
            if queue_id != run_queue:  # one queue's records of the answer: one checkpoint, one run
                run_start = starts.get((flag, queue_id))
                if run_start is None:
                    return None
                run = PopRun(topic, topic, (run_start, pop_time, invisible_time, revive_qid, flag, broker_name,
                                            queue_id), pop_time)
                run_queue = queue_id
            append(make(view[pos:end], run, queue_offset, reconsume, p - pos, stored))
            pos = end
    except struct.error:  # a record cut short
        return None
    return out


def _records(body: bytes, header: PopMessageResponseHeader, group: str, broker_name: str,
             make: "type[PoppedMessage]" = PoppedMessage) -> list[PoppedMessage]:
    """Every record of a pop answer, whatever it holds (orderly counts, receipts of the pop retry topic,
    several topics, IPv6 hosts): read through :func:`scan_spans`, which says what is wrong with a bad one."""
    counts = parse_order_count_info(header.order_count_info) if header.order_count_info else None
    starts: dict[tuple[str, int], int] | None = None  # startOffsetInfo, parsed once, when a message needs it
    pop_time, invisible_time, revive_qid = header.pop_time, header.invisible_time, header.revive_qid
    view = memoryview(body)
    topics: dict[bytes, tuple[str, str, str]] = {}  # raw topic -> (topic, ack topic, retry flag)
    out: list[PoppedMessage] = []
    append = out.append
    fixed = _MAGIC_FLAG_STORED_RECONSUME.unpack_from
    find = body.find
    run_key: tuple[str, int] | None = None  # (retry flag, queue id) of the previous record, and its ck start
    run_start = 0
    runs: dict[tuple[Any, ...], PopRun] = {}  # (topic, ack topic, receipt head) -> the messages' shared run
    of_run = make.of_run
    for pos, total, queue_id, queue_offset, _phys, body_len, p in scan_spans(body):
        magic, sys_flag, stored, reconsume = fixed(body, pos)
        if sys_flag & _HOSTS_V6:
            raw_topic, reconsume = _topic_and_reconsume(body, pos, body_len)
            (stored,) = _LONG.unpack_from(body, pos + store_timestamp_pos(sys_flag))
        else:  # _topic_and_reconsume's usual case inline: both hosts IPv4
            at = pos + _V4_TOPIC_AT + body_len
            raw_topic = (body[at + 1:at + 1 + body[at]] if magic == MAGIC_V1
                         else body[at + 2:at + 2 + _SHORT.unpack_from(body, at)[0]])
        named = topics.get(raw_topic)
        if named is None:
            topic = raw_topic.decode("utf-8", "replace")
            flag = retry_flag_of(topic)
            # a record names its original topic (the broker rewrites a retried one) unless it kept the retry topic
            named = topics[raw_topic] = (topic, topic if is_retry_topic(topic)
                                         else real_topic(topic, group, flag), flag)
        topic, ack_topic, flag = named
        end = pos + total
        if find(_B_POP_CK, p, end) >= 0:  # the name somewhere in the properties (one C search, no copy)
            ck = _property(body[p:end], _B_POP_CK)
        else:
            ck = None
        if ck:
            receipt = ReceiptHandle.parse(ck)
            if receipt.retry_flag != flag:  # the receipt's own flag names the topic it acks
                ack_topic = topic if is_retry_topic(topic) else real_topic(topic, group, receipt.retry_flag)
        else:
            if run_key is None or run_key[0] != flag or run_key[1] != queue_id:  # a new queue's run of records
                if starts is None:
                    starts = parse_start_offset_info(header.start_offset_info)
                start = starts.get((flag, queue_id)) if starts else queue_offset
                if start is None:  # receipt_for raises the error that names what the answer lacks
                    receipt_for(header, broker_name=broker_name, retry_flag=flag, queue_id=queue_id,
                                queue_offset=queue_offset, starts=starts)
                run_key, run_start = ((flag, queue_id) if starts else None), start
            # receipt_for's receipt, built inline and without the named tuple's Python __new__: one C call
            receipt = _new_tuple(ReceiptHandle, (run_start, pop_time, invisible_time, revive_qid, flag, broker_name,
                                                 queue_id, queue_offset))
        head = receipt[:7]
        key = (topic, ack_topic, head)  # a run per checkpoint and topic: what its messages share
        run = runs.get(key)
        if run is None:
            run = runs[key] = PopRun(topic, ack_topic, head, pop_time)
        # tags and the first pop time are read from the properties (at p - pos in the record) when asked for
        msg = of_run(view[pos:end], run, receipt[7], reconsume, p - pos, stored)
        if counts is not None:
            msg.order_count = order_count_for(counts, receipt.retry_flag, receipt.queue_id, receipt.queue_offset)
        append(msg)
    return out


def _merge(merged: dict[tuple[str, str, int, int, int], list[Any]], topic: str, f: ReceiptHandle,
           word: int) -> None:
    """One checkpoint's acks (``word``, of ``f``'s checkpoint) into a batch ack's entries: what came for
    it in several groups or runs goes as one entry, their words merged."""
    key = (topic, f[4], f[6], f[0], f[1])  # topic, retry flag, queue id, ck start offset, pop time
    got = merged.get(key)
    if got is None:
        merged[key] = [topic, f, word]
    else:
        got[2] |= word


def pop_result_from_response(resp: RemotingCommand, *, group: str, broker_name: str,
                             message_class: "type[PoppedMessage]" = PoppedMessage) -> PopResult:
    """MQClientAPIImpl.processPopResponse: the status, and each message with its receipt.

    The per-message hot path of a POP consumer. The usual answer is read in one
    pass (:func:`_plain_records`); any other, or one with a record out of place,
    by :func:`_records` through :func:`scan_spans`. Either way only ``POP_CK`` is
    looked up in a record's raw properties here (``1ST_POP_TIME`` and ``TAGS``
    when first asked for: :class:`PoppedMessage`), and a topic's retry flag and
    ack topic are worked out once per distinct topic in the answer.

    ``message_class``: what each message is made as (by its ``of_run``), a :class:`PoppedMessage` or a
    subclass (the consumer's ``PopEntry``: the message and its state in flight as one object, not a second
    one made per message). The messages of one queue's run in the answer share one :class:`PopRun`.
    """
    if resp.code == ResponseCode.SUCCESS:
        status = PopStatus.FOUND
    elif resp.code == ResponseCode.POLLING_FULL:
        status = PopStatus.POLLING_FULL
    elif resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
        status = PopStatus.NO_NEW_MSG
    else:
        raise error_for_code(resp.code, resp.remark, RequestCode.POP_MESSAGE)
    if status is not PopStatus.FOUND:
        rest = resp.ext_fields.get("restNum")
        return PopResult(status, rest_num=int(rest) if rest not in (None, "") else 0)
    header = PopMessageResponseHeader.from_ext(resp.ext_fields)
    body = bytes(resp.body or b"")
    out = None if header.order_count_info else _plain_records(body, header, broker_name, message_class)
    if out is not None:
        return PopResult(status, out, header.pop_time, header.invisible_time, header.rest_num,
                         out[0].topic if out else None)
    return PopResult(status, _records(body, header, group, broker_name, message_class), header.pop_time,
                     header.invisible_time, header.rest_num)


class PopClient:
    """POP calls over a :class:`BrokerClient` (its connection pool, failure log and answer times)."""

    def __init__(self, broker: BrokerClient) -> None:
        self.broker = broker
        #: POP_MESSAGE ext fields per distinct request (bornTime aside), so a pop does not encode its header anew
        self._pop_headers: dict[tuple[Any, ...], dict[str, str]] = {}

    async def pop(self, addr: str, *, group: str, topic: str, broker_name: str, queue_id: int = -1,
                  max_msg_nums: int = POP_MAX_MSG_NUMS, invisible_time_ms: int = 60_000,
                  poll_time_ms: int = 15_000, init_mode: int = 0, exp_type: str | None = None,
                  exp: str | None = None, order: bool = False, attempt_id: str | None = None,
                  message_class: "type[PoppedMessage]" = PoppedMessage) -> PopResult:
        """POP_MESSAGE with long polling: the broker holds the request up to ``poll_time_ms``; each message made
        as ``message_class`` (:func:`pop_result_from_response`)."""
        key = (group, topic, queue_id, max_msg_nums, invisible_time_ms, poll_time_ms, init_mode, exp_type, exp, order,
               attempt_id, broker_name)
        template = self._pop_headers.get(key)
        if template is None:  # the header of an assignment's pops, built once: only bornTime changes per pop
            if len(self._pop_headers) >= _POP_HEADERS_KEPT:
                self._pop_headers.clear()
            template = self._pop_headers[key] = PopMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_msg_nums,
                invisible_time=invisible_time_ms, poll_time=poll_time_ms, born_time=0, init_mode=init_mode,
                exp_type=exp_type, exp=exp, order=order, attempt_id=attempt_id, bname=broker_name).to_ext()
        ext = template.copy()
        ext["bornTime"] = str(int(time.time() * 1000))
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext)
        # written at once: within Java's window a no-op POP drain is paced by each message's cycle, a pop's round
        # trip its largest part (same-tree A/B of 100k no-op drains: +7 %, 5 of 6 rounds;
        # docs/benchmarks/pop/history.md)
        cmd.send_now = True
        timeout = max(PULL_TIMEOUT, poll_time_ms / 1000 + POP_TIMEOUT_SLACK)
        resp = await self.broker.request(addr, cmd, timeout)
        try:
            return pop_result_from_response(resp, group=group, broker_name=broker_name, message_class=message_class)
        except BrokerError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise _not_supported(exc, addr, "POP_MESSAGE") from None
            raise

    async def ack(self, addr: str, *, group: str, message: PoppedMessage,
                  receipt: ReceiptHandle | None = None, timeout: float = ACK_TIMEOUT) -> AckStatus:
        """ACK_MESSAGE for one message, naming the topic it was popped from (the retry topic if it was)."""
        r = receipt or message.receipt
        header = AckMessageRequestHeader(consumer_group=group, topic=message.ack_topic, queue_id=r.queue_id,
                                         extra_info=r.encode(), offset=r.queue_offset, bname=r.broker_name)
        resp = await self.broker.request(addr, RemotingCommand(RequestCode.ACK_MESSAGE, header.to_ext()), timeout)
        return self._ack_status(resp, addr, RequestCode.ACK_MESSAGE)

    async def batch_ack(self, addr: str, *, group: str, broker_name: str,
                        acks: Sequence[tuple[PoppedMessage, ReceiptHandle]],
                        timeout: float = ACK_TIMEOUT) -> AckStatus:
        """BATCH_ACK_MESSAGE: the messages grouped by checkpoint (retry flag, queue, ck offset, pop time)."""
        by_topic: dict[str, list[ReceiptHandle]] = {}
        for message, receipt in acks:
            by_topic.setdefault(message.topic, []).append(receipt)
        return await self.batch_ack_receipts(addr, group=group, broker_name=broker_name,
                                             groups=list(by_topic.items()), timeout=timeout)

    async def batch_ack_receipts(self, addr: str, *, group: str, broker_name: str,
                                 groups: Sequence[tuple[str, Sequence[ReceiptHandle]]],
                                 timeout: float = ACK_TIMEOUT) -> AckStatus:
        """:meth:`batch_ack` for receipts already grouped by topic (the original topic of their messages):
        the consumer's ack path, which has them so (a job's messages), without a pair per message. A topic
        may come in several groups (one per job: most are one checkpoint's run, the cheap case of
        ``batch_ack_words``); what groups ack of one checkpoint goes as one entry, their words merged.
        A group's receipts may be :class:`RunReceipts` (messages acked with their run's receipt): its word
        is worked out from the offsets, no receipt made per message."""
        merged: dict[tuple[str, str, int, int, int], list[Any]] = {}
        for topic, receipts in groups:
            if receipts.__class__ is RunReceipts:
                picked = set(receipts.offsets)  # type: ignore[attr-defined]
                if picked:
                    low, run = min(picked), receipts.run  # type: ignore[attr-defined]
                    start = run.head[0]
                    if low < start:
                        raise ValueError(f"receipt {run.receipt(low).encode()!r}: offset before its checkpoint's "
                                         "start")
                    _merge(merged, topic, run.receipt(low), run_word(start, picked, low))
                continue
            for f, word in batch_ack_words(receipts):
                _merge(merged, topic, f, word)
        body = encode_batch_ack_checkpoints(broker_name, group, merged.values())  # type: ignore[arg-type]
        resp = await self.broker.request(addr, RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, {}, body=body), timeout)
        return self._ack_status(resp, addr, RequestCode.BATCH_ACK_MESSAGE)

    async def change_invisible(self, addr: str, *, group: str, message: PoppedMessage, invisible_time_ms: int,
                               receipt: ReceiptHandle | None = None,
                               timeout: float = ACK_TIMEOUT) -> ReceiptHandle | None:
        """CHANGE_MESSAGE_INVISIBLETIME: the message stays invisible ``invisible_time_ms`` from now.

        Returns the new receipt (the old one no longer acks it), built from the
        answer as ``MQClientAPIImpl.changeInvisibleTimeAsync`` builds it; None when
        the broker no longer has the message at that receipt.
        """
        r = receipt or message.receipt
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=message.ack_topic, queue_id=r.queue_id, extra_info=r.encode(),
            offset=r.queue_offset, invisible_time=invisible_time_ms, bname=r.broker_name)
        cmd = RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())
        resp = await self.broker.request(addr, cmd, timeout)
        if self._ack_status(resp, addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME) is AckStatus.NO_EXIST:
            return None
        return receipt_after_change(r, ChangeInvisibleTimeResponseHeader.from_ext(resp.ext_fields))

    @staticmethod
    def _ack_status(resp: RemotingCommand, addr: str, request_code: int) -> AckStatus:
        if resp.code == ResponseCode.SUCCESS:
            return AckStatus.OK
        if resp.code in (ResponseCode.NO_MESSAGE, ResponseCode.MESSAGE_ILLEGAL):
            return AckStatus.NO_EXIST
        exc = error_for_code(resp.code, resp.remark, request_code)
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise _not_supported(exc, addr, RequestCode(request_code).name)
        raise exc
