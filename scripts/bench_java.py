"""rmqrun beside the Java push consumer on a real Apache RocketMQ 4.9.8 broker (issue #38): the ``--java DEST`` rows.

    .venv/bin/python scripts/bench_report.py --sections java --java /path/to/rmq498          # issue #38's sizes
    .venv/bin/python scripts/bench_report.py --sections java --java /path/to/rmq498 --quick  # a quick look

``DEST`` is a build of ``scripts/realmq/build-rocketmq-4.9.8.sh`` (name server, broker, Java client). Why a real
broker: rmqrun's own benchmarks run on the embedded broker and compare with the C++ client only, so a gap to the
Java consumer that a user would switch from never showed. Three consumers drain the same backlogs of the same
real broker in every round: Java in a fresh JVM, Java in a JVM that drained the backlog once before (JIT-compiled,
as a long-running consumer is) and rmqrun; their order rotates from round to round so drift in the machine's
load falls on all alike. Each one's own CPU per message is measured over the same 10–90 % window as its rate:
the supervisor plus its workers for rmqrun, the whole JVM for Java, and the broker's CPU beside each.

The broker runs from a private home (a temporary directory with DEST's ``bin/`` and ``conf/`` copied and ``lib/``
linked), so its store starts empty and a broker someone else runs from DEST is left alone. The Java program is
``scripts/java/JavaPushBench.java``, compiled at run time with DEST's client classpath.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import psutil

SCRIPTS = Path(__file__).resolve().parent
JAVA_SRC = SCRIPTS / "java" / "JavaPushBench.java"
NAMESRV_PORT = 19876  # not the defaults (9876/10911), so a broker someone else runs on them is not in the way
BROKER_PORT = 20911


@dataclass
class JavaSizes:
    """Issue #38's recipe: 100k × 1 KiB no-op backlog, 10k at 1 ms of CPU, ≥ 4 rounds."""

    rounds: int = 4
    noop: int = 100_000
    cpu1: int = 10_000
    workers: int = 2
    timeout: float = 600.0
    ceiling_s: float = 5.0  # per round: two bare handler loops beside the idle broker (see ceiling())


QUICK = JavaSizes(rounds=2, noop=20_000, cpu1=2_000, timeout=300.0, ceiling_s=2.0)

def sample_interval(cpu_ms: float) -> float:
    """Seconds between the progress samples of a drain, both sides alike: 0.1 s for the no-op rows (drains of
    about a second), 0.5 s for the 1 ms row (about 5 s).

    Each rmqrun sample is a status line of the supervisor and /proc reads of its processes by this script,
    charged to the two cores the handler's CPU share is measured on: at 10 a second they cost ~12 ms of CPU a
    second (0.6 % of the ideal; docs/benchmarks/java/where-the-time-goes.md §7a), at 2 a second a fifth of it;
    the rate is still exact counts over exact times.
    """
    return 0.5 if cpu_ms else 0.1


#: (row, topic, queues, handler CPU ms, orderly)
ROWS = (("no-op concurrent", "JBenchNoop", 8, 0.0, False),
        ("no-op orderly (4 queues)", "JBenchOrderly4", 4, 0.0, True),
        ("1 ms CPU", "JBenchCpu1", 8, 1.0, False))


def missing(dest: Path | None) -> str | None:
    """Why the Java rows cannot run (None when they can): the note the report prints instead of them."""
    if dest is None:
        return "no 4.9.8 build given (`--java DEST`, built by scripts/realmq/build-rocketmq-4.9.8.sh DEST)"
    for need in ("bin/start.sh", "bin/stop.sh", "bin/classpath", "bin/env.sh", "lib"):
        if not (dest / need).exists():
            return f"{dest} is not a 4.9.8 build: {need} is missing"
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "javac/java not found on PATH"
    return None


