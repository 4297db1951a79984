"""The message codec: stored-message records, their byte positions, decoding and encoding them.

A pull response body (and a VIEW_MESSAGE_BY_ID or QUERY_MESSAGE body) is a run
of stored-message records in commit-log layout, all big-endian::

    int totalSize, int magic, int bodyCRC, int queueId, int flag,
    long queueOffset, long physicalOffset, int sysFlag, long bornTimestamp,
    bornHost (4 or 16 bytes + int port), long storeTimestamp,
    storeHost (4 or 16 bytes + int port), int reconsumeTimes,
    long preparedTransactionOffset, int bodyLen + body,
    topicLen (byte in V1, short in V2) + topic, short propsLen + properties

The embedded broker stores exactly these bytes, so this module serves both
sides: :func:`decode_messages` for consumers, :func:`encode_stored` for the
store. No I/O here.

The rest of the codec lives beside it, one concern a module: the property
string and property names in :mod:`rmqrun.remoting.message_props`, host
addresses and offset message ids in :mod:`rmqrun.remoting.msg_id`, body
compression in :mod:`rmqrun.remoting.compression` and the batch-send body in
:mod:`rmqrun.remoting.message_batch`. Import each name from the module that
owns it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from rmqrun.model import PENDING, Message
from rmqrun.remoting.compression import decompress as _decompress  # decode_message has a `decompress` flag
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message_props import (
    PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, properties_to_string, string_to_properties,
)
from rmqrun.remoting.msg_id import fmt_host, host_bytes, parse_address

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB: the topic length is a short
BLANK_MAGIC = -875286124  # 0xCBD43194: end-of-segment filler in a commit log

# Byte positions inside a stored record.
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYSFLAG_POS = 36
BORN_TIMESTAMP_POS = 40
BORN_HOST_POS = 48

# MessageSysFlag bits.
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

SYSFLAG_NEED_UNWRAP = 0x40
SYSFLAG_INNER_BATCH = 0x80


_HEAD = struct.Struct(">iiiiiqqiq")  # up to and including bornTimestamp (48 bytes)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_AFTER_HOST = struct.Struct(">iq")  # reconsumeTimes, preparedTransactionOffset
_PORT_OFFSET = struct.Struct(">iq")  # the tail of an offset message id: port, commit-log offset
# born IPv4 + port, storeTimestamp, store IPv4 + port, reconsumeTimes, preparedOffset, bodyLen
_V4_MIDDLE = struct.Struct(">4siq4siiqi")
_V4_HEAD = struct.Struct(">iiiiiqqiq4siq4siiqi")  # _HEAD then _V4_MIDDLE: a record's fixed fields
# what scan_spans reads of a record with both hosts IPv4: total size, magic, queue id, queue offset,
# commit-log offset, sysFlag, body length (the rest skipped)
_SCAN_V4 = struct.Struct(">ii4xi4xqqi44xi")
# scan_columns' read of the same record: _SCAN_V4's fields and its storeTimestamp (after the 16 bytes of
# bornTimestamp and born IPv4 host + port), in the same single unpack
_SCAN_V4_STAMP = struct.Struct(">ii4xi4xqqi16xq20xi")


def store_timestamp_pos(sys_flag: int) -> int:
    """Where STORETIMESTAMP sits in a stored record: right after BORNHOST, 8 or 20 bytes wide."""
    return BORN_HOST_POS + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8)


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------- decode

@dataclass(slots=True)
class RecordHead:
    """The fields of a stored record a consumer needs before deciding what to do with it.

    The supervisor reads only these on the hot path (tag re-filter, offsets,
    in-flight accounting) and hands the raw record to a worker, which does the
    full :func:`decode_message`. Properties are parsed on first access: with a
    ``*`` subscription nobody needs them here.
    """

    start: int
    size: int
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body_size: int
    _props_raw: bytes | memoryview
    _props: dict[str, str] | None = None

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            try:
                self._props = string_to_properties(bytes(self._props_raw).decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ProtocolError(f"record at {self.start}: properties are not UTF-8: {exc}") from exc
        return self._props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)


def _derived_fields(props_text: str, born_ip: bytes, born_port: int, store_ip: bytes, store_port: int,
                    phys_offset: int) -> tuple[dict[str, str], str, str, str, str]:
    """A decoded message's deferred fields: properties, msg_id, offset_msg_id, born_host, store_host."""
    props = string_to_properties(props_text)
    off_id = (bytes(store_ip) + _PORT_OFFSET.pack(store_port, phys_offset)).hex().upper()
    return (props, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or off_id, off_id,
            fmt_host(born_ip, born_port), fmt_host(store_ip, store_port))


