#!/usr/bin/env python3
"""What message tracing costs: rmqrun throughput with ``msg_trace`` off and on, in the same run.

    .venv/bin/python scripts/bench_trace.py                      # 1 ms handler, 3 rounds, 4 workers
    .venv/bin/python scripts/bench_trace.py --cpu-ms 0 --messages 50000 --write docs/benchmarks/tracing.md

One embedded broker (a process of its own, ``traceTopicEnable``) serves every run. Each round drains the
same backlog twice with a fresh group, once with ``RMQRUN_MSG_TRACE=false`` and once ``true``, the order
alternating between rounds so neither side always runs on a warmer machine; the rate is the 10-90 % window
of the supervisor's status lines (``bench_consume.run_rmqrun``), and the supervisor's and workers' CPU per
message in that window. The ratio on/off of each round and their median are printed (and written as a
Markdown table with ``--write``), with the load average before each run: only a quiet machine's numbers
mean anything. The goal of issue #35 is >= 0.95 for the 1 ms handler.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SCRIPTS.parent))

from bench_consume import load, produce, run_rmqrun  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--cpu-ms", type=float, default=1.0, help="handler CPU per message (workers.cpu; 0: no-op)")
    ap.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--write", type=Path, metavar="FILE", help="write the table as Markdown")
    args = ap.parse_args()
    handler = "workers.cpu:handle" if args.cpu_ms > 0 else "workers.noop:handle"
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-trace-"))
    rows: list[str] = []
    ratios: list[float] = []
    with BrokerProcess(data / "broker", flush_mode="async", trace_topic_enable=True) as bp:
        ns = bp.namesrv_address
        topic = "BenchTrace"
        rate = asyncio.run(produce(ns, topic, args.messages))
        print(f"produced {args.messages} x 1 KiB at {rate:,.0f} msg/s; {args.workers} workers; {load()}")
        for r in range(args.rounds):
            order = ("off", "on") if r % 2 == 0 else ("on", "off")
            got: dict[str, float] = {}
            for mode in order:
                before = load()
                st = run_rmqrun(ns, topic, f"CG_trace_{r}_{mode}", args.messages, handler, args.workers,
                                args.cpu_ms, args.timeout,
                                extra_env={"RMQRUN_MSG_TRACE": "true" if mode == "on" else "false"})
                got[mode] = st.rate
                line = (f"| {r + 1} | {mode} | {st.rate:,.0f} | {st.supervisor_us:.1f} | {st.workers_us:.1f} "
                        f"| {before} |")
                rows.append(line)
                print(line, flush=True)
            ratios.append(got["on"] / got["off"])
            print(f"round {r + 1}: on/off {ratios[-1]:.3f}", flush=True)
    median = statistics.median(ratios)
    print(f"median on/off: {median:.3f} over {len(ratios)} round(s)")
    if args.write:
        what = f"{args.cpu_ms:g} ms CPU handler" if args.cpu_ms > 0 else "no-op handler"
        args.write.write_text(
            f"# Message tracing: throughput off and on ({what})\n\n"
            f"`scripts/bench_trace.py --messages {args.messages} --cpu-ms {args.cpu_ms:g} --workers {args.workers} "
            f"--rounds {args.rounds}`: {args.messages} messages of 1 KiB drained by {args.workers} workers, "
            f"with `msg_trace` off and on in each round (alternating which goes first), one embedded broker.\n\n"
            "| round | msg_trace | msg/s (10-90 %) | supervisor CPU us/msg | workers CPU us/msg | load before |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
            f"Ratio on/off per round: {', '.join(f'{x:.3f}' for x in ratios)}; **median {median:.3f}**.\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
