"""The benchmark report's measured sections (overhead, scaling, latency, memory, supervisor stages): each
runs its drains side by side with its peers and returns the figures :mod:`bench_render` writes.
"""


from __future__ import annotations

import asyncio
import pstats
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(ROOT))

from bench_consume import BODY, produce, raw_pull  # noqa: E402

from rmqrun.client.producer import OutgoingMessage, Producer  # noqa: E402

from bench_runs import RmqrunRun, Sizes, create_topic, drain, load, run_cpp, spread  # noqa: E402

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


