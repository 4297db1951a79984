"""The stored-message record layout (FACTS §2.6), read-only helpers, and the record checksum.

Encoding a record is the codec's job (``rmqrun.remoting.message``); the store only
needs to *check* records, patch the three fields it owns (queue offset, physical
offset, store timestamp) and find a few fields again during recovery. Offsets below
are byte positions inside a record; all integers are big-endian.

The record checksum ("sealed" records)
--------------------------------------
RocketMQ's record carries only a CRC of the body, so a torn record whose topic or
properties are garbage still parses. The store therefore seals every record it
writes with a CRC32 over the *whole* record, and it must do so without changing
what a client receives (pull bodies are the RocketMQ records, byte for byte) or
where records land (commit-log offsets, and so message ids, match a real 4.9.8
broker's for the same traffic: the conformance tests compare them). An extra field
or a trailer would shift every later offset, so the checksum goes where the record
already holds something redundant: PHYSICALOFFSET, which is by definition the
record's own position in the commit log.

On disk, a sealed record's PHYSICALOFFSET holds :data:`SEAL_TAG` in its high 32
bits and, in its low 32 bits, ``crc32`` of the record *as served* (that is, with
PHYSICALOFFSET = its position). Every read (pull, view by id, send-back) checks the
CRC and writes the position back before the record leaves the store; recovery checks
it for every record after the checkpoint. Because the CRC is computed over the
position too, a record found at the wrong place fails like a torn one.

Versioning: the tag has its top bit set, so the field read as a signed 64-bit
position is negative and can never be mistaken for a real one; a record whose field
equals its position is an unsealed record written before the checksum existed and
is checked the old way (structure, position and body CRC). So older data
directories open and keep working, and the format is told record by record. The
low byte of the tag is the seal version. Opening a sealed directory with an older
rmqrun is not supported: it would see the tags as wrong positions and cut the log.
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
_I64_PACK = _I64.pack_into


#: PHYSICALOFFSET's high 32 bits in a sealed record (top bit set: never a position; low byte: version 1).
SEAL_TAG = 0xC5E1_0001
_SEAL = struct.Struct(">II")
_SEAL_UNPACK = _SEAL.unpack_from
_crc32 = zlib.crc32


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


def record_crc(buf: bytes | bytearray | memoryview, off: int, total: int, pos: int) -> int:
    """CRC32 of the ``total``-byte record at ``buf[off]`` as served: PHYSICALOFFSET counted as ``pos``."""
    view = memoryview(buf)
    crc = zlib.crc32(view[off : off + PHYSICAL_OFFSET_POS])
    crc = zlib.crc32(_I64.pack(pos), crc)
    return zlib.crc32(view[off + PHYSICAL_OFFSET_POS + 8 : off + total], crc)


def seal(rec: bytearray, pos: int) -> None:
    """Turn a record whose fields are final (PHYSICALOFFSET = ``pos``) into its on-disk form."""
    _SEAL.pack_into(rec, PHYSICAL_OFFSET_POS, SEAL_TAG, zlib.crc32(rec))


def unseal(buf: bytearray, off: int, pos: int) -> None:
    """Give the record at ``buf[off]`` (read from disk) back its PHYSICALOFFSET."""
    _I64.pack_into(buf, off + PHYSICAL_OFFSET_POS, pos)


def unseal_span(buf: bytearray, span: list[tuple[int, int]], out: list[bytes | memoryview],
                start: int = 0) -> list[int]:
    """Check and unseal, in place, the records ``span`` = [(position, size), ...] (in position order) that
    ``buf`` holds, read from commit log position ``start``: each at ``buf[position - start]``, with or
    without bytes between them. Appends each good record to ``out`` as a memoryview; returns the positions
    of records that failed (not appended).

    The read path's :func:`stored_problem` + :func:`unseal` in one loop: one CRC call per
    record over the record itself (after putting its position back), no copies.
    """
    view = memoryview(buf)
    end = len(buf)
    bad: list[int] = []
    field = PHYSICAL_OFFSET_POS
    for pos, size in span:
        off = pos - start
        if off + size > end:
            break  # short read: the record is gone (cannot happen without deletion)
        tag, crc = _SEAL_UNPACK(buf, off + field)
        rec = view[off : off + size]
        if tag == SEAL_TAG:
            _I64_PACK(buf, off + field, pos)
            ok = _crc32(rec) == crc
        else:
            ok = (tag << 32) | crc == pos
        if ok:
            out.append(rec)
        else:
            bad.append(pos)
    return bad


def is_sealed(physical_offset_field: int) -> bool:
    """Whether a PHYSICALOFFSET field (as parsed, signed) holds a seal rather than a position."""
    return (physical_offset_field >> 32) & 0xFFFFFFFF == SEAL_TAG


def stored_problem(buf: bytes | bytearray | memoryview, off: int, total: int, pos: int, *,
                   check_crc: bool = True) -> str | None:
    """Why the ``total``-byte record at ``buf[off]`` is not the record stored at ``pos`` (None: it is).

    A sealed record must carry the CRC of its bytes at that position (skipped with
    ``check_crc=False`` for trusted regions); an unsealed (pre-checksum) one must name
    ``pos`` as its PHYSICALOFFSET. The caller has checked the structure
    (:func:`parse_header`) or trusts it; unsealed records also need
    :func:`check_body_crc` for the body.
    """
    tag, crc = _SEAL.unpack_from(buf, off + PHYSICAL_OFFSET_POS)
    if tag == SEAL_TAG:
        if check_crc and record_crc(buf, off, total, pos) != crc:
            return f"record at {pos}: record CRC mismatch"
        return None
    if (tag << 32) | crc != pos:
        return f"record at {pos} says PHYSICALOFFSET={_I64.unpack_from(buf, off + PHYSICAL_OFFSET_POS)[0]}"
    return None


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
