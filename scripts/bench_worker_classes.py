"""The worker classes side by side: process, threads and asyncio, on a handler that waits and one that computes.

Issue #36. Each class drains its own backlog with a fresh group in the same run, on the same
embedded broker: a handler that waits 50 ms per message (``workers.io_wait``: ``time.sleep`` for
process and threads, ``asyncio.sleep`` for asyncio) and one that burns 1 ms of CPU
(``workers.cpu`` / ``workers.io_wait:cpu_async``). The rate is msg/s over the 10-90 % window of
the drain; each row's ratio is against the process class on the same handler. The process class
drains a smaller backlog of the waiting handler (it moves 20 msg/s per worker): the rate, not the
time, is compared; so is the CPU each message cost (msg per CPU-second of the supervisor and its
workers), which tells the classes apart on a shared machine where the rate of a CPU-bound handler
mostly says how much of the cores the others left (more runnable threads get more time slices).

Run alone (``python scripts/bench_worker_classes.py``: an embedded broker of its own, a Markdown
table on stdout), or as the ``classes`` section of ``scripts/bench_report.py``, which passes its
helpers in (``drain``, ``create_topic``, ``produce``, ``load``), so this module imports nothing of it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("process", "threads", "asyncio")
#: (label, handler per class, the handler's environment)
HANDLERS = (
    ("waits 50 ms", {"process": "workers.io_wait:handle", "threads": "workers.io_wait:handle",
                     "asyncio": "workers.io_wait:handle_async"}, {"RMQRUN_HANDLER_SLEEP_MS": "50"}),
    ("1 ms CPU", {"process": "workers.cpu:handle", "threads": "workers.cpu:handle",
                  "asyncio": "workers.io_wait:cpu_async"}, {"RMQRUN_HANDLER_CPU_MS": "1"}),
)


def section_worker_classes(ns: str, sizes: dict[str, int], workers: int, concurrency: int, timeout: float, *,
                           drain: Callable[..., Any], create_topic: Callable[..., None],
                           produce: Callable[..., Any], load: Callable[[], float]) -> dict[str, Any]:
    """Rows keyed "<handler>, <class>": messages, rate, the load before it and the ratio to process.

    ``sizes``: messages per drain, by handler label; the process class's waiting drain takes a tenth."""
    rows: dict[str, dict[str, Any]] = {}
    for label, handlers, env in HANDLERS:
        for cls in CLASSES:
            n = sizes[label] if cls != "process" or "waits" not in label else max(40 * workers, sizes[label] // 10)
            topic = f"BenchClass{'Io' if 'waits' in label else 'Cpu'}{cls.capitalize()}"
            create_topic(ns, topic, 8)
            asyncio.run(produce(ns, topic, n))
            run_env = dict(env, RMQRUN_WORKER_CLASS=cls,
                           RMQRUN_WORKER_CONCURRENCY=str(1 if cls == "process" else concurrency))
            before = load()
            print(f"[classes] {label}, {cls}: {n:,} messages, {workers} workers"
                  + ("" if cls == "process" else f" x {concurrency}"), flush=True)
            run = drain(ns, topic, f"CG_{topic}", n, handlers[cls], workers, timeout, run_env)
            cores = run.cores_used(n)
            rows[f"{label}, {cls}"] = {"messages": n, "rate": run.rate(n), "load": before, "cores": cores,
                                       "per_cpu_s": run.rate(n) / cores if cores and cores == cores else float("nan")}
        base = rows[f"{label}, process"]["rate"]
        for cls in CLASSES:
            row = rows[f"{label}, {cls}"]
            row["ratio"] = row["rate"] / base if base and base == base else float("nan")
    return {"workers": workers, "concurrency": concurrency, "rows": rows}


def worker_class_lines(res: dict[str, Any]) -> list[str]:
    """The section as Markdown."""
    L = ["## Worker classes: process, threads, asyncio", "",
         f"{res['workers']} workers; threads and asyncio run up to {res['concurrency']} calls at once in each "
         "(`--worker-class`, `--worker-concurrency`), process one. The same run, the same broker; the ratio is "
         "against the process class on the same handler (`scripts/bench_worker_classes.py`).", "",
         "msg/s is what a machine as loaded as this one gave; msg per CPU-second (the supervisor's and the workers' "
         "CPU over the same window) is what each message cost, which the load does not change much.", "",
         "| handler | class | messages | msg/s | × process | cores used | msg per CPU-second | load before |",
         "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in res["rows"].items():
        label, cls = key.rsplit(", ", 1)
        L.append(f"| {label} | {cls} | {row['messages']:,} | {row['rate']:,.0f} | {row['ratio']:.1f} | "
                 f"{row.get('cores', float('nan')):.2f} | {row.get('per_cpu_s', float('nan')):,.0f} | "
                 f"{row['load']:.1f} |")
    return L + [""]


def main() -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT))
    import bench_report as br

    from rmqrun.broker.app import BrokerProcess

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--io-messages", type=int, default=2000, help="the waiting handler's backlog (process: 1/10)")
    ap.add_argument("--cpu-messages", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rmqrun-bench-classes-") as data:
        with BrokerProcess(Path(data) / "broker", flush_mode="async") as bp:
            res = section_worker_classes(
                bp.namesrv_address, {"waits 50 ms": args.io_messages, "1 ms CPU": args.cpu_messages},
                args.workers, args.concurrency, args.timeout, drain=br.drain, create_topic=br.create_topic,
                produce=br.produce, load=br.load)
    print("\n".join(worker_class_lines(res)))
    print(f"(machine: {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
