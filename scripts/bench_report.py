#!/usr/bin/env python3
"""One benchmark report, every figure measured side by side in one run: ``docs/benchmarks/report.md`` + PNG plots.

    .venv/bin/python scripts/bench_report.py            # the full sizes of issue #12 (200k backlog, 1M memory run)
    .venv/bin/python scripts/bench_report.py --quick    # small sizes, a few minutes; the report says so

Sections (each against peers measured in the same run, on the same embedded broker, or on the cluster behind ``--namesrv``):

* CPU-bound scaling: 1 ms and 10 ms pure-Python handlers, rmqrun with 1..N workers against the
  Apache C++ client's push consumer driven from Python; msg/s and efficiency against ``workers / cost``.
* Framework overhead: no-op handler, 1 KiB messages: concurrent, orderly over 4 queues (issue #10's row) and over
  16 queues, ``@rmqrun.batch``,
  the C++ peer, and the broker's raw pull rate (bare pull loops) as the ceiling.
* Latency at 25/50/75 % of the measured 1 ms capacity: store-to-handler p50/p99/max.
* Memory: supervisor and per-worker RSS while draining a large backlog.
* The supervisor's CPU µs per message (psutil, un-profiled run), split by stage from a cProfile
  of the supervisor (shares only: the profiler inflates absolute times).
* POP beside pull (:mod:`bench_pop`): no-op and 1 ms handlers drained by a pull group and a POP group in
  the same rounds; msg/s and what POP adds per message in supervisor and broker CPU.
* The Java push consumer beside rmqrun on a real 4.9.8 broker (:mod:`bench_java`, ``--java DEST``).

The load average is recorded before every measurement and printed beside it: this
report is only a quiet-machine result if those numbers say so.
The building blocks (producer, raw pull, C++ runner, rate window) come from
``scripts/bench_consume.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(ROOT))

from bench_consume import cpp_available, produce  # noqa: E402
from bench_pop import section_pop  # noqa: E402
import bench_java  # noqa: E402
from bench_worker_classes import section_worker_classes  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402

from bench_runs import (  # noqa: E402
    FULL, QUICK, RmqrunRun, Sizes, code_version, create_topic, drain, fmt, fmt_spread, load, machine, spread,
)
from bench_sections import (  # noqa: E402
    _stage_of, percentile, profile_split, section_latency, section_memory, section_overhead, section_scaling,
    section_stages,
)
from bench_render import headline, java_comparison, plots, report  # noqa: E402

#: what other scripts and the tests reach through this module (``bench_report.drain`` ...): the report's parts live
#: in bench_runs (the runs), bench_sections (the measured sections) and bench_render (plots and Markdown)
__all__ = ["FULL", "QUICK", "RmqrunRun", "Sizes", "_stage_of", "create_topic", "drain", "fmt", "fmt_spread",
           "java_comparison", "load", "main", "percentile", "produce", "profile_split", "spread"]

# --- main -------------------------------------------------------------------------------------------------------

SECTIONS = ("overhead", "scaling", "latency", "memory", "stages", "pop", "java", "classes")
#: sections run only when named in --sections (they need the spark extra and Java 17+)
OPTIONAL_SECTIONS = ("spark",)


def section_spark(ns: str, sz: Sizes) -> dict[str, Any]:
    """The ``rocketmq`` Spark source's batch read rate against raw pulls (``scripts/bench_spark_source.py``)."""
    import bench_spark_source as bss

    print(f"[spark] producing {sz.backlog:,} x 1 KiB", flush=True)
    asyncio.run(bss.produce(ns, sz.backlog, 1024))
    res = bss.measure(ns, "local[2]", sz.rounds)
    res["limits"] = bss.LIMITS
    return res



