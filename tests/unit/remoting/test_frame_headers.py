"""Frame headers in both codecs: the binary (ROCKETMQ) one round trip and every way a header can be bad.

RocketMQ clients may send either serialize type; a malformed header must be a
:class:`ProtocolError` saying what is wrong (the connection then drops that
peer), never an IndexError or a silently wrong command.
"""

from __future__ import annotations

import json
import struct

import pytest

from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand, SerializeType, decode, encode

_FIXED = struct.Struct(">hbhii")


def _binary(*, remark: bytes = b"", ext: bytes = b"", remark_len: int | None = None,
            ext_len: int | None = None, lang: int = 0) -> bytes:
    """A frame (without the length prefix) whose binary header is built field by field."""
    header = (_FIXED.pack(10, lang, 399, 7, 0) + struct.pack(">i", len(remark) if remark_len is None else remark_len)
              + remark + struct.pack(">i", len(ext) if ext_len is None else ext_len) + ext)
    return struct.pack(">I", (int(SerializeType.ROCKETMQ) << 24) | len(header)) + header


def _entry(key: bytes, value: bytes, *, klen: int | None = None, vlen: int | None = None) -> bytes:
    return (struct.pack(">h", len(key) if klen is None else klen) + key
            + struct.pack(">i", len(value) if vlen is None else vlen) + value)


def test_a_binary_header_round_trips() -> None:
    cmd = RemotingCommand(code=11, ext_fields={"topic": "T", "queueId": "3", "skipped": None},  # type: ignore[dict-item]
                          body=b"payload", opaque=42, flag=1, remark="é remark", language="CPP", version=401,
                          serialize_type=SerializeType.ROCKETMQ)
    frame = encode(cmd)
    back = decode(frame[4:])
    assert (back.code, back.opaque, back.flag, back.remark, back.language, back.version, back.body) == (
        11, 42, 1, "é remark", "CPP", 401, b"payload")
    assert back.ext_fields == {"topic": "T", "queueId": "3"}, "a None field is left out"
    assert back.serialize_type is SerializeType.ROCKETMQ


def test_unknown_language_names_and_bytes_become_other() -> None:
    cmd = RemotingCommand(code=1, language="COBOL", serialize_type=SerializeType.ROCKETMQ)
    assert decode(encode(cmd)[4:]).language == "OTHER"
    assert decode(_binary(lang=99)).language == "OTHER"


@pytest.mark.parametrize(("frame", "words"), [
    (_binary(remark=b"abc", remark_len=50), "remark length 50 outside the header"),
    (_binary(remark_len=-1), "remark length -1 outside the header"),
    (_binary(ext=b"", ext_len=9), "extFields length 9 outside the header"),
    (_binary(ext=_entry(b"key", b"v", klen=40)), "extFields key runs past its table"),
    (_binary(ext=_entry(b"key", b"v", vlen=40)), "extFields value runs past its table"),
    (_binary(ext=b"\x00"), "truncated binary header"),
    (_binary(remark=b"\xff\xfe"), "binary header text is not UTF-8"),
    (struct.pack(">I", (1 << 24) | 3) + b"\x00\x0a\x00", "truncated binary header"),
])
def test_a_malformed_binary_header_is_a_protocol_error(frame: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        decode(frame)


def _json_frame(obj: object) -> bytes:
    header = json.dumps(obj).encode()
    return struct.pack(">I", len(header)) + header


def test_json_ext_values_are_normalised_to_java_strings() -> None:
    cmd = decode(_json_frame({"code": 10, "extFields": {"n": 5, "b": True, "f": False, "z": None, "s": "x"}}))
    assert cmd.ext_fields == {"n": "5", "b": "true", "f": "false", "z": "", "s": "x"}
    assert cmd.language == "JAVA" and cmd.opaque == 0


@pytest.mark.parametrize(("frame", "words"), [
    (struct.pack(">I", 3) + b"{x}", "invalid JSON header"),
    (struct.pack(">I", 2) + b"\xff\xfe", "invalid JSON header"),
    (_json_frame([1, 2]), "JSON header is not an object"),
    (_json_frame({"code": 1, "extFields": [1]}), "extFields is not an object"),
    (_json_frame({"opaque": 1}), "malformed JSON header"),
    (_json_frame({"code": "ten"}), "malformed JSON header"),
    (struct.pack(">I", (7 << 24) | 2) + b"{}", "unknown serialize type 7"),
    (struct.pack(">I", 99) + b"{}", "header length 99 exceeds the frame"),
    (b"\x00\x00", "shorter than its header-length field"),
])
def test_a_malformed_frame_is_a_protocol_error(frame: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        decode(frame)
