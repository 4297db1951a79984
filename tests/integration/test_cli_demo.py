"""``rmqrun demo`` as a user runs it: a summary at the end, and nothing left behind, Ctrl-C included.

Each run gets its own TMPDIR, so "the temporary directory was removed" is
checked by looking at an otherwise empty directory; worker processes are
found as the demo's children while it runs and must all be gone after it.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil

from tests.integration.cli_kit import RMQRUN, ROOT, Child, child_env, run_cli, wait_for


def _env(tmp: Path) -> dict[str, str]:
    tmp.mkdir(exist_ok=True)
    return child_env(TMPDIR=str(tmp))


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_demo_runs_and_summarises(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    proc = run_cli(["demo", "--messages", "3000", "--workers", "2", "--cpu-ms", "0.5"], env=_env(tmp), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"embedded broker: name server 127\.0\.0\.1:\d+, broker 127\.0\.0\.1:\d+", out)
    assert "produced 3000 messages in" in out
    assert re.search(r"^3000 messages handled in \d+\.\d s by 2 workers \(workers\.cpu:handle, 0\.5 ms CPU per "
                     r"message\), 0 failed$", out, re.M), out
    m = re.search(r"^throughput (\d+) msg/s; ideal 2 workers / 0\.5 ms = 4000 msg/s: (\d+)% of ideal$", out, re.M)
    assert m, out
    assert int(m.group(1)) > 0 and 0 < int(m.group(2)) <= 110
    assert re.search(r"^CPU seconds per worker: \d+\.\d \d+\.\d$", out, re.M)
    assert "\x1b[" not in out, "no terminal control codes when stdout is not a terminal"
    assert list(tmp.iterdir()) == [], "the temporary directory is removed"


def test_demo_on_a_terminal_rewrites_one_progress_line(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    master, slave = pty.openpty()
    proc = subprocess.Popen([*RMQRUN, "demo", "-m", "2000", "-w", "1", "--cpu-ms", "0.5"], stdout=slave,
                            stderr=subprocess.PIPE, env=_env(tmp), cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    text = b"".join(chunks).decode()
    assert "\r\x1b[2Kconsumed " in text, "a progress line rewritten in place"
    assert "2000 messages handled in" in text
    assert list(tmp.iterdir()) == []


def test_ctrl_c_while_consuming_cleans_up(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    with Child(["demo", "-m", "6000", "-w", "2", "--cpu-ms", "5"], tmp_path, env=_env(tmp)) as child:
        child.wait_output("consumed ", timeout=60, stream="stdout")
        data_dirs = list(tmp.iterdir())
        assert len(data_dirs) == 1 and data_dirs[0].name.startswith("rmqrun-demo-")
        workers = _children(child.pid)
        assert len(workers) >= 2
        child.signal(signal.SIGINT)
        assert child.wait(30) == 130
    out = child.stdout
    assert re.search(r"^interrupted: \d+ messages handled in", out, re.M), out
    assert list(tmp.iterdir()) == [], "the temporary directory is removed"
    wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in workers), 30,
             f"the worker processes to exit: {workers}", interval=0.1)


def test_ctrl_c_while_producing_cleans_up(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    with Child(["demo", "-m", "2000000", "-w", "1"], tmp_path, env=_env(tmp)) as child:
        child.wait_output("embedded broker:", timeout=30, stream="stdout")
        wait_for(lambda: any(tmp.iterdir()), 10, "the data directory")
        time.sleep(0.5)
        child.signal(signal.SIGINT)
        assert child.wait(30) == 130
    assert list(tmp.iterdir()) == []
    assert "Traceback" not in child.stderr
    assert "interrupted before consuming began" in child.stdout


def test_demo_options_are_checked() -> None:
    proc = run_cli(["demo", "--messages", "0"])
    assert proc.returncode == 2 and "--messages" in proc.stderr
