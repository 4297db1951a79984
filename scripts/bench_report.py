#!/usr/bin/env python3
"""One benchmark report, every figure measured side by side in one run: ``docs/benchmarks/report.md`` + PNG plots.

    .venv/bin/python scripts/bench_report.py            # the full sizes of issue #12 (200k backlog, 1M memory run)
    .venv/bin/python scripts/bench_report.py --quick    # small sizes, a few minutes; the report says so

Sections (each against peers measured in the same run, on the same embedded broker):

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
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import psutil

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(ROOT))

from bench_consume import _STATUS, BODY, _children, cpp_available, produce, raw_pull, window_rate  # noqa: E402
from bench_pop import pop_lines, section_pop  # noqa: E402
import bench_java  # noqa: E402
from bench_worker_classes import section_worker_classes, worker_class_lines  # noqa: E402

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402

# --- sizes ------------------------------------------------------------------------------------------------------


@dataclass
class Sizes:
    """How much each section sends; ``--quick`` and the issue's full sizes differ only here."""

    rounds: int
    backlog: int  # no-op overhead rows
    cpu1_messages: int
    cpu10_messages: int
    cpu01_messages: int  # the 0.1 ms handler (scaling rows, the supervisor's CPU per message at its rate)
    memory_messages: int
    latency_seconds: float
    timeout: float


FULL = Sizes(rounds=3, backlog=200_000, cpu1_messages=20_000, cpu10_messages=2_000, cpu01_messages=60_000,
             memory_messages=1_000_000,
             latency_seconds=30.0, timeout=900.0)
QUICK = Sizes(rounds=3, backlog=50_000, cpu1_messages=5_000, cpu10_messages=500, cpu01_messages=20_000,
              memory_messages=300_000,
              latency_seconds=8.0, timeout=300.0)

# --- machine ----------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """CPU model, cores, memory, Python and kernel: what each caption quotes."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count() or 1, "memory_gib": psutil.virtual_memory().total / 2**30,
            "python": platform.python_version(), "kernel": platform.release()}


def code_version() -> str:
    """The commit measured (with ``+changes`` when the work tree differs) and the supervisor's event loop."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                             timeout=10).stdout.strip() or "unknown commit"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=ROOT, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "unknown commit", ""
    try:
        import uvloop  # noqa: F401

        loop = "uvloop installed (event_loop: auto uses it)"
    except ImportError:
        loop = "standard asyncio loop (uvloop not installed)"
    return f"commit {rev}{' +changes' if dirty else ''}, {loop}"


def load() -> float:
    """The 1-minute load average now."""
    return os.getloadavg()[0]


# --- one rmqrun run, watched ------------------------------------------------------------------------------------


@dataclass
class Sample:
    t: float  # wall time of the status line
    consumed: int
    sup_cpu: float  # supervisor CPU seconds so far
    sup_rss: int  # bytes
    worker_rss: list[int]
    worker_cpu: float = 0.0  # CPU seconds of the live workers so far
    broker_cpu: float = 0.0  # CPU seconds of the embedded broker so far (shared by everything in the run)


# `rmqrun` under cProfile timed by the main thread's CPU clock: the event loop runs there, and time
# blocked in epoll is waiting, not work (`python -m cProfile` would count it, being wall-clock).
PROFILED = """
import cProfile, runpy, sys, time
out = sys.argv[1]
sys.argv = ["rmqrun"] + sys.argv[2:]
prof = cProfile.Profile(time.thread_time)
try:
    prof.runcall(runpy.run_module, "rmqrun.cli.main", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    prof.dump_stats(out)
"""


@dataclass
class RmqrunRun:
    """``rmqrun run`` in a child process; a thread reads its status lines and samples CPU and RSS at each."""

    namesrv: str
    topic: str
    group: str
    handler: str
    workers: int
    env: dict[str, str] = field(default_factory=dict)
    profile: Path | None = None
    samples: list[Sample] = field(default_factory=list)
    broker: ClassVar[Any] = None  # psutil.Process of the embedded broker, set by main(): its CPU is sampled too

    def start(self) -> RmqrunRun:
        env = dict(os.environ, RMQRUN_STATUS_INTERVAL="0.1", PYTHONPATH=str(ROOT), **self.env)
        prefix = [sys.executable] + (["-c", PROFILED, str(self.profile)] if self.profile else ["-m", "rmqrun.cli.main"])
        cmd = prefix + ["run", self.handler, "--namesrv", self.namesrv, "--group", self.group,
                        "--topic", self.topic, "--consume-from", "CONSUME_FROM_FIRST_OFFSET",
                        "--workers", str(self.workers)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                                     cwd=ROOT)
        self.ps = psutil.Process(self.proc.pid)
        self.cond = threading.Condition()
        self.stopping = False
        self._procs: dict[int, psutil.Process] = {}
        self.tail: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _workers(self) -> list[psutil.Process]:
        """The supervisor's children (its workers), each a psutil.Process kept from one sample to the next.

        ``children(recursive=True)`` walks every process of the machine (about 0.9 ms here); at ten samples
        a second that is about 1 % of a core taken from the run being measured, which on 2 cores shows in
        the 1 ms row's share of the ideal. bench_consume's ``_children`` reads the list Linux keeps in /proc
        for the supervisor's main thread, which starts the workers.
        """
        known = self._procs
        out = []
        for pid in _children(self.proc.pid):
            proc = known.get(pid)
            if proc is None:
                try:
                    proc = known[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            out.append(proc)
        return out

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = _STATUS.match(line)
            if not m:
                self.tail = (self.tail + [line.rstrip()])[-20:]
                continue
            if self.stopping:
                # A line read after the stop was asked for is sampled late: its workers may have exited by now,
                # so its CPU and RSS would not be the figures of the time it was logged.
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            try:
                ct = self.ps.cpu_times()
                rss = self.ps.memory_info().rss
                wrss = []
                wcpu = 0.0
                for c in self._workers():
                    try:
                        wrss.append(c.memory_info().rss)
                        wt = c.cpu_times()
                        wcpu += wt.user + wt.system
                    except psutil.Error:
                        pass
            except psutil.Error:
                break
            bcpu = 0.0
            if self.broker is not None:
                try:
                    bt = self.broker.cpu_times()
                    bcpu = bt.user + bt.system
                except psutil.Error:
                    pass
            with self.cond:
                self.samples.append(Sample(t, int(m.group(2)), ct.user + ct.system, rss, wrss, wcpu, bcpu))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def consumed(self) -> int:
        return self.samples[-1].consumed if self.samples else 0

    def wait_for(self, count: int, timeout: float) -> bool:
        """Block until ``count`` messages were consumed (True), the process ended or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.consumed < count:
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    print(f"  rmqrun {self.group}: stopped at {self.consumed}/{count}; last lines: "
                          + " | ".join(self.tail[-3:]), file=sys.stderr)
                    return False
                self.cond.wait(min(left, 1.0))
        return True

    def stop(self) -> None:
        self.stopping = True
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)

    def rate(self, n: int) -> float:
        return window_rate([(s.t, s.consumed) for s in self.samples], n)

    def window(self, n: int) -> tuple[Sample | None, Sample | None]:
        """The first samples at >= 10 % and >= 90 % of ``n``: every per-message figure is taken between them."""
        return (next((s for s in self.samples if s.consumed >= 0.1 * n), None),
                next((s for s in self.samples if s.consumed >= 0.9 * n), None))

    def cores_used(self, n: int) -> float:
        """CPU (supervisor + workers) per wall second between 10 % and 90 % of ``n``: the cores rmqrun got."""
        lo, hi = self.window(n)
        if lo is None or hi is None or hi.t <= lo.t:
            return float("nan")
        return (hi.sup_cpu + hi.worker_cpu - lo.sup_cpu - lo.worker_cpu) / (hi.t - lo.t)

    def us_per_msg(self, n: int, field: str) -> float:
        """A CPU-seconds field of the samples, between 10 % and 90 % of ``n``, per message consumed then, in µs."""
        lo, hi = self.window(n)
        if lo is None or hi is None or hi.consumed <= lo.consumed:
            return float("nan")
        return (getattr(hi, field) - getattr(lo, field)) / (hi.consumed - lo.consumed) * 1e6

    def broker_us_per_msg(self, n: int) -> float:
        """The broker's CPU per message (its process is ``RmqrunRun.broker``: shared by everything in the run)."""
        return float("nan") if self.broker is None else self.us_per_msg(n, "broker_cpu")

    def worker_us_per_msg(self, n: int) -> float:
        return self.us_per_msg(n, "worker_cpu")  # all the workers together

    def supervisor_us_per_msg(self, n: int) -> float:
        return self.us_per_msg(n, "sup_cpu")


