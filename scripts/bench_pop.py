"""The benchmark report's POP section: ``--consume-mode pop`` beside pull mode, measured in the same run.

Two handlers (no-op, and 1 ms of CPU), each drained from one backlog by a fresh
pull group and a fresh POP group (switched to POP with ``rmqrun group mode``
first), round after round, interleaved (the two modes' order switching from round to round: a POP
drain right after a pull drain ran ~9 % slower than one after a POP drain,
docs/benchmarks/pop/history.md), on the same embedded broker. Per row:
msg/s (10-90 % window), the supervisor's and the broker's CPU per message.
What POP costs per message is the difference of those CPU figures with the
pull row of the same handler: mostly the one ACK_MESSAGE per message (a request
out, a checkpoint bit set on the broker) against pull's one offset commit per
queue every few seconds.

The helpers of ``bench_report`` (``drain``, ``create_topic``, ``produce``,
``load``, ``spread``) are passed in, so this module imports nothing of it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = (("no-op", "workers.noop:handle", {}), ("1 ms CPU", "workers.cpu:handle", {"RMQRUN_HANDLER_CPU_MS": "1"}))
MODES = ("pull", "pop")


def set_pop_mode(ns: str, topic: str, group: str) -> None:
    subprocess.run([sys.executable, "-m", "rmqrun.cli.main", "group", "mode", "--group", group, "--topic", topic,
                    "--mode", "pop", "--namesrv", ns], check=True, capture_output=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))


def section_pop(ns: str, sizes: dict[str, int], rounds: int, workers: int, timeout: float, *,
                drain: Callable[..., Any],
                create_topic: Callable[..., None], produce: Callable[..., Any], load: Callable[[], float],
                spread: Callable[[list[float]], dict[str, float]]) -> dict[str, Any]:
    """Rows keyed "<handler>, <mode>": rate, supervisor and broker µs per message (values and spread).

    ``sizes``: messages per drain by handler label (a no-op drain must be long enough for the 10-90 % window
    to hold several status lines, a 1 ms one short enough to finish)."""
    rows: dict[str, dict[str, list[float]]] = {}
    loads: list[float] = []
    for label, handler, env in HANDLERS:
        n = sizes[label]
        topic = "BenchPop" + ("Noop" if handler.endswith("noop:handle") else "Cpu1")
        create_topic(ns, topic, 8)
        asyncio.run(produce(ns, topic, n))
        for r in range(rounds):
            for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                group = f"CG_{mode}_{topic}_r{r}"
                run_env = dict(env)
                if mode == "pop":
                    set_pop_mode(ns, topic, group)
                    run_env["RMQRUN_CONSUME_MODE"] = "pop"
                loads.append(load())
                run = drain(ns, topic, group, n, handler, workers, timeout, run_env)
                row = rows.setdefault(f"{label}, {mode}", {"rate": [], "supervisor_us": [], "broker_us": []})
                row["rate"].append(run.rate(n))
                row["supervisor_us"].append(run.supervisor_us_per_msg(n))
                row["broker_us"].append(run.broker_us_per_msg(n))
            print(f"[pop {label}] round {r + 1}: " + ", ".join(
                f"{m} {rows[f'{label}, {m}']['rate'][-1]:,.0f}" for m in MODES), flush=True)
    out = {k: {stat: {"values": v, **spread(v)} for stat, v in row.items()} for k, row in rows.items()}
    return {"messages": dict(sizes), "workers": workers, "rows": out, "load": spread(loads)}


def ack_cost_us(res: dict[str, Any], label: str) -> float:
    """POP's extra CPU per message over pull (supervisor + broker medians) for one handler; NaN if unknown."""
    rows = res["rows"]
    try:
        pop, pull = rows[f"{label}, pop"], rows[f"{label}, pull"]
        return (pop["supervisor_us"]["median"] + pop["broker_us"]["median"]
                - pull["supervisor_us"]["median"] - pull["broker_us"]["median"])
    except KeyError:
        return float("nan")


def pop_lines(res: dict[str, Any], fmt: Callable[..., str], fmt_spread: Callable[..., str]) -> list[str]:
    """The report's markdown for the section."""
    L = ["## POP beside pull (`--consume-mode pop`)", "",
         ", ".join(f"{n:,} messages ({label})" for label, n in res["messages"].items())
         + f" of 1 KiB per row on an 8-queue topic, {res['workers']} worker(s), one "
         "instance; each round drains the backlog with a fresh pull group and a fresh POP group (switched with "
         "`rmqrun group mode`), interleaved, the modes' order switching from round to round. CPU per message is "
         "measured between 10 % and 90 % of the drain. "
         f"Load average during the section: {fmt_spread(res['load'], 2)}.", "",
         "| handler, mode | msg/s median (min–max) | supervisor µs/msg | broker µs/msg |", "|---|---:|---:|---:|"]
    for key, row in res["rows"].items():
        L.append(f"| {key} | {fmt_spread(row['rate'])} | {fmt(row['supervisor_us']['median'])} | "
                 f"{fmt(row['broker_us']['median'])} |")
    L.append("")
    costs = [f"{label}: {fmt(ack_cost_us(res, label))} µs" for label, _, _ in HANDLERS]
    L.append("What POP costs per message beyond pull (supervisor + broker CPU, medians, POP row minus pull row): "
             + "; ".join(costs) + ". That is what the POP path adds: a pop request per batch and its checkpoint, and "
             "an acknowledgement per message, where pull mode commits one offset per queue every few seconds. "
             "POP pays for it where pull cannot use the instances: more instances than queues, uneven "
             "instances, long calls (docs/pop.md).")
    L.append("")
    return L
