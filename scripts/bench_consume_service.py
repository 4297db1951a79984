#!/usr/bin/env python3
"""Micro-benchmark: a consume service's own CPU per job (the orderly one against the concurrent one), no broker.

A drain's supervisor figure (``bench_ab_drain.py``) moves by ±15 % from round to round on a shared machine,
more than a cut in one service is worth. This measures only what a service does per job: the real
``OrderlyConsumeService`` or ``ConcurrentConsumeService`` on the tests' fake engine (real process queues and
offset store), fed whole pulls of 32 messages over 4 queues the way the puller hands them over
(``put_run`` + ``submit_run``), with an executor that answers every job SUCCESS one event-loop turn after it
was handed over (a worker's no-op job, without the pool). CPU µs per job (``time.process_time``), uvloop.

The fake answers faster than a real pull comes, so every orderly job here finds its queue's loop ended
(a task per job; about half the jobs in a real drain): an upper bound of that cost.

Usage: python scripts/bench_consume_service.py [--pulls 3000] [--rounds 5] [--mode orderly|concurrent|both]
       [--compare TREE ...]
``--compare``: each round also runs the same from the other source trees (a subprocess each, PYTHONPATH set
to the tree, this one first), trees alternating from round to round; medians and minima per tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUEUES = 4
PER_PULL = 32


async def _drain(orderly: bool, pulls: int) -> float:
    from rmqrun.consumer.executor import JobResult
    from rmqrun.consumer.process_queue import QueuedRun
    from rmqrun.model import MessageQueue, Status
    from tests.fakes.engine import FakeEngine, FakeExecutor, config

    class AtOnce(FakeExecutor):
        """The pool executor's contract, answered one turn later: a future, the settled callback first."""
        runs_chains = True

        def submit(self, job):  # type: ignore[no-untyped-def]
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            if job.orderly:
                future.add_done_callback(job.settled)
            loop.call_soon(future.set_result, JobResult([Status.SUCCESS] * len(job.offsets), handler_seconds=0.0))
            return future

    engine = FakeEngine(config(orderly=orderly), executor=AtOnce())
    service = engine.consume_service
    reqs = [engine.request(MessageQueue("T", "broker-a", q)) for q in range(QUEUES)]
    payloads = [memoryview(b"x" * 1024)] * PER_PULL
    t0 = time.process_time()
    for i in range(pulls):
        for req in reqs:
            offsets = list(range(i * PER_PULL, (i + 1) * PER_PULL))
            run = QueuedRun(offsets, [1024] * PER_PULL, payloads, [0] * PER_PULL)
            req.pq.put_run(run, offsets[-1] + 1)
            service.submit_run(req, run)
        for _ in range(6):  # the jobs' answers and settling
            await asyncio.sleep(0)
    while service.in_flight or any(r.pq.msg_count for r in reqs):
        await asyncio.sleep(0)
    spent = time.process_time() - t0
    if any(engine.offset_store.read_memory(r.mq) != pulls * PER_PULL for r in reqs):
        raise SystemExit("not every queue committed through its last message")
    return 1e6 * spent / (pulls * QUEUES)


def one(mode: str, pulls: int) -> float:
    import uvloop
    return uvloop.run(_drain(mode == "orderly", pulls))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pulls", type=int, default=3000, help="pulls per queue in a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mode", choices=("orderly", "concurrent", "both"), default="both")
    ap.add_argument("--compare", type=Path, action="append", default=[], metavar="TREE")
    ap.add_argument("--one", choices=("orderly", "concurrent"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(f"{one(args.one, args.pulls):.3f}")
        return
    modes = ("orderly", "concurrent") if args.mode == "both" else (args.mode,)
    trees = [ROOT, *[t.resolve() for t in args.compare]]
    got: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for tree in trees[r % len(trees):] + trees[:r % len(trees)]:
            for mode in modes:
                env = dict(os.environ, PYTHONPATH=str(tree))
                out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", mode, "--pulls",
                                      str(args.pulls)], env=env, cwd=tree, check=True, capture_output=True, text=True)
                got.setdefault((str(tree), mode), []).append(float(out.stdout.split()[-1]))
    print(f"CPU µs per job ({QUEUES} queues, {PER_PULL} messages a job, {args.rounds} rounds, load "
          f"{os.getloadavg()[0]:.1f}): median (min–max)")
    for (tree, mode), v in got.items():
        print(f"  {mode:<10} {tree}: {statistics.median(v):6.2f} ({min(v):.2f}–{max(v):.2f})")


if __name__ == "__main__":
    main()