def _middle_fields(data: bytes | memoryview, p: int,
                   sys_flag: int) -> tuple[bytes, int, int, bytes, int, int, int, int, int]:
    """The fields from bornHost to bodyLen, read at ``p``, and the position after them.

    :func:`decode_message`'s path for what its single unpack does not cover (an
    IPv6 host, or a record too near the end of the data for that unpack's width),
    and :func:`record_ids`' way past the hosts.
    """
    if not sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6):
        # both hosts IPv4 in one unpack
        (born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared,
         body_len) = _V4_MIDDLE.unpack_from(data, p)
        return born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len, p + _V4_MIDDLE.size
    host = _HOST6 if sys_flag & SYSFLAG_BORNHOST_V6 else _HOST4
    born_ip, born_port = host.unpack_from(data, p)
    p += host.size
    (store_ts,) = _LONG.unpack_from(data, p)
    p += 8
    host = _HOST6 if sys_flag & SYSFLAG_STOREHOST_V6 else _HOST4
    store_ip, store_port = host.unpack_from(data, p)
    p += host.size
    reconsume, prepared = _AFTER_HOST.unpack_from(data, p)
    p += _AFTER_HOST.size
    (body_len,) = _INT.unpack_from(data, p)
    return born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len, p + 4


def decode_message(data: bytes | memoryview, pos: int = 0, *, decompress: bool = True,
                   broker_name: str = "", properties_errors: str = "strict") -> tuple[Message, int]:
    """Decode the record at ``pos``; returns it and the position after it.

    Raises :class:`ProtocolError` for anything that does not add up: a total
    size that disagrees with the fields, an unknown magic code, lengths that
    run past the record, properties that are not UTF-8 (unless
    ``properties_errors="replace"``: how the Java broker reads them, with
    ``new String(bytes, UTF_8)``, when it copies a message to the DLQ).
    """
    end_of_data = len(data)
    try:
        v4 = False
        if end_of_data - pos >= _V4_HEAD.size:
            # the common case, both hosts IPv4: every fixed field in one unpack
            (total, magic, crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ts, born_ip, born_port,
             store_ts, store_ip, store_port, reconsume, prepared, body_len) = _V4_HEAD.unpack_from(data, pos)
            v4 = not sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
        if not v4:
            (total, magic, crc, queue_id, flag, queue_offset, phys_offset, sys_flag,
             born_ts) = _HEAD.unpack_from(data, pos)
        if total < _HEAD.size or pos + total > end_of_data:
            raise ProtocolError(f"record at {pos} claims {total} bytes, {end_of_data - pos} available")
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            raise ProtocolError(f"record at {pos} has unknown magic code {magic & 0xFFFFFFFF:#010x}")
        end = pos + total
        if v4:
            p = pos + _V4_HEAD.size
        else:
            (born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len,
             p) = _middle_fields(data, pos + _HEAD.size, sys_flag)
        if body_len < 0 or p + body_len > end:
            raise ProtocolError(f"record at {pos}: body length {body_len} runs past the record")
        body = bytes(data[p:p + body_len])
        p += body_len
        if magic == MAGIC_V1:
            topic_len = data[p]
            p += 1
        else:
            (topic_len,) = _SHORT.unpack_from(data, p)
            p += 2
        if topic_len < 0 or p + topic_len > end:
            raise ProtocolError(f"record at {pos}: topic length {topic_len} runs past the record")
        topic = str(data[p:p + topic_len], "utf-8")
        p += topic_len
        (props_len,) = _SHORT.unpack_from(data, p)
        p += 2
        if props_len < 0 or p + props_len > end:
            raise ProtocolError(f"record at {pos}: properties length {props_len} runs past the record")
        # decoded here, so a record whose properties are not UTF-8 fails now; parsed on first read
        props_text = str(data[p:p + props_len], "utf-8", properties_errors)
        p += props_len
    except struct.error as exc:
        raise ProtocolError(f"record at {pos} is truncated: {exc}") from exc
    except (UnicodeDecodeError, IndexError) as exc:
        raise ProtocolError(f"record at {pos} is malformed: {exc}") from exc
    if p != end:
        raise ProtocolError(f"record at {pos}: fields end at {p - pos} bytes but total size is {total}")
    if decompress and sys_flag & SYSFLAG_COMPRESSED:
        body = _decompress(body, sys_flag)
    # positional (a keyword call of 18 arguments costs four times as much); the five derived fields
    # are deferred (see Message): a handler that never reads them never pays for them
    msg = Message(topic, body, PENDING,
                  (PENDING, _derived_fields, props_text, born_ip, born_port, store_ip, store_port, phys_offset),
                  PENDING, broker_name, queue_id, queue_offset, phys_offset, born_ts, store_ts, PENDING, PENDING,
                  reconsume, flag, sys_flag, crc, prepared)
    return msg, end


