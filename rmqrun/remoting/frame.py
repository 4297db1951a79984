"""The remoting frame: ``RemotingCommand`` and its two header serializations.

A frame on the wire::

    int32 BE  length         4 + header length + body length (excludes itself)
    int32 BE  (type << 24) | header length       type 0 = JSON, 1 = ROCKETMQ
    bytes     header
    bytes     body

Both serializations can appear on any connection (a binary request can get a
JSON answer when the broker held it for a long poll), so decoding always looks
at the type byte of the frame in hand. This module does no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Iterator

from rmqrun.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    VERSION_V4_9_8,
    request_name,
    response_name,
)
from rmqrun.remoting.errors import FrameTooLargeError, ProtocolError

#: The broker's own limit (NettyDecoder's frameMaxLength), the default here too.
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

_INT = struct.Struct(">i")
_PREFIX = struct.Struct(">iI")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_BIN_SHORT = struct.Struct(">h")


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


_MARK = struct.Struct(">I")
#: the type byte's values as plain ints (a compare with an IntEnum member is a Python-level call per frame)
_JSON, _ROCKETMQ = int(SerializeType.JSON), int(SerializeType.ROCKETMQ)


@dataclass(slots=True)
class RemotingCommand:
    """One request or response.

    ``ext_fields`` always holds strings: RocketMQ's Java side turns every
    custom header field into a string, and the C++ client's numbers are
    normalised to strings on decode, so typed headers parse one way only.
    """

    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = "PYTHON"
    version: int = VERSION_V4_9_8
    serialize_type: SerializeType = SerializeType.JSON
    #: Java writes ``"extFields":{}`` for a response built from an empty custom
    #: header and leaves the key out otherwise; kept so re-encoding is exact.
    empty_ext_present: bool = False
    #: ``ext_fields`` already written as JSON (the text the encoder would write), by a sender that keeps a
    #: template of them (the puller's pull header); None: encoded from ``ext_fields``. Whoever changes
    #: ``ext_fields`` afterwards (the request signer) sets it to None.
    ext_text: str | None = field(default=None, repr=False, compare=False)
    #: a request its connection writes at once, with the frames queued before it in this loop turn, instead of at
    #: the turn's end: local to this process, never on the wire (a POP consumer's pops: docs/benchmarks/pop/history.md)
    send_now: bool = field(default=False, repr=False, compare=False)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(self, code: int = 0, remark: str | None = None, ext_fields: dict[str, str] | None = None,
                 body: bytes | None = None) -> "RemotingCommand":
        """A response to this request: same opaque and serialization, response flag set."""
        return RemotingCommand(
            code=code,
            ext_fields=ext_fields or {},
            body=body,
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            language="JAVA",
            version=VERSION_V4_9_8,
            serialize_type=self.serialize_type,
        )

    def describe(self) -> str:
        kind = "response" if self.is_response else "request"
        name = response_name(self.code) if self.is_response else request_name(self.code)
        return f"{kind} {name}({self.code}) opaque={self.opaque}"


# --------------------------------------------------------------------------- encode

def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return _encode_binary_header(cmd)
    return _encode_json_header(cmd)


#: json.dumps with these options builds an encoder on every call; one is enough (same text, fewer calls)
_JSON_HEADER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
encode_basestring = json.encoder.encode_basestring  # what the encoder writes a str as (ensure_ascii off)
#: the C encoder ``_JSON_HEADER.iterencode`` would make, made once: without a circular-reference table (a frame
#: header is a flat dict of ints and strings, and ``ext_fields`` one of strings: it cannot hold itself), so one
#: encoder serves every frame instead of one built per frame
_C_HEADER_ENCODER = None if _c_make_encoder is None else _c_make_encoder(
    None, _JSON_HEADER.default, json.encoder.encode_basestring, None, _JSON_HEADER.key_separator,
    _JSON_HEADER.item_separator, _JSON_HEADER.sort_keys, _JSON_HEADER.skipkeys, _JSON_HEADER.allow_nan)


def dump_header(obj: dict[str, object]) -> str:
    """``_JSON_HEADER.encode(obj)`` for a dict: the same text from the C encoder made once (above), called without
    the Python steps around it."""
    if _C_HEADER_ENCODER is None:  # pragma: no cover - an interpreter without json's C speedups
        return _JSON_HEADER.encode(obj)
    return "".join(_C_HEADER_ENCODER(obj, 0))


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    # fastjson writes the top-level keys in alphabetical order and leaves out
    # nulls; doing the same keeps our frames byte-identical to a Java client's.
    ext_text = cmd.ext_text
    if ext_text is not None and cmd.remark is None and cmd.ext_fields:
        # the same text as below, the ext fields spliced in as the sender wrote them
        return (f'{{"code":{int(cmd.code)},"extFields":{ext_text},"flag":{int(cmd.flag)},"language":'
                f'{encode_basestring(cmd.language)},"opaque":{int(cmd.opaque)},"serializeTypeCurrentRPC":"JSON",'
                f'"version":{int(cmd.version)}}}').encode("utf-8")
    obj: dict[str, object] = {"code": cmd.code}
    if cmd.ext_fields or cmd.empty_ext_present:
        obj["extFields"] = cmd.ext_fields
    obj["flag"] = cmd.flag
    obj["language"] = cmd.language
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return dump_header(obj).encode("utf-8")


def _language_byte(name: str) -> int:
    try:
        return LanguageCode[name].value
    except KeyError:
        return LanguageCode.OTHER.value


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    parts = [_BIN_FIXED.pack(cmd.code, _language_byte(cmd.language), cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts.append(_INT.pack(len(remark)))
    parts.append(remark)
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        if value is None:
            continue
        k = key.encode("utf-8")
        v = str(value).encode("utf-8")
        ext += _BIN_SHORT.pack(len(k))
        ext += k
        ext += _INT.pack(len(v))
        ext += v
    parts.append(_INT.pack(len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included."""
    header = encode_header(cmd)
    body = cmd.body or b""
    if len(header) > 0xFFFFFF:
        raise ProtocolError(f"header of {len(header)} bytes does not fit the 24-bit length field")
    return b"".join((
        _PREFIX.pack(4 + len(header) + len(body), (int(cmd.serialize_type) << 24) | len(header)),
        header,
        body,
    ))


