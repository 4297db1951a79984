"""A stored-message record builder for the store tests, written from FACTS §2.6.

Deliberately independent of ``rmqrun.remoting.message`` (the production codec):
``test_store_records.py`` checks that both produce the same bytes, so the store and
the codec cannot silently disagree about the layout.
"""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20


def java_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (h * 31 + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _host(addr: tuple[str, int]) -> tuple[bytes, bool]:
    host, port = addr
    v6 = ":" in host
    raw = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, host)
    return raw + struct.pack(">i", port), v6


def build_record(
    topic: str,
    queue_id: int,
    body: bytes,
    *,
    properties: dict[str, str] | None = None,
    tags: str | None = None,
    flag: int = 0,
    sysflag: int = 0,
    born_ts: int = 1_700_000_000_000,
    store_ts: int = 1_700_000_000_001,
    born_host: tuple[str, int] = ("10.0.0.1", 50000),
    store_host: tuple[str, int] = ("10.0.0.2", 10911),
    reconsume_times: int = 0,
    magic: int | None = None,
    bad_crc: bool = False,
) -> bytearray:
    props = dict(properties or {})
    if tags is not None:
        props["TAGS"] = tags
    props_b = "\x02".join(f"{k}\x01{v}" for k, v in props.items()).encode()
    topic_b = topic.encode()
    if magic is None:
        magic = MAGIC_V1 if len(topic_b) <= 127 else MAGIC_V2
    born, born_v6 = _host(born_host)
    store, store_v6 = _host(store_host)
    sysflag = (sysflag & ~(BORNHOST_V6 | STOREHOST_V6)) | (BORNHOST_V6 if born_v6 else 0) | (STOREHOST_V6 if store_v6 else 0)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    if bad_crc:
        crc ^= 1
    topic_field = (struct.pack(">B", len(topic_b)) if magic == MAGIC_V1 else struct.pack(">H", len(topic_b))) + topic_b
    rest = (
        struct.pack(">iqqiq", flag, 0, 0, sysflag, born_ts)
        + born
        + struct.pack(">q", store_ts)
        + store
        + struct.pack(">iq", reconsume_times, 0)
        + struct.pack(">i", len(body))
        + body
        + topic_field
        + struct.pack(">H", len(props_b))
        + props_b
    )
    head = struct.pack(">iIii", 12 + 4 + len(rest), magic, crc, queue_id)
    return bytearray(head + rest)


@dataclass(frozen=True)
class Decoded:
    total_size: int
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_ts: int
    body: bytes
    topic: str
    properties: dict[str, str]


def decode_record(data: bytes | bytearray | memoryview) -> Decoded:
    """Just enough decoding to assert on what the store returns."""
    buf = bytes(data)
    total, magic, _crc, qid, _flag, qoff, phys, sysflag, _born = struct.unpack_from(">iIiiiqqiq", buf, 0)
    pos = 48 + (20 if sysflag & BORNHOST_V6 else 8)
    (store_ts,) = struct.unpack_from(">q", buf, pos)
    pos += 8 + (20 if sysflag & STOREHOST_V6 else 8) + 12
    (blen,) = struct.unpack_from(">i", buf, pos)
    body = buf[pos + 4 : pos + 4 + blen]
    pos += 4 + blen
    if magic == MAGIC_V1:
        tlen, pos = buf[pos], pos + 1
    else:
        (tlen,), pos = struct.unpack_from(">H", buf, pos), pos + 2
    topic = buf[pos : pos + tlen].decode()
    pos += tlen
    (plen,) = struct.unpack_from(">H", buf, pos)
    props = {}
    for item in buf[pos + 2 : pos + 2 + plen].decode().split("\x02"):
        k, sep, v = item.partition("\x01")
        if sep:
            props[k] = v
    assert pos + 2 + plen == total == len(buf), (pos + 2 + plen, total, len(buf))
    return Decoded(total, qid, qoff, phys, store_ts, body, topic, props)


def small_config(**overrides):
    """A StoreConfig with tiny segments so tests cross segment boundaries quickly."""
    from rmqrun.broker.store import StoreConfig

    values = dict(segment_size=4096, max_message_size=1024, consume_queue_entries_per_file=16,
                  stamp_store_timestamp=False, flush_interval_ms=20, checkpoint_interval_ms=50)
    values.update(overrides)
    return StoreConfig(**values)


def crash(store) -> None:
    """Abandon an open store as a killed process would: no final checkpoint, no close.

    The background threads are stopped (a dead process has none) and descriptors and
    the directory lock released; whatever was written stays in the files.
    """
    store._tasks.stop()
    store._flusher.stop()
    store._flusher = None
    store._log.close()
    store._queues.close()
    store._release_dir_lock()


def assert_consistent(store) -> dict:
    """Every valid record has exactly its consume-queue entry and vice versa.

    Walks the commit log independently of the consume queues and returns
    {(topic, qid): [bodies in queue order]}.
    """
    from rmqrun.broker.store.log_scanner import LogScanner

    log = store._log
    scanner = LogScanner(log, log.min_offset, verify_from=log.min_offset)
    by_queue: dict = {}
    for rec in scanner:
        data = rec.buf[rec.off : rec.off + rec.header.total_size]
        d = decode_record(data)
        entries = by_queue.setdefault((d.topic, d.queue_id), [])
        assert d.queue_offset == len(entries), (d.topic, d.queue_id, d.queue_offset, len(entries))
        entries.append((rec.pos, len(data), d.body))
    assert scanner.problem is None, scanner.problem
    assert scanner.end == log.write_pos
    assert sorted(by_queue) == store.queues()
    out = {}
    for key, entries in by_queue.items():
        cq = store._queues.get(*key)
        assert cq.max_offset == len(entries), (key, cq.max_offset, len(entries))
        for n, (pos, size, _body) in enumerate(entries):
            e = cq.entry(n)
            assert (e.commit_log_offset, e.size) == (pos, size), (key, n)
        out[key] = [body for _pos, _size, body in entries]
    return out