@dataclass(slots=True)
class RecordIds:
    """What names a stored record without decoding its body or properties.

    Enough to send it back by commit-log offset (the broker copies its own
    bytes) and to log it, for a record whose body or properties do not decode.
    """

    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    store_host: str
    offset_msg_id: str
    reconsume_times: int
    topic: str


def record_ids(data: bytes | bytearray | memoryview, pos: int = 0) -> RecordIds:
    """Read the fixed fields and the topic of the record at ``pos``; the body is skipped, not inflated."""
    try:
        (_total, _magic, _crc, queue_id, _flag, queue_offset, phys_offset, sys_flag,
         _born) = _HEAD.unpack_from(data, pos)
        (_born_ip, _born_port, _store_ts, store_ip, store_port, reconsume, _prepared, body_len,
         p) = _middle_fields(data, pos + _HEAD.size, sys_flag)
        p += max(body_len, 0)
        if _magic == MAGIC_V1:
            topic_len = data[p]
            p += 1
        else:
            (topic_len,) = _SHORT.unpack_from(data, p)
            p += 2
        topic = bytes(data[p:p + max(topic_len, 0)]).decode("utf-8", "replace")
    except (struct.error, IndexError) as exc:
        raise ProtocolError(f"record at {pos} is truncated: {exc}") from exc
    off_id = (bytes(store_ip) + struct.pack(">iq", store_port, phys_offset)).hex().upper()
    return RecordIds(queue_id, queue_offset, phys_offset, sys_flag, fmt_host(store_ip, store_port), off_id,
                     reconsume, topic)


def record_properties(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, str]:
    """The reconsume count and the properties text (``name\x01value\x02...``) of the record at ``pos``,
    nothing else read (the body is skipped): what the message-trace hook needs of each consumed record in
    the supervisor, whose worker decodes the rest."""
    try:
        (_total, magic, _crc, _qid, _flag, _qoff, _phys, sys_flag, _born) = _HEAD.unpack_from(data, pos)
        (*_hosts, reconsume, _prepared, body_len, p) = _middle_fields(data, pos + _HEAD.size, sys_flag)
        p += max(body_len, 0)
        if magic == MAGIC_V1:
            p += 1 + data[p]
        else:
            p += 2 + _SHORT.unpack_from(data, p)[0]
        (props_len,) = _SHORT.unpack_from(data, p)
        return reconsume, str(data[p + 2:p + 2 + props_len], "utf-8")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"record at {pos}: properties do not read: {exc}") from exc


def decode_messages(body: bytes | memoryview, *, decompress: bool = True, broker_name: str = "") -> list[Message]:
    """Every record in a pull (or query) response body."""
    out: list[Message] = []
    pos = 0
    n = len(body)
    while pos < n:
        msg, pos = decode_message(body, pos, decompress=decompress, broker_name=broker_name)
        out.append(msg)
    return out


#: One record of a pull body as :func:`scan_spans` finds it: (start, size, queue id, queue offset,
#: commit-log offset, body size, start of its properties); the properties end where the record ends.
RecordSpan = tuple[int, int, int, int, int, int, int]