def run_cpp(ns: str, topic: str, group: str, n: int, cpu_ms: float, timeout: float) -> tuple[float, float]:
    """The C++ peer (``scripts/cpp_bench_consumer.py``) on a fresh group: (msg/s, cores it got), both 10–90 %.

    As ``bench_consume.run_cpp``, plus the peer's CPU time sampled at each of its progress lines.
    """
    home = tempfile.mkdtemp(prefix="rmqrun-bench-report-cpp-")  # the C++ library's logs and offsets go here
    env = dict(os.environ, HOME=home)
    cmd = [sys.executable, str(SCRIPTS / "cpp_bench_consumer.py"), "--namesrv", ns, "--group", group,
           "--topic", topic, "--count", str(n), "--cpu-ms", str(cpu_ms), "--timeout", str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    ps = psutil.Process(proc.pid)
    points: list[tuple[float, int, float]] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            parts = line.split()
            if len(parts) != 2:
                continue
            try:
                ct = ps.cpu_times()
            except psutil.Error:
                break
            points.append((float(parts[0]), int(parts[1]), ct.user + ct.system))
    finally:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)
    rate = window_rate([(t, c) for t, c, _ in points], n)
    lo = next((p for p in points if p[1] >= 0.1 * n), None)
    hi = next((p for p in points if p[1] >= 0.9 * n), None)
    cores = (hi[2] - lo[2]) / (hi[0] - lo[0]) if lo and hi and hi[0] > lo[0] else float("nan")
    return rate, cores


def drain(ns: str, topic: str, group: str, n: int, handler: str, workers: int, timeout: float,
          env: dict[str, str] | None = None, profile: Path | None = None) -> RmqrunRun:
    """Drain ``n`` messages of ``topic`` with a fresh group from the first offset; return the watched run."""
    run = RmqrunRun(ns, topic, group, handler, workers, env or {}, profile).start()
    try:
        run.wait_for(n, timeout)
    finally:
        run.stop()
    return run


