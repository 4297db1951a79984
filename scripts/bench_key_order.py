#!/usr/bin/env python3
"""Ordered consumption by key against by queue, on the same backlog, against the ideal ``cores / cost``.

For a 1-queue and a 4-queue orderly topic (by default), a backlog of messages
over thousands of sharding keys (``__SHARDINGKEY``, one queue per key) is
consumed twice by ``rmqrun run --orderly`` with a CPU-bound handler
(``workers.cpu:handle``, 2 ms of CPU per message by default), each time with a
fresh consumer group from the first offset:

* ``--order-by queue``: Java's orderly model, one handler call per queue at a time;
* ``--order-by key``:   in order per key, parallel across keys.

The rate is taken between 10 % and 90 % of the backlog from rmqrun's status
lines (start-up and tail left out); each mode runs ``--rounds`` times,
alternating, each run with a fresh group over the same backlog, and the table
gives the median. Each row gives msg/s, its share of the
ideal ``cores / cost`` (all cores busy on the handler, nothing else), and the
ceiling of its mode: ``min(queues, workers, cores) / cost`` for queue order,
``min(workers, cores) / cost`` for key order. Each run also prints the CPU
seconds of the supervisor and of each worker (who did the work) and the cores
the process tree used on average (its CPU seconds / wall seconds). The load
average is printed too: on a shared machine other processes take cores, and
with the kernel's session autogroups (``/proc/sys/kernel/sched_autogroup_enabled``)
a busy machine gives the whole rmqrun tree one session's share of the CPU
however many workers it has, which caps both modes alike; compare the modes
of one run, and look at "cores used".

Usage: python scripts/bench_key_order.py [--messages 6000] [--keys 2000] [--cpu-ms 2] [--queues 1 4]
       [--workers N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.client.admin import AdminClient, TopicConfig  # noqa: E402
from rmqrun.client.instance import ClientInstance  # noqa: E402
from rmqrun.client.producer import Producer  # noqa: E402

BODY = b"x" * 256
_STATUS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*? (\d+) consumed")


async def create_topic(namesrv: str, broker: str, topic: str, queues: int) -> None:
    inst = ClientInstance(namesrv, instance_name="bench-key-admin")
    try:
        admin = AdminClient(inst.pool, inst.namesrv)
        await admin.create_or_update_topic(broker, TopicConfig(topic, queues, queues, order=True))
        for _ in range(200):
            try:
                await inst.update_route(topic)
                return
            except Exception:
                await asyncio.sleep(0.05)
        raise RuntimeError(f"no route for {topic} after creating it")
    finally:
        await inst.close()


async def produce(namesrv: str, topic: str, n: int, keys: int) -> float:
    """n messages, message i with sharding key ``key-<i % keys>``; a window never holds a key twice,
    so each key's messages are stored in order."""
    start = time.monotonic()
    async with Producer(namesrv, "PG_bench_key") as producer:
        window = min(keys, 256)
        for lo in range(0, n, window):
            await asyncio.gather(*(producer.send(topic, BODY, sharding_key=f"key-{i % keys}")
                                   for i in range(lo, min(lo + window, n))))
    return n / (time.monotonic() - start)


