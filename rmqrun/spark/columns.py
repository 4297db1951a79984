"""The source's rows decoded straight from pull answers into column lists, then one Arrow batch.

A partition used to decode every record into a :class:`~rmqrun.model.Message`
(in the consumer's loop thread, whose tag re-filter also parsed its properties),
then read each message's fields again, one attribute at a time, into the lists
:func:`~rmqrun.spark.schema.to_arrow` turns into Arrow arrays. That was a third
of a Python worker's CPU per row. Here each record of a pull's body is unpacked
once (every fixed field in one ``struct`` call) and its values go straight into
the column lists: no object per row, no deferred fields, the topic text decoded
once per pull.

A record the fast path does not take (an IPv6 host, a compressed body, anything
that does not add up) is decoded by :func:`~rmqrun.remoting.message.decode_message`,
which gives the same values or the error a pull would raise; the rows are the
ones ``to_arrow(read_range(...))`` gives, value for value (a test compares them).
"""

from __future__ import annotations

import struct
from typing import Any

from rmqrun.errors import RmqrunError
from rmqrun.model import Message, MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import (
    MAGIC_V1, MAGIC_V2, SYSFLAG_BORNHOST_V6, SYSFLAG_COMPRESSED, SYSFLAG_STOREHOST_V6, decode_message,
)
from rmqrun.remoting.message_props import (
    PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, string_to_properties,
)

__all__ = ["ColumnRows", "columns_to_arrow"]

# a stored record's fixed fields with both hosts IPv4: total size, magic, body CRC, queue id, flag,
# queue offset, commit-log offset, sysFlag, born timestamp, born host, born port, store timestamp,
# store host, store port, reconsume times, prepared-transaction offset, body length
_FIXED = struct.Struct(">iiiiiqqiq4siq4siiqi")
_SHORT = struct.Struct(">h")
_PORT_OFFSET = struct.Struct(">iq")
_SLOW = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6 | SYSFLAG_COMPRESSED
_KEYS = "KEYS"


class _NotFast(RmqrunError):
    """The record leaves the fast path; :func:`decode_message` reads it (or names what is wrong)."""