class RealBroker:
    """A name server and broker-a of DEST, started from a private home; ``stop()`` ends exactly those two."""

    def __init__(self, dest: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="rmqrun-bench-java-"))
        shutil.copytree(dest / "bin", self.home / "bin")
        shutil.copytree(dest / "conf", self.home / "conf")
        (self.home / "lib").symlink_to((dest / "lib").resolve())
        self.namesrv = f"127.0.0.1:{NAMESRV_PORT}"
        self.env = dict(os.environ, NAMESRV_PORT=str(NAMESRV_PORT), BROKER_PORT=str(BROKER_PORT))

    def start(self) -> RealBroker:
        try:
            subprocess.run([str(self.home / "bin" / "start.sh")], check=True, env=self.env, timeout=240,
                           stdout=subprocess.DEVNULL)
        except (subprocess.SubprocessError, OSError):
            self.stop()  # a name server it did start (the broker's port taken, say) goes too, and the home
            raise
        self.process = psutil.Process(int((self.home / "run" / "broker.pid").read_text().strip()))
        return self

    def classpath(self) -> str:
        return subprocess.run([str(self.home / "bin" / "classpath")], check=True, capture_output=True,
                              text=True).stdout.strip()

    def cpu(self) -> float:
        try:
            t = self.process.cpu_times()
        except psutil.Error:
            return float("nan")
        return t.user + t.system

    def stop(self) -> None:
        subprocess.run([str(self.home / "bin" / "stop.sh")], env=self.env, timeout=120, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(self.home, ignore_errors=True)  # the store: 300 MB at the sizes


def compile_bench(classpath: str, out: Path) -> None:
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(out), str(JAVA_SRC)], check=True, timeout=300)


# The flags DEST's env.sh gives its JVMs, so netty 4.1 runs on Java 17 as it does in the broker.
JVM_OPTS = ["-server", "-XX:+UseG1GC", "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/java.lang=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true"]


@dataclass
class Drain:
    """One drain: msg/s and µs of CPU per message (the consumer's own, the broker's) over 10–90 % of it."""

    rate: float
    own_us: float
    broker_us: float
    supervisor_us: float = float("nan")  # rmqrun only: the part of own_us its supervisor spent
    workers_us: float = float("nan")


def window(points: list[tuple[float, int, float, float]], n: int) -> Drain:
    """(t, consumed, own CPU s, broker CPU s) samples → the 10–90 % figures (NaN when the drain fell short)."""
    lo = next((p for p in points if p[1] >= 0.1 * n), None)
    hi = next((p for p in points if p[1] >= 0.9 * n), None)
    if lo is None or hi is None or hi[0] <= lo[0] or hi[1] <= lo[1]:
        return Drain(float("nan"), float("nan"), float("nan"))
    k = hi[1] - lo[1]
    return Drain(k / (hi[0] - lo[0]), (hi[2] - lo[2]) / k * 1e6, (hi[3] - lo[3]) / k * 1e6)


def run_java(broker: RealBroker, classes: Path, cp: str, topic: str, group: str, n: int, cpu_ms: float,
             orderly: bool, timeout: float, warmup: int = 0) -> Drain:
    """JavaPushBench on a fresh group; its progress lines carry the JVM's CPU, the broker's is sampled beside.

    ``warmup``: messages the same JVM drains first (no-op, another group, unreported): the warm-JVM row."""
    cmd = ["java", *JVM_OPTS, f"-Drocketmq.client.logRoot={broker.home / 'logs'}", f"-Duser.home={broker.home}",
           "-cp", f"{cp}:{classes}", "JavaPushBench", "--namesrv", broker.namesrv, "--group", group, "--topic",
           topic, "--count", str(n), "--cpu-ms", str(cpu_ms), "--timeout", str(timeout), "--warmup", str(warmup),
           "--interval", str(sample_interval(cpu_ms))]
    cmd += ["--orderly"] if orderly else []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    points: list[tuple[float, int, float, float]] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3 and not line.startswith("#"):
                points.append((float(parts[0]), int(parts[1]), float(parts[2]), broker.cpu()))
    finally:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if not points or points[-1][1] < n:
        print(f"  java {group}: stopped at {points[-1][1] if points else 0}/{n} (rc {proc.returncode})",
              file=sys.stderr)
    return window(points, n)


