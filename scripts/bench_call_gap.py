#!/usr/bin/env python3
"""Micro-benchmark: the worker's thread CPU *between* two handler calls, after short and after long calls.

Why: in the 1 ms row the workers spend ~19 µs per message beyond the handler's 1 ms, against ~7 µs with a
no-op handler, with the same code between calls. This times exactly that code: the handler reads
``time.thread_time()`` as it is entered and as it returns, and the gap from one call's return to the next
call's entry (inside a batch; the batch boundaries are left out) is the worker's own per-call path: the loop
step, the clock read, the progress block's stores, the time limit's fields, the status byte. The same gap is
timed in a bare loop that runs nothing between two calls, so what the machine charges for coming back from a
long call (cold caches and branch predictors after being preempted or after a millisecond of other code)
shows apart from what the worker's code costs.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_call_gap.py                 # 1 ms calls against no-op ones
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_call_gap.py --cpu-ms 2 --rounds 5

Figures are µs of thread CPU per gap (means; medians over rounds). Run it twice with two trees on PYTHONPATH
to compare them; on a shared machine only same-run ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]

_LOG: list[float] = []
_MS = [0.0]


def _handle(msg: object) -> None:
    """The timed handler: a thread CPU read on entry and on return, ``_MS[0]`` of burn between them."""
    import workers.cpu as cpu

    _LOG.append(time.thread_time())
    if _MS[0]:
        cpu.burn(_MS[0])
    _LOG.append(time.thread_time())


def _gaps(batch: int) -> float:
    """Mean µs from a call's return to the next call's entry, inside a batch of ``batch`` calls."""
    gaps = [_LOG[i + 1] - _LOG[i] for i in range(1, len(_LOG) - 1, 2)]
    inside = [g for j, g in enumerate(gaps) if (j + 1) % batch]
    return statistics.mean(inside) * 1e6


def worker_gap(batches: int, batch: int) -> float:
    """The gap in a real :class:`rmqrun.worker.main.Worker` (progress block, a 900 s time limit)."""
    from bench_worker import build_records

    from rmqrun.handler.loading import load_handler
    from rmqrun.pipe import progress as progress_mem
    from rmqrun.pipe.wire import Batch, ConsumeMode, Done, FrameBuffer, encode_run
    from rmqrun.pipe.worker_config import WorkerConfig
    from rmqrun.worker.main import Worker

    sup, wsock = socket.socketpair()
    writer = progress_mem.Writer(progress_mem.map_fd(progress_mem.create_fd()))
    worker = Worker(WorkerConfig("bench_call_gap:_handle", batch_size=1, time_limit=900.0), 1, wsock, writer)
    worker.handler = load_handler("bench_call_gap:_handle")
    recs = build_records(batch, 1024, 0)
    frame = b"".join(bytes(p) for p in encode_run(Batch(1, "q", ConsumeMode.CONCURRENT, "broker-a", recs,
                                                        count=len(recs))))
    back = FrameBuffer()
    _LOG.clear()
    for _ in range(batches):
        sup.sendall(frame)
        worker._run_batch(worker._next_frame())  # type: ignore[arg-type]
        worker.pipe.flush()
        done = None
        while not isinstance(done, Done):
            while not back.has_frame():
                back.feed(sup.recv(1 << 16))
            done = back.next()
    sup.close()
    wsock.close()
    return _gaps(batch)


def bare_gap(batches: int, batch: int) -> float:
    """The gap in a loop that calls the same handler with nothing in between."""
    _LOG.clear()
    for _ in range(batches * batch):
        _handle(None)
    return _gaps(batch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu-ms", type=float, default=1.0, help="the long calls' thread CPU (default 1 ms)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.modules.setdefault("bench_call_gap", sys.modules["__main__"])
    import rmqrun

    print(f"rmqrun from {rmqrun.__file__}")
    long_batches = max(2, int(800 / args.cpu_ms / args.batch))
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for label, ms, batches in (("no-op", 0.0, 200), (f"{args.cpu_ms:g} ms", args.cpu_ms, long_batches)):
            _MS[0] = ms
            rows.setdefault(f"worker, {label} calls", []).append(worker_gap(batches, args.batch))
            rows.setdefault(f"bare loop, {label} calls", []).append(bare_gap(batches, args.batch))
    for label, vals in rows.items():
        print(f"{label:<24} median {statistics.median(vals):6.2f} us between calls "
              f"(rounds {', '.join(f'{v:.2f}' for v in vals)})")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
