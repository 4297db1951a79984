"""The benchmark report's building blocks: the sizes, the machine and load, one watched ``rmqrun run``,
the C++ peer's drain, statistics and topics (used by :mod:`bench_sections` and :mod:`bench_report`).
"""


from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import psutil

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(ROOT))

from bench_consume import _STATUS, _children, window_rate  # noqa: E402




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
        env = {**os.environ, "RMQRUN_STATUS_INTERVAL": "0.1", "PYTHONPATH": str(ROOT), **self.env}  # env may set them
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


