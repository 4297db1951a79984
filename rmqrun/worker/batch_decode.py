"""A RUN frame's records, decoded into the messages a handler receives.

Why a module of its own: this loop runs once per message in every worker, and
what it does per record (decode, the queue offset, the retry topic's reset, the
namespace) must stay exactly Java's while costing as little as possible; a
record that does not decode is kept as ``None`` with its reason, never dropped.

Why it does not just call :func:`~rmqrun.remoting.message.decode_message` per
record: that call was half of a no-op worker's CPU per message (issue #38). The
usual record (magic V1, both hosts IPv4, an uncompressed body, consistent
lengths, UTF-8 topic and properties) is decoded here inline: one unpack of the
fixed fields, the body sliced from the frame's bytes, the topic text shared by
every record of the batch that carries the same topic bytes (a batch is one
queue), and the :class:`~rmqrun.model.Message` built slot by slot with its five
derived fields deferred as ``decode_message`` defers them (the four that
``decode_message`` stores as PENDING are left unset: :data:`~rmqrun.model.PENDING`),
and four numbers a handler rarely reads (commit-log offset, flag, body CRC, prepared
offset) left unset too: the unpack skips them and both hosts, which are read from a
copy of the record's fixed bytes on first use (:func:`_record_fields`).
The properties text is still decoded here, so a record whose properties are
not UTF-8 still fails at decode, never in the handler. Any record that is not
the usual one, or that fails any check, goes through ``decode_message``, which
gives it its exact message or its exact error; the values a handler reads are
the same either way (``tests/unit/worker/test_worker_batch_decode.py`` compares
the two on many shapes of records, intact and corrupted).
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

from rmqrun.model import DEFERRED_SLOT, PENDING, Message
from rmqrun.namespace import unwrap
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import (
    MAGIC_V1, QUEUE_OFFSET_POS, SYSFLAG_BORNHOST_V6, SYSFLAG_COMPRESSED, SYSFLAG_STOREHOST_V6, _derived_fields,
    decode_message,
)
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.topic_names import is_retry_topic

_SIZE = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
#: a record's fixed fields when both hosts are IPv4 (remoting.message's layout): total size, magic,
#: body CRC, queue id, flag, queue offset, commit-log offset, sysFlag, born timestamp, born IPv4 + port,
#: store timestamp, store IPv4 + port, reconsume times, prepared offset, body length
_V4_FIXED = struct.Struct(">iiiiiqqiq4siq4siiqi")
_FIXED_SIZE = _V4_FIXED.size
#: the same bytes, unpacking only what the decode needs or a handler usually reads (total size, magic, queue
#: id, queue offset, sysFlag, born timestamp, store timestamp, reconsume times, body length); the rest
#: (body CRC, flag, commit-log offset, both hosts, prepared offset) is read from a copy of these bytes
#: the first time a handler reads one of them (:func:`_record_fields`)
_V4_USED = struct.Struct(">ii4xi4xq8xiq8xq8xi8xi")
assert _V4_USED.size == _FIXED_SIZE
#: sysFlag bits that send a record to decode_message (an IPv6 host, a compressed body)
_UNUSUAL = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6 | SYSFLAG_COMPRESSED
_new = Message.__new__
_NO_TOPIC = b""  # with the length -1, which no topic has: the next record's topic is decoded


def decode_batch(data: bytes | memoryview, pos: int, broker_name: str,
                 namespace: str | None) -> tuple[list[Any], list[int], list[str | None]]:
    """Messages (None where a record does not decode), queue offsets, decode errors (None where it did)."""
    if type(data) is not bytes:  # slices of bytes are bytes: the body a handler gets
        data, pos = bytes(data[pos:]), 0
    msgs: list[Any] = []
    offsets: list[int] = []
    bad: dict[int, str] = {}
    n = len(data)
    add_msg = msgs.append
    add_offset = offsets.append
    unpack = _V4_USED.unpack_from
    startswith = data.startswith
    fill = _record_fields
    set_state = DEFERRED_SLOT
    # a batch is one queue, so its records share a topic: its text is decoded once per topic seen
    # (a bytes compare per record), and the retry-prefix test with it; only a retry topic's records
    # have their properties read
    raw_topic, topic_len, topic_text, shown, retry = _NO_TOPIC, -1, "", "", False
    while pos < n:
        if n - pos >= _FIXED_SIZE:
            (total, magic, queue_id, queue_offset, sys_flag, born_ts, store_ts, reconsume,
             body_len) = unpack(data, pos)
            end = pos + total
            p = pos + _FIXED_SIZE
            tp = p + body_len  # the topic's length byte
            # (a total under the fixed size fails tp < end: the body starts past such a record's end)
            if magic == MAGIC_V1 and not sys_flag & _UNUSUAL and end <= n and 0 <= body_len and tp < end:
                ts = tp + 1
                te = ts + data[tp]
                pl = te + 2  # the properties (a signed short's length before them: under 0x8000, to the end)
                if pl <= end:
                    if (data[te] << 8 | data[te + 1]) == end - pl < 0x8000:
                        try:
                            if te - ts != topic_len or not startswith(raw_topic, ts):
                                raw_topic, topic_len = data[ts:te], -1
                                topic_text = str(raw_topic, "utf-8")
                                retry = is_retry_topic(topic_text)
                                shown = unwrap(namespace, topic_text) if namespace else topic_text
                                topic_len = te - ts  # only once its text decoded
                            props_text = str(data[pl:end], "utf-8")
                        except UnicodeDecodeError:
                            pass  # decode_message says why (the shared topic is only ever a decoded one)
                        else:
                            msg = _new(Message)
                            msg.topic = shown
                            msg.body = data[p:tp]
                            set_state(msg, (PENDING, fill, props_text, data[pos:p]))
                            msg.broker_name = broker_name
                            msg.queue_id = queue_id
                            msg.queue_offset = queue_offset
                            msg.born_timestamp = born_ts
                            msg.store_timestamp = store_ts
                            msg.reconsume_times = reconsume
                            msg.sys_flag = sys_flag
                            add_offset(queue_offset)
                            if retry:
                                msg.topic = _shown_topic(msg, topic_text, namespace)
                            add_msg(msg)
                            pos = end
                            continue
        pos = _decode_one(data, pos, broker_name, namespace, msgs, offsets, bad)  # anything else
    errors: list[str | None] = [None] * len(msgs)
    for i, text in bad.items():
        errors[i] = text
    return msgs, offsets, errors


def _record_fields(props_text: str, fixed: bytes) -> tuple[Any, ...]:
    """A message's deferred fields from its properties text and its record's fixed bytes (both hosts
    IPv4): decode_message's five derived fields, then the four rarely read numbers (model.py's
    ``_RECORD_NAMES`` order), each the value decode_message stores."""
    (_, _, crc, _, flag, _, phys_offset, _, _, born_ip, born_port, _, store_ip, store_port, _, prepared,
     _) = _V4_FIXED.unpack(fixed)
    return (*_derived_fields(props_text, born_ip, born_port, store_ip, store_port, phys_offset),
            phys_offset, flag, crc, prepared)


def _decode_one(data: bytes, pos: int, broker_name: str, namespace: str | None, msgs: list[Any],
                offsets: list[int], bad: dict[int, str]) -> int:
    """The record at ``pos`` through the general decoder, with its exact errors; the position after it."""
    try:
        msg, end = decode_message(data, pos, broker_name=broker_name)
    except ProtocolError as exc:
        offsets.append(_OFFSET.unpack_from(data, pos + QUEUE_OFFSET_POS)[0])
        msgs.append(None)
        bad[len(msgs) - 1] = f"record {len(msgs) - 1} does not decode: {exc}"
        return pos + _SIZE.unpack_from(data, pos)[0]
    offsets.append(msg.queue_offset)  # the same field the supervisor reads at QUEUE_OFFSET_POS
    if namespace or is_retry_topic(msg.topic):
        msg.topic = _shown_topic(msg, msg.topic, namespace)
    msgs.append(msg)
    return end  # a record that decodes ends where its size field says


def _shown_topic(msg: Message, stored: str, namespace: str | None) -> str:
    """Java's resetRetryAndNamespace: a retried message shows the topic it was sent to (RETRY_TOPIC,
    when set), and with a namespace the topic is shown without it (once)."""
    topic = (msg.properties.get(PROPERTY_RETRY_TOPIC) or stored) if is_retry_topic(stored) else stored
    return unwrap(namespace, topic) if namespace else topic


def chunks_around(errors: list[str | None], step: int) -> Iterator[tuple[int, int]]:
    """Handler calls of up to ``step`` messages, each record that did not decode alone in its own.

    A batch handler's ``AckIndex`` counts positions in the list it was given, so a
    bad record is cut out of the calls rather than left as a hole in one.
    """
    n = len(errors)
    start = 0
    while start < n:
        end = start + 1
        if not errors[start]:
            while end < n and end - start < step and not errors[end]:
                end += 1
        yield start, end
        start = end
