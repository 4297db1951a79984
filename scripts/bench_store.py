"""Micro-benchmark of the embedded broker's message store: put and get throughput.

    .venv/bin/python scripts/bench_store.py [--count 50000] [--size 1024] [--dir /tmp]

Prints messages/s for: plain puts (ASYNC flush), batched puts, SYNC-flush puts with
1 and with many concurrent producers (group commit: fsync rounds are shown), and
pulls of 32-message batches with and without a tag filter. Records are built once
and copied per put, so the numbers measure the store, not the encoder.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqrun.broker.store import FlushMode, GetMessageStatus, MessageStore, StoreConfig  # noqa: E402
from rmqrun.remoting.message import encode_stored
from rmqrun.remoting.message_props import tags_code

TOPIC = "BenchTopic"


def make_record(size: int, tag: str, queue_id: int = 0) -> bytearray:
    base = encode_stored(topic=TOPIC, queue_id=queue_id, body=b"", properties={"TAGS": tag})
    body = b"x" * max(0, size - len(base))
    return encode_stored(topic=TOPIC, queue_id=queue_id, body=body, properties={"TAGS": tag})


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t0


def bench(root: Path, count: int, size: int) -> list[tuple[str, int, float, str]]:
    rows: list[tuple[str, int, float, str]] = []
    # templates[q][i & 1]: a record for queue q, alternating tags
    templates = [[make_record(size, tag, q) for tag in ("TagA", "TagB")] for q in range(4)]
    codes = [tags_code("TagA"), tags_code("TagB")]

    def open_store(name: str, mode: FlushMode) -> MessageStore:
        return MessageStore(root / name, StoreConfig(flush_mode=mode)).open()

    # 1. put, ASYNC flush
    store = open_store("async", FlushMode.ASYNC)

    def puts() -> int:
        for i in range(count):
            store.put(TOPIC, 0, bytearray(templates[0][i & 1]), codes[i & 1])
        return count

    n, dt = timed(puts)
    rows.append(("put (async flush)", n, dt, ""))

    # 2. put_many, batches of 32
    def batched() -> int:
        for i in range(0, count, 32):
            k = min(32, count - i)
            store.put_many(TOPIC, 1, [bytearray(templates[1][j & 1]) for j in range(k)], [codes[j & 1] for j in range(k)])
        return count

    n, dt = timed(batched)
    rows.append(("put_many x32 (async flush)", n, dt, ""))

    # 3. get, 32 per pull
    def gets(accept=None) -> Callable[[], int]:
        def run() -> int:
            offset, got = 0, 0
            while True:
                res = store.get(TOPIC, 0, offset, 32, accept=accept)
                if res.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE):
                    return got
                got += len(res.records)
                offset = res.next_begin_offset
        return run

    n, dt = timed(gets())
    rows.append(("get x32", n, dt, f"{size} B records"))
    n, dt = timed(gets(lambda code: code == codes[0]))
    rows.append(("get x32, tag filter 1/2", n, dt, ""))
    store.close()

    # 4. put_sync, SYNC flush, 1 and 64 concurrent producers
    for producers in (1, 64):
        store = open_store(f"sync{producers}", FlushMode.SYNC)
        sync_count = count if producers > 1 else min(count, 2000)
        fsyncs0 = store._flusher.fsync_count  # noqa: SLF001 (benchmark introspection)

        async def produce(k: int, per: int) -> None:
            for i in range(per):
                await store.put_sync(TOPIC, k % 4, bytearray(templates[k % 4][i & 1]), codes[i & 1])

        def run() -> int:
            per = sync_count // producers

            async def main() -> None:
                await asyncio.gather(*(produce(k, per) for k in range(producers)))

            asyncio.run(main())
            return per * producers

        n, dt = timed(run)
        rounds = store._flusher.fsync_count - fsyncs0  # noqa: SLF001
        rows.append((f"put_sync (sync flush), {producers} producer(s)", n, dt, f"{rounds} fsyncs, {n / max(rounds, 1):.1f} msg/fsync"))
        store.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024, help="record size in bytes")
    ap.add_argument("--dir", default=None, help="where to create the temporary stores (default: system temp)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_store_", dir=args.dir))
    try:
        rows = bench(root, args.count, args.size)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'operation':<40} {'messages':>9} {'seconds':>8} {'msg/s':>10} {'MiB/s':>7}  notes")
    for name, n, dt, notes in rows:
        print(f"{name:<40} {n:>9} {dt:>8.2f} {n / dt:>10,.0f} {n * args.size / dt / 2**20:>7.1f}  {notes}")


if __name__ == "__main__":
    main()
