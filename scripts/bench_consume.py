#!/usr/bin/env python3
"""Drain a backlog of 1 KiB messages: rmqrun against the Apache C++ client, measured in the same run.

For each row (a no-op handler, the same orderly over 4 queues, and 1 ms of CPU
per message) both consumers drain the same backlog from the same embedded
broker (a separate process), each with a fresh consumer group starting at the
first offset:

* rmqrun: ``rmqrun run`` with ``--workers`` worker processes (default: CPU count);
* C++:    the Apache C++ client's push consumer from Python (``scripts/cpp_bench_consumer.py``),
          whose Python callback holds the GIL.

The rate is taken between 10 % and 90 % of the backlog (start-up and the tail
are left out). The report gives msg/s, rmqrun / C++, and rmqrun's share of the
ideal ``cores / handler cost`` for CPU-bound handlers. A "raw pull" line shows
what the broker serves to bare pull loops with no consumer logic, so a
reader can see whether the broker was the limit, and every rate is also
given as a ratio to it. The 1-minute load average is printed beside each
figure (the machine may be shared).

``--profile DIR`` runs each rmqrun supervisor under cProfile (process CPU time,
not wall time, so the event loop's idle waits do not count), writes
``DIR/<row>.prof`` and prints the supervisor's CPU per message split by
stage (see :func:`stage_split`). Profiled runs are slower; take rates from a
run without it.

Usage: python scripts/bench_consume.py [--messages 100000] [--cpu-messages 10000] [--workers N]
                                       [--rounds 3] [--rows noop,orderly,cpu] [--profile DIR]
                                       [--event-loop asyncio,uvloop]
Numbers depend on the machine; compare ratios, and runs on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import signal
import re
import subprocess
import sys
import tempfile
import statistics
from dataclasses import dataclass
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rmqrun.broker.app import BrokerProcess  # noqa: E402
from rmqrun.protocol.headers import PullMessageRequestHeader  # noqa: E402
from rmqrun.client.instance import ClientInstance  # noqa: E402
from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402
from rmqrun.remoting.message import scan_records  # noqa: E402

BODY = b"x" * 1024
_STATUS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) .*? (\d+) consumed")


async def produce(namesrv: str, topic: str, n: int) -> float:
    start = time.monotonic()
    async with Producer(namesrv, "PG_bench") as producer:
        await producer.send(topic, BODY)  # creates the topic
        sent = 1
        queues = await producer.instance.publish_queues(topic, refresh=True)
        batch = 64
        q = 0
        while sent < n:
            k = min(batch, n - sent)
            await producer.send_batch(topic, [OutgoingMessage(BODY)] * k, queue=queues[q % len(queues)])
            q += 1
            sent += k
    return n / (time.monotonic() - start)


async def raw_pull(namesrv: str, topic: str, n: int) -> float:
    """Bare pull loops, one per queue, no consumer logic: the broker's serving rate."""
    inst = ClientInstance(namesrv, instance_name="bench-raw")
    try:
        queues = await inst.subscribe_queues(topic)
        addr = inst.broker_address(queues[0].broker_name)
        assert addr is not None
        got = 0

        async def loop(mq) -> None:  # type: ignore[no-untyped-def]
            nonlocal got
            offset = 0
            while got < n:
                header = PullMessageRequestHeader(
                    consumer_group="bench-raw", topic=topic, queue_id=mq.queue_id, queue_offset=offset,
                    max_msg_nums=32, sys_flag=4, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                    subscription="*", expression_type="TAG")
                result = await inst.broker.pull(addr, header)
                if not result.body:
                    return
                got += len(scan_records(result.body))
                offset = result.next_begin_offset
        start = time.monotonic()
        await asyncio.gather(*(loop(mq) for mq in queues))
        return got / (time.monotonic() - start)
    finally:
        await inst.close()