def run_rmqrun(drain: Callable[..., Any], broker: RealBroker, topic: str, group: str, n: int, cpu_ms: float,
               orderly: bool, sz: JavaSizes) -> Drain:
    """``rmqrun run`` through bench_report's watched drain (its broker sampler pointed at the real broker)."""
    env = {"RMQRUN_HANDLER_CPU_MS": str(cpu_ms), "RMQRUN_STATUS_INTERVAL": str(sample_interval(cpu_ms))}
    if orderly:
        env["RMQRUN_ORDERLY"] = "true"
    handler = "workers.cpu:handle" if cpu_ms else "workers.noop:handle"
    run = drain(broker.namesrv, topic, group, n, handler, sz.workers, sz.timeout, env)
    sup, wrk = run.supervisor_us_per_msg(n), run.worker_us_per_msg(n)
    return Drain(run.rate(n), sup + wrk, run.broker_us_per_msg(n), sup, wrk)


#: one bare handler loop: ``workers.cpu.burn(1)`` back to back for argv[1] seconds, nothing else; prints its calls,
#: its wall seconds and its thread CPU seconds
_BURN_LOOP = """
import sys, time
sys.path.insert(0, sys.argv[2])
from workers.cpu import burn
t0 = time.monotonic(); end = t0 + float(sys.argv[1]); cpu0 = time.thread_time(); n = 0
while time.monotonic() < end:
    burn(1.0)
    n += 1
print(n, time.monotonic() - t0, time.thread_time() - cpu0)
"""


@dataclass
class Ceiling:
    """What the 1 ms row's handler gets on this box with no consumer at all: the broker idles beside it."""

    rate: float  # 1 ms calls a second, the loops together
    call_us: float  # thread CPU per call: the burn's own overshoot of its 1,000 µs (clock reads are system calls)
    broker_ms: float  # the idle broker's CPU in the same seconds, ms a second


def ceiling(broker: RealBroker, loops: int, seconds: float) -> Ceiling:
    """The 1 ms row's ceiling: ``loops`` processes (one per core) call the drains' own ``workers.cpu.burn(1)``
    back to back for ``seconds`` while the real broker idles on the same cores.

    The ideal (cores ÷ 1 ms) assumes the handlers get every cycle; the broker's own threads on the same box (its
    ReputMessageService alone wakes ~900 times a second) take some whatever the consumer, and the clock reads of
    the burn take some more. This is the most any consumer can drain at 1 ms in these rounds, so the distance
    from it to a consumer's rate is what the consumer itself costs.
    """
    b0, t0 = broker.cpu(), time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", _BURN_LOOP, str(seconds), str(SCRIPTS.parent)],
                              stdout=subprocess.PIPE, text=True) for _ in range(loops)]
    outs = [p.communicate(timeout=seconds + 120)[0].split() for p in procs]
    b1, dt = broker.cpu(), time.monotonic() - t0
    if any(p.returncode or len(o) != 3 for p, o in zip(procs, outs)):
        print(f"  ceiling: a burn loop failed ({[p.returncode for p in procs]})", file=sys.stderr)
        return Ceiling(float("nan"), float("nan"), float("nan"))
    calls = sum(int(o[0]) for o in outs)
    if not calls:  # no time given: no figure, not a division by zero
        return Ceiling(float("nan"), float("nan"), float("nan"))
    return Ceiling(sum(int(o[0]) / float(o[1]) for o in outs), sum(float(o[2]) for o in outs) / calls * 1e6,
                   (b1 - b0) / dt * 1e3)