# --- statistics -------------------------------------------------------------------------------------------------


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of the finite values (NaN when none)."""
    ok = [v for v in values if v == v]
    if not ok:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": statistics.median(ok), "min": min(ok), "max": max(ok), "n": len(ok)}


def fmt(v: float, digits: int = 0) -> str:
    return "-" if v != v else f"{v:,.{digits}f}"


def fmt_spread(s: dict[str, float], digits: int = 0) -> str:
    if s["n"] == 0:
        return "-"
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


# --- topics -----------------------------------------------------------------------------------------------------


def create_topic(ns: str, topic: str, queues: int) -> None:
    subprocess.run([sys.executable, "-m", "rmqrun.cli.main", "topic", "create", topic, "--queues", str(queues),
                    "--namesrv", ns], check=True, capture_output=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))


# --- sections ---------------------------------------------------------------------------------------------------

NOOP = "workers.noop:handle"
NOOP_BATCH = "workers.noop:handle_batch"
CPU = "workers.cpu:handle"


def section_overhead(ns: str, sz: Sizes, workers: int, with_cpp: bool) -> dict[str, Any]:
    """No-op handler over a backlog: raw pull ceiling, rmqrun concurrent/orderly/batch, the C++ peer."""
    n = sz.backlog
    create_topic(ns, "BenchNoop", 8)
    create_topic(ns, "BenchOrderly", 16)
    create_topic(ns, "BenchOrderly4", 4)
    print(f"[overhead] producing 3 x {n} x 1 KiB", flush=True)
    asyncio.run(produce(ns, "BenchNoop", n))
    asyncio.run(produce(ns, "BenchOrderly", n))
    asyncio.run(produce(ns, "BenchOrderly4", n))
    kinds: dict[str, list[float]] = {"raw pull (ceiling)": [], "rmqrun concurrent": [],
                                     "rmqrun orderly, 4 queues": [], "rmqrun orderly, 16 queues": [],
                                     "rmqrun @rmqrun.batch (32)": []}
    if with_cpp:
        kinds["C++ push consumer"] = []
    sup_us: list[float] = []
    worker_us: list[float] = []
    broker_us: list[float] = []
    loads: list[float] = []
    ratios: dict[str, list[float]] = {"orderly, 4 queues": [], "orderly, 16 queues": []}
    gaps: dict[str, list[float]] = {"gap_ms": [], "handler_ms": []}
    for r in range(sz.rounds):
        tag = f"r{r}"
        loads.append(load())
        kinds["raw pull (ceiling)"].append(asyncio.run(raw_pull(ns, "BenchNoop", n)))
        run = drain(ns, "BenchNoop", f"CG_conc_{tag}", n, NOOP, workers, sz.timeout)
        kinds["rmqrun concurrent"].append(run.rate(n))
        sup_us.append(run.supervisor_us_per_msg(n))
        worker_us.append(run.worker_us_per_msg(n))
        broker_us.append(run.broker_us_per_msg(n))
        loads.append(load())
        run = drain(ns, "BenchOrderly4", f"CG_ord4_{tag}", n, NOOP, workers, sz.timeout, {"RMQRUN_ORDERLY": "true"})
        kinds["rmqrun orderly, 4 queues"].append(run.rate(n))
        gap = orderly_gap(run)
        if gap is not None:
            gaps["gap_ms"].append(gap[0])
            gaps["handler_ms"].append(gap[1])
        run = drain(ns, "BenchOrderly", f"CG_ord_{tag}", n, NOOP, workers, sz.timeout, {"RMQRUN_ORDERLY": "true"})
        kinds["rmqrun orderly, 16 queues"].append(run.rate(n))
        # orderly against concurrent, drained one after the other in the same round
        conc = kinds["rmqrun concurrent"][-1]
        ratios["orderly, 4 queues"].append(kinds["rmqrun orderly, 4 queues"][-1] / conc if conc else float("nan"))
        ratios["orderly, 16 queues"].append(kinds["rmqrun orderly, 16 queues"][-1] / conc if conc else float("nan"))
        run = drain(ns, "BenchNoop", f"CG_batch_{tag}", n, NOOP_BATCH, workers, sz.timeout,
                    {"RMQRUN_CONSUME_MESSAGE_BATCH_MAX_SIZE": "32"})
        kinds["rmqrun @rmqrun.batch (32)"].append(run.rate(n))
        loads.append(load())
        if with_cpp:
            kinds["C++ push consumer"].append(run_cpp(ns, "BenchNoop", f"CG_cpp_{tag}", n, 0.0, sz.timeout)[0])
        loads.append(load())
        print(f"[overhead] round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in kinds.items()), flush=True)
    return {"messages": n, "workers": workers, "rows": {k: {"values": v, **spread(v)} for k, v in kinds.items()},
            "supervisor_us_per_msg": {"values": sup_us, **spread(sup_us)},
            "worker_us_per_msg": {"values": worker_us, **spread(worker_us)},
            "broker_us_per_msg": {"values": broker_us, **spread(broker_us)}, "load": spread(loads),
            "orderly_vs_concurrent": {k: {"values": v, **spread(v)} for k, v in ratios.items()},
            "orderly_gap": {k: {"values": v, **spread(v)} for k, v in gaps.items()}}


def orderly_gap(run: RmqrunRun) -> tuple[float, float] | None:
    """(ms per job an orderly queue spent between results outside its handler, ms in it), from the line the
    orderly consume service logs as it stops (over the whole drain, its start and tail included)."""
    for line in run.tail:
        m = _GAP.search(line)
        if m:
            return float(m.group(1)), float(m.group(2))
    return None


_GAP = re.compile(r"orderly queues: ([0-9.]+) ms per job between results not in the handler \(([0-9.]+) ms in it\)")


def section_scaling(ns: str, sz: Sizes, max_workers: int, with_cpp: bool) -> dict[str, Any]:
    """1 ms and 10 ms handlers: rmqrun 1..N workers and the C++ peer, all rounds interleaved."""
    out: dict[str, Any] = {}
    for cpu_ms, n in ((1.0, sz.cpu1_messages), (0.1, sz.cpu01_messages), (10.0, sz.cpu10_messages)):
        if n <= 0:
            continue
        topic = f"BenchCpu{cpu_ms:g}".replace(".", "_")
        create_topic(ns, topic, 8)
        asyncio.run(produce(ns, topic, n))
        env = {"RMQRUN_HANDLER_CPU_MS": str(cpu_ms)}
        rmq: dict[int, list[float]] = {w: [] for w in range(1, max_workers + 1)}
        got: dict[int, list[float]] = {w: [] for w in rmq}
        sup: dict[int, list[float]] = {w: [] for w in rmq}
        cpp: list[float] = []
        cpp_got: list[float] = []
        loads: list[float] = []
        for r in range(sz.rounds):
            for w in rmq:
                loads.append(load())
                run = drain(ns, topic, f"CG_{topic}_w{w}_r{r}", n, CPU, w, sz.timeout, env)
                rmq[w].append(run.rate(n))
                got[w].append(run.cores_used(n))
                sup[w].append(run.supervisor_us_per_msg(n))
            if with_cpp:
                loads.append(load())
                rate, cores = run_cpp(ns, topic, f"CG_cpp{int(cpu_ms)}_r{r}", n, cpu_ms, sz.timeout)
                cpp.append(rate)
                cpp_got.append(cores)
            loads.append(load())
            print(f"[scaling {cpu_ms:g} ms] round {r + 1}: "
                  + ", ".join(f"{w}w {v[-1]:,.0f}" for w, v in rmq.items())
                  + (f", C++ {cpp[-1]:,.0f}" if cpp else ""), flush=True)
        out[f"{cpu_ms:g}"] = {"cpu_ms": cpu_ms, "messages": n,
                              "rmqrun": {str(w): {"values": v, **spread(v)} for w, v in rmq.items()},
                              "cores_used": {str(w): {"values": v, **spread(v)} for w, v in got.items()},
                              "supervisor_us_per_msg": {str(w): {"values": v, **spread(v)} for w, v in sup.items()},
                              "cpp": {"values": cpp, **spread(cpp)}, "cpp_cores_used": {"values": cpp_got,
                                                                                        **spread(cpp_got)},
                              "load": spread(loads)}
    return out


async def paced_send(ns: str, topic: str, rate: float, seconds: float) -> int:
    """Send 1 KiB messages at ``rate`` msg/s for ``seconds``, in 20 ms ticks, round robin over the queues."""
    async with Producer(ns, "PG_bench_paced") as producer:
        queues = await producer.instance.publish_queues(topic, refresh=True)
        start = time.monotonic()
        sent = 0
        q = 0
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds:
                return sent
            due = int(rate * elapsed) - sent
            if due > 0:
                await producer.send_batch(topic, [OutgoingMessage(BODY)] * due, queue=queues[q % len(queues)])
                q += 1
                sent += due
            await asyncio.sleep(0.02)


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


LATENCY_CPU_MS = 1.0  # the latency runs' handler cost: the 1 ms row of the scaling section gives their capacity
LAG_BEHIND_S = 0.25  # still this far behind when sending stops: a standing queue, not a consumer keeping up


def section_latency(ns: str, sz: Sizes, workers: int, capacity: float) -> dict[str, Any]:
    """Fixed send rates at 25/50/75 % of the 1 ms capacity; store-to-handler latency per message."""
    rows: dict[str, Any] = {}
    for pct in (25, 50, 75):
        rate = capacity * pct / 100
        topic = f"BenchLat{pct}"
        create_topic(ns, topic, 8)
        asyncio.run(produce(ns, topic, 1))  # one message, so the consumer can show it is up
        lat_dir = Path(tempfile.mkdtemp(prefix="rmqrun-bench-lat-"))
        env = {"RMQRUN_HANDLER_CPU_MS": str(LATENCY_CPU_MS), "RMQRUN_HANDLER_LATENCY_DIR": str(lat_dir)}
        before = load()
        run = RmqrunRun(ns, topic, f"CG_lat{pct}", "workers.bench_latency:handle", workers, env).start()
        try:
            if not run.wait_for(1, sz.timeout):
                rows[str(pct)] = {"rate": rate, "error": "consumer did not start"}
                continue
            warm = time.time() + min(2.0, sz.latency_seconds / 4)
            sent = asyncio.run(paced_send(ns, topic, rate, sz.latency_seconds))
            sent_at = time.monotonic()
            run.wait_for(sent + 1, sz.timeout)
            lag = time.monotonic() - sent_at
        finally:
            run.stop()
        got = run.cores_used(sent + 1)
        lats: list[float] = []
        for f in lat_dir.glob("*.txt"):
            for line in f.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and int(parts[0]) >= warm * 1000:
                    lats.append(float(parts[1]))
        shutil.rmtree(lat_dir, ignore_errors=True)
        lats.sort()
        rows[str(pct)] = {"rate": rate, "sent": sent, "measured": len(lats), "p50": percentile(lats, 50),
                          "p99": percentile(lats, 99), "max": lats[-1] if lats else float("nan"),
                          "lag_s": lag, "cores_used": got, "load": (before + load()) / 2}
        print(f"[latency {pct}%] {rate:,.0f} msg/s: p50 {rows[str(pct)]['p50']:.1f} ms, "
              f"p99 {rows[str(pct)]['p99']:.1f} ms over {len(lats)}", flush=True)
    return {"capacity": capacity, "workers": workers, "rows": rows}


def section_memory(ns: str, sz: Sizes, workers: int) -> dict[str, Any]:
    """Drain a large backlog with the no-op handler, RSS sampled at every status line (0.1 s)."""
    n = sz.memory_messages
    create_topic(ns, "BenchMemory", 8)
    print(f"[memory] producing {n} x 1 KiB", flush=True)
    asyncio.run(produce(ns, "BenchMemory", n))
    before = load()
    run = drain(ns, "BenchMemory", "CG_memory", n, NOOP, workers, sz.timeout * 3)
    t0 = run.samples[0].t if run.samples else 0.0
    series = [{"t": s.t - t0, "consumed": s.consumed, "sup_mib": s.sup_rss / 2**20,
               "workers_mib": [w / 2**20 for w in s.worker_rss]} for s in run.samples]

    def at(frac: float) -> dict[str, float]:
        s = next((x for x in series if x["consumed"] >= frac * n), series[-1] if series else None)
        if s is None:
            return {"sup_mib": float("nan"), "worker_max_mib": float("nan")}
        return {"sup_mib": s["sup_mib"], "worker_max_mib": max(s["workers_mib"], default=float("nan"))}

    marks = {f"{int(f * 100)}%": at(f) for f in (0.1, 0.25, 0.5, 0.75, 1.0)}
    peak_sup = max((s["sup_mib"] for s in series), default=float("nan"))
    peak_worker = max((max(s["workers_mib"], default=0.0) for s in series), default=float("nan"))
    print(f"[memory] drained {run.consumed}/{n}; supervisor peak {peak_sup:.0f} MiB, worker peak {peak_worker:.0f} MiB",
          flush=True)
    return {"messages": n, "workers": workers, "consumed": run.consumed, "rate": run.rate(n), "series": series,
            "marks": marks, "peak_sup_mib": peak_sup, "peak_worker_mib": peak_worker,
            "load": (before + load()) / 2}


# Which stage a profiled function belongs to, by its file. Built-ins and the rest of the standard
# library are charged to their callers' stages (one level up), so `struct.unpack` called by the
# decoder counts as decoding and `socket.send` called by asyncio as the event loop.
STAGES = (
    ("rmqrun/remoting/", "wire: frames, encode/decode"),
    ("rmqrun/client/", "client: pull/ack requests, routes"),
    ("rmqrun/consumer/", "consumer: process queues, offsets, rebalance"),
    ("rmqrun/supervisor/", "supervisor: dispatch, pool, executor"),
    ("rmqrun/pipe/", "pipe: framing to/from workers"),
    ("rmqrun/", "other rmqrun (logging setup, cli, metrics)"),
    ("/asyncio/", "event loop, sockets, selectors"),
    ("selectors.py", "event loop, sockets, selectors"),
    ("loguru", "logging"),
    ("<frozen importlib", "start-up (imports)"),
)
EXCLUDED = {"start-up (imports)"}
OTHER = "other (stdlib, built-ins)"


def _stage_of(filename: str) -> str | None:
    for key, stage in STAGES:
        if key in filename:
            return stage
    return None


def profile_split(path: Path) -> dict[str, float]:
    """Share of the supervisor's profiled CPU per stage (start-up excluded), summing to 1.

    A function outside the stage table (built-ins, the rest of the standard library) is charged
    to the stages of its callers, in proportion to the cumulative time each caller spent in it,
    walking up until a caller has a stage.
    """
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    memo: dict[Any, dict[str, float]] = {}
    busy: set[Any] = set()  # on the current walk: a caller cycle, left out of the split

    def weights(func: Any) -> dict[str, float]:
        stage = _stage_of(func[0])
        if stage is not None:
            return {stage: 1.0}
        if func in memo:
            return memo[func]
        busy.add(func)
        callers = {c: v[3] for c, v in stats.get(func, (0, 0, 0, 0, {}))[4].items() if c not in busy}
        out: dict[str, float] = {}
        for c, ct in callers.items():
            for st, w in weights(c).items():
                out[st] = out.get(st, 0.0) + w * ct
        busy.discard(func)
        whole = sum(out.values())
        memo[func] = {k: v / whole for k, v in out.items()} if whole > 0 else {OTHER: 1.0}
        return memo[func]

    totals: dict[str, float] = {}
    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        for st, w in weights(func).items():
            totals[st] = totals.get(st, 0.0) + tt * w
    for s in EXCLUDED:
        totals.pop(s, None)
    whole = sum(totals.values()) or 1.0
    return {k: v / whole for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def section_stages(ns: str, sz: Sizes, workers: int, us_per_msg: float) -> dict[str, Any]:
    """Profile one no-op drain of the supervisor; apply the shares to the un-profiled µs per message."""
    prof = Path(tempfile.mkdtemp(prefix="rmqrun-bench-prof-")) / "supervisor.prof"
    n = sz.backlog
    drain(ns, "BenchNoop", "CG_profile", n, NOOP, workers, sz.timeout * 2, profile=prof)
    if not prof.exists():
        return {"error": "the profiled supervisor wrote no profile", "us_per_msg": us_per_msg}
    shares = profile_split(prof)
    shutil.rmtree(prof.parent, ignore_errors=True)
    return {"us_per_msg": us_per_msg, "shares": shares,
            "us_by_stage": {k: v * us_per_msg for k, v in shares.items()}}


# --- plots ------------------------------------------------------------------------------------------------------


def plots(res: dict[str, Any], out: Path) -> list[str]:
    """Write the PNGs; return their file names (none, with a warning, when matplotlib is not installed)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): the report has tables but no plots",
              file=sys.stderr)
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = res["machine"]
    cap = f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']:.0f} GiB"
    names: list[str] = []

    if "scaling" in res:
        fig, axes = plt.subplots(1, len(res["scaling"]), figsize=(11, 4))
        for ax, (key, sc) in zip(axes if len(res["scaling"]) > 1 else [axes], res["scaling"].items()):
            ws = [int(w) for w in sc["rmqrun"]]
            med = [sc["rmqrun"][str(w)]["median"] for w in ws]
            lo = [max(0.0, md - sc["rmqrun"][str(w)]["min"]) for w, md in zip(ws, med)]
            hi = [max(0.0, sc["rmqrun"][str(w)]["max"] - md) for w, md in zip(ws, med)]
            ax.errorbar(ws, med, yerr=[lo, hi], marker="o", capsize=4, label="rmqrun")
            ax.plot(ws, [w * 1000 / sc["cpu_ms"] for w in ws], "k--", label="ideal workers / cost")
            if sc["cpp"]["n"]:
                ax.axhline(sc["cpp"]["median"], color="tab:red", label="C++ push consumer (from Python)")
            ax.set_title(f"{key} ms CPU per message (load {sc['load']['median']:.1f})")
            ax.set_xlabel("rmqrun workers")
            ax.set_ylabel("msg/s")
            ax.set_xticks(ws)
            ax.legend(fontsize=8)
        fig.suptitle(f"CPU-bound scaling — {cap}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "scaling.png", dpi=100)
        plt.close(fig)
        names.append("scaling.png")

    if "overhead" in res:
        rows = res["overhead"]["rows"]
        labels = list(rows)
        med = [rows[k]["median"] for k in labels]
        err = [[max(0.0, rows[k]["median"] - rows[k]["min"]) for k in labels],
               [max(0.0, rows[k]["max"] - rows[k]["median"]) for k in labels]]
        fig, ax = plt.subplots(figsize=(9, 3.5))
        ax.barh(labels, med, xerr=err, capsize=4, color=["grey"] + ["tab:blue"] * 3 + ["tab:red"] * (len(labels) - 4))
        ax.invert_yaxis()
        ax.set_xlabel("msg/s (no-op handler, 1 KiB)")
        ax.set_title(f"Framework overhead, {res['overhead']['messages']:,} backlog — {cap}, "
                     f"load {res['overhead']['load']['median']:.1f}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "overhead.png", dpi=100)
        plt.close(fig)
        names.append("overhead.png")

    if "latency" in res:
        rows = {k: v for k, v in res["latency"]["rows"].items() if "p50" in v}
        if rows:
            fig, ax = plt.subplots(figsize=(7, 3.5))
            xs = list(range(len(rows)))
            for i, (stat, color) in enumerate((("p50", "tab:blue"), ("p99", "tab:orange"), ("max", "tab:red"))):
                ax.bar([x + (i - 1) * 0.25 for x in xs], [v[stat] for v in rows.values()], 0.25, label=stat,
                       color=color)
            ax.set_xticks(xs, [f"{k}% ({v['rate']:,.0f}/s)" for k, v in rows.items()])
            ax.set_yscale("log")
            ax.set_ylabel("store → handler, ms")
            loads = [v["load"] for v in rows.values()]
            ax.set_title(f"Latency at fixed rates, 1 ms handler — {cap}, load {min(loads):.1f}–{max(loads):.1f}",
                         fontsize=9)
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "latency.png", dpi=100)
            plt.close(fig)
            names.append("latency.png")

    if "memory" in res and res["memory"]["series"]:
        s = res["memory"]["series"]
        fig, ax = plt.subplots(figsize=(9, 3.8))
        t = [x["t"] for x in s]
        ax.plot(t, [x["sup_mib"] for x in s], label="supervisor RSS", color="tab:blue")
        nworkers = max(len(x["workers_mib"]) for x in s)
        for i in range(nworkers):
            ax.plot(t, [x["workers_mib"][i] if i < len(x["workers_mib"]) else float("nan") for x in s],
                    label=f"worker {i + 1} RSS", lw=0.8)
        ax.set_xlabel("s")
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax2 = ax.twinx()
        ax2.plot(t, [x["consumed"] for x in s], "k:", label="consumed")
        ax2.set_ylabel("messages consumed")
        ax.legend(loc="upper left", fontsize=8)
        ax.set_title(f"Memory while draining {res['memory']['messages']:,} messages — {cap}, "
                     f"load {res['memory']['load']:.1f}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "memory.png", dpi=100)
        plt.close(fig)
        names.append("memory.png")

    if "stages" in res and "us_by_stage" in res["stages"]:
        st = res["stages"]["us_by_stage"]
        fig, ax = plt.subplots(figsize=(9, 3.8))
        ax.barh(list(st), list(st.values()), color="tab:purple")
        ax.invert_yaxis()
        ax.set_xlabel("supervisor CPU µs per message")
        ax.set_title(f"Supervisor CPU per message by stage ({res['stages']['us_per_msg']:.1f} µs in all)\n{cap}",
                     fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "stages.png", dpi=100)
        plt.close(fig)
        names.append("stages.png")
    return names


# --- report -----------------------------------------------------------------------------------------------------


# Issue #10's reference figures: the Java DefaultMQPushConsumer 4.9.8 on a 2-core machine like this one, draining
# a 100k backlog of 1 KiB messages from a real Apache 4.9.8 broker; the embedded broker's raw pulls were ~120k msg/s
# there and the C++ push consumer driven from Python 17-29k msg/s. There is no Java client on this machine, so the
# comparison is between ratios: each consumer against the raw pull rate and the C++ peer of its own run.
JAVA_REFERENCE = {"rmqrun concurrent": ("concurrent", 71_700),
                  "rmqrun orderly, 4 queues": ("orderly, 4 queues", 83_400)}
JAVA_RAW_PULL = 120_000
JAVA_CPP = (17_000, 29_000)


def java_comparison(rows: dict[str, Any], raw: float, cpp: float) -> str:
    """One paragraph setting this run's no-op ratios beside the Java push consumer's in issue #10."""
    parts = []
    for key, (what, java) in JAVA_REFERENCE.items():
        if key not in rows:
            continue
        ours = rows[key]["median"]
        text = (f"{what}: Java {java / JAVA_RAW_PULL:.2f} of its raw pull rate and "
                f"{java / JAVA_CPP[1]:.1f}–{java / JAVA_CPP[0]:.1f}× its C++ peer; "
                f"rmqrun here {ours / raw:.2f} of the raw pull rate")
        text += f" and {ours / cpp:.1f}× the C++ peer" if cpp else " (C++ peer not measured)"
        parts.append(text)
    return ("Against issue #10's Java figures (no Java client here, so ratios: each consumer against the raw pull "
            "rate and the C++ push consumer measured beside it; the issue's raw pull rate was about "
            f"{JAVA_RAW_PULL:,} msg/s, measured by its author, and may not be measured the way this script's bare "
            "loops are): " + "; ".join(parts) + ".")


def saturation(sc: dict[str, Any]) -> str:
    """Where one supervisor saturates, from its CPU per message at the highest worker count of a scaling row."""
    sups = sc.get("supervisor_us_per_msg", {})
    w = str(max(int(x) for x in sc["rmqrun"]))
    sup = sups.get(w, {"n": 0})
    if not sup["n"] or not sup["median"] > 0:
        return ""
    at = 1e6 / sup["median"]
    line = (f"At {w} worker(s) the supervisor spent {fmt_spread(sup, 1)} µs of CPU per message, so one supervisor "
            f"(one core) saturates near **{at:,.0f} msg/s** whatever the worker count: that many "
            f"{sc['cpu_ms']:g} ms messages a second need {at * sc['cpu_ms'] / 1000:,.0f} workers busy. (A bound from "
            f"below: part of that CPU is per second, not per message — timers, status lines, heartbeats, lock "
            f"renewals — and weighs less the faster messages flow; on a loaded machine it is inflated too.)")
    if at < 200_000:
        line += (" That is below 200k msg/s: what would move it is less supervisor work per message — records "
                 "handed to workers through a shared-memory ring (no RUN/DONE frames, no per-batch futures), "
                 "the pull/decode path in a compiled extension, or several supervisors each owning a share of "
                 "the queues (one per 8–16 workers).")
    return line


def headline(res: dict[str, Any]) -> list[str]:
    """The ratios the README quotes."""
    lines = []
    cores = res["machine"]["cores"]
    for key, sc in res.get("scaling", {}).items():
        best = sc["rmqrun"][str(max(int(w) for w in sc["rmqrun"]))]["median"]
        cpp = sc["cpp"]["median"]
        ideal = cores * 1000 / sc["cpu_ms"]
        ratio = f"{best / cpp:.2f}× the C++ push consumer" if sc["cpp"]["n"] else "C++ peer not measured"
        lines.append(f"{key} ms CPU handler, {max(int(w) for w in sc['rmqrun'])} workers: {fmt(best)} msg/s, "
                     f"{ratio}, {best / ideal:.0%} of the ideal {ideal:,.0f}/s")
    if "overhead" in res:
        rows = res["overhead"]["rows"]
        raw = rows["raw pull (ceiling)"]["median"]
        conc = rows["rmqrun concurrent"]["median"]
        line = f"no-op handler: rmqrun concurrent {fmt(conc)} msg/s = {conc / raw:.2f} of the raw pull rate"
        if "C++ push consumer" in rows:
            line += f", {conc / rows['C++ push consumer']['median']:.2f}× the C++ push consumer"
        if "rmqrun orderly, 4 queues" in rows:
            o4 = rows["rmqrun orderly, 4 queues"]["median"]
            line += f"; orderly over 4 queues {fmt(o4)} msg/s = {o4 / raw:.2f} of the raw pull rate"
            ratio = res["overhead"].get("orderly_vs_concurrent", {}).get("orderly, 4 queues", {"n": 0})
            if ratio["n"]:
                line += f", {fmt_spread(ratio, 2)}× concurrent in the same rounds"
        lines.append(line)
    if "spark" in res:
        rows = res["spark"]["rounds"]
        lines.append(f"Spark rocketmq source, batch read on {res['spark']['master']}: "
                     f"{fmt(statistics.median(r['spark'] for r in rows))} msg/s = "
                     f"{statistics.median(r['ratio'] for r in rows):.2f} of the raw pull rate (goal 0.8)")
    return lines


def report(res: dict[str, Any], images: list[str]) -> str:
    m = res["machine"]
    cap = (f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']:.0f} GiB RAM, Python {m['python']}, "
           f"Linux {m['kernel']}")
    L: list[str] = []
    mode = "QUICK run (small sizes, not the issue's full sizes)" if res["quick"] else "full run"
    L += ["# rmqrun benchmark report", "",
          f"**{mode}**, {res['started']} → {res['finished']}, produced by `{res['command']}`.", ""]
    L.append(f"Machine: {cap}. Load average (1 min) at start {res['load_start']:.2f}, at end {res['load_end']:.2f}.")
    if "code" in res:
        L += ["", f"Code: {res['code']}."]
    # Only the load before the first measurement tells of other processes: the load at the end (and the
    # per-row figures) include the benchmark's own broker, consumers and producers.
    quiet = res["load_start"] < 0.5 * m["cores"]
    if quiet:
        L.append("")
        L.append("The machine was otherwise idle when the run started (load average below half the core count); "
                 "the load figures during and after the run include the benchmark's own processes.")
    else:
        L.append("")
        L.append(f"> **Loaded machine.** The load average was above half the core count when this run started: other "
                 f"processes took CPU from both rmqrun and its peers. Absolute rates here are *not* quiet-machine "
                 f"figures; the ratios between rows, measured side by side and interleaved round by round, are the "
                 f"meaningful part, and even they carry the noise shown in the min–max ranges.")
    L.append("")
    L.append("Every figure below comes from this one run, on one embedded broker (its own process, async flush), "
             f"{res['sizes']['rounds']} round(s) per row, interleaved; cells are *median (min–max)*. Rates are taken "
             "between 10 % and 90 % of each backlog (start-up and tail left out). Rerun: "
             "`.venv/bin/pip install -e '.[test,bench]' && .venv/bin/python scripts/bench_report.py` "
             "(full sizes; add `--quick` for a few-minute run).")
    L.append("")
    if not images:
        L.append("(No plots: matplotlib was not installed when this report was written; `pip install -e '.[bench]'`.)")
        L.append("")
    L.append("## Headline")
    L.append("")
    for h in headline(res):
        L.append(f"- {h}")
    L.append("")

    if "scaling" in res:
        L.append("## CPU-bound scaling")
        L.append("")
        L.append("Handlers burning 1 ms, 0.1 ms and 10 ms of pure-Python CPU per message (`workers.cpu:handle`, thread CPU "
                 "time). The C++ peer is the Apache C++ client's push consumer (PyPI `rocketmq==0.4.4`) driven from "
                 "Python: its callback holds the GIL, so it cannot use more than one core for Python work. "
                 "Efficiency = msg/s ÷ (workers ÷ cost); the machine's ideal is cores ÷ cost. *Cores rmqrun got* is "
                 "the CPU time of the supervisor and its workers per wall second over the same window (psutil): on "
                 "a shared machine it is below the worker count, and *handler share* = msg/s × cost ÷ that figure "
                 "is the part of the CPU rmqrun did get that went into the handler — the efficiency that other "
                 "processes' load does not change. Both are sampled at the 0.1 s status lines, so they are good to a few "
                 "percent: a share a little over 100 % is that sampling.")
        L.append("")
        for key, sc in res["scaling"].items():
            L.append(f"**{key} ms per message**, {sc['messages']:,} messages, load average "
                     f"{fmt_spread(sc['load'], 1)} — {cap}")
            L.append("")
            L.append("| consumer | msg/s | efficiency vs workers/cost | cores rmqrun got | handler share of "
                     "the CPU it got | supervisor µs/msg | vs C++ |")
            L.append("|---|---:|---:|---:|---:|---:|---:|")
            cpp = sc["cpp"]
            for w, st in sc["rmqrun"].items():
                ideal = int(w) * 1000 / sc["cpu_ms"]
                vs = f"{st['median'] / cpp['median']:.2f}×" if cpp["n"] else "-"
                got = sc.get("cores_used", {}).get(w, {"n": 0, "median": float("nan")})
                share = st["median"] * sc["cpu_ms"] / 1000 / got["median"] if got["n"] else float("nan")
                sup = sc.get("supervisor_us_per_msg", {}).get(w, {"n": 0})
                L.append(f"| rmqrun, {w} worker(s) | {fmt_spread(st)} | {st['median'] / ideal:.0%} | "
                         f"{fmt_spread(got, 2)} | {'-' if share != share else f'{share:.0%}'} | "
                         f"{fmt_spread(sup, 1) if sup['n'] else '-'} | {vs} |")
            if cpp["n"]:
                cgot = sc.get("cpp_cores_used", {"n": 0, "median": float("nan")})
                cshare = cpp["median"] * sc["cpu_ms"] / 1000 / cgot["median"] if cgot["n"] else float("nan")
                L.append(f"| C++ push consumer | {fmt_spread(cpp)} | {cpp['median'] / (1000 / sc['cpu_ms']):.0%} "
                         f"of one core | {fmt_spread(cgot, 2)} | {'-' if cshare != cshare else f'{cshare:.0%}'} "
                         f"| - | 1.00× |")
            L.append("")
            line = saturation(sc)
            if line:
                L.append(line)
                L.append("")
        if "scaling.png" in images:
            L.append(f"![CPU-bound scaling]({'scaling.png'})")
            L.append("")

    if "overhead" in res:
        ov = res["overhead"]
        L.append("## Framework overhead (no-op handler, 1 KiB messages)")
        L.append("")
        L.append(f"Backlog {ov['messages']:,} messages per row, rmqrun with {ov['workers']} workers; load average "
                 f"{fmt_spread(ov['load'], 1)} — {cap}. The raw pull rate is bare pull loops (one per queue, no "
                 f"consumer logic, nothing handled): what the broker serves, the ceiling for every consumer.")
        L.append("")
        raw = ov["rows"]["raw pull (ceiling)"]["median"]
        cpp_row = ov["rows"].get("C++ push consumer")
        cpp = cpp_row["median"] if cpp_row and cpp_row.get("n") else 0.0
        L.append("| consumer | msg/s | share of raw pull | vs C++ |")
        L.append("|---|---:|---:|---:|")
        for k, st in ov["rows"].items():
            vs = f"{st['median'] / cpp:.2f}×" if cpp else "–"
            L.append(f"| {k} | {fmt_spread(st)} | {st['median'] / raw:.2f} | {vs} |")
        L.append("")
        L.append(java_comparison(ov["rows"], raw, cpp))
        L.append("")
        rat = ov.get("orderly_vs_concurrent", {})
        gap = ov.get("orderly_gap", {})
        if rat:
            L.append("Orderly against concurrent, each round's drains one after the other (ratio of the rates): "
                     + "; ".join(f"{k} {fmt_spread(v, 2)}×" for k, v in rat.items() if v["n"]) + ".")
            L.append("")
        if gap and gap.get("gap_ms", {}).get("n"):
            g, h = gap["gap_ms"], gap["handler_ms"]
            L.append(f"Per orderly job (4 queues; up to 32 messages), the time between two results of a queue that "
                     f"its worker did not spend in the job: {fmt_spread(g, 3)} ms, against {fmt_spread(h, 3)} ms in "
                     "it (the consume service's own count, logged as it stops, over the whole drain). A queue's next "
                     "job waits in its worker's pipe behind the running one, so no pipe round trip is in it; what is "
                     "left is the supervisor's own time per job (reading the result, committing, taking and sending "
                     "the next job) and, on a loaded machine, its wait for a core: it shows how far the supervisor, "
                     "not the worker, sets an orderly queue's pace.")
            L.append("")
        if "overhead.png" in images:
            L.append("![Framework overhead](overhead.png)")
            L.append("")

    if "stages" in res:
        st = res["stages"]
        L.append("## Supervisor CPU per message, by stage")
        L.append("")
        L.append(f"The supervisor's own CPU (user + system, psutil) between 10 % and 90 % of the no-op concurrent "
                 f"drains above: {fmt_spread(res['overhead']['supervisor_us_per_msg'], 1)} µs per message. "
                 "The split comes from a cProfile of the supervisor during one more no-op drain; a profiler inflates "
                 "absolute times, so only its *shares* are used, applied to the un-profiled figure. Start-up imports "
                 "are left out; built-ins and standard-library calls are charged to the stage of their caller. The "
                 "workers' decode and handler time is not in this figure (it is in the workers' CPU). — " + cap)
        L.append("")
        if "us_by_stage" in st:
            L.append("| stage | share | µs / message |")
            L.append("|---|---:|---:|")
            for k, v in st["us_by_stage"].items():
                L.append(f"| {k} | {st['shares'][k]:.0%} | {v:.1f} |")
            L.append("")
            sup = st["us_per_msg"]
            wk = res["overhead"].get("worker_us_per_msg", {"n": 0})
            bk = res["overhead"].get("broker_us_per_msg", {"n": 0})
            if sup == sup and sup > 0:
                line = (f"What this explains: at {sup:.1f} µs per message the supervisor alone could feed "
                        f"{1e6 / sup:,.0f} msg/s from one core.")
                if wk["n"]:
                    total = sup + wk["median"]
                    line += (f" The workers together spent {fmt_spread(wk, 1)} µs of CPU per no-op message "
                             f"(decoding, calling the handler, reporting the result)")
                    if bk["n"]:
                        total += bk["median"]
                        line += (f" and the embedded broker, on the same cores, {fmt_spread(bk, 1)} µs serving the "
                                 f"pulls and offset commits")
                    conc = res["overhead"]["rows"]["rmqrun concurrent"]["median"]
                    line += (f", so the whole no-op path costs about {total:.1f} µs of CPU per message: at most "
                             f"{m['cores'] * 1e6 / total:,.0f} msg/s on {m['cores']} idle cores, against "
                             f"{fmt(conc)} measured ({conc * total / 1e6:.2f} cores busy on it; the rest went to "
                             f"other processes on this machine or to waiting).")
                L.append(line)
                for key, sc in res.get("scaling", {}).items():
                    w = str(max(int(x) for x in sc["rmqrun"]))
                    rate = sc["rmqrun"][w]["median"]
                    got = sc.get("cores_used", {}).get(w, {"n": 0})
                    line = (f" For the {key} ms handler at {w} workers ({fmt(rate)} msg/s) the supervisor used "
                            f"{rate * sup / 1e6:.1%} of a core")
                    if got["n"]:
                        share = rate * sc["cpu_ms"] / 1000 / got["median"]
                        line += (f"; rmqrun as a whole got {got['median']:.2f} of the {m['cores']} cores and "
                                 f"{share:.0%} of that went into the handler, so the distance to the ideal "
                                 f"{m['cores'] * 1000 / sc['cpu_ms']:,.0f} msg/s is "
                                 + ("mostly CPU the run did not get, not CPU it spent outside the handler"
                                    if share >= 0.9 else "partly CPU spent outside the handler"))
                    L[-1] += line + "."
                L.append("")
        else:
            L.append(f"(no split: {st.get('error')})")
            L.append("")
        if "stages.png" in images:
            L.append("![Supervisor CPU by stage](stages.png)")
            L.append("")

    if "latency" in res:
        lt = res["latency"]
        L.append("## Latency below capacity")
        L.append("")
        L.append(f"Messages sent at fixed rates, 25/50/75 % of the measured capacity of the 1 ms handler with "
                 f"{lt['workers']} workers ({fmt(lt['capacity'])} msg/s, from the scaling section); each worker "
                 "records `now − store timestamp` on entering the handler (`workers.bench_latency:handle`), the "
                 f"first seconds left out as warm-up — {cap}")
        L.append("")
        L.append("| load | send rate | messages | p50 ms | p99 ms | max ms | behind at the end of sending, s | "
                 "handler CPU the rate needs, cores | cores rmqrun got | load avg |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        behind = []
        for pct, r in lt["rows"].items():
            if "p50" not in r:
                L.append(f"| {pct} % | {fmt(r['rate'])} | - | - | - | - | - | - | - | {r.get('error', '')} |")
                continue
            lag, got = r.get("lag_s", float("nan")), r.get("cores_used", float("nan"))
            if lag == lag and lag > LAG_BEHIND_S:
                behind.append(f"{pct} %")
            L.append(f"| {pct} % | {fmt(r['rate'])} | {r['measured']:,} | {r['p50']:.1f} | {r['p99']:.1f} | "
                     f"{r['max']:.1f} | {fmt(lag, 1)} | {r['rate'] * LATENCY_CPU_MS / 1000:.2f} | {fmt(got, 2)} | "
                     f"{r['load']:.1f} |")
        L.append("")
        if behind:
            L.append(f"At {', '.join(behind)} the consumer was still more than {LAG_BEHIND_S:g} s behind when sending "
                     "stopped: a standing queue. Compare the CPU the handler alone needed at that rate with the CPU "
                     "rmqrun got: on this shared machine it got less than when its capacity was measured, so the "
                     "rate was at or above what it could do at that moment, and those latencies are mostly that "
                     "queue, not the framework's path. Only rows that kept up measure the path itself.")
            L.append("")
        if "latency.png" in images:
            L.append("![Latency](latency.png)")
            L.append("")

    if "memory" in res:
        mm = res["memory"]
        L.append("## Memory while draining a backlog")
        L.append("")
        L.append(f"{mm['messages']:,} messages of 1 KiB drained by the no-op handler with {mm['workers']} workers "
                 f"({fmt(mm['rate'])} msg/s, {mm['consumed']:,} consumed); RSS sampled at every status line "
                 f"(0.1 s); load average {mm['load']:.1f} — {cap}. The pull thresholds (per queue, per topic) "
                 "bound what the supervisor holds, so RSS should stay flat however large the backlog.")
        L.append("")
        L.append("| progress | supervisor RSS MiB | largest worker RSS MiB |")
        L.append("|---|---:|---:|")
        for k, v in mm["marks"].items():
            L.append(f"| {k} drained | {fmt(v['sup_mib'], 1)} | {fmt(v['worker_max_mib'], 1)} |")
        L.append(f"| peak | {fmt(mm['peak_sup_mib'], 1)} | {fmt(mm['peak_worker_mib'], 1)} |")
        L.append("")
        half, end = mm["marks"]["50%"], mm["marks"]["100%"]
        if half["sup_mib"] == half["sup_mib"] and end["sup_mib"] == end["sup_mib"] and half["sup_mib"] > 0:
            L.append(f"Over the second half of the drain (50 % → 100 %) the supervisor's RSS changed by "
                     f"{(end['sup_mib'] / half['sup_mib'] - 1):+.0%} and the largest worker's by "
                     f"{(end['worker_max_mib'] / half['worker_max_mib'] - 1):+.0%}, while the backlog left in the "
                     f"broker went from {0.5 * mm['messages']:,.0f} messages to none. A rise early in the drain is "
                     "the working set filling up (process queues up to the pull thresholds, buffers, the status "
                     "windows' first minute); growth that goes on through the second half would be a leak.")
            L.append("")
        if "memory.png" in images:
            L.append("![Memory](memory.png)")
            L.append("")
    if "pop" in res:
        L += pop_lines(res["pop"], fmt, fmt_spread)
    if "spark" in res:
        L.extend(spark_lines(res["spark"]))
    L += bench_java.java_lines(res["java"]) if "java" in res else []
    L += worker_class_lines(res["classes"]) if "classes" in res else []
    L += ["Raw numbers of this run: [`report.json`](report.json).", ""]
    return "\n".join(L)


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


def spark_lines(sp: dict[str, Any]) -> list[str]:
    rows = sp["rounds"]
    L = ["## Spark source: batch read rate against raw pulls", "",
         f"`spark.read.format(\"rocketmq\")` on a `{sp['master']}` session against one process pulling the same "
         f"{rows[0]['messages']:,} messages ({sp['queues']} queues) with a `PullConsumer`, interleaved; the load "
         "average before each measurement beside it (`scripts/bench_spark_source.py`).", "",
         "| round | raw msg/s | load | Spark msg/s | load | Spark / raw | Spark query s | fixed cost s "
         "| Spark / raw without the fixed cost |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, r in enumerate(rows, 1):
        L.append(f"| {i} | {fmt(r['raw'])} | {r['load_raw']:.1f} | {fmt(r['spark'])} | {r['load_spark']:.1f} | "
                 f"{r['ratio']:.2f} | {r['seconds']:.1f} | {r['fixed']:.1f} | {r.get('steady_ratio', 0):.2f} |")
    L += ["", f"Median Spark / raw: **{statistics.median(r['ratio'] for r in rows):.2f}** (goal 0.8 on 2 cores); "
          f"without the fixed cost {statistics.median(r.get('steady_ratio', 0) for r in rows):.2f}.",
          "", sp.get("limits", ""), ""]
    return L


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
    with_cpp = not args.no_cpp and cpp_available()
    if not with_cpp and not args.no_cpp:
        print("the C++ peer (PyPI rocketmq==0.4.4) is not importable: its rows are left out", file=sys.stderr)

    res: dict[str, Any] = {"machine": machine(), "quick": args.quick, "sizes": vars(sz), "workers": args.workers,
                           "command": " ".join(["python", "scripts/bench_report.py"] + sys.argv[1:]),
                           "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           "load_start": load(), "with_cpp": with_cpp, "code": code_version()}
    print(f"machine: {res['machine']}; load {res['load_start']:.2f}; sizes {vars(sz)}", flush=True)
    if "java" in sections and bench_java.hook(args, sections, res, drain=drain, runner=RmqrunRun, produce=produce,
                                              create_topic=create_topic):
        return 0  # --sections java alone: its report went to OUT/java/
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-report-"))
    with BrokerProcess(data / "broker", flush_mode="async") as bp:
        ns = bp.namesrv_address
        RmqrunRun.broker = psutil.Process(bp.pid)
        if "overhead" in sections or "stages" in sections:
            res["overhead"] = section_overhead(ns, sz, args.workers, with_cpp)
        if "scaling" in sections or "latency" in sections:
            res["scaling"] = section_scaling(ns, sz, args.workers, with_cpp)
        if "latency" in sections:
            cap = res["scaling"]["1"]["rmqrun"][str(args.workers)]["median"]
            res["latency"] = section_latency(ns, sz, args.workers, cap)
        if "memory" in sections:
            res["memory"] = section_memory(ns, sz, args.workers)
        if "stages" in sections:
            res["stages"] = section_stages(ns, sz, args.workers, res["overhead"]["supervisor_us_per_msg"]["median"])
        if "pop" in sections:
            pop_sizes = {"no-op": max(sz.backlog // 4, sz.cpu1_messages), "1 ms CPU": sz.cpu1_messages}
            res["pop"] = section_pop(ns, pop_sizes, sz.rounds, args.workers, sz.timeout, drain=drain,
                                     create_topic=create_topic, produce=produce, load=load, spread=spread)
        if "spark" in sections:
            res["spark"] = section_spark(ns, sz)
        if "classes" in sections:  # scripts/bench_worker_classes.py: process, threads, asyncio side by side
            res["classes"] = section_worker_classes(ns, {"waits 50 ms": sz.cpu10_messages, "1 ms CPU": sz.cpu1_messages
                                                         // 2}, args.workers, 32, sz.timeout, drain=drain,
                                                    create_topic=create_topic, produce=produce, load=load)
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
