"""``rmqrun run`` on bodies a RocketMQ 5.x producer compressed, and on bodies nobody can decode.

Messages are stored through the embedded broker the way a 5.x Java producer
sends them: SEND_MESSAGE_V2 with the body already compressed and the sysFlag
carrying COMPRESSED (bit 0) and the compression type (bits 8..10:
``MessageSysFlag.COMPRESSION_LZ4_TYPE`` = 1 << 8, ZSTD = 2 << 8, ZLIB = 3 << 8).
The frames are the ones Java's compressors write: an LZ4 frame
(``LZ4FrameOutputStream``), a zstd frame without content size
(``ZstdOutputStream``), a zlib stream (``DeflaterOutputStream``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import zlib
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client, send_ext
from tests.integration.cli_kit import free_port
from tests.integration.test_metrics_endpoint import scrape, total
from tests.integration.signals_kit import Runs, committed, queue_max_offsets, wait_until
from tests.unit.remoting.test_compressed_bodies import java_lz4, java_zlib, java_zstd

COMPRESSED = 0x1
LZ4, ZSTD, ZLIB = 1 << 8, 2 << 8, 3 << 8
QUEUES = 4


def send_raw(eb: EmbeddedBroker, topic: str, items: list[tuple[int, bytes, int]]) -> None:
    """Store (idx, stored body, sysFlag) messages, round-robin over the topic's queues."""
    async def main() -> None:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            for n, (idx, body, sys_flag) in enumerate(items):
                ext = send_ext(topic, queue_id=n % QUEUES, props={"idx": str(idx)}, keys=f"k{idx}",
                               tags="TagA" if idx % 2 else "TagB")
                ext["f"] = str(sys_flag)
                resp = await client.call(RequestCode.SEND_MESSAGE_V2, ext, body)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
        finally:
            await client.close()
    asyncio.run(main())


