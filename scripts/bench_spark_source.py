#!/usr/bin/env python3
"""The ``rocketmq`` Spark source's batch read rate against raw pulls of the same backlog.

A broker (its own process) holds a backlog of ``--messages`` messages of
``--size`` bytes in 4 queues. Measured on the same broker and machine:

* raw: one process, one :class:`rmqrun.PullConsumer`, pulling every queue from
  its first to its last offset (``rmqrun.spark.pulling.read_range``, 32 per pull,
  messages decoded) — the floor any reader on this client stands on;
* Spark: ``spark.read.format("rocketmq")`` on a ``local[N]`` session, summing
  the body lengths so every row (and its body) is produced; the session and
  its Python workers are warmed up by a first read, which is not timed.

Prints both rates and the ratio Spark / raw. Needs the ``spark`` extra and Java 17+.

Usage: python scripts/bench_spark_source.py [--messages 200000] [--size 1024] [--master local[2]]
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

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402
from rmqrun.pull import PullConsumer  # noqa: E402
from rmqrun.spark.pulling import read_range  # noqa: E402
from rmqrun.spark.ranges import list_queues, plan_ranges  # noqa: E402

TOPIC = "BenchSpark"


async def produce(namesrv: str, messages: int, size: int) -> None:
    batch = [OutgoingMessage(b"s" * size) for _ in range(32)]
    async with Producer(namesrv, group="PG_bench_spark") as producer:
        async def worker(n: int) -> None:
            for _ in range(n):
                await producer.send_batch(TOPIC, batch)

        await asyncio.gather(*(worker(messages // 32 // 8) for _ in range(8)))


def raw_rate(namesrv: str) -> tuple[float, int]:
    with PullConsumer(namesrv, timeout=10) as consumer:
        queues = list_queues(consumer, [TOPIC])
        start = {q: consumer.min_offset(q) for q in queues}
        end = {q: consumer.max_offset(q) for q in queues}
        count = 0
        began = time.perf_counter()
        for r in plan_ranges(start, end):
            for msg in read_range(consumer, r):
                count += len(msg.body) > 0
        return count / (time.perf_counter() - began), count


def spark_rate(namesrv: str, master: str) -> tuple[float, int]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession, functions as F

    import rmqrun.spark

    spark = (SparkSession.builder.master(master).appName("bench-spark-source")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rmqrun.spark.register(spark)
    try:
        df = spark.read.format("rocketmq").option("namesrv", namesrv).option("topic", TOPIC).load()
        df.limit(10).collect()                                     # warm-up: session, Python workers
        df.agg(F.count("*"), F.sum(F.length("body"))).collect()    # warm-up of the full plan
        began = time.perf_counter()
        count, _ = df.agg(F.count("*"), F.sum(F.length("body"))).collect()[0]
        return count / (time.perf_counter() - began), int(count)
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with BrokerProcess(Path(tmp) / "data", log_path=Path(tmp) / "broker.log") as bp:
            asyncio.run(produce(bp.namesrv_address, args.messages, args.size))
            raw, n_raw = raw_rate(bp.namesrv_address)
            spark, n_spark = spark_rate(bp.namesrv_address, args.master)
    assert n_raw == n_spark, f"raw pulls read {n_raw} messages, Spark {n_spark}"
    print(f"machine: {os.cpu_count()} cores; backlog {n_raw:,} messages of {args.size} B in 4 queues")
    print(f"raw PullConsumer, one process   : {raw:>10,.0f} msg/s")
    print(f"Spark rocketmq source, {args.master:<9}: {spark:>10,.0f} msg/s")
    print(f"ratio Spark / raw               : {spark / raw:>10.2f}")


if __name__ == "__main__":
    main()