class ColumnRows:
    """Rows of :data:`~rmqrun.spark.schema.SCHEMA_DDL` as one list per column, filled per pull."""

    __slots__ = ("namespace", "rows", "topics", "brokers", "qids", "offsets", "ids", "tags", "keys", "bodies",
                 "prop_keys", "prop_values", "prop_offsets", "born", "stored", "recons", "_topic_text")

    def __init__(self, namespace: str | None = None) -> None:
        self.namespace = namespace
        self.rows = 0
        self.topics: list[str] = []
        self.brokers: list[str] = []
        self.qids: list[int] = []
        self.offsets: list[int] = []
        self.ids: list[str] = []
        self.tags: list[str | None] = []
        self.keys: list[str | None] = []
        self.bodies: list[bytes] = []
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.prop_offsets = [0]
        self.born: list[int] = []
        self.stored: list[int] = []
        self.recons: list[int] = []
        self._topic_text: dict[bytes, str] = {}

    def add(self, body: bytes, mq: MessageQueue, sub: Any, offset: int, end: int) -> bool:
        """Append the records of one pull ``body`` of ``mq`` that ``sub`` keeps and whose queue offset is
        in ``[offset, end)``; True when a kept record at or past ``end`` was met (the range is done).

        A record that does not decode raises :class:`ProtocolError` naming the pull, as a pull does."""
        if type(body) is not bytes:
            body = bytes(body)  # slices of bytes are the row's bodies, no copy more
        pos = 0
        n = len(body)
        while pos < n:
            try:
                pos, past_end = self._add_fast(body, pos, n, mq, sub, offset, end)
            except _NotFast:
                try:
                    msg, next_pos = decode_message(body, pos, broker_name=mq.broker_name)
                except ProtocolError as exc:
                    raise ProtocolError(f"pull of {mq} from offset {offset}: a message does not decode: "
                                        f"{exc}") from exc
                pos = next_pos
                past_end = self._add_message(msg, mq, sub, offset, end)
            if past_end:
                return True
        return False

    def _add_fast(self, data: bytes, pos: int, n: int, mq: MessageQueue, sub: Any, offset: int,
                  end: int) -> tuple[int, bool]:
        """One IPv4, uncompressed record at ``pos``; the position after it and whether it is past ``end``."""
        if n - pos < _FIXED.size:
            raise _NotFast
        (total, magic, _crc, _qid, _flag, queue_offset, phys_offset, sys_flag, born_ts, _born_ip, _born_port,
         store_ts, store_ip, store_port, reconsume, _prepared, body_len) = _FIXED.unpack_from(data, pos)
        record_end = pos + total
        if sys_flag & _SLOW or total < _FIXED.size or record_end > n or body_len < 0:
            raise _NotFast
        p = pos + _FIXED.size + body_len
        if magic == MAGIC_V1:
            if p >= record_end:
                raise _NotFast
            topic_len = data[p]
            p += 1
        elif magic == MAGIC_V2 and p + 2 <= record_end:
            (topic_len,) = _SHORT.unpack_from(data, p)
            p += 2
        else:
            raise _NotFast
        topic_at = p
        p += topic_len
        if topic_len < 0 or p + 2 > record_end:
            raise _NotFast
        (props_len,) = _SHORT.unpack_from(data, p)
        p += 2
        if props_len < 0 or p + props_len != record_end:
            raise _NotFast
        try:
            props = string_to_properties(str(data[p:record_end], "utf-8"))
            topic_raw = data[topic_at:topic_at + topic_len]
            topic = self._topic_text.get(topic_raw)
            if topic is None:
                topic = str(topic_raw, "utf-8")
                if self.namespace:
                    topic = unwrap(self.namespace, topic)
                self._topic_text[topic_raw] = topic
        except UnicodeDecodeError:
            raise _NotFast from None
        tags = props.get(PROPERTY_TAGS)
        if not sub.matches_tag(tags):
            return record_end, False
        if queue_offset >= end:
            return record_end, True
        if queue_offset < offset:
            return record_end, False
        body_at = pos + _FIXED.size
        msg_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or \
            (store_ip + _PORT_OFFSET.pack(store_port, phys_offset)).hex().upper()
        self._append(topic, mq, queue_offset, msg_id, tags, props, data[body_at:body_at + body_len],
                     born_ts, store_ts, reconsume)
        return record_end, False

    def _add_message(self, msg: Message, mq: MessageQueue, sub: Any, offset: int, end: int) -> bool:
        """The fast path's checks and row for a record :func:`decode_message` read."""
        props = msg.properties
        tags = props.get(PROPERTY_TAGS)
        if not sub.matches_tag(tags):
            return False
        if msg.queue_offset >= end:
            return True
        if msg.queue_offset < offset:
            return False
        topic = unwrap(self.namespace, msg.topic) if self.namespace else msg.topic
        body = msg.body
        self._append(topic, mq, msg.queue_offset, msg.msg_id, tags, props,
                     body if type(body) is bytes else bytes(body), msg.born_timestamp, msg.store_timestamp,
                     msg.reconsume_times)
        return False

    def _append(self, topic: str, mq: MessageQueue, queue_offset: int, msg_id: str, tags: str | None,
                props: dict[str, str], body: bytes, born_ts: int, store_ts: int, reconsume: int) -> None:
        self.topics.append(topic)
        self.brokers.append(mq.broker_name)
        self.qids.append(mq.queue_id)
        self.offsets.append(queue_offset)
        self.ids.append(msg_id)
        self.tags.append(tags)
        self.keys.append(props.get(_KEYS))
        self.bodies.append(body)
        self.prop_keys.extend(props)
        self.prop_values.extend(props.values())
        self.prop_offsets.append(len(self.prop_keys))
        self.born.append(born_ts * 1000)
        self.stored.append(store_ts * 1000)
        self.recons.append(reconsume)
        self.rows += 1

    def batch(self, schema: Any):  # type: ignore[no-untyped-def]
        """The rows as one Arrow record batch of ``schema``."""
        return columns_to_arrow(schema, self.topics, self.brokers, self.qids, self.offsets, self.ids, self.tags,
                                self.keys, self.bodies, self.prop_offsets, self.prop_keys, self.prop_values,
                                self.born, self.stored, self.recons)


def columns_to_arrow(schema: Any, topics: list[str], brokers: list[str], qids: list[int], offsets: list[int],
                     ids: list[str], tags: list[str | None], keys: list[str | None], bodies: list[bytes],
                     prop_offsets: list[int], prop_keys: list[str], prop_values: list[str], born_us: list[int],
                     stored_us: list[int], recons: list[int]):  # type: ignore[no-untyped-def]
    """One Arrow array per column list (timestamps in µs; the properties map from flat key and value
    lists and the offsets of each row's first entry): one pyarrow call per column, none per row."""
    import pyarrow as pa

    properties = pa.MapArray.from_arrays(pa.array(prop_offsets, pa.int32()), pa.array(prop_keys, pa.string()),
                                         pa.array(prop_values, pa.string()))
    return pa.RecordBatch.from_arrays([
        pa.array(topics, pa.string()), pa.array(brokers, pa.string()), pa.array(qids, pa.int32()),
        pa.array(offsets, pa.int64()), pa.array(ids, pa.string()), pa.array(tags, pa.string()),
        pa.array(keys, pa.string()), pa.array(bodies, pa.binary()), properties,
        pa.array(born_us, pa.timestamp("us", tz="UTC")), pa.array(stored_us, pa.timestamp("us", tz="UTC")),
        pa.array(recons, pa.int32()),
    ], schema=schema)
