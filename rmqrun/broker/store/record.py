"""The stored-message record layout (FACTS §2.6), read-only helpers.

Encoding a record is the codec's job (``rmqrun.remoting.message``); the store only
needs to *check* records, patch the three fields it owns (queue offset, physical
offset, store timestamp) and find a few fields again during recovery. Offsets below
are byte positions inside a record; all integers are big-endian.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from .errors import RecordFormatError

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB  # V2 only widens the topic length to a short
#: RocketMQ's end-of-segment marker: (int total = bytes left in the segment, int magic).
BLANK_MAGIC = 0xCBD43194
BLANK_HEADER_SIZE = 8

TOTAL_SIZE_POS = 0
MAGIC_POS = 4
BODY_CRC_POS = 8
QUEUE_ID_POS = 12
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYSFLAG_POS = 36
BORN_TIMESTAMP_POS = 40
BORN_HOST_POS = 48

SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20

#: Smallest possible record: IPv4 hosts, V1, empty body, topic and properties.
MIN_RECORD_SIZE = 91
#: Bytes enough to reach STORETIMESTAMP even with an IPv6 born host.
STORE_TIMESTAMP_PROBE = BORN_HOST_POS + 20 + 8

# total, magic, crc, qid, flag, qoff, phys, sysflag, born ts, (born host), store ts, (store host,
# reconsume times, prepared offset), body length -- the layout when both hosts are IPv4
_HEAD_V4 = struct.Struct(">iIiiiqqiq8xq8x12xi")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_I64 = struct.Struct(">q")
_BLANK = struct.Struct(">iI")


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC as RocketMQ stores it: ``UtilAll.crc32`` = CRC32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def store_timestamp_pos(sysflag: int) -> int:
    """Where STORETIMESTAMP sits: right after BORNHOST, which is 8 or 20 bytes wide."""
    return BORN_HOST_POS + (20 if sysflag & SYSFLAG_BORNHOST_V6 else 8)


def blank_marker(remaining: int) -> bytes:
    """The 8-byte end-of-segment marker claiming the ``remaining`` bytes of a segment."""
    return _BLANK.pack(remaining, BLANK_MAGIC)


def read_blank(buf: bytes | bytearray | memoryview, off: int) -> int | None:
    """Size claimed by a blank marker at ``off``, or None if there is no marker there."""
    if len(buf) - off < BLANK_HEADER_SIZE:
        return None
    size, magic = _BLANK.unpack_from(buf, off)
    return size if magic == BLANK_MAGIC else None


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """The fields of one record the store cares about; positions are relative to the record."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    queue_offset: int
    physical_offset: int
    sysflag: int
    store_timestamp: int
    body_pos: int
    body_len: int
    topic: str
    properties_pos: int
    properties_len: int


def parse_header(buf: bytes | bytearray | memoryview, off: int = 0, *, limit: int | None = None) -> RecordHeader:
    """Parse and cross-check the record starting at ``buf[off]``.

    ``limit`` bounds the record size (e.g. bytes left in the segment). The check is
    structural: the variable-length fields must add up exactly to TOTALSIZE. The body
    CRC is checked separately (:func:`check_body_crc`) because it costs a pass over the
    body and trusted regions skip it. Raises :class:`RecordFormatError`.
    """
    avail = len(buf) - off
    if avail < MIN_RECORD_SIZE:
        raise RecordFormatError(f"only {avail} bytes, a record needs at least {MIN_RECORD_SIZE}")
    # One unpack reaches BODY length when both hosts are IPv4 (the usual case).
    total, magic, crc, qid, _flag, qoff, phys, sysflag, _born, store_ts, body_len = _HEAD_V4.unpack_from(buf, off)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise RecordFormatError(f"bad magic code 0x{magic:08X}")
    if total < MIN_RECORD_SIZE or (limit is not None and total > limit):
        raise RecordFormatError(f"total size {total} out of range [{MIN_RECORD_SIZE}, {limit}]")
    if total > avail:
        raise RecordFormatError(f"total size {total} but only {avail} bytes available")
    if sysflag & (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6):
        ts_pos = store_timestamp_pos(sysflag)
        store_host = 20 if sysflag & SYSFLAG_STOREHOST_V6 else 8
        body_pos = ts_pos + 8 + store_host + 4 + 8 + 4  # + RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODY length
        if body_pos + 3 > total:
            raise RecordFormatError(f"total size {total} too small for sysflag 0x{sysflag:X}")
        (store_ts,) = _I64.unpack_from(buf, off + ts_pos)
        (body_len,) = _I32.unpack_from(buf, off + body_pos - 4)
    else:
        body_pos = _HEAD_V4.size
    if body_len < 0 or body_pos + body_len + 3 > total:
        raise RecordFormatError(f"body length {body_len} does not fit in total size {total}")
    topic_len_pos = body_pos + body_len
    if magic == MAGIC_V1:
        topic_len = buf[off + topic_len_pos]
        topic_pos = topic_len_pos + 1
    else:
        (topic_len,) = _U16.unpack_from(buf, off + topic_len_pos)
        topic_pos = topic_len_pos + 2
    props_len_pos = topic_pos + topic_len
    if props_len_pos + 2 > total:
        raise RecordFormatError(f"topic length {topic_len} does not fit in total size {total}")
    (props_len,) = _U16.unpack_from(buf, off + props_len_pos)
    props_pos = props_len_pos + 2
    if props_pos + props_len != total:
        raise RecordFormatError(
            f"fields add up to {props_pos + props_len} bytes but TOTALSIZE is {total}"
        )
    try:
        topic = str(buf[off + topic_pos : off + topic_pos + topic_len], "utf-8")
    except UnicodeDecodeError as exc:
        raise RecordFormatError(f"topic is not UTF-8: {exc}") from None
    return RecordHeader(
        total_size=total,
        magic=magic,
        body_crc=crc,
        queue_id=qid,
        queue_offset=qoff,
        physical_offset=phys,
        sysflag=sysflag,
        store_timestamp=store_ts,
        body_pos=body_pos,
        body_len=body_len,
        topic=topic,
        properties_pos=props_pos,
        properties_len=props_len,
    )


def check_body_crc(buf: bytes | bytearray | memoryview, off: int, header: RecordHeader) -> bool:
    start = off + header.body_pos
    return body_crc(memoryview(buf)[start : start + header.body_len]) == header.body_crc


def parse_properties(raw: bytes | bytearray | memoryview) -> dict[str, str]:
    """Decode ``name\\x01value\\x02`` pairs (MessageDecoder.string2messageProperties)."""
    text = bytes(raw).decode("utf-8", errors="replace")
    props: dict[str, str] = {}
    for item in text.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name:
            props[name] = value
    return props


def read_store_timestamp(buf: bytes | bytearray | memoryview, off: int = 0) -> int:
    """STORETIMESTAMP of the record at ``off`` (needs :data:`STORE_TIMESTAMP_PROBE` bytes)."""
    (sysflag,) = _I32.unpack_from(buf, off + SYSFLAG_POS)
    (ts,) = _I64.unpack_from(buf, off + store_timestamp_pos(sysflag))
    return ts


def patch_int64(buf: bytearray, pos: int, value: int) -> None:
    _I64.pack_into(buf, pos, value)


def read_int32(buf: bytes | bytearray | memoryview, pos: int) -> int:
    return _I32.unpack_from(buf, pos)[0]