def scan_spans(body: bytes | memoryview) -> list[RecordSpan]:
    """Split a pull body into records as plain tuples (see :data:`RecordSpan`).

    The supervisor's hot path with a ``*`` subscription: no object per record
    beyond a tuple. Validates every length it follows, as :func:`scan_records`
    (built on it) does.
    """
    out: list[RecordSpan] = []
    append = out.append
    pos = 0
    n = len(body)
    unpack_fixed = _SCAN_V4.unpack_from
    unpack_head = _HEAD.unpack_from
    unpack_int = _INT.unpack_from
    unpack_short = _SHORT.unpack_from
    v6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
    try:
        while pos < n:
            if n - pos >= _SCAN_V4.size:
                # one unpack for what is read of a record with both hosts IPv4 (the body length too)
                total, magic, queue_id, queue_offset, phys_offset, sys_flag, body_len = unpack_fixed(body, pos)
                p = pos + _SCAN_V4.size - 4
            else:
                (total, magic, _crc, queue_id, _flag, queue_offset, phys_offset, sys_flag,
                 _born) = unpack_head(body, pos)
            if total < _HEAD.size or pos + total > n:
                raise ProtocolError(f"record at {pos} claims {total} bytes, {n - pos} available")
            if magic != MAGIC_V1 and magic != MAGIC_V2:
                raise ProtocolError(f"record at {pos} has unknown magic code {magic & 0xFFFFFFFF:#010x}")
            end = pos + total
            if n - pos < _SCAN_V4.size or sys_flag & v6:
                p = pos + store_timestamp_pos(sys_flag) + 8
                p += (20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8) + 12
                (body_len,) = unpack_int(body, p)
            if body_len < 0:
                raise ProtocolError(f"record at {pos}: negative body length")
            p += 4 + body_len
            if magic == MAGIC_V1:
                topic_len = body[p]
                p += 1 + topic_len
            else:
                (topic_len,) = unpack_short(body, p)
                p += 2 + topic_len
            (props_len,) = unpack_short(body, p)
            p += 2
            if props_len < 0 or p + props_len != end:
                raise ProtocolError(f"record at {pos}: fields do not add up to its total size {total}")
            append((pos, total, queue_id, queue_offset, phys_offset, body_len, p))
            pos = end
    except struct.error as exc:
        raise ProtocolError(f"record at {pos} is truncated: {exc}") from exc
    except (UnicodeDecodeError, IndexError) as exc:
        raise ProtocolError(f"record at {pos} is malformed: {exc}") from exc
    return out


def scan_columns(body: bytes) -> tuple[list[int], list[int], list[memoryview], list[int]]:
    """A pull body's records as the puller caches them: queue offsets, body sizes, record views and store
    timestamps (epoch ms, as stored: 0 or less where the broker wrote none), one list each, in one pass.

    :func:`scan_spans` then a pass per column, fused: no tuple per record and the store time (which the
    statistics read once the job is done) taken by the same ``unpack_from`` as the lengths. Checks and
    errors are exactly :func:`scan_spans`'s (a test compares them on every kind of body).
    """
    offsets: list[int] = []
    sizes: list[int] = []
    views: list[memoryview] = []
    stamps: list[int] = []
    add_offset, add_size, add_view, add_stamp = offsets.append, sizes.append, views.append, stamps.append
    view = memoryview(body)
    pos = 0
    n = len(body)
    fixed = _SCAN_V4_STAMP.size
    last_fixed = n - fixed  # a record starting at or before it has all of _SCAN_V4_STAMP's bytes
    head_size = _HEAD.size
    magic_v1, magic_v2 = MAGIC_V1, MAGIC_V2
    unpack_fixed = _SCAN_V4_STAMP.unpack_from
    unpack_head = _HEAD.unpack_from
    unpack_int = _INT.unpack_from
    unpack_short = _SHORT.unpack_from
    unpack_long = _LONG.unpack_from
    v6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
    try:
        while pos < n:
            if pos <= last_fixed:
                total, magic, _queue_id, queue_offset, _phys, sys_flag, stamp, body_len = unpack_fixed(body, pos)
                p = pos + fixed - 4
                short = False
            else:
                (total, magic, _crc, _queue_id, _flag, queue_offset, _phys, sys_flag,
                 _born) = unpack_head(body, pos)
                short = True
            end = pos + total
            if total < head_size or end > n:
                raise ProtocolError(f"record at {pos} claims {total} bytes, {n - pos} available")
            if magic == magic_v1:
                v1 = True
            elif magic == magic_v2:
                v1 = False
            else:
                raise ProtocolError(f"record at {pos} has unknown magic code {magic & 0xFFFFFFFF:#010x}")
            if short or sys_flag & v6:
                p = pos + store_timestamp_pos(sys_flag)
                (stamp,) = unpack_long(body, p)
                p += 8 + (20 if sys_flag & SYSFLAG_STOREHOST_V6 else 8) + 12
                (body_len,) = unpack_int(body, p)
            if body_len < 0:
                raise ProtocolError(f"record at {pos}: negative body length")
            p += 4 + body_len
            p += 1 + body[p] if v1 else 2 + unpack_short(body, p)[0]
            (props_len,) = unpack_short(body, p)
            if props_len < 0 or p + 2 + props_len != end:
                raise ProtocolError(f"record at {pos}: fields do not add up to its total size {total}")
            add_offset(queue_offset)
            add_size(body_len)
            add_view(view[pos:end])
            add_stamp(stamp)
            pos = end
    except struct.error as exc:
        raise ProtocolError(f"record at {pos} is truncated: {exc}") from exc
    except (UnicodeDecodeError, IndexError) as exc:
        raise ProtocolError(f"record at {pos} is malformed: {exc}") from exc
    return offsets, sizes, views, stamps


