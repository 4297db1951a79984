#!/usr/bin/env python3
"""How fast the embedded broker takes and serves messages (it must never be a benchmark's bottleneck).

The broker runs as its own process (``BrokerProcess``), as in real use, so
the client load generator does not share its interpreter. Measured, for 1 KiB
messages (``--size``):

* send, rmqrun Producer: ``--concurrency`` sends in flight (sync flush: each
  SEND_OK waits for the group-committed fsync), then batches of 32;
* serve, one consumer: a bare pull loop with one outstanding long-poll pull per
  queue (what a push consumer keeps in flight), 32 messages per pull, counting
  records without decoding them; the broker process's CPU use meanwhile is
  printed too, so "the client was the limit" can be told from "the broker was";
* serve, the Apache C++ client's push consumer (``scripts/cpp_bench_consumer.py``),
  when the ``rocketmq`` package loads: what an unchanged real client gets.

Usage: python scripts/bench_broker.py [--messages 100000] [--size 1024] [--flush sync|async]
Target (issue): well above 40 000 msg/s served to one consumer. Numbers depend on
the machine; the report prints the machine's core count.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.protocol.bodies import ConsumerData, HeartbeatData  # noqa: E402
from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402
from rmqrun.protocol.subscription import SubscriptionData  # noqa: E402
from rmqrun.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from rmqrun.remoting.connection import Connection  # noqa: E402
from rmqrun.remoting.frame import RemotingCommand  # noqa: E402

QUEUES = 4
_INT = struct.Struct(">i")


class BusyMeter:
    """Share of one core the broker process used since the last call (``busy()``)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self._mark()

    def _mark(self) -> None:
        t = self.proc.cpu_times()
        self.cpu, self.wall = t.user + t.system, time.perf_counter()

    def busy(self) -> float:
        cpu, wall = self.cpu, self.wall
        self._mark()
        return (self.cpu - cpu) / max(self.wall - wall, 1e-9)


def count_records(body: bytes) -> int:
    """Records in a pull body, walking TOTALSIZE only (the cheapest honest count)."""
    n = pos = 0
    end = len(body)
    while pos < end:
        pos += _INT.unpack_from(body, pos)[0]
        n += 1
    return n


async def bench_send(namesrv: str, topic: str, messages: int, size: int, concurrency: int) -> tuple[float, int]:
    body = b"x" * size
    async with Producer(namesrv, group="PG_bench") as producer:
        await producer.send(topic, body)  # route + auto-create outside the timing
        sent = 0
        started = time.perf_counter()

        async def worker(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                await producer.send(topic, body)
                sent += 1

        per = messages // concurrency
        await asyncio.gather(*(worker(per) for _ in range(concurrency)))
        return sent / (time.perf_counter() - started), sent + 1


async def bench_send_batch(namesrv: str, topic: str, messages: int, size: int, concurrency: int) -> float:
    batch = [OutgoingMessage(b"y" * size) for _ in range(32)]
    async with Producer(namesrv, group="PG_bench_batch") as producer:
        await producer.send(topic, b"warm-up")
        sent = 0
        started = time.perf_counter()

        async def worker(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                await producer.send_batch(topic, batch)
                sent += len(batch)

        per = max(1, messages // 32 // concurrency)
        await asyncio.gather(*(worker(per) for _ in range(concurrency)))
        return sent / (time.perf_counter() - started)


async def bench_pull(broker: str, topic: str, group: str, expect: int) -> tuple[float, float]:
    """One consumer, one pull in flight per queue; returns (msg/s, MiB/s)."""
    conn = await Connection.open(broker)
    hb = HeartbeatData(f"bench@{os.getpid()}", consumer_data_set=[
        ConsumerData(group, subscription_data_set=[SubscriptionData.build(topic, "*")])])
    resp = await conn.request(RemotingCommand(RequestCode.HEART_BEAT, body=hb.encode()), 5)
    assert resp.code == ResponseCode.SUCCESS, resp
    got = 0
    nbytes = 0
    done = asyncio.Event()

    async def queue_loop(queue_id: int) -> None:
        nonlocal got, nbytes
        offset = 0
        while not done.is_set():
            ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
                   "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "1000",
                   "subVersion": "0", "expressionType": "TAG"}
            r = await conn.request(RemotingCommand(RequestCode.PULL_MESSAGE, ext), 30)
            if r.code == ResponseCode.SUCCESS and r.body:
                got += count_records(r.body)
                nbytes += len(r.body)
            if r.code != ResponseCode.PULL_NOT_FOUND:
                offset = int(r.ext_fields["nextBeginOffset"])
            if got >= expect:
                done.set()

    started = time.perf_counter()
    tasks = [asyncio.create_task(queue_loop(q)) for q in range(QUEUES)]
    await done.wait()
    elapsed = time.perf_counter() - started
    for t in tasks:
        t.cancel()
    conn.close()
    return got / elapsed, nbytes / elapsed / 2**20


def bench_cpp_consumer(namesrv: str, topic: str, expect: int) -> float | None:
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # the wheel is Linux x86-64 only
        print(f"  (C++ client unavailable: {exc!r})")
        return None
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HOME": home}
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cpp_bench_consumer.py"), "--namesrv", namesrv,
                               "--group", "CG_bench_cpp", "--topic", topic, "--count", str(expect)],
                              capture_output=True, text=True, env=env, timeout=900)
    samples = [tuple(map(float, line.split())) for line in proc.stdout.splitlines() if line.strip()]
    lo = next((s for s in samples if s[1] >= expect * 0.1), None)
    hi = next((s for s in samples if s[1] >= expect * 0.9), None)
    if proc.returncode != 0 or lo is None or hi is None or hi[0] <= lo[0]:
        print(f"  (C++ consumer failed: rc={proc.returncode} {proc.stderr[-300:]!r})")
        return None
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--flush", choices=("sync", "async"), default="sync")
    ap.add_argument("--no-cpp", action="store_true")
    args = ap.parse_args()
    print(f"embedded broker benchmark: {args.messages} x {args.size} B, flush={args.flush}, "
          f"{os.cpu_count()} cores, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        with BrokerProcess(Path(tmp) / "data", flush_mode=args.flush,
                           log_path=Path(tmp) / "broker.log") as bp:
            meter = BusyMeter(bp.pid)
            rate, total = asyncio.run(bench_send(bp.namesrv_address, "Bench", args.messages, args.size,
                                                 args.concurrency))
            print(f"send   rmqrun Producer, {args.concurrency} in flight : {rate:>10,.0f} msg/s   "
                  f"(broker busy {meter.busy():.0%})")
            rate = asyncio.run(bench_send_batch(bp.namesrv_address, "BenchBatch", args.messages, args.size,
                                                max(1, args.concurrency // 8)))
            print(f"send   rmqrun Producer, batches of 32      : {rate:>10,.0f} msg/s   "
                  f"(broker busy {meter.busy():.0%})")
            msgs, mib = asyncio.run(bench_pull(bp.broker_address, "Bench", "CG_bench_raw", total))
            busy = meter.busy()
            print(f"serve  one consumer, 1 pull per queue       : {msgs:>10,.0f} msg/s   "
                  f"(broker busy {busy:.0%}: capacity ~{msgs / max(busy, 0.01):,.0f} msg/s; {mib:,.1f} MiB/s)")
            if not args.no_cpp:
                rate_cpp = bench_cpp_consumer(bp.namesrv_address, "Bench", total)
                if rate_cpp is not None:
                    print(f"serve  Apache C++ push consumer (10-90 %)  : {rate_cpp:>10,.0f} msg/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
