#!/usr/bin/env python3
"""``rmqrun spark`` against ``rmqrun run`` with a CPU-bound handler, on the same backlog, broker and machine.

One embedded broker (a separate process) holds one backlog of 1 KiB messages.
Both runners drain all of it with ``workers.cpu:handle`` (``--cpu-ms`` of CPU
per message):

* ``rmqrun run`` with ``--workers`` processes (default: CPU count), a fresh group from the first
  offset; its rate is taken between 10 % and 90 % of the backlog (``bench_consume.py``'s window);
* ``rmqrun spark`` on ``local[N]`` (N = ``--workers``); its rate is the Spark job's (messages / job
  time, from the summary), and its wall time with the session start-up is reported beside it.

The report gives both rates, spark / run, and each against the ideal ``cores / handler cost``.

Usage: python scripts/bench_spark_runner.py [--messages 20000] [--cpu-ms 1] [--workers N] [--master URL]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_consume import produce, run_rmqrun  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402

_SUMMARY = re.compile(r"handled (\d+) messages in (\d+) partitions in ([\d.]+) s \(([\d,]+) msg/s; ([\d.]+) s in all\)")


def run_spark(namesrv: str, topic: str, n: int, cpu_ms: float, master: str, timeout: float) -> tuple[float, float]:
    """(job msg/s, wall seconds of the whole command)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_")}
    env.update(RMQRUN_HANDLER_CPU_MS=str(cpu_ms), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "rmqrun.cli.main", "spark", "workers.cpu:handle", "--namesrv", namesrv,
           "--topic", topic, "--master", master, "--conf", "spark.ui.enabled=false"]
    began = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    wall = time.monotonic() - began
    m = _SUMMARY.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"rmqrun spark failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    handled, seconds = int(m.group(1)), float(m.group(3))
    if handled != n:
        raise SystemExit(f"rmqrun spark handled {handled} of {n} messages")
    return handled / seconds, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--cpu-ms", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--master", default=None, help="Spark master (default local[WORKERS])")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    ideal = cores / (args.cpu_ms / 1000)
    master = args.master or f"local[{args.workers}]"
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-spark-"))
    with BrokerProcess(data / "broker", flush_mode="async") as bp:
        ns = bp.namesrv_address
        topic = "BenchSparkRunner"
        rate = asyncio.run(produce(ns, topic, args.messages))
        print(f"broker pid {bp.pid} at {ns}; {cores} cores; produced {args.messages} x 1 KiB at {rate:,.0f} msg/s; "
              f"handler workers.cpu:handle at {args.cpu_ms:g} ms CPU")
        began = time.monotonic()
        run_rate = run_rmqrun(ns, topic, "CG_bench_run", args.messages, "workers.cpu:handle", args.workers,
                              args.cpu_ms, args.timeout)
        run_wall = time.monotonic() - began
        spark_rate, spark_wall = run_spark(ns, topic, args.messages, args.cpu_ms, master, args.timeout)
    print()
    print(f"{'runner':<28} {'msg/s':>10} {'of ideal':>9} {'wall s':>8}")
    print(f"{'rmqrun run (' + str(args.workers) + ' workers)':<28} {run_rate:>10,.0f} {run_rate / ideal:>9.2f} "
          f"{run_wall:>8.1f}")
    print(f"{'rmqrun spark (' + master + ')':<28} {spark_rate:>10,.0f} {spark_rate / ideal:>9.2f} {spark_wall:>8.1f}")
    print(f"ideal (cores / handler cost): {ideal:,.0f} msg/s")
    print(f"rmqrun spark / rmqrun run: {spark_rate / run_rate:.2f} (job rate; wall time ratio "
          f"{run_wall / spark_wall:.2f}, including Spark's start-up)")


if __name__ == "__main__":
    main()