def window_rate(points: list[tuple[float, int]], total: int) -> float:
    """msg/s between the first sample >= 10 % and the first >= 90 % of ``total``."""
    lo = next((p for p in points if p[1] >= 0.1 * total), None)
    hi = next((p for p in points if p[1] >= 0.9 * total), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return float("nan")
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def cpu_split(pid: int) -> tuple[float, list[float]]:
    """CPU seconds of the supervisor and of each worker process."""
    try:
        sup = psutil.Process(pid)
        mine = sup.cpu_times()
        workers = [c.cpu_times() for c in sup.children(recursive=True)]
    except psutil.Error:
        return float("nan"), []
    return mine.user + mine.system, sorted((t.user + t.system for t in workers), reverse=True)


def run_rmqrun(namesrv: str, topic: str, group: str, n: int, order_by: str, workers: int, cpu_ms: float,
               timeout: float) -> tuple[float, tuple[float, list[float], float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_")}
    env.update(RMQRUN_STATUS_INTERVAL="0.1", RMQRUN_HANDLER_CPU_MS=str(cpu_ms), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "rmqrun.cli.main", "run", "workers.cpu:handle", "--namesrv", namesrv,
           "--group", group, "--topic", topic, "--consume-from", "CONSUME_FROM_FIRST_OFFSET",
           "--workers", str(workers), "--orderly", "--order-by", order_by]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    points: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    split: tuple[float, list[float], float] = (float("nan"), [], float("nan"))
    try:
        for line in proc.stderr:
            m = _STATUS.match(line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
                points.append((t, int(m.group(2))))
                if points[-1][1] >= n:
                    sup, per_worker = cpu_split(proc.pid)
                    split = (sup, per_worker, (sup + sum(per_worker)) / (time.monotonic() - began))
                    break
            if time.monotonic() > deadline:
                print(f"  {order_by}: timed out at {points[-1][1] if points else 0}/{n}", file=sys.stderr)
                break
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return window_rate(points, n), split


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=6000)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--cpu-ms", type=float, default=2.0)
    ap.add_argument("--queues", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each mode, alternating queue and key; the table gives the median")
    args = ap.parse_args()
    if args.cpu_ms <= 0 or args.messages < 10 or args.keys < 1:
        ap.error("--cpu-ms must be > 0, --messages >= 10, --keys >= 1")
    cores = os.cpu_count() or 1
    cost = args.cpu_ms / 1000
    ideal = cores / cost
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-key-"))
    rows: list[tuple[int, str, list[float], float, list[float]]] = []
    print(f"{cores} cores, {args.workers} workers, {args.cpu_ms:g} ms CPU per message, {args.messages} messages "
          f"over {args.keys} keys; load average before: {load()}")
    with BrokerProcess(data / "broker", flush_mode="async") as bp:
        ns = bp.namesrv_address
        for queues in args.queues:
            topic = f"BenchKey{queues}q"
            asyncio.run(create_topic(ns, bp.broker_address, topic, queues))
            rate = asyncio.run(produce(ns, topic, args.messages, args.keys))
            print(f"[{queues} queue(s)] produced {args.messages} at {rate:,.0f} msg/s")
            rates: dict[str, list[float]] = {"queue": [], "key": []}
            cores_used: dict[str, list[float]] = {"queue": [], "key": []}
            for round_ in range(args.rounds):
                for order_by in ("queue", "key") if round_ % 2 == 0 else ("key", "queue"):
                    r, (sup, per_worker, used) = run_rmqrun(ns, topic, f"CG_{order_by}_{topic}_{round_}", args.messages,
                                                      order_by, args.workers, args.cpu_ms, args.timeout)
                    rates[order_by].append(r)
                    cores_used[order_by].append(used)
                    print(f"[{queues} queue(s)] --order-by {order_by}: {r:,.0f} msg/s; CPU s supervisor {sup:.1f}, "
                          f"workers {' '.join(f'{w:.1f}' for w in per_worker)}, {used:.2f} cores used "
                          f"(load average {load()})")
            for order_by in ("queue", "key"):
                busy = min(args.workers, cores) if order_by == "key" else min(queues, args.workers, cores)
                rows.append((queues, order_by, rates[order_by], busy / cost, cores_used[order_by]))
    print()
    print(f"ideal cores / cost = {cores} / {args.cpu_ms:g} ms = {ideal:,.0f} msg/s; load average after: {load()}")
    print("| queues | order by | msg/s (median) | of ideal | mode's ceiling | cores used | every run |")
    print("|---:|---|---:|---:|---:|---:|---|")
    for queues, order_by, rs, ceiling, used in rows:
        r = statistics.median(rs)
        print(f"| {queues} | {order_by} | {r:,.0f} | {r / ideal:.2f} | {ceiling:,.0f} | "
              f"{statistics.median(used):.2f} | "
              f"{', '.join(f'{x:,.0f}' for x in rs)} |")


if __name__ == "__main__":
    main()
