"""The benchmark report's plots and Markdown (:mod:`bench_report` measures, this module writes what was measured).
"""


from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any


SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(ROOT))

from bench_pop import pop_lines  # noqa: E402
import bench_java  # noqa: E402
from bench_worker_classes import worker_class_lines  # noqa: E402


from bench_runs import fmt, fmt_spread  # noqa: E402
from bench_sections import LAG_BEHIND_S, LATENCY_CPU_MS  # noqa: E402

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
    cluster = res.get("cluster")
    if cluster:
        where = (f"against the cluster behind the name server `{cluster['namesrv']}` (`--namesrv`; the broker's CPU "
                 + (f"sampled from process {cluster['broker_pid']})" if cluster.get("broker_pid")
                    else "not sampled: its columns are empty)"))
    else:
        where = "on one embedded broker (its own process, async flush)"
    L.append(f"Every figure below comes from this one run, {where}, "
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