def window_rate(points: list[tuple[float, int]], total: int) -> float:
    """msg/s between the first sample >= 10 % and the first >= 90 % of ``total``."""
    lo = next((p for p in points if p[1] >= 0.1 * total), None)
    hi = next((p for p in points if p[1] >= 0.9 * total), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return float("nan")
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


@dataclass
class RunStats:
    """One rmqrun run: the 10-90 % rate and, in that window, CPU per message of the supervisor and the workers."""

    rate: float
    supervisor_us: float = float("nan")
    workers_us: float = float("nan")


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def run_rmqrun(namesrv: str, topic: str, group: str, n: int, handler: str, workers: int, cpu_ms: float,
               timeout: float, orderly: bool = False, profile: Path | None = None,
               extra_env: dict[str, str] | None = None, root: Path = ROOT, spy: Path | None = None) -> RunStats:
    env = dict(os.environ, RMQRUN_STATUS_INTERVAL="0.1", RMQRUN_HANDLER_CPU_MS=str(cpu_ms),
               PYTHONPATH=str(root), **(extra_env or {}))
    args = ["run", handler, "--namesrv", namesrv, "--group", group,
            "--topic", topic, "--consume-from", "CONSUME_FROM_FIRST_OFFSET", "--workers", str(workers)]
    if orderly:
        args.append("--orderly")
    if profile is not None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--profiled-run", str(profile), "--", *args]
        env["PYTHONPATH"] = f"{root}{os.pathsep}{ROOT}"  # rmqrun from root; this script's helpers from ROOT
    else:
        cmd = [sys.executable, "-m", "rmqrun.cli.main", *args]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=root)
    points: list[tuple[float, int]] = []
    marks: list[tuple[int, float, float]] = []  # (consumed, supervisor cpu s, workers cpu s) at ~10 % and ~90 %
    deadline = time.monotonic() + timeout
    spy_proc: subprocess.Popen[bytes] | None = None
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            m = _STATUS.match(line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
                points.append((t, int(m.group(2))))
                count = points[-1][1]
                if (not marks and count >= 0.1 * n) or (len(marks) == 1 and count >= 0.9 * n):
                    marks.append((count, _cpu_seconds(proc.pid),
                                  sum(_cpu_seconds(c) for c in _children(proc.pid))))
                    if spy is not None and len(marks) == 1:
                        spy_proc = _start_py_spy(proc.pid, spy)
                    elif spy_proc is not None:
                        _stop_py_spy(spy_proc)
                        spy_proc = None
                if count >= n:
                    break
            if time.monotonic() > deadline:
                print(f"  rmqrun: timed out at {points[-1][1] if points else 0}/{n}", file=sys.stderr)
                break
    finally:
        if spy_proc is not None:
            _stop_py_spy(spy_proc)
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    stats = RunStats(window_rate(points, n))
    if len(marks) == 2 and marks[1][0] > marks[0][0]:
        k = marks[1][0] - marks[0][0]
        stats.supervisor_us = (marks[1][1] - marks[0][1]) / k * 1e6
        stats.workers_us = (marks[1][2] - marks[0][2]) / k * 1e6
    return stats


def run_cpp(namesrv: str, topic: str, group: str, n: int, cpu_ms: float, timeout: float,
            orderly: bool = False) -> float:
    home = tempfile.mkdtemp(prefix="rmqrun-bench-cpp-")
    env = dict(os.environ, HOME=home)
    cmd = [sys.executable, str(ROOT / "scripts" / "cpp_bench_consumer.py"), "--namesrv", namesrv, "--group", group,
           "--topic", topic, "--count", str(n), "--cpu-ms", str(cpu_ms), "--timeout", str(timeout)]
    if orderly:
        cmd.append("--orderly")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout + 60)
    points = [(float(a), int(b)) for a, b in (line.split() for line in out.stdout.splitlines() if line.strip())]
    return window_rate(points, n)


def cpp_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True,
                           env=dict(os.environ, HOME=tempfile.mkdtemp(prefix="rmqrun-bench-probe-")))
    return probe.returncode == 0


# --------------------------------------------------------------------------- profile

def _start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """Sample the running supervisor (no slowdown: py-spy reads it from outside) until stopped."""
    exe = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(exe), "record", "--pid", str(pid), "--rate", "500", "--format", "raw",
                             "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_py_spy(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        spy.wait(30)
    except subprocess.TimeoutExpired:
        spy.kill()


