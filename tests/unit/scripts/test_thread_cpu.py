"""scripts/thread_cpu.py: per-thread CPU of a live process, busiest first."""

from __future__ import annotations

import subprocess
import sys
import time
from types import ModuleType

from tests.unit.scripts.script_kit import load_script

SPINNER = """
import threading, time
def spin():
    print(threading.get_native_id(), flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pass
t = threading.Thread(target=spin); t.start()
time.sleep(30)
"""


def _load() -> ModuleType:
    return load_script("thread_cpu")


def test_the_spinning_thread_comes_first_and_the_sleeping_one_spends_nothing() -> None:
    tc = _load()
    proc = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        spinner = proc.stdout.readline().strip()  # its thread id (Python 3.11 leaves the OS thread name alone)
        before, t0 = tc.snapshot(proc.pid), time.monotonic()
        time.sleep(0.5)
        rows = tc.rates(before, tc.snapshot(proc.pid), time.monotonic() - t0)
    finally:
        proc.kill()
        proc.wait()
    assert rows[0][3] == spinner and rows[0][0] > 50  # ms of CPU a second: it had a core much of the time
    main = [r for r in rows if r[3] == str(proc.pid)]
    assert main and main[0][0] < 5  # the main thread sleeps


def test_a_process_that_is_gone_is_a_clear_error(capsys) -> None:  # type: ignore[no-untyped-def]
    tc = _load()
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert tc.main([str(proc.pid), "--seconds", "0"]) == 1
    assert f"no process {proc.pid}" in capsys.readouterr().err
