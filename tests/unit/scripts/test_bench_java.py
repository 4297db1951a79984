"""scripts/bench_java.py: the 10–90 % window, the note when no 4.9.8 build is given, and the table it renders."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.unit.scripts.script_kit import load_script

ROOT = Path(__file__).resolve().parents[3]


def _load() -> ModuleType:
    return load_script("bench_java")


def test_the_window_takes_rate_and_cpu_between_the_first_samples_past_10_and_90_percent() -> None:
    bj = _load()
    # (t, consumed, own CPU s, broker CPU s); 1000 messages: the window is the samples at 100 and 900
    points = [(0.0, 0, 0.0, 0.0), (1.0, 50, 0.5, 0.1), (2.0, 150, 1.0, 0.2), (3.0, 600, 1.2, 0.3),
              (4.0, 950, 1.8, 0.5), (5.0, 1000, 2.0, 0.6)]
    d = bj.window(points, 1000)
    assert d.rate == (950 - 150) / (4.0 - 2.0)
    assert math.isclose(d.own_us, (1.8 - 1.0) / 800 * 1e6)
    assert math.isclose(d.broker_us, (0.5 - 0.2) / 800 * 1e6)


def test_a_drain_that_fell_short_of_90_percent_gives_no_figure() -> None:
    bj = _load()
    d = bj.window([(0.0, 0, 0.0, 0.0), (1.0, 200, 0.1, 0.1), (2.0, 800, 0.2, 0.2)], 1000)
    assert math.isnan(d.rate) and math.isnan(d.own_us) and math.isnan(d.broker_us)


def test_missing_names_what_is_absent(tmp_path: Path) -> None:
    bj = _load()
    assert "--java DEST" in bj.missing(None)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "start.sh").write_text("")
    assert "bin/stop.sh is missing" in bj.missing(tmp_path)


def test_without_a_build_the_java_section_alone_writes_only_the_note(tmp_path: Path) -> None:
    # no --java: nothing is started (no broker, no JVM); the report says why the rows are not there
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_report.py"), "--sections", "java",
                           "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    md = (out / "java" / "report.md").read_text()
    assert "Skipped: no 4.9.8 build given" in md
    assert json.loads((out / "java" / "report.json").read_text())["java"]["skipped"].startswith("no 4.9.8")
    assert not (out / "report.md").exists()  # the main report was not overwritten by a java-only run


def test_the_table_sets_rmqrun_beside_java_per_row() -> None:
    bj = _load()

    def side(rate: float, own: float, sup: float = float("nan"), wrk: float = float("nan")) -> dict:
        return {"rate": bj.spread([rate]), "own_us": bj.spread([own]), "broker_us": bj.spread([9.0]),
                "supervisor_us": bj.spread([sup]), "workers_us": bj.spread([wrk])}

    res = {"dest": "/x", "sizes": vars(bj.JavaSizes()), "uptime_before": "up 1", "uptime_after": "up 2",
           "load": bj.spread([1.0, 2.0]),
           "rows": {"no-op concurrent": {"java": side(50_000, 20.0), "java_warm": side(80_000, 8.0),
                                         "rmqrun": side(40_000, 12.0, 5.0, 7.0),
                                         "ratio": bj.spread([0.8]), "ratio_warm": bj.spread([0.5])},
                    "1 ms CPU": {"java": side(1_800, 1100.0), "rmqrun": side(1_900, 1040.0, 20.0, 1020.0),
                                 "ratio": bj.spread([1.9 / 1.8])}}}
    md = "\n".join(bj.java_lines(res))
    assert ("| no-op concurrent | Java, fresh JVM | 50,000 (50,000–50,000) | 0.80 (0.80–0.80) | 20.0 (20.0–20.0) "
            "| 9.0 | 1.00 |") in md  # cores used: msg/s × own µs per message
    assert "| no-op concurrent | Java, warm JVM | 80,000 (80,000–80,000) | 0.50 (0.50–0.50) |" in md
    assert ("| no-op concurrent | rmqrun | 40,000 (40,000–40,000) |  | 12.0 (12.0–12.0) (5.0 + 7.0) | 9.0 "
            "| 0.48 |") in md
    assert "| 1 ms CPU | Java, warm JVM |" not in md  # a run without the warm row renders what it has
    cores = os.cpu_count() or 1
    assert f"rmqrun {1_900 / (cores * 1000):.2f}" in md


def test_the_full_report_carries_the_note_when_the_java_rows_were_skipped() -> None:
    br = load_script("bench_report", "bench_report_for_java")
    assert "java" in br.SECTIONS  # run by default, so a report without a build says why the rows are missing
    res = {"machine": br.machine(), "quick": False, "started": "s", "finished": "f", "command": "c",
           "load_start": 0.1, "load_end": 0.1, "sizes": {"rounds": 1},
           "java": {"skipped": _load().missing(None)}}
    md = br.report(res, [])
    assert "## rmqrun beside the Java push consumer" in md
    assert "Skipped: no 4.9.8 build given (`--java DEST`" in md


def test_the_report_says_whether_the_machine_was_idle_when_the_run_started() -> None:
    bj = _load()
    run = {"machine": {"cores": 2}, "java": {"load_before": 0.5}}
    assert bj.machine_note(run).startswith("Nothing else ran on it: the load average was 0.50")
    run["java"]["load_before"] = 1.0  # half the cores: not idle
    assert "shared with other work" in bj.machine_note(run)
    assert "shared with other work" in bj.machine_note({"machine": {"cores": 2}, "java": {}})


class _IdleBroker:
    """A broker that spends 0.25 s of CPU between the two reads the ceiling takes."""

    def __init__(self) -> None:
        self.reads = [0.0, 0.25]

    def cpu(self) -> float:
        return self.reads.pop(0)


def test_the_ceiling_runs_bare_burn_loops_and_reads_the_broker_beside_them() -> None:
    bj = _load()
    c = bj.ceiling(_IdleBroker(), 2, 1.0)
    # each loop makes at most 1,000 one-ms calls a second of wall time (two on two cores: close to that), and each
    # call costs at least its 1,000 µs of thread CPU
    assert 0 < c.rate <= 2 * 1000
    assert 1000 <= c.call_us < 2000
    assert 0 < c.broker_ms <= 0.25 / 1.0 * 1000


def test_a_ceiling_with_no_calls_gives_no_figure() -> None:
    bj = _load()
    c = bj.ceiling(_IdleBroker(), 1, 0.0)
    assert math.isnan(c.rate) and math.isnan(c.call_us)


def test_the_report_reads_the_1ms_row_against_the_ceiling() -> None:
    bj = _load()

    def side(rate: float) -> dict:
        return {"rate": bj.spread([rate]), "own_us": bj.spread([1010.0]), "broker_us": bj.spread([9.0]),
                "supervisor_us": bj.spread([5.0]), "workers_us": bj.spread([1005.0])}

    cores = os.cpu_count() or 1
    res = {"dest": "/x", "sizes": vars(bj.JavaSizes()), "uptime_before": "up 1", "uptime_after": "up 2",
           "load": bj.spread([1.0]),
           "rows": {"1 ms CPU": {"java": side(1_800), "rmqrun": side(1_900), "ratio": bj.spread([1.9 / 1.8]),
                                 "of_ceiling": bj.spread([0.97, 0.99])}},
           "ceiling": {"rate": bj.spread([1_960.0]), "call_us": bj.spread([1002.5]), "broker_ms": bj.spread([37.0])}}
    md = "\n".join(bj.java_lines(res))
    assert f"1,960 (1,960–1,960) calls/s = {1_960 / (cores * 1000):.3f} of the ideal" in md
    assert "1,002.5 (1,002.5–1,002.5) µs of thread CPU a call; the idle broker 37.0 (37.0–37.0) ms" in md
    assert "rmqrun ÷ the ceiling, per round: 0.980 (0.970–0.990)." in md
    del res["ceiling"]  # a run from before the ceiling existed renders without the line
    assert "ceiling" not in "\n".join(bj.java_lines(res))