def measure_sections(res: dict[str, Any], sections: list[str], ns: str, sz: Sizes, workers: int,
                     with_cpp: bool) -> None:
    """Every section asked for, against the cluster behind ``ns``, its results into ``res``."""
    if "overhead" in sections or "stages" in sections:
        res["overhead"] = section_overhead(ns, sz, workers, with_cpp)
    if "scaling" in sections or "latency" in sections:
        res["scaling"] = section_scaling(ns, sz, workers, with_cpp)
    if "latency" in sections:
        cap = res["scaling"]["1"]["rmqrun"][str(workers)]["median"]
        res["latency"] = section_latency(ns, sz, workers, cap)
    if "memory" in sections:
        res["memory"] = section_memory(ns, sz, workers)
    if "stages" in sections:
        res["stages"] = section_stages(ns, sz, workers, res["overhead"]["supervisor_us_per_msg"]["median"])
    if "pop" in sections:
        pop_sizes = {"no-op": max(sz.backlog // 4, sz.cpu1_messages), "1 ms CPU": sz.cpu1_messages}
        res["pop"] = section_pop(ns, pop_sizes, sz.rounds, workers, sz.timeout, drain=drain,
                                 create_topic=create_topic, produce=produce, load=load, spread=spread)
    if "spark" in sections:
        res["spark"] = section_spark(ns, sz)
    if "classes" in sections:  # scripts/bench_worker_classes.py: process, threads, asyncio side by side
        sizes = {"waits 50 ms": sz.cpu10_messages, "1 ms CPU": sz.cpu1_messages // 2}
        res["classes"] = section_worker_classes(ns, sizes, workers, 32, sz.timeout, drain=drain,
                                                create_topic=create_topic, produce=produce, load=load)


def cluster_broker(ap: argparse.ArgumentParser, args: argparse.Namespace, sections: list[str]) -> Any:
    """``--namesrv`` / ``--broker-pid`` checked: the psutil process of the given broker, or None."""
    if args.broker_pid is not None and not args.namesrv:
        ap.error("--broker-pid names the broker behind --namesrv; without --namesrv the embedded broker is measured")
    if args.namesrv and "java" in sections:
        ap.error("--namesrv: the java section starts its own 4.9.8 broker (--java DEST); leave it out of --sections")
    if args.broker_pid is None:
        return None
    try:
        return psutil.Process(args.broker_pid)
    except psutil.Error as e:
        ap.error(f"--broker-pid {args.broker_pid}: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes); the report is marked QUICK")
    ap.add_argument("--rounds", type=int, help="rounds per row (default 3, quick 3)")
    ap.add_argument("--backlog", type=int, help="no-op backlog per row (default 200000, quick 50000)")
    ap.add_argument("--cpu1-messages", type=int, help="1 ms handler backlog (default 20000, quick 5000)")
    ap.add_argument("--cpu10-messages", type=int, help="10 ms handler backlog (default 2000, quick 500)")
    ap.add_argument("--cpu01-messages", type=int, help="0.1 ms handler backlog (default 60000, quick 20000)")
    ap.add_argument("--memory-messages", type=int, help="memory-run backlog (default 1000000, quick 300000)")
    ap.add_argument("--latency-seconds", type=float, help="send time per latency rate (default 30, quick 8)")
    ap.add_argument("--timeout", type=float, help="per-drain time limit in seconds")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="N: rmqrun workers 1..N [cores]")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma list of {', '.join(SECTIONS + OPTIONAL_SECTIONS)} (default: all but "
                         f"{', '.join(OPTIONAL_SECTIONS)})")
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ peer")
    ap.add_argument("--java", type=Path, metavar="DEST", help="a RocketMQ 4.9.8 build: the java section's broker")
    ap.add_argument("--namesrv", metavar="ADDR",
                    help="measure against the cluster behind this name server (e.g. a real 5.x one for the pop "
                         "section) instead of starting an embedded broker")
    ap.add_argument("--broker-pid", type=int, metavar="PID",
                    help="with --namesrv: the local broker process whose CPU per message is reported beside the "
                         "consumer's (without it the broker column is left empty)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="report directory")
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="measure nothing: rewrite report.md and the plots in --out from a saved report.json")
    args = ap.parse_args()
    if args.render is not None:
        try:
            saved = json.loads(args.render.read_text())
        except (OSError, ValueError) as e:
            ap.error(f"--render {args.render}: {e}")
        args.out.mkdir(parents=True, exist_ok=True)
        images = plots(saved, args.out)
        (args.out / "report.md").write_text(report(saved, images))
        print(f"wrote {args.out / 'report.md'} and {', '.join(images)} from {args.render}")
        return 0

    base = QUICK if args.quick else FULL
    sz = Sizes(**{k: (getattr(args, k) if getattr(args, k, None) is not None else v)
                  for k, v in vars(base).items()})
    for k, v in vars(sz).items():
        if v <= 0:
            ap.error(f"--{k.replace('_', '-')} must be positive, got {v}")
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS + OPTIONAL_SECTIONS]
    if unknown:
        ap.error(f"--sections: unknown {', '.join(unknown)} (choose from {', '.join(SECTIONS + OPTIONAL_SECTIONS)})")
    if args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    broker_proc = cluster_broker(ap, args, sections)
    with_cpp = not args.no_cpp and cpp_available()
    if not with_cpp and not args.no_cpp:
        print("the C++ peer (PyPI rocketmq==0.4.4) is not importable: its rows are left out", file=sys.stderr)

    res: dict[str, Any] = {"machine": machine(), "quick": args.quick, "sizes": vars(sz), "workers": args.workers,
                           "command": " ".join(["python", "scripts/bench_report.py"] + sys.argv[1:]),
                           "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           "load_start": load(), "with_cpp": with_cpp, "code": code_version(),
                           "cluster": ({"namesrv": args.namesrv, "broker_pid": args.broker_pid} if args.namesrv
                                       else None)}
    print(f"machine: {res['machine']}; load {res['load_start']:.2f}; sizes {vars(sz)}", flush=True)
    if "java" in sections and bench_java.hook(args, sections, res, drain=drain, runner=RmqrunRun, produce=produce,
                                              create_topic=create_topic):
        return 0  # --sections java alone: its report went to OUT/java/
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-report-"))
    if args.namesrv:
        RmqrunRun.broker = broker_proc
        measure_sections(res, sections, args.namesrv, sz, args.workers, with_cpp)
    else:
        with BrokerProcess(data / "broker", flush_mode="async") as bp:
            RmqrunRun.broker = psutil.Process(bp.pid)
            measure_sections(res, sections, bp.namesrv_address, sz, args.workers, with_cpp)
    shutil.rmtree(data, ignore_errors=True)  # the full run's backlogs take over a GiB
    res["load_end"] = load()
    res["finished"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    args.out.mkdir(parents=True, exist_ok=True)
    images = plots(res, args.out)
    (args.out / "report.json").write_text(json.dumps(res, indent=1, default=str))
    (args.out / "report.md").write_text(report(res, images))
    print(f"wrote {args.out / 'report.md'} and {', '.join(images)}")
    for h in headline(res):
        print("  " + h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