def spread(values: list[float]) -> dict[str, Any]:
    ok = [v for v in values if v == v]
    if not ok:
        return {"values": values, "median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"values": values, "median": statistics.median(ok), "min": min(ok), "max": max(ok), "n": len(ok)}


def section_java(dest: Path, sz: JavaSizes, *, drain: Callable[..., Any], runner: Any,
                 produce: Callable[..., Any], create_topic: Callable[[str, str, int], None]) -> dict[str, Any]:
    """Every row and consumer, ``sz.rounds`` rotating rounds on one real broker; medians, spreads, ratios."""
    out: dict[str, Any] = {"dest": str(dest), "sizes": vars(sz), "load_before": os.getloadavg()[0],
                           "uptime_before": _uptime()}
    broker = RealBroker(dest).start()
    saved, runner.broker = runner.broker, broker.process  # bench_report samples this broker's CPU per status line
    classes = broker.home / "classes"
    try:
        cp = broker.classpath()
        compile_bench(cp, classes)
        for label, topic, queues, cpu_ms, _ in ROWS:
            create_topic(broker.namesrv, topic, queues)
            n = sz.cpu1 if cpu_ms else sz.noop
            print(f"[java] producing {n:,} x 1 KiB to {topic} ({queues} queues)", flush=True)
            asyncio.run(produce(broker.namesrv, topic, n))
        # Unrecorded warm-up: one drain by each side. A fresh broker JIT-compiles its pull path and reads the
        # new backlog for the first time during its first drains (its CPU per message was 3-5x higher then),
        # and the first round would charge that to whichever side ran there.
        print("[java] warm-up: one unrecorded drain by each side", flush=True)
        run_java(broker, classes, cp, ROWS[0][1], "CG_warmup_java", sz.noop, 0.0, False, sz.timeout)
        run_rmqrun(drain, broker, ROWS[0][1], "CG_warmup_rmqrun", sz.noop, 0.0, False, sz)
        raw, loads, ceilings = _rounds(broker, classes, cp, sz, drain)
    finally:
        runner.broker = saved
        broker.stop()
    out["rows"] = {label: {side: {f: spread([getattr(d, f) for d in ds]) for f in vars(ds[0])}
                           for side, ds in sides_.items()} for label, sides_ in raw.items()}
    for label, row in out["rows"].items():
        for java, key in (("java", "ratio"), ("java_warm", "ratio_warm")):
            row[key] = spread([rq.rate / jv.rate if jv.rate == jv.rate and jv.rate else float("nan")
                               for rq, jv in zip(raw[label]["rmqrun"], raw[label][java])])
    if ceilings:
        out["ceiling"] = {f: spread([getattr(c, f) for c in ceilings]) for f in vars(ceilings[0])}
        cpu = raw.get("1 ms CPU")
        if cpu:
            per_round = zip(cpu["rmqrun"], ceilings)
            out["rows"]["1 ms CPU"]["of_ceiling"] = spread([d.rate / c.rate if c.rate == c.rate and c.rate
                                                            else float("nan") for d, c in per_round])
    out["load"] = spread(loads)
    out["load_after"] = os.getloadavg()[0]
    out["uptime_after"] = _uptime()
    return out


#: the consumers of every row: Java in a fresh JVM (what starting a consumer gives), Java in a JVM that drained
#: the backlog once before (a long-running consumer's compiled code), rmqrun
SIDES = ("java", "java_warm", "rmqrun")


def _rounds(broker: RealBroker, classes: Path, cp: str, sz: JavaSizes,
            drain: Callable[..., Any]) -> tuple[dict[str, dict[str, list[Drain]]], list[float], list[Ceiling]]:
    """``sz.rounds`` rounds of every row and side, the order of the sides rotating from round to round; each
    round ends with the 1 ms row's :func:`ceiling` (one loop per core), so it sees the broker as the rounds do."""
    raw: dict[str, dict[str, list[Drain]]] = {r[0]: {side: [] for side in SIDES} for r in ROWS}
    loads: list[float] = []
    ceilings: list[Ceiling] = []
    for r in range(sz.rounds):
        for label, topic, _, cpu_ms, orderly in ROWS:
            n = sz.cpu1 if cpu_ms else sz.noop
            for side in SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]:
                loads.append(os.getloadavg()[0])
                group = f"CG_{side}_{topic}_r{r}"
                if side == "rmqrun":
                    d = run_rmqrun(drain, broker, topic, group, n, cpu_ms, orderly, sz)
                else:
                    d = run_java(broker, classes, cp, topic, group, n, cpu_ms, orderly, sz.timeout,
                                 n if side == "java_warm" else 0)
                raw[label][side].append(d)
            print(f"[java] round {r + 1} {label}: " + ", ".join(
                f"{side} {raw[label][side][-1].rate:,.0f}/s {raw[label][side][-1].own_us:.1f} µs" for side in SIDES)
                + f" (load {loads[-1]:.2f})", flush=True)
        if sz.ceiling_s > 0:
            c = ceiling(broker, os.cpu_count() or 1, sz.ceiling_s)
            ceilings.append(c)
            print(f"[java] round {r + 1} ceiling: bare 1 ms loops {c.rate:,.0f}/s ({c.call_us:.1f} µs a call), "
                  f"the idle broker {c.broker_ms:.1f} ms/s", flush=True)
    return raw, loads, ceilings


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _f(v: float, digits: int = 0) -> str:
    return "-" if v != v else f"{v:,.{digits}f}"


