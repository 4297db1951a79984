"""The SEND_BATCH_MESSAGE body: compact records of body and properties, one per message.

Not the stored-record layout (no hosts, offsets or topic: the request
header carries the topic); the broker turns each into a stored record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable

from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message_props import properties_to_string, string_to_properties

_SHORT = struct.Struct(">h")
_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen


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
