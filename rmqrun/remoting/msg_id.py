"""Broker addresses and message ids: ``host:port`` text, offset message ids, a record's host fields.

An offset message id is the store host's IP and port and the commit-log
offset in hex (16 or 28 bytes: IPv4 or IPv6); it is how a message is looked
up or sent back by id. No I/O.
"""

from __future__ import annotations

import functools
import socket
import struct

from rmqrun.remoting.errors import ProtocolError


def host_bytes(host: str) -> bytes:
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
    return (host_bytes(host) + struct.pack(">iq", port, commit_log_offset)).hex().upper()


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


def fmt_host(raw: bytes | memoryview, port: int) -> str:
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