def _s(s: dict[str, Any], digits: int = 0) -> str:
    return "-" if not s["n"] else f"{_f(s['median'], digits)} ({_f(s['min'], digits)}–{_f(s['max'], digits)})"


def cores(side: dict[str, Any]) -> float:
    """Median over the rounds of msg/s × own CPU µs per message: the cores a consumer got in its 10–90 % window."""
    got = [r * u / 1e6 for r, u in zip(side["rate"]["values"], side["own_us"]["values"]) if r == r and u == u]
    return statistics.median(got) if got else float("nan")


def java_lines(res: dict[str, Any]) -> list[str]:
    """The report's markdown for the section (or the note saying why it was skipped)."""
    L = ["## rmqrun beside the Java push consumer (real RocketMQ 4.9.8 broker)", ""]
    if "skipped" in res:
        return L + [f"Skipped: {res['skipped']}.", ""]
    sz = res["sizes"]
    L += [f"Real Apache RocketMQ 4.9.8 name server and broker (`{res['dest']}`, async flush) on this machine; "
          f"{sz['noop']:,} × 1 KiB no-op backlog, {sz['cpu1']:,} messages at 1 ms of handler CPU; rmqrun `run` with "
          f"{sz['workers']} workers against `scripts/java/JavaPushBench.java` (DefaultMQPushConsumer, client "
          f"defaults: 20 consume threads, pull batch 32), each on a fresh group from the first offset, "
          f"{sz['rounds']} rounds rotating which consumer drains first, after one unrecorded warm-up drain by each "
          "side (the broker's first drains cost it several times the CPU per message). Cells are *median "
          "(min–max)* over the rounds; "
          "rates and CPU per message are taken between 10 % and 90 % of each drain. Own CPU = supervisor + workers "
          "for rmqrun, the whole JVM for Java; the broker's CPU per message is measured in the same window.", "",
          f"Load: `{res['uptime_before']}` before, `{res['uptime_after']}` after; 1-minute load average sampled "
          f"before each drain {_s(res['load'], 2)}.", "",
          "| row | consumer | msg/s | rmqrun ÷ this (per round) | own µs/msg | broker µs/msg | cores used |",
          "|---|---|---:|---:|---:|---:|---:|"]
    names = {"java": "Java, fresh JVM", "java_warm": "Java, warm JVM", "rmqrun": "rmqrun"}
    ratio_of = {"java": "ratio", "java_warm": "ratio_warm"}
    for label, row in res["rows"].items():
        for side, name in names.items():
            if side not in row:  # (runs before the warm-JVM row existed)
                continue
            d = row[side]
            own = _s(d["own_us"], 1)
            if side == "rmqrun":
                own += f" ({_f(d['supervisor_us']['median'], 1)} + {_f(d['workers_us']['median'], 1)})"
            ratio = _s(row[ratio_of[side]], 2) if side in ratio_of and ratio_of[side] in row else ""
            L.append(f"| {label} | {name} | {_s(d['rate'])} | {ratio} | {own} | {_f(d['broker_us']['median'], 1)} "
                     f"| {_f(cores(d), 2)} |")
    L += ["", "*Cores used* = msg/s × own µs/msg, the median over the rounds: the CPU each consumer got while "
          "draining. On a loaded machine the scheduler, not the consumer's efficiency, decides most of the rate "
          "(a JVM of ~30 threads and rmqrun's 3 processes compete differently with everything else); own µs per "
          "message is the figure that load changes least. rmqrun's own CPU is its supervisor + workers (in "
          "brackets). *Warm JVM*: the same JVM first drained the backlog on another group with a no-op listener "
          "(unreported), so the measured drain runs on JIT-compiled code, as in a long-running consumer; a fresh "
          "JVM spends the first seconds of a drain compiling."]
    cpu = res["rows"].get("1 ms CPU")
    if cpu:
        ideal = os.cpu_count() or 1
        L += ["", f"1 ms row against the machine's ideal ({ideal} cores ÷ 1 ms = {ideal * 1000:,}/s): " + ", ".join(
            f"{names[side]} {_f(cpu[side]['rate']['median'] / (ideal * 1000), 2)}" for side in names if side in cpu)
            + "."]
        c = res.get("ceiling")
        if c and c["rate"]["n"]:
            L += ["", f"The 1 ms row's ceiling on this box: {ideal} bare loops of the drains' own "
                  "`workers.cpu.burn(1)` back to back, no consumer, the broker idle beside them, at the end of every "
                  "round: "
                  f"{_s(c['rate'])} calls/s = {_f(c['rate']['median'] / (ideal * 1000), 3)} of the ideal "
                  f"({_s(c['call_us'], 1)} µs of thread CPU a call; the idle broker {_s(c['broker_ms'], 1)} ms of CPU "
                  "a second). No consumer drains faster than this here; the distance from it is what the consumer "
                  "itself costs."
                  + (f" rmqrun ÷ the ceiling, per round: {_s(cpu['of_ceiling'], 3)}." if "of_ceiling" in cpu else "")]
    return L + [""]


