"""The message codec: stored-message records, send-side bodies, properties, ids.

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
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from dataclasses import dataclass
from typing import Iterable

from rmqrun.model import PENDING, Message
from rmqrun.remoting.errors import ProtocolError

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
COMPRESSION_MASK = 0x700  # bits 8..10; 0 and 3 both mean zlib (4.x compatibility)
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names (MessageConst).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_CLUSTER = "CLUSTER"

_HEAD = struct.Struct(">iiiiiqqiq")  # up to and including bornTimestamp (48 bytes)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_MID = struct.Struct(">qiiq")  # storeTimestamp, (host handled apart), reconsumeTimes, preparedOffset
_AFTER_HOST = struct.Struct(">iq")  # reconsumeTimes, preparedTransactionOffset
_PORT_OFFSET = struct.Struct(">iq")  # the tail of an offset message id: port, commit-log offset
_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
# born IPv4 + port, storeTimestamp, store IPv4 + port, reconsumeTimes, preparedOffset, bodyLen
_V4_MIDDLE = struct.Struct(">4siq4siiqi")
_V4_HEAD = struct.Struct(">iiiiiqqiq4siq4siiqi")  # _HEAD then _V4_MIDDLE: a record's fixed fields
# what scan_spans reads of a record with both hosts IPv4: total size, magic, queue id, queue offset,
# commit-log offset, sysFlag, body length (the rest skipped)
_SCAN_V4 = struct.Struct(">ii4xi4xqqi44xi")


def store_timestamp_pos(sys_flag: int) -> int:
    """Where STORETIMESTAMP sits in a stored record: right after BORNHOST, 8 or 20 bytes wide."""
    return BORN_HOST_POS + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: 31-polynomial over UTF-16 code units, signed 32-bit.

    The broker stores this for a message's TAGS as the consume-queue tags code,
    and a subscription's codeSet holds it for each tag.
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tags code of a message (0 when it has no tags)."""
    return java_string_hash(tags) if tags else 0


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --------------------------------------------------------------------------- properties

