#!/usr/bin/env python3
"""Micro-benchmark: a worker's CPU per message, in this process, with no supervisor or broker.

Why: on the shared 2-core machine a full drain (``bench_consume.py``) measures the
worker side through the load of everything else; this drives the real
:class:`rmqrun.worker.main.Worker` loop (frame parsing, decode, the handler's
message, the handler call, progress memory, the DONE frame, the pipe writes)
over a real socket pair, one RUN frame of ``--batch`` records at a time, and
counts this process's CPU time (``time.process_time``) per message. The
supervisor's end of the pair (writing RUN, reading DONE) runs in the same
process and is counted too: a small constant, the same for every variant.

    .venv/bin/python scripts/bench_worker.py                      # no-op, 32-message batches
    .venv/bin/python scripts/bench_worker.py --compare /tmp/perf2-base   # another checkout, interleaved
    .venv/bin/python scripts/bench_worker.py --profile /tmp/w.prof       # cProfile of the loop
    .venv/bin/python scripts/bench_worker.py --cpu-ms 1 --compare DIR    # a 1 ms CPU handler (workers.cpu)

With ``--cpu-ms MS`` the handler is ``workers.cpu:handle`` burning MS of thread
CPU per message (``RMQRUN_HANDLER_CPU_MS``), the default batch count drops so a
round lasts a few seconds, and the figure printed is the CPU per message
*beyond* the handler's MS (what the worker costs around a real handler's call:
the 1 ms row of ``bench_report.py``). The burn itself overshoots by about a
microsecond (its last clock read), which stays in that figure for every tree.

``--compare`` runs this script again under the other tree's code (a subprocess
per round, rounds interleaved) so both share the machine's load.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_records(batch: int, body_size: int, start: int) -> list[bytes]:
    """Records as a 4.x Java producer and the broker leave them: UNIQ_KEY, WAIT, TAGS, KEYS, CLUSTER."""
    from rmqrun.remoting.message import encode_stored

    out = []
    for i in range(start, start + batch):
        props = {"UNIQ_KEY": f"7F0000011F8B18B4AAC2{i:012X}", "WAIT": "true", "TAGS": "TagA",
                 "KEYS": f"key-{i}", "CLUSTER": "DefaultCluster", "MIN_OFFSET": "0", "MAX_OFFSET": "100000"}
        out.append(bytes(encode_stored(
            topic="BenchTopic", body=os.urandom(body_size), properties=props, queue_id=1,
            born_timestamp=1_700_000_000_000 + i, born_host="127.0.0.1:40000", store_timestamp=1_700_000_000_001 + i,
            store_host="127.0.0.1:10911", queue_offset=i, commit_log_offset=i * 1200)))
    return out


def measure(batches: int, batch: int, body_size: int, handler: str, orderly: bool, profile: str | None) -> float:
    """CPU µs per message of ``batches`` RUN frames through a real Worker."""
    from rmqrun.pipe import progress as progress_mem
    from rmqrun.pipe.wire import Batch, ConsumeMode, Done, FrameBuffer, encode_run
    from rmqrun.pipe.worker_config import WorkerConfig
    from rmqrun.worker.main import Worker

    sup, wsock = socket.socketpair()
    sup.setblocking(True)
    wsock.setblocking(True)
    fd = progress_mem.create_fd()
    writer = progress_mem.Writer(progress_mem.map_fd(fd))
    worker = Worker(WorkerConfig(handler, batch_size=1, time_limit=900.0), 1, wsock, writer)
    worker.handler = __import__("rmqrun.handler.loading", fromlist=["load_handler"]).load_handler(handler)
    mode = ConsumeMode.ORDERLY if orderly else ConsumeMode.CONCURRENT
    frames = []
    for b in range(16):  # a few distinct batches, reused round robin
        recs = build_records(batch, body_size, b * batch)
        frames.append(b"".join(bytes(p) for p in encode_run(Batch(b + 1, "q", mode, "broker-a", recs,
                                                                   count=len(recs)))))
    back = FrameBuffer()

    def loop(n: int) -> None:
        for i in range(n):
            sup.sendall(frames[i % len(frames)])
            frame = worker._next_frame()
            worker._run_batch(frame)  # type: ignore[arg-type]
            worker.pipe.flush()
            done = None
            while not isinstance(done, Done):  # STARTED, then DONE
                while not back.has_frame():
                    back.feed(sup.recv(1 << 16))
                done = back.next()
            assert done is not None and len(done.statuses) == batch and not any(done.statuses), done  # type: ignore

    loop(50)  # warm-up: caches, first imports
    if profile:
        import cProfile

        prof = cProfile.Profile(time.process_time)
        prof.enable()
        loop(batches)
        prof.disable()
        prof.dump_stats(profile)
    t0 = time.process_time()
    loop(batches)
    return (time.process_time() - t0) / (batches * batch) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--handler", default="workers.noop:handle")
    ap.add_argument("--cpu-ms", type=float, default=0.0, metavar="MS",
                    help="workers.cpu:handle burning MS of CPU per message; report the CPU beyond it")
    ap.add_argument("--orderly", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", type=Path, metavar="DIR", help="another checkout, run in the same rounds")
    ap.add_argument("--profile", metavar="FILE", help="also write a cProfile of one pass (process-time clock)")
    ap.add_argument("--once", action="store_true", help=argparse.SUPPRESS)  # one measurement, printed bare
    args = ap.parse_args()
    if args.cpu_ms > 0:
        args.handler = "workers.cpu:handle"
        os.environ["RMQRUN_HANDLER_CPU_MS"] = repr(args.cpu_ms)  # read by workers/cpu.py at import
        if args.batches == ap.get_default("batches"):
            args.batches = max(10, int(80 / args.cpu_ms))  # ~2.5 s of handler time per round
    if args.once:  # rmqrun comes from PYTHONPATH (the tree under test)
        import rmqrun

        print(rmqrun.__file__, file=sys.stderr)
        print(measure(args.batches, args.batch, args.body_size, args.handler, args.orderly, args.profile)
              - args.cpu_ms * 1000)
        return
    trees = {"this": ROOT}
    if args.compare:
        trees = {"base": args.compare.resolve(), "this": ROOT}
    results: dict[str, list[float]] = {k: [] for k in trees}
    base_cmd = [sys.executable, str(Path(__file__).resolve()), "--once", "--batches", str(args.batches),
                "--batch", str(args.batch), "--body-size", str(args.body_size), "--handler", args.handler,
                "--cpu-ms", repr(args.cpu_ms)]
    if args.orderly:
        base_cmd.append("--orderly")
    for r in range(args.rounds):
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}")
            cmd = [*base_cmd]
            if args.profile and r == 0:
                cmd += ["--profile", f"{args.profile}.{label}"]
            proc = subprocess.run(cmd, env=env, cwd=tree, check=True, capture_output=True, text=True)
            if r == 0:
                print(f"{label}: rmqrun from {proc.stderr.strip().splitlines()[-1]}")
            out = proc.stdout
            results[label].append(float(out.strip().splitlines()[-1]))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} us/msg" for k, v in results.items()), flush=True)
    load = os.getloadavg()[0]
    if args.cpu_ms > 0:
        print(f"(CPU per message beyond the handler's {args.cpu_ms:g} ms)")
    for label, vals in results.items():
        print(f"{label:<5} median {statistics.median(vals):.2f} us/msg (min {min(vals):.2f}, max {max(vals):.2f}); "
              f"load {load:.2f}")


if __name__ == "__main__":
    main()
