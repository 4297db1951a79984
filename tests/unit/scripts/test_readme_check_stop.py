"""``scripts/readme_check.py``: a README command that does not stop when told leaves its stacks in the failure.

A CI run once failed on ``rmqrun status --watch`` not ending after SIGINT, with nothing to say where it was
stuck. The check now runs every command with ``PYTHONFAULTHANDLER=1`` and, when one outlives its signal,
sends SIGABRT first (faulthandler prints every thread's stack) before SIGKILL.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.unit.scripts.script_kit import load_script

readme_check = load_script("readme_check")

STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
def stuck_here():
    while True:
        time.sleep(0.05)
stuck_here()
"""


def test_a_command_that_ignores_sigterm_is_aborted_with_its_stacks_in_the_output() -> None:
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    bg = readme_check.Background("python -c STUBBORN", proc)
    bg.pump()
    bg.wait_for("^ready", 30)
    code = bg.stop(timeout=0.5)
    assert code == -signal.SIGABRT
    out = bg.tail()
    assert "Fatal Python error: Aborted" in out
    assert "in stuck_here" in out, out


def test_every_command_runs_with_faulthandler_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    runner = readme_check.Runner(tmp_path, tmp_path / "bin", log=False)
    assert runner.env["PYTHONFAULTHANDLER"] == "1"
