#!/usr/bin/env python3
"""Where one batch query of the ``rocketmq`` source spends its time, in Spark's own numbers.

The same backlog and query as ``scripts/bench_spark_source.py`` (``count(*)`` and
``sum(length(body))`` over every message), run ``--queries`` times on a warmed-up
``local[N]`` session with the UI on, so Spark's REST API gives each query's SQL
execution, jobs, stages and tasks (scheduler delay, executor deserialize time, run
time, result serialization, getting the result). The source is wrapped (a subclass
registered as ``rocketmq_traced``, same code underneath) to time the Python side:
``schema()``/``reader()``/``partitions()`` in Spark's planner processes, each
``read()`` on the executors up to its first and last Arrow batch, and how old each of
those Python processes was when it got there (a process started for one call pays
Python's and pyspark's imports first).

Prints one timeline per query (seconds from the moment ``collect()`` was called) and a
median summary; ``--json`` keeps everything.

Usage: PYTHONPATH=$PWD python scripts/bench_spark_profile.py [--messages 50000] [--queries 5] [--master local[2]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_spark_source import TOPIC, produce  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.spark.source import RocketMQDataSource  # noqa: E402
from pyspark.sql.datasource import DataSourceReader  # noqa: E402


def _age() -> float:
    """Seconds since this process started (from /proc: clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - ticks / os.sysconf("SC_CLK_TCK")


def _note(**fields: object) -> None:
    path = os.environ.get("RMQRUN_SPARK_TRACE")
    if path:
        fields.update(pid=os.getpid(), age=round(_age(), 3))
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


class TracedSource(RocketMQDataSource):
    """The ``rocketmq`` source with its Python calls timed into ``$RMQRUN_SPARK_TRACE``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq_traced"

    def schema(self) -> str:
        _note(call="schema", t=time.time())
        return super().schema()

    def reader(self, schema):  # type: ignore[no-untyped-def]
        began = time.time()
        inner = super().reader(schema)
        _note(call="reader", t=began, took=time.time() - began, partitions=len(inner.partitions()),
              env=sorted(k for k in os.environ if "SPARK" in k.upper()))
        return _TracedReader(inner)


class _TracedReader(DataSourceReader):
    """Delegates to the real reader; ``read()`` notes its start, first batch and end."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner

    def partitions(self):  # type: ignore[no-untyped-def]
        return self.inner.partitions()

    def read(self, partition):  # type: ignore[no-untyped-def]
        began = time.time()
        first = None
        rows = 0
        for batch in self.inner.read(partition):
            if first is None:
                first = time.time()
            rows += batch.num_rows
            yield batch
        _note(call="read", t=began, first=first, end=time.time(), rows=rows)


def _ts(s: str | None) -> float | None:
    if not s:
        return None
    return datetime.strptime(s.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


class Rest:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/api/v1/applications"
        self.app = self.get("")[0]["id"]

    def get(self, path: str):  # type: ignore[no-untyped-def]
        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return json.load(r)

    def app_get(self, path: str):  # type: ignore[no-untyped-def]
        return self.get(f"/{self.app}{path}")


def query_profile(rest: Rest, t0: float, t_end: float, job_ids: list[int], trace: list[dict]) -> dict:
    """One query's timeline: planner calls, jobs, stages, tasks and reads, seconds from ``t0``."""
    out: dict = {"collect": round(t_end - t0, 3), "jobs": [], "python": []}
    for jid in job_ids:
        job = rest.app_get(f"/jobs/{jid}")
        entry = {"job": jid, "submitted": _ts(job.get("submissionTime")), "completed": _ts(job.get("completionTime")),
                 "stages": []}
        for sid in job["stageIds"]:
            for st in rest.app_get(f"/stages/{sid}"):
                if st.get("status") == "SKIPPED" or st.get("status") is None:
                    continue
                tasks = rest.app_get(f"/stages/{sid}/{st['attemptId']}/taskList?length=1000")
                entry["stages"].append({
                    "stage": sid, "submitted": _ts(st.get("submissionTime")),
                    "first_task": _ts(st.get("firstTaskLaunchedTime")), "completed": _ts(st.get("completionTime")),
                    "tasks": [{"launch": _ts(t["launchTime"]), "duration": t.get("duration", 0) / 1000,
                               "sched_delay": t.get("schedulerDelay", 0) / 1000,
                               "getting_result": t.get("gettingResultTime", 0) / 1000,
                               "deserialize": t["taskMetrics"]["executorDeserializeTime"] / 1000,
                               "run": t["taskMetrics"]["executorRunTime"] / 1000,
                               "cpu": t["taskMetrics"]["executorCpuTime"] / 1e9,
                               "result_ser": t["taskMetrics"]["resultSerializationTime"] / 1000,
                               "gc": t["taskMetrics"]["jvmGcTime"] / 1000,
                               "rows_in": t["taskMetrics"]["inputMetrics"]["recordsRead"]}
                              for t in tasks],
                })
        out["jobs"].append(entry)
    out["python"] = [e for e in trace if t0 <= e["t"] <= t_end]
    return out


def _rel(t: float | None, t0: float) -> str:
    return "-" if t is None else f"{t - t0:6.3f}"


def show(p: dict, t0: float) -> None:
    print(f"  collect() returned at {p['collect']:.3f} s")
    for e in sorted(p["python"], key=lambda e: e["t"]):
        extra = ""
        if e["call"] == "read":
            extra = (f" first batch {_rel(e['first'], t0)} end {_rel(e['end'], t0)} rows {e['rows']}")
        elif e["call"] == "reader":
            extra = f" took {e['took']:.3f} s, {e['partitions']} partitions"
        print(f"  {_rel(e['t'], t0)} python {e['call']:<7} pid {e['pid']} (process age {e['age']:.2f} s){extra}")
    for j in p["jobs"]:
        print(f"  {_rel(j['submitted'], t0)} job {j['job']} submitted, completed {_rel(j['completed'], t0)}")
        for s in j["stages"]:
            print(f"  {_rel(s['submitted'], t0)}   stage {s['stage']} submitted, first task "
                  f"{_rel(s['first_task'], t0)}, completed {_rel(s['completed'], t0)}, {len(s['tasks'])} tasks")
            for t in sorted(s["tasks"], key=lambda t: t["launch"]):
                print(f"  {_rel(t['launch'], t0)}     task: duration {t['duration']:.3f} sched delay "
                      f"{t['sched_delay']:.3f} deser {t['deserialize']:.3f} run {t['run']:.3f} cpu {t['cpu']:.3f} "
                      f"result ser {t['result_ser']:.3f} gc {t['gc']:.3f}")


def summary(profiles: list[dict], t0s: list[float]) -> dict:
    """Medians over the queries of the phases of a query."""
    phases: dict[str, list[float]] = {}

    def add(name: str, value: float | None) -> None:
        if value is not None:
            phases.setdefault(name, []).append(value)

    for p, t0 in zip(profiles, t0s):
        jobs = p["jobs"]
        add("collect", p["collect"])
        if jobs:
            add("to first job submitted", jobs[0]["submitted"] - t0)
            add("after last job completed", t0 + p["collect"] - jobs[-1]["completed"])
        reads = [e for e in p["python"] if e["call"] == "read"]
        planner = [e for e in p["python"] if e["call"] in ("schema", "reader")]
        for e in planner:
            add(f"planner {e['call']} at", e["t"] - t0)
            add(f"planner {e['call']} process age", e["age"])
        for e in [e for e in planner if e["call"] == "reader"]:
            add("planner reader() took", e["took"])
        if reads:
            add("first read() called", min(e["t"] for e in reads) - t0)
            add("first Arrow batch", min(e["first"] for e in reads if e["first"]) - t0)
            add("last read() ended", max(e["end"] for e in reads) - t0)
            add("read() to its first batch (median)", statistics.median(e["first"] - e["t"] for e in reads
                                                                         if e["first"]))
        for j in jobs:
            for k, s in enumerate(j["stages"]):
                label = f"stage {k}"
                add(f"{label} submitted", s["submitted"] - t0)
                add(f"{label} completed", s["completed"] - t0)
                add(f"{label} tasks", len(s["tasks"]))
                add(f"{label} submitted to first task", (s["first_task"] or s["submitted"]) - s["submitted"])
                for key in ("sched_delay", "deserialize", "run", "cpu", "result_ser", "getting_result", "gc"):
                    add(f"{label} task {key} (sum)", sum(t[key] for t in s["tasks"]))
    return {k: statistics.median(v) for k, v in phases.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--queries", type=int, default=5)
    ap.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value")
    ap.add_argument("--option", action="append", default=[], help="extra source option key=value")
    ap.add_argument("--b-option", action="append", default=[],
                    help="source option key=value of a variant B, run alternately with A (no extra options)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.jsonl"
        os.environ["RMQRUN_SPARK_TRACE"] = str(trace_path)
        with BrokerProcess(Path(tmp) / "data", log_path=Path(tmp) / "broker.log") as bp:
            asyncio.run(produce(bp.namesrv_address, args.messages, args.size))
            res = profile(bp.namesrv_address, args, trace_path)
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


def profile(namesrv: str, args: argparse.Namespace, trace_path: Path) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    b = (SparkSession.builder.master(args.master).appName("bench-spark-profile")
         .config("spark.ui.enabled", "true").config("spark.ui.port", "0").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1"))
    for kv in args.conf:
        k, v = kv.split("=", 1)
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(TracedSource)
    rest = Rest(spark.sparkContext.uiWebUrl)
    tracker = spark.sparkContext.statusTracker()

    def df(variant: str = "A"):  # type: ignore[no-untyped-def]
        r = spark.read.format("rocketmq_traced").option("namesrv", namesrv).option("topic", TOPIC)
        for kv in args.option + (args.b_option if variant == "B" else []):
            k, v = kv.split("=", 1)
            r = r.option(k, v)
        return r.load()

    planning: list[dict] = []

    def query(variant: str = "A") -> tuple[float, float, list[int], int]:
        group = f"q{time.time_ns()}"
        spark.sparkContext.setJobGroup(group, group)
        t0 = time.time()
        q = df(variant).agg(F.count("*"), F.sum(F.length("body")))
        n = q.collect()[0][0]
        t1 = time.time()
        phases = q._jdf.queryExecution().tracker().phases()
        it, phase = phases.iterator(), {}
        while it.hasNext():
            kv = it.next()
            phase[str(kv._1())] = (kv._2().startTimeMs() / 1000 - t0, kv._2().durationMs() / 1000)
        planning.append(phase)
        return t0, t1, list(tracker.getJobIdsForGroup(group)), n

    variants = ["A", "B"] if args.b_option else ["A"]
    for v in variants:
        query(v)
        query(v)     # warm-up: session, Python workers, the plan
    profiles, t0s, names = [], [], []
    print(f"load before: {os.getloadavg()[0]:.1f}")
    for i in range(args.queries * len(variants)):
        variant = variants[i % len(variants)] if i // len(variants) % 2 == 0 else variants[::-1][i % len(variants)]
        t0, t1, jobs, n = query(variant)
        time.sleep(0.5)     # let the REST store catch up
        trace = [json.loads(line) for line in trace_path.read_text().splitlines()]
        p = query_profile(rest, t0, t1, sorted(jobs), trace)
        p["planning_phases"] = planning[-1]
        print("  Spark's planning phases (start s from collect(), seconds):", {k: (round(a, 3), round(b, 3))
                                                                           for k, (a, b) in planning[-1].items()})
        p["variant"] = variant
        profiles.append(p)
        t0s.append(t0)
        names.append(variant)
        print(f"query {i + 1} (variant {variant}): {n} rows, load {os.getloadavg()[0]:.1f}")
        show(p, t0)
    meds = {}
    for v in variants:
        med = meds[v] = summary([p for p, n in zip(profiles, names) if n == v],
                                [t for t, n in zip(t0s, names) if n == v])
        print(f"variant {v} ({args.b_option if v == 'B' else 'default options'}): medians over its queries "
              "(seconds from collect()):")
        for k, x in med.items():
            print(f"  {k:<45} {x:8.3f}")
    spark.stop()
    return {"queries": profiles, "t0": t0s, "medians": meds, "load_after": os.getloadavg()[0]}


if __name__ == "__main__":
    main()
