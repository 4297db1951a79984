#!/usr/bin/env python3
"""Micro-benchmark: the process queue's concurrent path (put, mark started, remove out of order), in messages/s.

This was a test asserting a rate (``> 200,000 msg/s``): a rate is what the machine does, not what the code
guarantees, and it failed under load. The suite checks what the process queue decides
(``tests/unit/test_process_queue.py``); this script measures how fast, to compare runs on one machine.
The supervisor's whole path targets about 40,000 msg/s; this part alone should stay far above that.

Usage: python scripts/bench_process_queue.py [--messages 400000] [--batch 32] [--min-rate 0]
Exits 1 when ``--min-rate`` is given and the measured rate is below it.
"""

from __future__ import annotations

import argparse
import sys
import time

from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.model import MessageQueue

T0 = 1_700_000_000_000


def measure(n: int, batch: int) -> float:
    """Messages per second through put → mark_consume_started → remove (odd offsets first, then even)."""
    pq = ProcessQueue(MessageQueue("T", "broker-a", 0), now_ms=T0)
    start = time.perf_counter()
    for base in range(0, n, batch):
        entries = [QueuedMessage(o, 100) for o in range(base, base + batch)]
        pq.put(entries)
        offsets = [e.offset for e in entries]
        pq.mark_consume_started(offsets, T0)
        pq.remove_messages(offsets[1::2], T0)
        pq.remove_messages(offsets[0::2], T0)
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--min-rate", type=float, default=0.0, help="exit 1 below this many msg/s (0: only report)")
    args = ap.parse_args(argv)
    rate = measure(args.messages, args.batch)
    print(f"process queue: {rate:,.0f} msg/s ({args.messages} messages in batches of {args.batch})")
    return 1 if args.min_rate and rate < args.min_rate else 0


if __name__ == "__main__":
    sys.exit(main())