def spy_split(raw: Path) -> tuple[dict[str, int], int]:
    """Samples per stage from py-spy's raw output, each charged to its innermost Python frame.

    py-spy samples only frames that are running (not the loop waiting in epoll), and a
    built-in's time shows in the Python function that called it.
    """
    split: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        filename = leaf[leaf.rfind("(") + 1:].rsplit(":", 1)[0]
        stage = stage_of(filename)
        split[stage] = split.get(stage, 0) + int(count)
        total += int(count)
    return split, total


def print_spy_split(label: str, raw: Path) -> None:
    if not raw.exists():
        print(f"[{label}] py-spy wrote nothing (is py-spy installed, may it attach?)")
        return
    split, total = spy_split(raw)
    print(f"[{label}] supervisor samples by py-spy in the 10-90 % window (no profiler overhead): {total}")
    for stage, k in sorted(split.items(), key=lambda kv: -kv[1]):
        if total and k / total >= 0.005:
            print(f"    {stage:<44} {100 * k / total:5.1f} %")


#: Stages of the supervisor, by the source file a function lives in (first match wins).
STAGES: tuple[tuple[str, str], ...] = (
    ("rmqrun/remoting/", "remoting (frames, connection, record scan)"),
    ("rmqrun/client/", "client (pull calls, offsets, routes)"),
    ("rmqrun/consumer/puller.py", "consumer: puller"),
    ("rmqrun/consumer/process_queue.py", "consumer: process queue"),
    ("rmqrun/consumer/consume_", "consumer: consume service (job, result)"),
    ("rmqrun/consumer/offsets.py", "consumer: offset store"),
    ("rmqrun/consumer/", "consumer: other (engine, rebalance, stats)"),
    ("rmqrun/supervisor/executor.py", "supervisor: executor"),
    ("rmqrun/supervisor/dispatch.py", "supervisor: dispatcher"),
    ("rmqrun/supervisor/pool.py", "supervisor: pool (pipe I/O)"),
    ("rmqrun/supervisor/worker_process.py", "supervisor: pool (pipe I/O)"),
    ("rmqrun/supervisor/", "supervisor: other"),
    ("rmqrun/pipe/", "pipe codec (RUN/DONE frames)"),
    ("rmqrun/", "rmqrun: other"),
    ("asyncio/", "asyncio event loop"),
    ("uvloop", "asyncio event loop"),
    ("selectors.py", "asyncio event loop"),
    ("loguru", "logging"),
    ("logging/", "logging"),
)


def stage_of(filename: str) -> str:
    for prefix, stage in STAGES:
        if prefix in filename:
            return stage
    return "other (stdlib, start-up)"


def stage_split(prof_file: Path) -> tuple[dict[str, float], float]:
    """Self CPU time per stage, in seconds, and the total.

    A built-in (``len``, ``bytes.join``, ``socket.send`` ...) has no file of its own,
    so its self time is charged to the stages of its callers, in proportion to the
    time each caller spent in it: the cost of a pipe write lands on the pool, the
    cost of decoding a response on the remoting layer.
    """
    stats: dict[Any, Any] = pstats.Stats(str(prof_file)).stats  # type: ignore[attr-defined]
    split: dict[str, float] = {}
    total = 0.0

    def add(stage: str, t: float) -> None:
        split[stage] = split.get(stage, 0.0) + t

    def owner(func: tuple[str, int, str], depth: int = 0) -> dict[str, float]:
        """Shares of a built-in's time by the stage of the first caller with a file."""
        filename = func[0]
        if filename not in ("~", "") and not filename.startswith("<"):
            return {stage_of(filename): 1.0}
        callers = stats.get(func, (0, 0, 0, 0, {}))[4]
        weights = {c: v[2] + v[3] for c, v in callers.items()} if callers else {}
        whole = sum(weights.values())
        if depth > 4 or not whole:
            return {"other (stdlib, start-up)": 1.0}
        out: dict[str, float] = {}
        for caller, w in weights.items():
            for stage, share in owner(caller, depth + 1).items():
                out[stage] = out.get(stage, 0.0) + share * w / whole
        return out

    for func, (_cc, _nc, tt, _ct, callers) in stats.items():
        total += tt
        if func[0] in ("~", "") or func[0].startswith("<"):
            weights = {c: v[2] for c, v in callers.items()}
            whole = sum(weights.values())
            if not whole:
                add("other (stdlib, start-up)", tt)
                continue
            for caller, w in weights.items():
                for stage, share in owner(caller).items():
                    add(stage, tt * share * w / whole)
        else:
            add(stage_of(func[0]), tt)
    return split, total


