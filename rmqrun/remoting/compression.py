"""Message body compression: which of Java's codecs a sysFlag names, and inflating with it.

A compressed body carries the COMPRESSED sysFlag bit and, since 5.x, the
codec in bits 8..10 (``MessageSysFlag.getCompressionType``); a 4.x producer
writes no type bits and means zlib. LZ4 and ZSTD are imported on first use:
only 5.x producers that chose them need the libraries.
"""

from __future__ import annotations

import zlib

from rmqrun.remoting.errors import ProtocolError

COMPRESSION_MASK = 0x700  # bits 8..10; 0 and 3 both mean zlib (4.x compatibility)
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

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


def decompress(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer gave it, whichever of Java's three codecs compressed it."""
    kind = compression_type(sys_flag)
    try:
        return _INFLATERS[kind](body)
    except zlib.error as exc:
        raise ProtocolError(f"{kind} body does not inflate: {exc}") from exc
