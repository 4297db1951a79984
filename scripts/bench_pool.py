"""Throughput of the worker pool with real processes: msg/s and overhead against a 1 ms handler.

    .venv/bin/python scripts/bench_pool.py                    # both scenarios, 2 workers
    .venv/bin/python scripts/bench_pool.py --scenario noop --batch 1 8 32 --messages 200000

Scenarios:

* ``noop``: ``workers.noop:handle``; reports messages per second through the
  pool (submit -> worker decodes -> handler -> DONE -> on_result), the number
  the supervisor can push per second with no work in the handler.
* ``cpu``: ``workers.cpu:handle`` burning RMQRUN_HANDLER_CPU_MS (1 ms) of CPU per
  message. The same messages are first decoded and handled in this process to
  get the real per-message cost; overhead = pool time * workers / messages
  over that cost, minus 1. On a machine with as many cores as workers the
  supervisor competes with the workers for CPU, and that is counted.

The feeding loop is the one the supervisor will use: a Dispatcher bounds
messages in flight per worker and a result frees room for the next batch.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmqrun.remoting.message import decode_message, encode_stored  # noqa: E402
from rmqrun.supervisor.dispatch import Dispatcher  # noqa: E402
from rmqrun.pipe.wire import Batch, BatchResult, ConsumeMode, Status
from rmqrun.supervisor.pool import Pool
from rmqrun.pipe.worker_config import WorkerConfig  # noqa: E402
from rmqrun.supervisor.pool_config import PoolConfig  # noqa: E402


def make_records(count: int, body_size: int) -> list[bytes]:
    body = b"x" * body_size
    return [bytes(encode_stored(topic="BenchTopic", body=body, properties={"TAGS": "bench", "UNIQ_KEY": f"K{i}"},
                                queue_id=i % 4, queue_offset=i, commit_log_offset=i * 200,
                                born_timestamp=1, store_timestamp=2))
            for i in range(count)]


@dataclass
class Run:
    wall: float  # seconds from the first submit to the last result
    ok: int  # messages that succeeded
    supervisor_cpu: float  # CPU seconds of this process over the run
    worker_cpu: float  # CPU seconds of all workers over the run


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


async def run_pool(handler: str, workers: int, records: list[bytes], batch: int, inflight: int,
                   time_limit: float = 60.0) -> Run:
    """Push every record through the pool, measuring wall time and CPU on both sides."""
    batches = [b"".join(records[i:i + batch]) for i in range(0, len(records), batch)]
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    state = {"next": 0, "done": 0, "ok": 0}
    dispatcher = Dispatcher(range(workers), max_inflight_messages=inflight)
    pool: Pool

    def feed() -> None:
        while state["next"] < len(batches):
            i = state["next"]
            wid = dispatcher.assign(i, i % 4, ConsumeMode.CONCURRENT, batch)
            if wid is None:
                return
            pool.submit(wid, Batch(i, i % 4, ConsumeMode.CONCURRENT, "broker-a", batches[i]))
            state["next"] += 1

    def on_result(result: BatchResult) -> None:
        dispatcher.done(result.batch_id)
        state["done"] += 1
        state["ok"] += result.statuses.count(Status.SUCCESS)
        if state["done"] == len(batches):
            finished.set_result(None)
        else:
            feed()

    def on_lost(lost) -> None:  # type: ignore[no-untyped-def]
        finished.set_exception(RuntimeError(f"worker lost: {lost}"))

    worker = WorkerConfig(handler, batch_size=1, time_limit=time_limit, log_level="WARNING")
    pool = Pool(PoolConfig(worker, workers=workers),
                on_result=on_result, on_worker_lost=on_lost)
    await pool.start()
    try:
        pids = [w.pid for w in pool.workers()]
        w0, c0, t0 = _cpu_of(pids), time.process_time(), time.perf_counter()
        feed()
        await finished
        elapsed = time.perf_counter() - t0
        supervisor = time.process_time() - c0
        worker = _cpu_of(pids) - w0
    finally:
        await pool.stop(10)
    return Run(elapsed, state["ok"], supervisor, worker)


def baseline_cost(records: list[bytes], handler) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds per message to decode and handle in this process (the work the pool must not inflate)."""
    t0 = time.thread_time()
    for rec in records:
        msg, _ = decode_message(rec, 0, broker_name="broker-a")
        handler(msg)
    return (time.thread_time() - t0) / len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=["noop", "cpu", "all"], default="all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--messages", type=int, default=100_000, help="noop scenario")
    parser.add_argument("--cpu-messages", type=int, default=4000, help="cpu scenario")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--inflight", type=int, default=0, help="messages in flight per worker (0: 2 batches)")
    parser.add_argument("--body", type=int, default=100)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.workers} workers, "
          f"body {args.body} B, load average {os.getloadavg()[0]:.2f} before the run")

    if args.scenario in ("noop", "all"):
        records = make_records(args.messages, args.body)
        for batch in args.batch:
            inflight = args.inflight or 2 * batch
            r = asyncio.run(run_pool("workers.noop:handle", args.workers, records, batch, inflight))
            assert r.ok == len(records), (r.ok, len(records))
            n = len(records)
            print(f"noop   batch {batch:3d}: {n / r.wall:8.0f} msg/s; CPU per message: supervisor "
                  f"{r.supervisor_cpu / n * 1e6:5.1f} us, workers {r.worker_cpu / n * 1e6:5.1f} us")

    if args.scenario in ("cpu", "all"):
        os.environ["RMQRUN_HANDLER_CPU_MS"] = "1"
        import workers.cpu as cpu
        records = make_records(args.cpu_messages, args.body)
        per_msg = baseline_cost(records[:1000], cpu.handle)
        for batch in args.batch:
            inflight = args.inflight or 2 * batch
            r = asyncio.run(run_pool("workers.cpu:handle", args.workers, records, batch, inflight))
            assert r.ok == len(records)
            n = len(records)
            wall_per_msg = r.wall * args.workers / n
            cpu_per_msg = (r.worker_cpu + r.supervisor_cpu) / n
            print(f"cpu1ms batch {batch:3d}: {n / r.wall:6.0f} msg/s (ideal {args.workers / per_msg:.0f}); "
                  f"CPU overhead {100 * (cpu_per_msg / per_msg - 1):+5.1f}% "
                  f"(workers {r.worker_cpu / n * 1e3:.3f} + supervisor {r.supervisor_cpu / n * 1e3:.3f} ms/msg vs "
                  f"{per_msg * 1e3:.3f} in-process); wall overhead {100 * (wall_per_msg / per_msg - 1):+.1f}%")


if __name__ == "__main__":
    main()
