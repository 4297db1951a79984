"""scripts/bench_report.py end to end on a small size: a real embedded broker, a real `rmqrun run`, the report."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_report.py"


def test_a_memory_section_drains_everything_and_renders_the_same_report_again(tmp_path: Path) -> None:
    out = tmp_path / "report"
    run = subprocess.run([sys.executable, str(SCRIPT), "--sections", "memory", "--memory-messages", "20000",
                          "--no-cpp", "--timeout", "240", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]

    res = json.loads((out / "report.json").read_text())
    mem = res["memory"]
    assert mem["consumed"] >= 20000
    assert mem["series"], "no RSS samples were taken"
    assert all(len(s["workers_mib"]) >= 1 and s["sup_mib"] > 0 for s in mem["series"])
    assert res["machine"]["cores"] >= 1 and "load_start" in res

    text = (out / "report.md").read_text()
    assert "## Memory while draining a backlog" in text
    assert "20,000 messages of 1 KiB" in text
    assert res["machine"]["cpu"] in text
    if importlib.util.find_spec("matplotlib") is not None:  # the `bench` extra
        assert (out / "memory.png").stat().st_size > 1000
        assert "![Memory](memory.png)" in text
    else:
        assert not (out / "memory.png").exists()
        assert "No plots: matplotlib was not installed" in text
    # not a quick run: the report must not call itself one
    assert "QUICK run" not in text

    again = tmp_path / "again"
    render = subprocess.run([sys.executable, str(SCRIPT), "--render", str(out / "report.json"), "--out", str(again)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert render.returncode == 0, render.stderr[-2000:]
    assert (again / "report.md").read_text() == text