# --------------------------------------------------------------------------- decode

def check_length(length: int, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
    """Validate a length prefix before reading that many bytes."""
    if length < 4 or length > max_frame_size:
        raise FrameTooLargeError(
            f"frame length {length} outside the allowed range 4..{max_frame_size}")


def decode(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix."""
    view = memoryview(frame)
    if len(view) < 4:
        raise ProtocolError(f"frame of {len(view)} bytes is shorter than its header-length field")
    (mark,) = _MARK.unpack_from(view, 0)
    ser = mark >> 24
    header_len = mark & 0xFFFFFF
    if header_len > len(view) - 4:
        raise ProtocolError(f"header length {header_len} exceeds the frame ({len(view) - 4} bytes left)")
    header = view[4:4 + header_len]
    body = bytes(view[4 + header_len:]) or None
    if ser == _JSON:
        cmd = _decode_json_header(header)
    elif ser == _ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise ProtocolError(f"unknown serialize type {ser}")
    cmd.body = body
    return cmd


def decode_with_prefix(data: bytes | bytearray | memoryview,
                       max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> RemotingCommand:
    """Decode exactly one whole frame, length prefix included."""
    view = memoryview(data)
    if len(view) < 4:
        raise ProtocolError("truncated frame: no length prefix")
    (length,) = _INT.unpack_from(view, 0)
    check_length(length, max_frame_size)
    if length != len(view) - 4:
        raise ProtocolError(f"length prefix says {length} bytes but {len(view) - 4} follow")
    return decode(view[4:])


def iter_frames(buffer: bytearray, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> Iterator[RemotingCommand]:
    """Decode every complete frame at the start of ``buffer`` and remove them from it.

    A trailing partial frame stays in the buffer for the next call.
    """
    pos = 0
    try:
        while len(buffer) - pos >= 4:
            (length,) = _INT.unpack_from(buffer, pos)
            check_length(length, max_frame_size)
            if len(buffer) - pos - 4 < length:
                break
            yield decode(memoryview(buffer)[pos + 4:pos + 4 + length])
            pos += 4 + length
    finally:
        del buffer[:pos]


_STR_ONLY = {str}


def _ext_value(value: object) -> str:
    # The C++ client sends some fields as JSON numbers; booleans as JSON
    # booleans would come out of str() as "True", Java writes "true".
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


#: ``json.loads(text)`` is ``raw_decode`` between two whitespace scans (regex matches at the start and the end);
#: a frame's JSON header is one object with nothing around it, which ``raw_decode`` alone reads (about half the
#: cost for a small header). Anything else (whitespace around it, a BOM, extra data, bad JSON) goes to
#: ``json.loads``, which reads or refuses it exactly as before.
_RAW_DECODE = json.JSONDecoder().raw_decode


def _loads(text: str) -> object:
    try:
        obj, end = _RAW_DECODE(text)
    except ValueError:
        return json.loads(text)
    return obj if end == len(text) else json.loads(text)


def _decode_json_header(header: memoryview) -> RemotingCommand:
    try:
        obj = _loads(bytes(header).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"invalid JSON header: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError("JSON header is not an object")
    try:
        code = int(obj["code"])
        ext = obj.get("extFields") or {}
        if not isinstance(ext, dict):
            raise ProtocolError("extFields is not an object")
        remark = obj.get("remark")
        if not set(map(type, ext.values())) <= _STR_ONLY:  # a Java peer sends strings only: kept as parsed
            ext = {str(k): _ext_value(v) for k, v in ext.items()}
        return RemotingCommand(
            code=code,
            ext_fields=ext,
            opaque=int(obj.get("opaque", 0)),
            flag=int(obj.get("flag", 0)),
            remark=None if remark is None else str(remark),
            language=str(obj.get("language", "JAVA")),
            version=int(obj.get("version", 0)),
            serialize_type=SerializeType.JSON,
            empty_ext_present="extFields" in obj and not ext,
        )
    except ProtocolError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed JSON header: {exc!r}") from exc


def _decode_binary_header(header: memoryview) -> RemotingCommand:
    n = len(header)
    try:
        code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
        pos = _BIN_FIXED.size
        (remark_len,) = _INT.unpack_from(header, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > n:
            raise ProtocolError(f"remark length {remark_len} outside the header")
        remark = bytes(header[pos:pos + remark_len]).decode("utf-8") if remark_len else None
        pos += remark_len
        (ext_len,) = _INT.unpack_from(header, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len > n:
            raise ProtocolError(f"extFields length {ext_len} outside the header")
        end = pos + ext_len
        ext: dict[str, str] = {}
        while pos < end:
            (klen,) = _BIN_SHORT.unpack_from(header, pos)
            pos += 2
            if klen < 0 or pos + klen > end:
                raise ProtocolError("extFields key runs past its table")
            key = bytes(header[pos:pos + klen]).decode("utf-8")
            pos += klen
            (vlen,) = _INT.unpack_from(header, pos)
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise ProtocolError("extFields value runs past its table")
            ext[key] = bytes(header[pos:pos + vlen]).decode("utf-8")
            pos += vlen
    except struct.error as exc:
        raise ProtocolError(f"truncated binary header: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"binary header text is not UTF-8: {exc}") from exc
    try:
        language = LanguageCode(lang).name
    except ValueError:
        language = "OTHER"
    return RemotingCommand(
        code=code,
        ext_fields=ext,
        opaque=opaque,
        flag=flag,
        remark=remark,
        language=language,
        version=version,
        serialize_type=SerializeType.ROCKETMQ,
    )
