#!/usr/bin/env python3
"""Drain a backlog of 1 KiB messages: rmqrun against the Apache C++ client, measured in the same run.

For each handler cost (default: a no-op and 1 ms of CPU per message) both
consumers drain the same backlog from the same embedded broker (a separate
process), each with a fresh consumer group starting at the first offset:

* rmqrun: ``rmqrun run`` with ``--workers`` worker processes (default: CPU count);
* C++:    the Apache C++ client's push consumer from Python (``scripts/cpp_bench_consumer.py``),
          whose Python callback holds the GIL.

The rate is taken between 10 % and 90 % of the backlog (start-up and the tail
are left out). The report gives msg/s, rmqrun / C++, and rmqrun's share of the
ideal ``cores / handler cost`` for CPU-bound handlers. A "raw pull" line shows
what the broker serves to bare pull loops with no consumer logic, so a
reader can see whether the broker was the limit.

Usage: python scripts/bench_consume.py [--messages 100000] [--cpu-messages 10000] [--workers N]
Numbers depend on the machine; compare ratios, and runs on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.client.headers import PullMessageRequestHeader  # noqa: E402
from rmqrun.client.instance import ClientInstance  # noqa: E402
from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402
from rmqrun.remoting.message import scan_records  # noqa: E402

BODY = b"x" * 1024
_STATUS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*? (\d+) consumed")


async def produce(namesrv: str, topic: str, n: int) -> float:
    start = time.monotonic()
    async with Producer(namesrv, "PG_bench") as producer:
        await producer.send(topic, BODY)  # creates the topic
        sent = 1
        queues = await producer.instance.publish_queues(topic, refresh=True)
        batch = 64
        q = 0
        while sent < n:
            k = min(batch, n - sent)
            await producer.send_batch(topic, [OutgoingMessage(BODY)] * k, queue=queues[q % len(queues)])
            q += 1
            sent += k
    return n / (time.monotonic() - start)


async def raw_pull(namesrv: str, topic: str, n: int) -> float:
    """Bare pull loops, one per queue, no consumer logic: the broker's serving rate."""
    inst = ClientInstance(namesrv, instance_name="bench-raw")
    try:
        queues = await inst.subscribe_queues(topic)
        addr = inst.broker_address(queues[0].broker_name)
        assert addr is not None
        got = 0

        async def loop(mq) -> None:  # type: ignore[no-untyped-def]
            nonlocal got
            offset = 0
            while got < n:
                header = PullMessageRequestHeader(
                    consumer_group="bench-raw", topic=topic, queue_id=mq.queue_id, queue_offset=offset,
                    max_msg_nums=32, sys_flag=4, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                    subscription="*", expression_type="TAG")
                result = await inst.broker.pull(addr, header)
                if not result.body:
                    return
                got += len(scan_records(result.body))
                offset = result.next_begin_offset
        start = time.monotonic()
        await asyncio.gather(*(loop(mq) for mq in queues))
        return got / (time.monotonic() - start)
    finally:
        await inst.close()


def window_rate(points: list[tuple[float, int]], total: int) -> float:
    """msg/s between the first sample >= 10 % and the first >= 90 % of ``total``."""
    lo = next((p for p in points if p[1] >= 0.1 * total), None)
    hi = next((p for p in points if p[1] >= 0.9 * total), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return float("nan")
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def run_rmqrun(namesrv: str, topic: str, group: str, n: int, handler: str, workers: int, cpu_ms: float,
               timeout: float) -> float:
    env = dict(os.environ, RMQRUN_STATUS_INTERVAL="0.1", RMQRUN_HANDLER_CPU_MS=str(cpu_ms),
               PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "rmqrun.cli.main", "run", handler, "--namesrv", namesrv, "--group", group,
           "--topic", topic, "--consume-from", "CONSUME_FROM_FIRST_OFFSET", "--workers", str(workers)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    points: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            m = _STATUS.match(line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
                points.append((t, int(m.group(2))))
                if points[-1][1] >= n:
                    break
            if time.monotonic() > deadline:
                print(f"  rmqrun: timed out at {points[-1][1] if points else 0}/{n}", file=sys.stderr)
                break
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return window_rate(points, n)


def run_cpp(namesrv: str, topic: str, group: str, n: int, cpu_ms: float, timeout: float) -> float:
    home = tempfile.mkdtemp(prefix="rmqrun-bench-cpp-")
    env = dict(os.environ, HOME=home)
    cmd = [sys.executable, str(ROOT / "scripts" / "cpp_bench_consumer.py"), "--namesrv", namesrv, "--group", group,
           "--topic", topic, "--count", str(n), "--cpu-ms", str(cpu_ms), "--timeout", str(timeout)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout + 60)
    points = [(float(a), int(b)) for a, b in (line.split() for line in out.stdout.splitlines() if line.strip())]
    return window_rate(points, n)


def cpp_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True,
                           env=dict(os.environ, HOME=tempfile.mkdtemp(prefix="rmqrun-bench-probe-")))
    return probe.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000, help="backlog for the no-op handler")
    ap.add_argument("--cpu-messages", type=int, default=10_000, help="backlog for the CPU-bound handler")
    ap.add_argument("--cpu-ms", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ peer")
    args = ap.parse_args()
    with_cpp = not args.no_cpp and cpp_available()
    cores = os.cpu_count() or 1
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-"))
    rows: list[tuple[str, str, float, float | None, str]] = []
    with BrokerProcess(data / "broker", flush_mode="async") as bp:
        ns = bp.namesrv_address
        print(f"broker pid {bp.pid} at {ns}; {cores} cores; rmqrun workers {args.workers}")
        for label, n, cpu_ms, handler in (("no-op", args.messages, 0.0, "workers.noop:handle"),
                                          (f"{args.cpu_ms:g} ms CPU", args.cpu_messages, args.cpu_ms,
                                           "workers.cpu:handle")):
            topic = f"Bench{int(cpu_ms * 1000)}"
            rate = asyncio.run(produce(ns, topic, n))
            print(f"[{label}] produced {n} x 1 KiB at {rate:,.0f} msg/s")
            if cpu_ms == 0:
                raw = asyncio.run(raw_pull(ns, topic, n))
                print(f"[{label}] raw pull (broker serving rate, no consumer logic): {raw:,.0f} msg/s")
            r = run_rmqrun(ns, topic, f"CG_rmqrun_{topic}", n, handler, args.workers, cpu_ms, args.timeout)
            c = run_cpp(ns, topic, f"CG_cpp_{topic}", n, cpu_ms, args.timeout) if with_cpp else None
            ideal = f"{r / (cores / (cpu_ms / 1000)):.2f} of ideal {cores / (cpu_ms / 1000):,.0f}/s" if cpu_ms else ""
            rows.append((label, topic, r, c, ideal))
    print()
    print(f"{'handler':<12} {'rmqrun msg/s':>14} {'C++ msg/s':>12} {'rmqrun/C++':>11}  vs ideal")
    for label, _topic, r, c, ideal in rows:
        cs = f"{c:,.0f}" if c else "-"
        ratio = f"{r / c:.2f}" if c else "-"
        print(f"{label:<12} {r:>14,.0f} {cs:>12} {ratio:>11}  {ideal}")


if __name__ == "__main__":
    main()
