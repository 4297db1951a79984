"""What ``rmqrun read`` accepts and prints: the ``--from`` / ``--to`` forms, the text and JSON lines, raw bodies.

Kept apart from the command so both are plain functions tested without a broker.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rmqrun.model import Message
from rmqrun.time_text import iso_ms

#: a bare integer at least this large is epoch milliseconds (2001-09-09 onwards), a smaller one an offset
EPOCH_MS_FLOOR = 10**12
#: the last millisecond a date can name (9999-12-31T23:59:59.999Z): a larger "time" is a typo, not a moment
MAX_EPOCH_MS = 253402300799999
PREVIEW_CHARS = 120


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where each queue starts: ``kind`` is earliest, latest, offset or time (``value`` the offset / epoch ms)."""

    kind: str
    value: int = 0

    def describe(self) -> str:
        if self.kind == "offset":
            return f"offset {self.value}"
        if self.kind == "time":
            return f"messages stored from {iso_ms(self.value)}"
        return self.kind


def parse_from(text: str) -> StartAt:
    """``earliest``, ``latest``, an offset, or a time (ISO-8601, or epoch ms).

    A bare integer below 10^12 is an offset, from 10^12 up epoch milliseconds;
    ``offset:N`` and ``time:T`` say which explicitly. An ISO time without a zone
    is local time (as ``date`` prints it). Raises ValueError with what is accepted.
    """
    return _parse_position(text, "--from", ("earliest", "latest"))


def parse_to(text: str) -> StartAt:
    """Where ``--to`` stops each queue: ``latest`` (the end when the read starts), an offset
    (the first one *not* printed) or a time (messages stored from then on are not printed).
    The forms are those of :func:`parse_from`; ``earliest`` would print nothing and is refused."""
    return _parse_position(text, "--to", ("latest",))


def _parse_position(text: str, flag: str, words: tuple[str, ...]) -> StartAt:
    raw = text.strip()
    low = raw.lower()
    if low in words:
        return StartAt(low)
    kind = None
    if low.startswith("offset:"):
        kind, raw = "offset", raw[7:].strip()
    elif low.startswith("time:"):
        kind, raw = "time", raw[5:].strip()
    if re.fullmatch(r"\d+", raw):
        number = int(raw)
        if kind is None:
            kind = "time" if number >= EPOCH_MS_FLOOR else "offset"
        if kind == "time" and number > MAX_EPOCH_MS:
            raise ValueError(f"{flag} {text!r} is epoch milliseconds after the year 9999; give a time such as "
                             "1732435200000 or 2024-11-24T08:00:00Z, or offset:N for a queue offset")
        return StartAt(kind, number)
    if kind != "offset" and raw:
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith(("Z", "z")) else raw)
        except ValueError:
            pass
        else:
            if when.tzinfo is None:
                when = when.astimezone()
            return StartAt("time", int(when.timestamp() * 1000))
    raise ValueError(f"{flag} {text!r} is not {', '.join(words)}, an offset (e.g. 42), epoch milliseconds "
                     "(e.g. 1732435200000) or an ISO-8601 time (e.g. 2024-11-24T08:00:00Z)")


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def escape(text: str) -> str:
    """Printable characters as they are; control characters, and bytes that were not UTF-8
    (surrogate-escaped), as backslash escapes, so one message stays on one line."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)


def preview(body: bytes, limit: int = PREVIEW_CHARS) -> str:
    """The body's first ``limit`` characters, escaped, then ``… (N bytes)`` when there is more.

    Cut first, then escape: only the first ``limit + 1`` characters are decoded and
    escaped (a character is at most 4 UTF-8 bytes, an escape never shortens one), so
    a 1 MiB body costs what a 500-byte one does. The result is exactly the escape of
    the whole body cut at ``limit``.
    """
    head = body[:(limit + 1) * 4]
    text = escape(head.decode("utf-8", errors="surrogateescape")[:limit + 1])
    if len(text) > limit:
        return f"{text[:limit]}… ({len(body)} bytes)"
    return text


def text_line(msg: Message) -> str:
    """One readable line: where, which message, when, and the start of the body."""
    parts = [
        f"{msg.broker_name}:{msg.queue_id}@{msg.queue_offset}",
        f"id={msg.msg_id}",
        f"tags={escape(msg.tags) if msg.tags is not None else '-'}",
        f"keys={escape(msg.properties['KEYS']) if 'KEYS' in msg.properties else '-'}",
        f"stored={iso_ms(msg.store_timestamp)}",
        f"body={preview(msg.body)}",
    ]
    return " ".join(parts)


def json_line(msg: Message) -> str:
    """Every field of the message; the body as UTF-8 text when it is, else base64 (``body_encoding`` says)."""
    try:
        body, encoding = msg.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(msg.body).decode("ascii"), "base64"
    record: dict[str, Any] = {
        "topic": msg.topic,
        "broker": msg.broker_name,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "msg_id": msg.msg_id,
        "offset_msg_id": msg.offset_msg_id,
        "tags": msg.tags,
        "keys": msg.properties.get("KEYS"),
        "properties": msg.properties,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "born_host": msg.born_host,
        "store_host": msg.store_host,
        "reconsume_times": msg.reconsume_times,
        "commit_log_offset": msg.commit_log_offset,
        "flag": msg.flag,
        "sys_flag": msg.sys_flag,
        "body_crc": msg.body_crc,
        "body_size": len(msg.body),
        "body_encoding": encoding,
        "body": body,
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


_LENGTH = struct.Struct(">I")


def body_record(msg: Message) -> bytes:
    """``--format body``: the body as stored, then a newline (for ``| grep``, ``| jq`` of JSON bodies)."""
    return msg.body + b"\n"


def length_prefixed_record(msg: Message) -> bytes:
    """``--format length-prefixed``: the body's length as 4 bytes big-endian, then the body.

    Binary-safe where ``body`` is not (a body holding a newline reads as two there);
    what ``DataInputStream.readInt`` + ``readFully`` or ``struct.unpack(">I")`` read back.
    """
    return _LENGTH.pack(len(msg.body)) + msg.body
