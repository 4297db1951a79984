#!/usr/bin/env python3
"""The benchmark's peer: the Apache C++ client (PyPI ``rocketmq`` 0.4.4) as a push consumer, from Python.

Counts deliveries (optionally burning ``--cpu-ms`` of CPU in the callback,
which holds the GIL as any Python handler does) and prints ``<monotonic time>
<count>`` every 0.1 s on stdout until ``--count`` messages arrived, then
shuts down. Used by ``scripts/bench_consume.py``; not a test helper.

The C++ library writes its logs under $HOME; the parent points HOME at a
temporary directory before starting this script.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time


def burn(ms: float) -> None:
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--cpu-ms", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=0, help="consume threads (0: the library's default)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--orderly", action="store_true", help="an orderly push consumer (per-queue order, broker locks)")
    args = ap.parse_args()

    from rocketmq.client import PushConsumer  # loads librocketmq.so

    lock = threading.Lock()
    count = 0
    done = threading.Event()

    def on_message(msg) -> None:  # type: ignore[no-untyped-def]
        # returning normally is CONSUME_SUCCESS in this wrapper
        nonlocal count
        if args.cpu_ms:
            burn(args.cpu_ms)
        with lock:
            count += 1
            if count >= args.count:
                done.set()

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    if args.threads:
        consumer.set_thread_count(args.threads)
    consumer.subscribe(args.topic, on_message)
    consumer.start()
    deadline = time.monotonic() + args.timeout
    out = sys.stdout
    while not done.is_set() and time.monotonic() < deadline:
        out.write(f"{time.monotonic():.6f} {count}\n")
        out.flush()
        done.wait(0.1)
    out.write(f"{time.monotonic():.6f} {count}\n")
    out.flush()
    consumer.shutdown()
    return 0 if done.is_set() else 3


if __name__ == "__main__":
    sys.exit(main())
