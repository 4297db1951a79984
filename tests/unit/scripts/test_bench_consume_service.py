"""scripts/bench_consume_service.py: both services drain its fake backlog and commit it whole (no timing asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.scripts.script_kit import load_script

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bench_consume_service.py"


def _load() -> ModuleType:
    return load_script("bench_consume_service")


@pytest.mark.parametrize("mode", ["orderly", "concurrent"])
def test_a_round_drains_every_queue_and_commits_through_its_last_message(mode: str) -> None:
    # the round raises SystemExit unless each queue's offset in memory is past its last message
    assert _load().one(mode, 7) > 0


def test_the_script_runs_its_rounds_in_subprocesses_and_prints_a_line_per_mode() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(SCRIPT), "--pulls", "5", "--rounds", "2"],
                         env=env, cwd=ROOT, check=True, capture_output=True, text=True, timeout=120).stdout
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(lines) == 2 and {line.split()[0] for line in lines} == {"orderly", "concurrent"}, out
