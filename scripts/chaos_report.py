"""The chaos suite's report: the summary, the table per fault kind, memory, the verdict and the ``--json`` file.

Kept apart from the run (:mod:`chaos`) so the run's file holds what the suite does and this one what it says.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from chaos_audit import GroupAudit, KindRow, Stored, count_events, table
from chaos_pop import POP_GROUP

MIB = 2**20


def report(chaos: Any, audits: list[GroupAudit], rows: dict[str, KindRow], stored: list[Stored],
           calls_by_group: dict[str, Any], settled: bool, elapsed: float, *,
           kinds: tuple[tuple[str, ...], tuple[str, ...]], queues: int) -> int:
    """Print the run's summary, the table per fault kind and the verdict (and write ``--json``); 0 on a pass."""
    o = chaos.o
    FAULT_KINDS, HANDLER_KINDS = kinds
    print()
    print(f"chaos run: seed {o.seed}, {o.minutes:g} min of faults, {elapsed / 60:.1f} min in all, "
          f"{o.rate:g} msg/s over {o.keys} sharding keys, {queues} queues, groups "
          + ", ".join(f"{a.group} ({'orderly' if a.orderly else 'POP' if a.group == POP_GROUP else 'concurrent'})"
                       for a in audits))
    print(f"produced: {len(chaos.producer.acked)} acknowledged, {len(stored)} stored, "
          f"{chaos.producer.failures} failed send attempts (retried)")
    for a in audits:
        ev = count_events(calls_by_group[a.group])
        print(f"{a.group}: {a.completed} of {a.stored} stored messages completed, {ev['ok']} completions, "
              f"{a.duplicates} duplicates ({len(a.unexplained_duplicates)} unexplained), "
              f"{a.retry_stored} through %RETRY%, {len(a.dlq)} in %DLQ%")
    print()
    order = [k for k in (*FAULT_KINDS, *HANDLER_KINDS, "none") if rows[k].injected or rows[k].affected
             or rows[k].lost or rows[k].out_of_order or rows[k].duplicates or k in FAULT_KINDS]
    print(table(rows, order))
    print()
    mem_ok = (chaos.rss_max["supervisor"] <= o.max_supervisor_mb * MIB
              and chaos.rss_max["worker"] <= (o.max_worker_mb + o.leak_mb + 16) * MIB)
    print(f"memory (max RSS): supervisor {chaos.rss_max['supervisor'] / MIB:.0f} MiB "
          f"(bound {o.max_supervisor_mb}), worker {chaos.rss_max['worker'] / MIB:.0f} MiB "
          f"(recycled above {o.max_worker_mb}, + one {o.leak_mb} MiB leak), broker {chaos.rss_max['broker'] / MIB:.0f} MiB")
    recycled = sum(run_log.count("recycling (") for run_log in chaos.all_logs())
    print(f"workers recycled by rmqrun (memory or message limits): {recycled}")
    if chaos.proxy.half_open_noticed or chaos.proxy.half_open_unnoticed:
        noticed = sorted(chaos.proxy.half_open_noticed)
        print(f"half-open connections: {len(noticed)} closed by rmqrun"
              + (f" (after {noticed[0]:.1f}..{noticed[-1]:.1f} s)" if noticed else "")
              + f", {chaos.proxy.half_open_unnoticed} still open after {o.half_open_limit:g} s (reset by the proxy)")
    problems: list[str] = []
    for a in audits:
        for what, items in (("lost", a.lost), ("out of order", a.order_violations),
                            ("unhandled in %RETRY%", a.retry_unhandled), ("in %DLQ%", a.dlq),
                            ("offsets not at the max", a.offsets_behind)):
            if items:
                problems.append(f"{a.group}: {len(items)} {what}")
                for item in items[:10]:
                    print(f"  {a.group} {what}: {item}")
        for item in a.unexplained_duplicates[:10]:
            print(f"  {a.group} unexplained duplicate: {item}")
    if not settled:
        problems.append(f"not drained: nothing completed for {o.settle_timeout:g} s after the faults stopped")
    if not mem_ok:
        problems.append("memory over its bound")
    if chaos.proxy.half_open_unnoticed:
        problems.append(f"{chaos.proxy.half_open_unnoticed} half-open connections never closed by rmqrun")
    for exit_note in chaos.unexpected_exits:
        problems.append("an instance exited by itself")
        print(f"  unexpected exit: {exit_note}")
    for note in chaos.notes:
        print(f"  note: {note}")
    unexplained = sum(len(a.unexplained_duplicates) for a in audits)
    verdict = ("PASS" if not problems else "FAIL") + (
        f": {sum(a.stored for a in audits) // len(audits)} messages x {len(audits)} groups, "
        f"{sum(r.injected for k, r in rows.items() if k in FAULT_KINDS)} faults, "
        f"{sum(len(a.lost) for a in audits)} lost, {sum(len(a.order_violations) for a in audits)} out of order, "
        f"{sum(a.duplicates for a in audits)} duplicates ({unexplained} unexplained)")
    if problems:
        verdict += "; " + "; ".join(dict.fromkeys(problems))
    print(f"verdict: {verdict}")
    if o.json_out:
        o.json_out.write_text(json.dumps({
            "seed": o.seed, "minutes": o.minutes, "elapsed_s": elapsed, "verdict": verdict, "pass": not problems,
            "rows": {k: asdict(v) for k, v in rows.items()},
            "groups": [asdict(a) for a in audits], "faults": [asdict(f) for f in chaos.faults],
            "acknowledged": len(chaos.producer.acked), "stored": len(stored), "rss_max": chaos.rss_max,
            "supervisor_rss_first_last": {n: [chaos.rss_first[n], chaos.rss_last.get(n, 0)] for n in chaos.rss_first},
            "half_open_noticed_s": chaos.proxy.half_open_noticed, "workers_recycled": recycled,
            "half_open_unnoticed": chaos.proxy.half_open_unnoticed, "notes": chaos.notes,
            "unexpected_exits": chaos.unexpected_exits}, indent=1))
    return 0 if not problems else 1
