#!/usr/bin/env python3
"""CPU seconds each process spends on one batch query of the ``rocketmq`` source, and on the raw loop.

Wall-clock ratios on a shared 2-core machine swing with the other jobs' load; the CPU a
query costs each process does not (much). The same backlog and query as
``scripts/bench_spark_source.py``; for each of ``--queries`` rounds, the CPU time (user +
system, from ``psutil``) that the JVM, each Python worker and the broker used during one
Spark query, then during one raw ``PullConsumer`` read of the same backlog.

Usage: PYTHONPATH=$PWD python scripts/bench_spark_cpu.py [--messages 50000] [--queries 3] [--master local[2]]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import psutil  # noqa: E402

from bench_spark_source import SparkReader, produce, raw_rate  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402


def _cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of this process and every descendant, by pid (with a short name)."""
    me = psutil.Process()
    out = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            args = p.cmdline()
            what = "java (Spark)" if p.name() == "java" else " ".join(args[1:3])[:40] or p.name()
            out[p.pid] = (what, t.user + t.system)
        except psutil.Error:
            continue
    return out


def _spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> list[tuple[float, str]]:
    rows = [(t - before.get(pid, (what, 0.0))[1], f"{pid} {what}") for pid, (what, t) in after.items()]
    return sorted((r for r in rows if r[0] >= 0.01), reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--queries", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with BrokerProcess(Path(tmp) / "data", log_path=Path(tmp) / "broker.log") as bp:
            asyncio.run(produce(bp.namesrv_address, args.messages, args.size))
            reader = SparkReader(bp.namesrv_address, args.master)
            try:
                for _ in range(args.queries):
                    before = _cpu()
                    _, count, took = reader.read()
                    spent = _spent(before, _cpu())
                    print(f"Spark query: {count:,} rows in {took:.2f} s (load {os.getloadavg()[0]:.1f}), "
                          f"CPU {sum(s for s, _ in spent):.2f} s:")
                    for s, who in spent:
                        print(f"   {s:6.2f} s  {who}")
                    before = _cpu()
                    began = time.perf_counter()
                    _, count = raw_rate(bp.namesrv_address)
                    took = time.perf_counter() - began
                    spent = _spent(before, _cpu())
                    print(f"raw loop: {count:,} messages in {took:.2f} s, CPU {sum(s for s, _ in spent):.2f} s:")
                    for s, who in spent:
                        print(f"   {s:6.2f} s  {who}")
            finally:
                reader.stop()


if __name__ == "__main__":
    main()
