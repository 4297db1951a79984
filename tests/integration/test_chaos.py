"""The chaos suite in the default run: about two minutes of ``scripts/chaos.py``, which must pass.

It drives real processes (``rmqrun broker``, three groups of ``rmqrun run``: concurrent, orderly, POP,
producers) through the suite's TCP proxy and audits every message (see
``docs/reliability.md``). Its fault timing waits on conditions (a process
consuming again, the broker ready, messages completed), so a slow, shared
machine makes it longer, not flaky. The timeout only turns a hang into a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULT_KINDS = ("worker_kill", "run_kill", "run_term", "join_leave", "broker_kill", "proxy_cut", "proxy_stall",
               "proxy_half_open")


@pytest.mark.timeout(1800)
def test_chaos_run_loses_nothing_and_keeps_order(tmp_path: Path) -> None:
    result_path = tmp_path / "chaos.json"
    proc = subprocess.Popen(
        [sys.executable, "scripts/chaos.py", "--minutes", "1.5", "--seed", "2024", "--workdir", str(tmp_path / "work"),
         "--json", str(result_path)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=1700)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the suite stops the processes it started on SIGTERM
        out, _ = proc.communicate(timeout=120)
    report = out[-12000:]
    assert proc.returncode == 0, report
    result = json.loads(result_path.read_text())
    assert result["pass"], report
    assert result["verdict"].startswith("PASS"), report
    for kind in (*FAULT_KINDS, "handler_raise", "handler_hang", "handler_leak"):  # every fault kind happened
        assert result["rows"][kind]["injected"] >= 1, (kind, report)
    assert result["workers_recycled"] >= 1, report  # the leaking worker was replaced
    assert result["acknowledged"] >= 500 and result["stored"] >= result["acknowledged"], report
    for group in result["groups"]:
        assert group["stored"] == result["stored"] and group["completed"] == group["stored"], report
        assert not group["lost"] and not group["order_violations"] and not group["dlq"], report
        assert not group["offsets_behind"] and not group["retry_unhandled"], report
    orderly = next(g for g in result["groups"] if g["orderly"])
    concurrent = next(g for g in result["groups"] if not g["orderly"])
    # the handler faults were exercised in both modes: retries went through %RETRY% in concurrent mode only
    assert concurrent["retry_stored"] >= 1 and orderly["retry_stored"] == 0, report
    # the POP group's failures came back through its pop retry topic (%RETRY%chaos_pop_ChaosOrders)
    pop = next(g for g in result["groups"] if g["group"] == "chaos_pop")
    assert pop["retry_stored"] >= 1, report
    assert result["half_open_unnoticed"] == 0 and result["half_open_noticed_s"], report