def scan_records(body: bytes | memoryview) -> list[RecordHead]:
    """Split a pull body into records, decoding only what the supervisor needs.

    Cheaper than :func:`decode_messages`: the body is not copied or inflated,
    hosts and timestamps are skipped. Validates every length it follows.
    """
    view = memoryview(body)
    return [RecordHead(pos, total, queue_id, queue_offset, phys, body_len, view[p:pos + total])
            for pos, total, queue_id, queue_offset, phys, body_len, p in scan_spans(body)]


# --------------------------------------------------------------------------- encode

def _host_field(addr: str) -> tuple[bytes, bool]:
    host, port = parse_address(addr)
    raw = host_bytes(host)
    return raw + _INT.pack(port), len(raw) == 16


def encode_stored(*, topic: str, body: bytes, properties: str | dict[str, str] = "", queue_id: int = 0,
                  flag: int = 0, sys_flag: int = 0, born_timestamp: int = 0, born_host: str = "127.0.0.1:0",
                  store_timestamp: int = 0, store_host: str = "127.0.0.1:10911", reconsume_times: int = 0,
                  prepared_transaction_offset: int = 0, queue_offset: int = 0, commit_log_offset: int = 0,
                  crc: int | None = None) -> bytearray:
    """A stored-message record, as a broker writes it to its commit log.

    ``body`` is taken as it goes on disk (already compressed when the
    COMPRESSED sysFlag bit is set). The host flags in ``sys_flag`` are set
    from the addresses given.
    """
    props = properties_to_string(properties) if isinstance(properties, dict) else properties
    props_b = props.encode("utf-8")
    topic_b = topic.encode("utf-8")
    if len(props_b) > 32767:
        raise ProtocolError(f"properties of {len(props_b)} bytes exceed the 32767-byte limit")
    born, born_v6 = _host_field(born_host)
    store, store_v6 = _host_field(store_host)
    sys_flag &= ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)
    if born_v6:
        sys_flag |= SYSFLAG_BORNHOST_V6
    if store_v6:
        sys_flag |= SYSFLAG_STOREHOST_V6
    magic = MAGIC_V1 if len(topic_b) <= 127 else MAGIC_V2
    topic_field = (bytes((len(topic_b),)) if magic == MAGIC_V1 else _SHORT.pack(len(topic_b))) + topic_b
    total = (_HEAD.size + len(born) + 8 + len(store) + _AFTER_HOST.size + 4 + len(body)
             + len(topic_field) + 2 + len(props_b))
    out = bytearray(_HEAD.pack(total, magic, body_crc(body) if crc is None else crc, queue_id, flag,
                               queue_offset, commit_log_offset, sys_flag, born_timestamp))
    out += born
    out += _LONG.pack(store_timestamp)
    out += store
    out += _AFTER_HOST.pack(reconsume_times, prepared_transaction_offset)
    out += _INT.pack(len(body))
    out += body
    out += topic_field
    out += _SHORT.pack(len(props_b))
    out += props_b
    return out


