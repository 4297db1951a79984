#!/usr/bin/env python3
"""Where each process's time goes during a no-op drain: running, runnable but waiting for a core, asleep.

One embedded broker (its own process, async flush), a backlog of ``--messages`` × 1 KiB on an 8-queue topic (and a
4-queue one drained orderly with ``--orderly``), drained by ``rmqrun run`` with 2 workers on a fresh group per round.
Over the 10–90 % window of each drain it reads ``/proc/<pid>/task/*/schedstat`` (Linux: time on a core, time
runnable but waiting for one, time slices) of the supervisor, each worker and the broker, and prints each one's
shares of the window. A stage that is running or waiting most of the time while the others sleep is the
pipeline's limit (issue #38: the supervisor, see docs/benchmarks/java/where-the-time-goes.md §18).

Each line also counts context switches per 1,000 messages: voluntary ones (the process blocked, so something had
to wake it: a wake-up its peer paid for) and involuntary ones (preempted); and the machine's cores' idle entries per
1,000 messages (every process's, so only on a quiet machine): on a VM whose idle cores halt (no halt polling), each
one is a later wake-up of that core, which costs its waker ~10 us.

Usage: python scripts/bench_sched.py [--messages 300000] [--rounds 2] [--orderly] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SCRIPTS.parent))

import bench_report as br  # noqa: E402
import bench_runs  # noqa: E402
from bench_pop import set_pop_mode  # noqa: E402
from bench_sections import NOOP  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402

def schedstat(pid: int) -> tuple[int, int, int]:
    """Nanoseconds on a core, nanoseconds runnable but waiting, time slices: summed over the process's threads."""
    run = wait = slices = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                a, b, c = f.read().split()[:3]
        except OSError:  # a thread that ended meanwhile
            continue
        run, wait, slices = run + int(a), wait + int(b), slices + int(c)
    return run, wait, slices


def switches(pid: int) -> tuple[int, int]:
    """Voluntary (it blocked: each one is a later wake-up) and involuntary (preempted) context switches, summed
    over the process's threads."""
    vol = invol = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol += int(line.split()[1])
        except OSError:
            continue
    return vol, invol


def io_calls(pid: int) -> tuple[int, int]:
    """Read-like and write-like system calls so far (``/proc/<pid>/io``: ``syscr``, ``syscw``; 0, 0 where it
    cannot be read)."""
    calls = {}
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                key, _, value = line.partition(":")
                calls[key] = int(value)
    except (OSError, ValueError):
        return 0, 0
    return calls.get("syscr", 0), calls.get("syscw", 0)


def idle_entries() -> int:
    """Times the machine's cores went idle so far (all processes', Linux cpuidle; 0 where there is none): on a VM
    whose idle cores halt, each one costs whoever wakes that core again an interrupt between cores."""
    total = 0
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpuidle/state*/usage"):
        try:
            total += int(path.read_text())
        except (OSError, ValueError):
            continue
    return total


def drain(ns: str, topic: str, group: str, n: int, workers: int, kind: str, broker_pid: int) -> None:
    orderly = kind == "orderly"
    env = {"RMQRUN_ORDERLY": "true" if orderly else "false"}
    if kind == "pop":
        set_pop_mode(ns, topic, group)
        env["RMQRUN_CONSUME_MODE"] = "pop"
    run = bench_runs.RmqrunRun(ns, topic, group, NOOP, workers, env)
    run.start()
    try:
        if not run.wait_for(int(0.1 * n), 300):
            raise RuntimeError(f"rmqrun {group} did not reach 10 % of the backlog")
        pids = {"supervisor": run.proc.pid,
                **{f"worker {i + 1}": w.pid for i, w in enumerate(run.ps.children())}, "broker": broker_pid}
        sw0, idle0 = {k: switches(p) for k, p in pids.items()}, idle_entries()
        io0 = {k: io_calls(p) for k, p in pids.items()}
        before, t0, c0 = {k: schedstat(p) for k, p in pids.items()}, time.monotonic(), run.consumed
        if not run.wait_for(int(0.9 * n), 300):
            raise RuntimeError(f"rmqrun {group} did not reach 90 % of the backlog")
        after, t1, c1 = {k: schedstat(p) for k, p in pids.items()}, time.monotonic(), run.consumed
        sw1, idle1 = {k: switches(p) for k, p in pids.items()}, idle_entries()
        io1 = {k: io_calls(p) for k, p in pids.items()}
    finally:
        run.stop()
    wall = t1 - t0
    print(f"{kind} {group}: {(c1 - c0) / wall:,.0f} msg/s over {wall:.2f} s, "
          f"load {os.getloadavg()[0]:.1f}")
    total = 0.0
    for name in pids:
        ran = (after[name][0] - before[name][0]) / 1e9
        wait = (after[name][1] - before[name][1]) / 1e9
        slices = after[name][2] - before[name][2]
        total += ran
        per_k = 1000 / max(1, c1 - c0)
        vol, invol = ((sw1[name][i] - sw0[name][i]) * per_k for i in (0, 1))
        reads, writes = ((io1[name][i] - io0[name][i]) * per_k for i in (0, 1))
        print(f"  {name:10s} running {ran / wall:6.1%}  waiting for a core {wait / wall:6.1%}  "
              f"asleep {1 - (ran + wait) / wall:6.1%}  time slices/s {slices / wall:,.0f}  "
              f"sleeps/1k msg {vol:5.1f}  preempted/1k msg {invol:5.1f}  reads/1k msg {reads:5.1f}  "
              f"writes/1k msg {writes:5.1f}")
    print(f"  cores used by these processes: {total / wall:.2f} of {os.cpu_count()}; the cores went idle "
          f"{(idle1 - idle0) * 1000 / max(1, c1 - c0):.1f} times per 1,000 messages (whole machine)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--orderly", action="store_true", help="also drain a 4-queue topic orderly")
    ap.add_argument("--pop", action="store_true", help="also drain an 8-queue topic with --consume-mode pop")
    args = ap.parse_args(argv)
    if not Path("/proc/self/schedstat").exists():
        print("no /proc/<pid>/schedstat here (Linux with schedstats only)", file=sys.stderr)
        return 2
    kinds = [("concurrent", "SchedNoop", 8)] + ([("orderly", "SchedOrderly4", 4)] if args.orderly else []) \
        + ([("pop", "SchedPop", 8)] if args.pop else [])
    with tempfile.TemporaryDirectory(prefix="rmqrun-sched-") as tmp:
        broker = BrokerProcess(Path(tmp) / "broker", flush_mode="async").start()
        try:
            ns = broker.namesrv_address
            for _, topic, queues in kinds:
                br.create_topic(ns, topic, queues)
                asyncio.run(br.produce(ns, topic, args.messages))
            for r in range(args.rounds):
                for kind, topic, _ in kinds:
                    drain(ns, topic, f"CG_sched_{kind}_{r}", args.messages, args.workers, kind, broker.pid)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