def print_split(label: str, prof_file: Path, n: int) -> None:
    split, total = stage_split(prof_file)
    calls = sum(v[1] for v in pstats.Stats(str(prof_file)).stats.values())  # type: ignore[attr-defined]
    print(f"[{label}] supervisor CPU under cProfile: {total:.2f} s for {n} messages = "
          f"{total / n * 1e6:.1f} us/msg, {calls / n:.1f} function calls/msg, start-up included "
          f"(profile: {prof_file})")
    for stage, t in sorted(split.items(), key=lambda kv: -kv[1]):
        if t / total >= 0.005:
            print(f"    {stage:<44} {t / n * 1e6:7.1f} us/msg  {100 * t / total:5.1f} %")


def profiled_run(out: str, args: list[str]) -> None:
    """``rmqrun`` in this process under cProfile with a CPU-time clock; the profile is written on exit."""
    sys.path.insert(0, os.environ["PYTHONPATH"].split(os.pathsep)[0])  # the tree under test, not this one
    for name in [m for m in sys.modules if m == "rmqrun" or m.startswith("rmqrun.")]:
        del sys.modules[name]
    from rmqrun.cli.main import main as rmqrun_main
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    try:
        sys.argv = ["rmqrun", *args]
        rmqrun_main()
    except SystemExit:
        pass
    finally:
        prof.disable()
        prof.dump_stats(out)


# --------------------------------------------------------------------------- main

