#!/usr/bin/env python3
"""Before/after: CPU per no-op message of ``rmqrun run`` from two source trees, drained alternately.

One embedded broker (one per tree with ``--broker-too``), one backlog of ``--messages`` × 1 KiB on an 8-queue
topic (optionally also a 4-queue topic drained orderly); each round drains it once with the tree given as
``--before`` and once with ``--after`` (this checkout by default), each on a fresh consumer group from the first
offset, in an order that alternates from round to round. A drain is ``bench_report``'s (status lines every
0.1 s, CPU sampled at each), so the figures are its own: supervisor, workers and broker CPU µs per message over the
10–90 % window, and the rate. On a shared machine compare the CPU per message (what load changes least), not the
rates.

Usage: python scripts/bench_ab_drain.py --before /path/to/old/tree [--after .] [--messages 50000]
       [--rounds 4] [--workers 2] [--orderly] [--pop] [--broker-too]

``--cpu-ms MS`` drains with ``workers.cpu:handle`` burning MS of CPU per message (the 1 ms row: use a
smaller ``--messages``, e.g. 6000) and prints the workers' CPU per message beyond the handler's MS.
``--handler`` drains with any other handler (``module:function``).

``--pop`` also drains an 8-queue topic with ``--consume-mode pop`` (each group switched to POP first, as
``bench_pop`` does).

Which broker: by default one broker serves both sides, started as ``python -m rmqrun.broker`` with this
process's directory and environment (run from the ``--after`` tree with ``PYTHONPATH=$PWD`` it is that tree's),
so only the client differs. ``--broker-too`` A/Bs the broker as well: two brokers, one started from each tree
(cwd and PYTHONPATH set to it, as a drain's client is), each with its own copy of the backlog, and every drain
goes to its own side's broker (the other idles meanwhile), so a round measures tree X's client against tree X's
broker; the broker column is then each side's own broker CPU per message. The header names the tree each broker
imports ``rmqrun`` from (read from the running process: its cwd, then its PYTHONPATH), and the ``--json``
figures carry it per drain as ``broker_tree``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SCRIPTS.parent))

import bench_report as br  # noqa: E402
import bench_runs  # noqa: E402
from bench_sections import NOOP  # noqa: E402
from bench_pop import set_pop_mode  # noqa: E402

import psutil  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402


def start_broker(data_dir: Path, tree: Path | None) -> BrokerProcess:
    """An embedded broker (async flush); with ``tree``, started with that tree as its cwd and PYTHONPATH, so
    ``python -m rmqrun.broker`` imports that tree's ``rmqrun``."""
    if tree is None:
        return BrokerProcess(data_dir, flush_mode="async").start()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return BrokerProcess(data_dir, flush_mode="async", cwd=tree, env=env).start()


def rmqrun_tree(proc: psutil.Process) -> str:
    """Where a running ``python -m rmqrun...`` process imports ``rmqrun`` from: its cwd (``-m`` puts it first
    unless PYTHONSAFEPATH is set), then its PYTHONPATH entries, else the installed package."""
    env, cwd = proc.environ(), Path(proc.cwd())
    dirs = ([] if env.get("PYTHONSAFEPATH") else [cwd]) + [cwd / d for d in env.get("PYTHONPATH", "").split(":") if d]
    found = next((d for d in dirs if (d / "rmqrun" / "__init__.py").is_file()), None)
    return str(found.resolve()) if found else "the installed rmqrun"