def properties_to_string(props: dict[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02``, as the 4.9.8 Java client and broker write them.

    (5.x and the C++ client add a trailing separator; the decoder accepts both.)
    """
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def string_to_properties(text: str) -> dict[str, str]:
    """The inverse; tolerates a trailing separator or none (4.9.8 writes none, 5.x and C++ one)."""
    if not text:
        return {}
    try:
        # fast path: every item is name\x01value
        return dict(item.split(NAME_VALUE_SEPARATOR, 1) for item in text.rstrip(PROPERTY_SEPARATOR)
                    .split(PROPERTY_SEPARATOR))  # type: ignore[misc]
    except ValueError:
        pass
    props: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            props[name] = value
    return props


# --------------------------------------------------------------------------- ids

def _host_bytes(host: str) -> bytes:
    try:
        return socket.inet_pton(socket.AF_INET, host)
    except OSError:
        return socket.inet_pton(socket.AF_INET6, host)


def parse_address(addr: str) -> tuple[str, int]:
    """``"ip:port"`` or ``"[v6]:port"`` to a (host, port) pair."""
    host, _, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host, int(port)


def offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """The broker-side message id: store IP, port and commit-log offset in hex."""
    host, port = parse_address(store_host)
    return (_host_bytes(host) + struct.pack(">iq", port, commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(store address, commit-log offset) from an offset message id (32 or 56 hex digits)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ProtocolError(f"message id {msg_id!r} is not hex") from exc
    if len(raw) == 16:
        host = socket.inet_ntop(socket.AF_INET, raw[:4])
        port, offset = struct.unpack(">iq", raw[4:])
        return f"{host}:{port}", offset
    if len(raw) == 28:
        host = socket.inet_ntop(socket.AF_INET6, raw[:16])
        port, offset = struct.unpack(">iq", raw[16:])
        return f"[{host}]:{port}", offset
    raise ProtocolError(f"message id {msg_id!r} has {len(raw)} bytes; expected 16 or 28")


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


def _fmt_host(raw: bytes | memoryview, port: int) -> str:
    """``ip:port`` text of a record's born or store host.

    Every decoded message needs two of these and a batch repeats the same few hosts
    (one store host per broker, one born host per producer), so the text is cached:
    the formatting was a tenth of a no-op worker's busy time.
    """
    return _host_text(bytes(raw), port)


@functools.lru_cache(maxsize=4096)
def _host_text(raw: bytes, port: int) -> str:
    if len(raw) == 4:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{port}"


#: Java's ``CompressionType`` values (``MessageSysFlag.getCompressionType``: bits 8..10 shifted down).
#: 0 is what a 4.x producer writes (no type bits) and means zlib, as in Java's ``findByValue``.
COMPRESSION_TYPES: dict[int, str] = {0: "ZLIB", 1: "LZ4", 2: "ZSTD", 3: "ZLIB"}


def compression_type(sys_flag: int) -> str:
    """The name of the codec a compressed body was written with (``ZLIB``, ``LZ4``, ``ZSTD``).

    Raises :class:`ProtocolError` for the type values 4..7, which no Java version writes.
    """
    value = (sys_flag & COMPRESSION_MASK) >> 8
    try:
        return COMPRESSION_TYPES[value]
    except KeyError:
        raise ProtocolError(f"unknown compression type {value} in sysFlag {sys_flag:#x}") from None


def _inflate_zlib(body: bytes) -> bytes:
    # Java's Deflater/DeflaterOutputStream: a zlib stream (RFC 1950), not raw deflate.
    d = zlib.decompressobj()
    out = d.decompress(body)
    if not d.eof:
        raise ProtocolError("ZLIB body is truncated")
    return out


def _inflate_lz4(body: bytes) -> bytes:
    # Lz4Compressor writes through lz4-java's LZ4FrameOutputStream: the LZ4 *frame*
    # format (magic 0x184D2204, 4 MiB independent blocks), not a bare LZ4 block.
    import lz4.frame  # imported here: only 5.x LZ4 producers need it, and import rmqrun stays cheap

    try:
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(body)
    except RuntimeError as exc:
        raise ProtocolError(f"LZ4 body does not inflate: {exc}") from exc
    if not d.eof:
        raise ProtocolError("LZ4 body is truncated (frame incomplete)")
    return out


def _inflate_zstd(body: bytes) -> bytes:
    # ZstdCompressor writes through zstd-jni's ZstdOutputStream: standard zstd frames
    # without a content size in the header, so decompress as a stream, frame after frame.
    import zstandard

    parts: list[bytes] = []
    rest = body
    try:
        while rest:
            d = zstandard.ZstdDecompressor().decompressobj()
            parts.append(d.decompress(rest))
            if not d.eof:
                raise ProtocolError("ZSTD body is truncated (frame incomplete)")
            rest = d.unused_data
    except zstandard.ZstdError as exc:
        raise ProtocolError(f"ZSTD body does not inflate: {exc}") from exc
    if not parts:
        raise ProtocolError("ZSTD body is empty")
    return b"".join(parts)


_INFLATERS = {"ZLIB": _inflate_zlib, "LZ4": _inflate_lz4, "ZSTD": _inflate_zstd}


def _decompress(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer gave it, whichever of Java's three codecs compressed it."""
    kind = compression_type(sys_flag)
    try:
        return _INFLATERS[kind](body)
    except zlib.error as exc:
        raise ProtocolError(f"{kind} body does not inflate: {exc}") from exc


def _derived_fields(props_text: str, born_ip: bytes, born_port: int, store_ip: bytes, store_port: int,
                    phys_offset: int) -> tuple[dict[str, str], str, str, str, str]:
    """A decoded message's deferred fields: properties, msg_id, offset_msg_id, born_host, store_host."""
    props = string_to_properties(props_text)
    off_id = (bytes(store_ip) + _PORT_OFFSET.pack(store_port, phys_offset)).hex().upper()
    return (props, props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or off_id, off_id,
            _fmt_host(born_ip, born_port), _fmt_host(store_ip, store_port))


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
        p = pos + _HEAD.size
        if v4:
            p = pos + _V4_HEAD.size
        elif not sys_flag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6):
            # the common case in one unpack: both hosts IPv4
            (born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared,
             body_len) = _V4_MIDDLE.unpack_from(data, p)
            p += _V4_MIDDLE.size
        else:
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
            p += 4
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
        p = pos + _HEAD.size + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8) + 8
        host = _HOST6 if sys_flag & SYSFLAG_STOREHOST_V6 else _HOST4
        store_ip, store_port = host.unpack_from(data, p)
        p += host.size
        reconsume, _prepared = _AFTER_HOST.unpack_from(data, p)
        p += _AFTER_HOST.size
        (body_len,) = _INT.unpack_from(data, p)
        p += 4 + max(body_len, 0)
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
    return RecordIds(queue_id, queue_offset, phys_offset, sys_flag, _fmt_host(store_ip, store_port), off_id,
                     reconsume, topic)


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
    raw = _host_bytes(host)
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


@dataclass(slots=True)
class BatchItem:
    """One message of a SEND_BATCH_MESSAGE body."""

    body: bytes
    properties: dict[str, str]
    flag: int = 0


def encode_batch(items: Iterable[BatchItem]) -> bytes:
    """The body of a batch send: one compact record per message (MessageDecoder.encodeMessage)."""
    parts: list[bytes] = []
    for item in items:
        props_b = properties_to_string(item.properties).encode("utf-8")
        total = _BATCH_HEAD.size + len(item.body) + 2 + len(props_b)
        # The Java client leaves magic code and body CRC zero here; the broker
        # computes the CRC when it stores the message.
        parts.append(_BATCH_HEAD.pack(total, 0, 0, item.flag, len(item.body)))
        parts.append(item.body)
        parts.append(_SHORT.pack(len(props_b)))
        parts.append(props_b)
    return b"".join(parts)


def decode_batch(body: bytes | memoryview) -> list[BatchItem]:
    """The inverse of :func:`encode_batch`, for the broker; validates every length."""
    out: list[BatchItem] = []
    pos = 0
    n = len(body)
    try:
        while pos < n:
            total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
            if total < _BATCH_HEAD.size + 2 or pos + total > n or body_len < 0:
                raise ProtocolError(f"batch record at {pos} claims {total} bytes, {n - pos} available")
            p = pos + _BATCH_HEAD.size
            msg_body = bytes(body[p:p + body_len])
            p += body_len
            (props_len,) = _SHORT.unpack_from(body, p)
            p += 2
            if props_len < 0 or p + props_len != pos + total:
                raise ProtocolError(f"batch record at {pos}: fields do not add up to {total} bytes")
            props = string_to_properties(bytes(body[p:p + props_len]).decode("utf-8"))
            out.append(BatchItem(msg_body, props, flag))
            pos += total
    except struct.error as exc:
        raise ProtocolError(f"batch record at {pos} is truncated: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"batch record at {pos}: properties are not UTF-8") from exc
    return out