ROWS = ("noop", "orderly", "cpu")


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--profiled-run":
        out, rest = sys.argv[2], sys.argv[3:]
        profiled_run(out, rest[1:] if rest[:1] == ["--"] else rest)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000, help="backlog for the no-op handler")
    ap.add_argument("--cpu-messages", type=int, default=10_000, help="backlog for the CPU-bound handler")
    ap.add_argument("--cpu-ms", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--rounds", type=int, default=1, help="rounds per row (fresh groups); medians are reported")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}")
    ap.add_argument("--no-cpp", action="store_true", help="skip the C++ peer")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="run each rmqrun supervisor under cProfile, write DIR/<row>.prof, print the split")
    ap.add_argument("--py-spy", type=Path, metavar="DIR", dest="spy",
                    help="sample each rmqrun supervisor with py-spy (pip install py-spy) in the 10-90 %% window, "
                         "write DIR/<row>.txt and print the split by stage: no profiler overhead")
    ap.add_argument("--compare", type=Path, action="append", default=[], metavar="DIR",
                    help="also run the rmqrun of another checkout (e.g. `git archive` of an older commit) in "
                         "every round, so before and after share the machine's load")
    ap.add_argument("--event-loop", default="",
                    help="comma-separated event_loop values (auto, uvloop, asyncio) to run rmqrun with, each in "
                         "every round (default: the environment's setting)")
    args = ap.parse_args()
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in ROWS]
    if unknown:
        ap.error(f"--rows: unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    with_cpp = not args.no_cpp and cpp_available()
    cores = os.cpu_count() or 1
    loop_names = [x.strip() for x in args.event_loop.split(",") if x.strip()] or [""]
    # each variant runs once per round: this tree and each --compare tree, on each --event-loop (a tree
    # older than the event_loop setting runs once, on its standard loop)
    variants: dict[str, tuple[Path, str]] = {}
    for root in [ROOT, *(d.resolve() for d in args.compare)]:
        tree = "" if root == ROOT else root.name
        knows = '"event_loop"' in (root / "rmqrun" / "cli" / "settings.py").read_text()
        for lp in (loop_names if knows else [""]):
            variants[" ".join(x for x in (tree, lp) if x) or "default"] = (root, lp)
    loops = list(variants)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.spy:
        args.spy.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="rmqrun-bench-"))
    rows: list[tuple[str, float, float | None, float, str, str, float, float]] = []
    specs = {
        "noop": ("no-op", args.messages, 0.0, "workers.noop:handle", False),
        "orderly": ("no-op orderly", args.messages, 0.0, "workers.noop:handle", True),
        "cpu": (f"{args.cpu_ms:g} ms CPU", args.cpu_messages, args.cpu_ms, "workers.cpu:handle", False),
    }
    with BrokerProcess(data / "broker", flush_mode="async") as bp:
        ns = bp.namesrv_address
        print(f"broker pid {bp.pid} at {ns}; {cores} cores; rmqrun workers {args.workers}; {load()}")
        for key in wanted:
            label, n, cpu_ms, handler, orderly = specs[key]
            topic = f"Bench_{key}"
            rate = asyncio.run(produce(ns, topic, n))
            print(f"[{label}] produced {n} x 1 KiB at {rate:,.0f} msg/s; {load()}", flush=True)
            raws, cs = [], []
            rs: dict[str, list[float]] = {lp: [] for lp in loops}
            sups: dict[str, list[float]] = {lp: [] for lp in loops}
            wks: dict[str, list[float]] = {lp: [] for lp in loops}
            for i in range(args.rounds):
                raw = asyncio.run(raw_pull(ns, topic, n))
                raws.append(raw)
                print(f"[{label}] round {i + 1}: raw pull {raw:,.0f} msg/s; {load()}", flush=True)
                for lp in loops:
                    name = f"{label} [{lp}]" if lp else label
                    prof = (args.profile / f"{key}{'-' + lp.replace(' ', '-') if lp else ''}.prof"
                            if args.profile and i == 0 else None)
                    root, loop_name = variants[lp]
                    spy = (args.spy / f"{key}{'-' + lp.replace(' ', '-') if lp else ''}.txt"
                           if args.spy and i == 0 and prof is None else None)
                    st = run_rmqrun(ns, topic, f"CG_rmqrun_{topic}_{i}{lp.replace(' ', '_')}", n, handler,
                                    args.workers, cpu_ms, args.timeout, orderly=orderly, profile=prof,
                                    extra_env={"RMQRUN_EVENT_LOOP": loop_name} if loop_name else None, root=root,
                                    spy=spy)
                    rs[lp].append(st.rate)
                    sups[lp].append(st.supervisor_us)
                    wks[lp].append(st.workers_us)
                    print(f"[{name}] round {i + 1}: rmqrun {st.rate:,.0f} msg/s{' (profiled)' if prof else ''}, "
                          f"CPU per message: supervisor {st.supervisor_us:.1f} us, workers {st.workers_us:.1f} us; "
                          f"{load()}", flush=True)
                    if prof is not None:
                        print_split(name, prof, n)
                    if spy is not None:
                        print_spy_split(name, spy)
                if with_cpp:
                    c = run_cpp(ns, topic, f"CG_cpp_{topic}_{i}", n, cpu_ms, args.timeout, orderly=orderly)
                    cs.append(c)
                    print(f"[{label}] round {i + 1}: C++ {c:,.0f} msg/s; {load()}", flush=True)
            c = statistics.median(cs) if cs else None
            raw = statistics.median(raws)
            for lp in loops:
                r = statistics.median(rs[lp])
                ideal = (f"{r / (cores / (cpu_ms / 1000)):.2f} of ideal {cores / (cpu_ms / 1000):,.0f}/s"
                         if cpu_ms else "")
                rows.append((f"{label} [{lp}]" if lp else label, r, c, raw, ideal, load(),
                             statistics.median(sups[lp]), statistics.median(wks[lp])))
    print()
    print(f"medians of {args.rounds} round(s)")
    print(f"{'handler':<24} {'rmqrun msg/s':>13} {'C++ msg/s':>10} {'raw pull':>10} {'rmqrun/C++':>11} "
          f"{'rmqrun/raw':>11} {'C++/raw':>8} {'sup us/msg':>10} {'wrk us/msg':>10}  {'load':<10} vs ideal")
    for label, r, c, raw, ideal, ld, sup, wk in rows:
        cs_ = f"{c:,.0f}" if c else "-"
        ratio = f"{r / c:.2f}" if c else "-"
        craw = f"{c / raw:.2f}" if c else "-"
        print(f"{label:<24} {r:>13,.0f} {cs_:>10} {raw:>10,.0f} {ratio:>11} {r / raw:>11.2f} {craw:>8} {sup:>10.1f} "
              f"{wk:>10.1f}  {ld:<10} {ideal}")


if __name__ == "__main__":
    main()
