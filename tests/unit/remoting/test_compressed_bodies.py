"""Bodies compressed the way RocketMQ 5.x producers compress them: ZLIB, LZ4, ZSTD.

The flag bits and the frame formats come from apache/rocketmq 5.x:
``MessageSysFlag`` (COMPRESSED = bit 0; the compression type in bits 8..10:
LZ4 = 1 << 8, ZSTD = 2 << 8, ZLIB = 3 << 8; no type bits = a 4.x producer = ZLIB)
and ``common/compression``: ``ZlibCompressor`` writes a zlib stream (java.util.zip
Deflater), ``Lz4Compressor`` an LZ4 *frame* (lz4-java LZ4FrameOutputStream, 4 MiB
independent blocks), ``ZstdCompressor`` a zstd frame without content size
(zstd-jni ZstdOutputStream).
"""

from __future__ import annotations

import os
import zlib

import lz4.frame
import pytest
import zstandard

from rmqrun.remoting import compression, message, msg_id
from rmqrun.remoting.errors import ProtocolError

COMPRESSED = 0x1
LZ4_TYPE, ZSTD_TYPE, ZLIB_TYPE = 1 << 8, 2 << 8, 3 << 8


def java_lz4(body: bytes) -> bytes:
    return lz4.frame.compress(body, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                              content_checksum=False, store_size=False)


def java_zstd(body: bytes, level: int = 5) -> bytes:
    c = zstandard.ZstdCompressor(level=level, write_content_size=False).compressobj()
    return c.compress(body) + c.flush()


def java_zlib(body: bytes, level: int = 5) -> bytes:
    return zlib.compress(body, level)


CODECS = {"LZ4": (LZ4_TYPE, java_lz4), "ZSTD": (ZSTD_TYPE, java_zstd), "ZLIB": (ZLIB_TYPE, java_zlib)}
BODIES = [b"", b"x", "héllo wörld ".encode() * 500, os.urandom(3000), bytes(range(256)) * 40000]


def test_flag_bits_match_the_java_table() -> None:
    assert message.SYSFLAG_COMPRESSED == COMPRESSED
    assert compression.COMPRESSION_LZ4 == LZ4_TYPE
    assert compression.COMPRESSION_ZSTD == ZSTD_TYPE
    assert compression.COMPRESSION_ZLIB == ZLIB_TYPE
    assert compression.COMPRESSION_MASK == 0x7 << 8
    table = {flag: compression.compression_type(flag | COMPRESSED) for flag in (0, LZ4_TYPE, ZSTD_TYPE, ZLIB_TYPE)}
    assert table == {0: "ZLIB", LZ4_TYPE: "LZ4", ZSTD_TYPE: "ZSTD", ZLIB_TYPE: "ZLIB"}
    for value in range(4, 8):
        with pytest.raises(ProtocolError, match=f"unknown compression type {value}"):
            compression.compression_type(COMPRESSED | value << 8)


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("body", BODIES, ids=lambda b: f"{len(b)}B")
def test_decodes_each_codec(codec: str, body: bytes) -> None:
    flag, compress = CODECS[codec]
    raw = message.encode_stored(topic="T", body=compress(body), sys_flag=COMPRESSED | flag,
                                properties={"KEYS": "k"})
    msg, end = message.decode_message(raw)
    assert end == len(raw)
    assert msg.body == body
    assert msg.sys_flag & compression.COMPRESSION_MASK == flag
    # without decompression the stored bytes come back as they are
    assert message.decode_message(raw, decompress=False)[0].body == compress(body)


def test_4x_zlib_without_type_bits() -> None:
    raw = message.encode_stored(topic="T", body=java_zlib(b"old producer"), sys_flag=COMPRESSED)
    assert message.decode_message(raw)[0].body == b"old producer"


def test_type_bits_without_the_compressed_bit_leave_the_body_alone() -> None:
    raw = message.encode_stored(topic="T", body=b"plain", sys_flag=LZ4_TYPE)
    assert message.decode_message(raw)[0].body == b"plain"


def test_lz4_with_content_checksum_and_several_frames() -> None:
    body = b"abc" * 100_000
    one = lz4.frame.compress(body, content_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    raw = message.encode_stored(topic="T", body=one, sys_flag=COMPRESSED | LZ4_TYPE)
    assert message.decode_message(raw)[0].body == body
    two = java_zstd(b"first ") + java_zstd(b"second")
    raw = message.encode_stored(topic="T", body=two, sys_flag=COMPRESSED | ZSTD_TYPE)
    assert message.decode_message(raw)[0].body == b"first second"


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "other-codec"])
def test_corrupt_bodies_are_protocol_errors(codec: str, damage: str) -> None:
    flag, compress = CODECS[codec]
    good = compress(b"payload " * 200)
    body = {"truncated": good[:len(good) // 2], "garbage": b"\x00garbage\xff" * 5, "empty": b"",
            "other-codec": (java_zstd if codec != "ZSTD" else java_lz4)(b"payload")}[damage]
    raw = message.encode_stored(topic="T", body=body, sys_flag=COMPRESSED | flag)
    with pytest.raises(ProtocolError, match=codec):
        message.decode_message(raw)


def test_unknown_type_is_a_protocol_error() -> None:
    raw = message.encode_stored(topic="T", body=java_zlib(b"x"), sys_flag=COMPRESSED | 5 << 8)
    with pytest.raises(ProtocolError, match="unknown compression type 5"):
        message.decode_message(raw)


def test_record_ids_read_without_the_body_or_properties() -> None:
    raw = message.encode_stored(topic="Orders", body=b"\x00not lz4", sys_flag=COMPRESSED | LZ4_TYPE,
                                properties="KEYS\x01\xff", queue_id=3, queue_offset=17, commit_log_offset=4096,
                                store_host="10.1.2.3:10911", reconsume_times=2)
    # non-UTF-8 properties: the record's fields still name it
    raw = raw.replace("\xff".encode(), b"\xff\xfe")  # same length, no longer UTF-8
    with pytest.raises(ProtocolError):
        message.decode_message(raw)
    ids = message.record_ids(raw)
    assert (ids.topic, ids.queue_id, ids.queue_offset, ids.commit_log_offset, ids.reconsume_times) == \
        ("Orders", 3, 17, 4096, 2)
    assert ids.store_host == "10.1.2.3:10911"
    assert ids.offset_msg_id == msg_id.offset_msg_id("10.1.2.3:10911", 4096)
