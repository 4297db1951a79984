#!/usr/bin/env python3
"""Per-thread CPU of one process over a window: which of its threads spend the CPU, and how often they run.

    python scripts/thread_cpu.py PID [--seconds 10] [--top 15]

Reads ``/proc/PID/task/*/schedstat`` (nanoseconds on the CPU, times scheduled) and ``comm`` at the start and
the end of the window, so it costs the process nothing. Used to split an idle RocketMQ broker's background CPU
by thread (docs/benchmarks/java/where-the-time-goes.md §23: its ReputMessageService wakes ~900 times a second).
Linux only; threads that start or end inside the window are left out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def snapshot(pid: int) -> dict[str, tuple[str, int, int]]:
    """thread id → (name, ns on the CPU, times run) of every thread of ``pid`` now."""
    out: dict[str, tuple[str, int, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                on_cpu, _, runs = (int(v) for v in f.read().split()[:3])
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
        out[tid] = (name, on_cpu, runs)
    return out


def rates(before: dict[str, tuple[str, int, int]], after: dict[str, tuple[str, int, int]],
          seconds: float) -> list[tuple[float, float, str, str]]:
    """(ms of CPU a second, runs a second, name, thread id) per thread alive at both ends, busiest first."""
    rows = [((a[1] - before[tid][1]) / seconds / 1e6, (a[2] - before[tid][2]) / seconds, a[0], tid)
            for tid, a in after.items() if tid in before]
    return sorted(rows, reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pid", type=int)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    try:
        before, t0 = snapshot(args.pid), time.monotonic()
        time.sleep(args.seconds)
        after, dt = snapshot(args.pid), time.monotonic() - t0
    except FileNotFoundError:
        print(f"no process {args.pid}", file=sys.stderr)
        return 1
    rows = rates(before, after, dt)
    print(f"pid {args.pid}: {sum(r[0] for r in rows):.2f} ms of CPU a second over {dt:.1f} s, {len(rows)} threads")
    for ms, runs, name, tid in rows[:args.top]:
        print(f"{ms:8.2f} ms/s {runs:8.0f} runs/s  {name} ({tid})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