def machine_note(run: dict[str, Any]) -> str:
    """What the load said about the machine: idle when the run started (load below half the cores), or shared."""
    before = run.get("java", {}).get("load_before", run.get("load_start"))
    cores = run["machine"]["cores"]
    if before is not None and before < 0.5 * cores:
        return (f"Nothing else ran on it: the load average was {before:.2f} when the run started; the load "
                "figures below are the benchmark's own (the broker, the consumer being measured and its JVM "
                "threads).")
    return ("This machine is shared with other work: absolute rates are not quiet-machine figures; the ratios "
            "between the two consumers, measured in the same rounds, alternating, are what this run shows.")


def write(run: dict[str, Any], out: Path) -> None:
    """``out/report.md`` and ``out/report.json`` for a run of this section alone (``--sections java``).

    ``run`` is bench_report's result dict (machine, command, code version, times) holding the section as "java".
    """
    m = run["machine"]
    head = ["# rmqrun beside the Java push consumer", "",
            f"**{'QUICK run (small sizes)' if run['quick'] else 'full run'}**, {run['started']} → "
            f"{run.get('finished', '?')}, produced by `{run['command']}`; {run.get('code', '')}.", "",
            f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']:.0f} GiB RAM, Python {m['python']}, "
            f"Linux {m['kernel']}. " + machine_note(run), ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(run, indent=1, default=str))
    (out / "report.md").write_text("\n".join(head + java_lines(run["java"])))
    print(f"wrote {out / 'report.md'}", flush=True)


def hook(args: Any, sections: list[str], run: dict[str, Any], **helpers: Any) -> bool:
    """bench_report's ``java`` section: ``run["java"]`` measured (or the note why not); True when it ran alone
    (``--sections java``), its report then written to ``--out``/java/ and nothing else left to do.

    The sizes are issue #38's (or QUICK's), each overridden by bench_report's flag when given: ``--rounds``,
    ``--backlog`` (no-op rows), ``--cpu1-messages``, ``--workers``, ``--timeout``. ``helpers`` are bench_report's
    ``drain``, ``runner`` (its RmqrunRun class), ``produce`` and ``create_topic``.
    """
    base = QUICK if args.quick else JavaSizes()
    sz = JavaSizes(rounds=args.rounds or base.rounds, noop=args.backlog or base.noop,
                   cpu1=args.cpu1_messages or base.cpu1, workers=args.workers or base.workers,
                   timeout=args.timeout or base.timeout)
    why = missing(args.java)
    run["java"] = {"skipped": why} if why else section_java(args.java, sz, **helpers)
    if sections != ["java"]:
        return False
    run["finished"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write(run, args.out / "java")
    return True
