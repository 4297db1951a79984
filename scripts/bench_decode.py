#!/usr/bin/env python3
"""Micro-benchmark: decoding pull-response bodies, in messages per second.

Builds pull bodies of 32 stored records (the broker's batch cap) with 1 KiB
bodies and typical properties, then times:

* ``scan_records``   - what the supervisor does per pulled message on the hot path
* ``decode_messages`` - the full decode a worker does before calling the handler
* ``frame.decode``    - the frame around a pull response

Usage: python scripts/bench_decode.py [--body-size 1024] [--batch 32] [--seconds 2]
Prints one line per case; compare runs of the same machine only.
"""

from __future__ import annotations

import argparse
import time

from rmqrun.remoting import frame, message


def build_body(batch: int, body_size: int) -> bytes:
    parts = []
    for i in range(batch):
        props = {"KEYS": f"key-{i}", "UNIQ_KEY": f"{i:032X}", "CLUSTER": "DefaultCluster", "TAGS": "TagA",
                 "idx": str(i)}
        parts.append(bytes(message.encode_stored(
            topic="BenchTopic", body=bytes(body_size), properties=props, queue_id=1, born_timestamp=1,
            born_host="127.0.0.1:40000", store_timestamp=2, store_host="127.0.0.1:10911", queue_offset=i,
            commit_log_offset=i * 1200)))
    return b"".join(parts)


def bench(name: str, fn, per_call: int, seconds: float) -> float:
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(50):
            fn()
        calls += 50
        now = time.perf_counter()
        if now >= deadline:
            break
    rate = calls * per_call / (now - start)
    print(f"{name:<18} {rate:>12,.0f} msg/s  ({(now - start) / calls / per_call * 1e6:6.2f} us/msg)")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    body = build_body(args.batch, args.body_size)
    cmd = frame.RemotingCommand(0, {"nextBeginOffset": "32", "minOffset": "0", "maxOffset": "100",
                                    "suggestWhichBrokerId": "0"}, body=body, flag=1, remark="FOUND")
    raw = frame.encode(cmd)[4:]
    print(f"pull body: {args.batch} records of {args.body_size} B body, {len(body)} bytes")
    bench("scan_records", lambda: message.scan_records(body), args.batch, args.seconds)
    bench("decode_messages", lambda: message.decode_messages(body), args.batch, args.seconds)
    bench("frame.decode", lambda: frame.decode(raw), args.batch, args.seconds)


if __name__ == "__main__":
    main()