def bodies_seen(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [(int(a), b) for a, b in (line.split() for line in path.read_text().splitlines())]


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def start_run(runs: Runs, eb: EmbeddedBroker, tmp_path: Path, group: str, topic: str, *args: str):  # type: ignore[no-untyped-def]
    return runs.start(group, "tests.integration.handlers.bodies_handler:handle", namesrv=eb.namesrv_address, group=group,
                      topic=topic, args=["--workers", "2", *args],
                      env={"PROBE_BODIES": str(tmp_path / f"{group}.bodies")})


def test_lz4_zstd_and_zlib_bodies_reach_the_handler_unchanged(eb: EmbeddedBroker, runs: Runs,
                                                              tmp_path: Path) -> None:
    topic, group = "Compressed5x", "G_compressed"
    originals: dict[int, bytes] = {}
    items: list[tuple[int, bytes, int]] = []
    codecs = [(LZ4, java_lz4), (ZSTD, java_zstd), (ZLIB, java_zlib), (0, java_zlib)]  # 0: a 4.x producer
    for i in range(40):
        flag, compress = codecs[i % len(codecs)]
        body = (f"message {i} ".encode() * (50 + i)) + os.urandom(i)
        originals[i] = body
        items.append((i, compress(body), COMPRESSED | flag))
    originals[40] = b"not compressed at all"
    items.append((40, originals[40], 0))
    send_raw(eb, topic, items)

    run = start_run(runs, eb, tmp_path, group, topic)
    path = tmp_path / f"{group}.bodies"
    wait_until(lambda: len(bodies_seen(path)) >= len(originals), 60, "every message handled")
    seen = bodies_seen(path)
    assert sorted(i for i, _ in seen) == sorted(originals)
    assert {i: d for i, d in seen} == {i: digest(b) for i, b in originals.items()}
    # a graceful stop (not the fixture's SIGKILL) commits every queue to its end
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert committed(eb, group, topic) == queue_max_offsets(eb, topic)


@pytest.mark.parametrize("mode", ["concurrent", "orderly"])
def test_an_undecodable_body_goes_to_the_dlq_as_stored_and_the_queue_moves_on(
        eb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: str) -> None:
    topic, group = f"Corrupt_{mode}", f"G_corrupt_{mode}"
    good = {i: f"good {i} ".encode() * 30 for i in range(24)}
    items: list[tuple[int, bytes, int]] = []
    for i, body in good.items():
        items.append((i, java_zstd(body) if i % 2 else java_lz4(body), COMPRESSED | (ZSTD if i % 2 else LZ4)))
    bad = {
        100: (java_lz4(b"whole")[:-6], COMPRESSED | LZ4),     # truncated LZ4 frame
        101: (b"\x28\xb5\x2f\xfdgarbage", COMPRESSED | ZSTD),  # zstd magic, then nothing valid
        102: (java_zlib(b"x"), COMPRESSED | 5 << 8),           # a compression type no Java version writes
    }
    # the bad ones sit in the middle of their queues, with good messages behind them
    items[5:5] = [(idx, body, flag) for idx, (body, flag) in bad.items()]
    send_raw(eb, topic, items[:12])
    store_bad_properties(eb, topic, 200)  # properties that are not UTF-8, in queue 0 between good ones
    bad[200] = (b"bad properties", 0)
    send_raw(eb, topic, items[12:])
    items = items[:12] + [(200, b"", 0)] + items[12:]  # queue of the n-th item: see queue_of below

    port = free_port()
    # a tag expression, so the supervisor's own tag re-filter meets the record whose properties do not decode
    args = ["--metrics-port", str(port), "--tags", "TagA || TagB"] + (["--orderly"] if mode == "orderly" else [])
    run = start_run(runs, eb, tmp_path, group, topic, *args)
    path = tmp_path / f"{group}.bodies"
    wait_until(lambda: len(bodies_seen(path)) >= len(good), 60, "every good message handled")
    ends = queue_max_offsets(eb, topic)
    wait_until(lambda: committed(eb, group, topic) == ends, 30, "every queue committed to its end")
    dlq = f"%DLQ%{group}"
    wait_until(lambda: len(_dlq_records(eb, dlq)) >= len(bad), 15, "the undecodable messages in the DLQ")

    seen = bodies_seen(path)
    assert sorted(i for i, _ in seen) == sorted(good), "each good message exactly once, no bad one handled"
    assert {i: d for i, d in seen} == {i: digest(b) for i, b in good.items()}
    if mode == "orderly":
        by_queue: dict[int, list[int]] = {}
        for idx, queue in queue_of(items).items():
            if idx in good:
                by_queue.setdefault(queue, []).append(idx)
        order = [i for i, _ in seen]
        for idxs in by_queue.values():
            assert [i for i in order if i in idxs] == idxs, "queue order kept around the dead-lettered message"

    # as stored: the body still compressed (or foreign), sysFlag kept, so nothing is lost
    from rmqrun.remoting import message as codec
    from rmqrun.remoting import compression
    stored = _dlq_records(eb, dlq)
    assert sorted(stored) == sorted(bad)
    for idx, (body, flag) in bad.items():
        got_body, got_flag, retry_topic = stored[idx]
        assert got_body == body
        assert got_flag & (compression.COMPRESSION_MASK | codec.SYSFLAG_COMPRESSED) == flag
        assert retry_topic == topic

    metrics = scrape(port)
    assert total(metrics, "rmqrun_messages_undecodable_total") == len(bad)
    assert total(metrics, "rmqrun_messages_failed_total") == 0, "an undecodable message is no handler failure"

    log = run.log()
    assert "never retrieved" not in log
    # one dead-letter line per message, counted by reason (issue #22 item 3)
    assert log.count(f" to %DLQ%{group} (undecodable): ") == len(bad), log[-3000:]
    assert metrics.value("rmqrun_messages_dead_lettered_total", group=group, topic=topic,
                         reason="undecodable") == len(bad)
    # stopped gracefully (the fixture would SIGKILL it): the commit stays at the ends, nothing redone
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert committed(eb, group, topic) == ends
    assert len(bodies_seen(path)) == len(good)


def _dlq_records(eb: EmbeddedBroker, dlq: str) -> dict[int, tuple[bytes, int, str]]:
    """The DLQ's messages by idx, bodies as stored (not inflated)."""
    from rmqrun.remoting import message as codec
    from rmqrun.protocol.headers import PullMessageRequestHeader
    from rmqrun.client.instance import ClientInstance

    async def main() -> dict[int, tuple[bytes, int, str]]:
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-dlq")
        try:
            out = {}
            for mq in await inst.subscribe_queues(dlq):
                header = PullMessageRequestHeader(
                    consumer_group="probe", topic=dlq, queue_id=mq.queue_id, queue_offset=0, max_msg_nums=32,
                    sys_flag=4, commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*",
                    expression_type="TAG")
                result = await inst.broker.pull(eb.broker_address, header)
                for m in codec.decode_messages(result.body, decompress=False):
                    out[int(m.properties["idx"])] = (m.body, m.sys_flag, m.properties.get("RETRY_TOPIC", ""))
            return out
        finally:
            await inst.close()
    return asyncio.run(main())


def queue_of(items: list[tuple[int, bytes, int]]) -> dict[int, int]:
    """Where each idx was stored: send_raw's round robin, restarted by each call (items 0..11, the
    bad-properties record in queue 0, then the rest)."""
    out = {idx: n % QUEUES for n, (idx, _, _) in enumerate(items[:12])}
    out[items[12][0]] = 0
    out.update({idx: n % QUEUES for n, (idx, _, _) in enumerate(items[13:])})
    return out


def store_bad_properties(eb: EmbeddedBroker, topic: str, idx: int) -> None:
    """A record whose properties are not UTF-8, written to the store directly (no client can send one:
    properties travel in a JSON header). Nobody holds a pull yet, so no waking is missed."""
    from rmqrun.remoting import message as codec
    from rmqrun.remoting import message_props
    placeholder = "\u00ff"  # two bytes in UTF-8, replaced by two bytes that are not UTF-8
    props = f"TAGS\x01TagA\x02idx\x01{idx}\x02broken\x01{placeholder}"
    record = codec.encode_stored(topic=topic, body=b"bad properties", properties=props, queue_id=0,
                                 store_host=eb.broker_address, born_host=eb.broker_address)
    record = bytearray(bytes(record).replace(placeholder.encode(), b"\xff\xfe"))
    eb.broker.store.put(topic, 0, record, message_props.tags_code("TagA"))