def drain_with(tree: Path, ns: str, topic: str, group: str, n: int, workers: int, timeout: float,
               env: dict[str, str], handler: str = NOOP, handler_us: float = 0.0) -> dict[str, Any]:
    """One drain by ``rmqrun run`` imported from ``tree`` (bench_runs reads its ROOT when a run starts);
    ``handler_us`` (the handler's own CPU per message) is taken off the workers' figure."""
    bench_runs.ROOT = tree
    try:
        run = bench_runs.drain(ns, topic, group, n, handler, workers, timeout, env)
    finally:
        bench_runs.ROOT = SCRIPTS.parent
    return {"sup": run.supervisor_us_per_msg(n), "workers": run.worker_us_per_msg(n) - handler_us,
            "broker": run.broker_us_per_msg(n), "rate": run.rate(n), "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the source tree to compare against")
    ap.add_argument("--after", type=Path, default=SCRIPTS.parent)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--orderly", action="store_true", help="also drain a 4-queue topic orderly")
    ap.add_argument("--pop", action="store_true", help="also drain an 8-queue topic with --consume-mode pop")
    ap.add_argument("--json", type=Path, help="write every drain's figures here")
    ap.add_argument("--cpu-ms", type=float, default=0.0, metavar="MS",
                    help="workers.cpu:handle at MS of CPU per message; workers' figure is beyond it")
    ap.add_argument("--handler", default=NOOP, help="the handler every drain runs (module:function)")
    ap.add_argument("--broker-too", action="store_true",
                    help="one broker per tree, each side's drains on its own tree's broker (A/B of the broker too)")
    args = ap.parse_args(argv)
    handler, handler_us, cpu_env = args.handler, 0.0, {}
    if args.cpu_ms > 0:
        handler, handler_us = "workers.cpu:handle", args.cpu_ms * 1000
        cpu_env = {"RMQRUN_HANDLER_CPU_MS": repr(args.cpu_ms)}
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows: dict[str, list[dict[str, Any]]] = {}
    kinds = [("concurrent", "ABNoop", {})]
    if args.orderly:
        kinds.append(("orderly", "ABOrderly4", {"RMQRUN_ORDERLY": "true"}))
    if args.pop:
        kinds.append(("pop", "ABPop", {"RMQRUN_CONSUME_MODE": "pop"}))
    with tempfile.TemporaryDirectory(prefix="rmqrun-ab-") as tmp, contextlib.ExitStack() as stack:
        brokers: dict[str, BrokerProcess] = {}
        for side, tree in trees.items():
            if args.broker_too or not brokers:
                brokers[side] = start_broker(Path(tmp) / (f"broker-{side}" if args.broker_too else "broker"),
                                             tree if args.broker_too else None)
                stack.callback(brokers[side].stop)
            else:
                brokers[side] = brokers["before"]
        procs = {side: psutil.Process(bp.pid) for side, bp in brokers.items()}
        broker_trees = {side: rmqrun_tree(proc) for side, proc in procs.items()}
        for side in trees:
            print(f"{side:6s} client {trees[side]}, broker {broker_trees[side]} (pid {procs[side].pid}"
                  + (", shared)" if not args.broker_too else ")"), flush=True)
        for bp in {id(bp): bp for bp in brokers.values()}.values():
            for kind, topic, _env in kinds:
                br.create_topic(bp.namesrv_address, topic, 4 if kind == "orderly" else 8)
                asyncio.run(br.produce(bp.namesrv_address, topic, args.messages))
        for r in range(args.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for kind, topic, env in kinds:
                for side in order:
                    ns, br.RmqrunRun.broker = brokers[side].namesrv_address, procs[side]
                    group = f"CG_{kind}_{side}_{r}"
                    if kind == "pop":
                        set_pop_mode(ns, topic, group)
                    got = drain_with(trees[side], ns, topic, group, args.messages, args.workers, args.timeout,
                                     {**env, **cpu_env}, handler, handler_us)
                    got["broker_tree"] = broker_trees[side]
                    rows.setdefault(f"{kind} {side}", []).append(got)
                    print(f"round {r + 1} {kind:10s} {side:6s} sup {got['sup']:.2f} workers {got['workers']:.2f} "
                          f"broker {got['broker']:.2f} µs/msg, {got['rate']:,.0f} msg/s, load {got['load']:.1f}",
                          flush=True)
    print("\nmedians (min–max) of the rounds, CPU µs per message"
          + (f" (workers: beyond the handler's {args.cpu_ms:g} ms)" if args.cpu_ms > 0 else "") + ":")
    for name, drains in rows.items():
        parts = []
        for key in ("sup", "workers", "broker"):
            vals = [d[key] for d in drains if d[key] == d[key]]
            parts.append(f"{key} {statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})" if vals
                         else f"{key} nan")
        loads = [d["load"] for d in drains]
        print(f"  {name:18s} " + ", ".join(parts) + f"; load {min(loads):.1f}–{max(loads):.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
