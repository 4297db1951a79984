"""Recycling from the command line, and the warning when memory grows with no limit (issue #26 item 6).

``rmqrun run`` is a real process against an embedded broker; the probe handler
(:mod:`tests.integration.handlers.probe_handler`) records which worker pid handled each
message and leaks memory on request.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.signals_kit import REPO, Runs, oks, produce, wait_until

PROBE = "tests.integration.handlers.probe_handler"


def test_run_help_shows_the_recycling_flags() -> None:
    out = subprocess.run([sys.executable, "-m", "rmqrun.cli.main", "run", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}).stdout
    for flag in ("--max-messages-per-worker", "--max-messages-jitter", "--max-memory-per-worker"):
        assert flag in out, out


def _start(tmp_path: Path, eb, runs: Runs, handler: str, topic: str, n: int, args: list[str],  # type: ignore[no-untyped-def]
           **env: str):
    """``n`` messages on ``topic``, then ``rmqrun run`` of a probe handler with one worker and ``args``."""
    record = tmp_path / "record.txt"
    produce(eb, topic, n)
    run = runs.start("run", f"{PROBE}:{handler}", namesrv=eb.namesrv_address, group=f"G{topic}", topic=topic,
                     args=["--workers", "1", *args], env={"PROBE_RECORD": str(record), **env})
    return run, record


def test_max_messages_per_worker_flag_recycles_workers(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "record", "RMX", 12, ["--max-messages-per-worker", "2",
                         "--max-messages-jitter", "0", "--batch-size", "1"], PROBE_SLEEP_MS="20")
    wait_until(lambda: len(oks(record)) >= 12, 60, "12 messages")
    log = run.log()
    assert "recycling: handled " in log and "(limit 2)" in log, log[-3000:]
    assert len({d.pid for d in oks(record)}) >= 2, "one worker handled everything: no recycling"
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0


def test_max_memory_per_worker_flag_recycles_a_leaking_worker(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "leak", "RMM", 8, ["--max-memory-per-worker", "200MiB"],
                         PROBE_LEAK_MB="50")
    wait_until(lambda: len(oks(record)) >= 8, 60, "8 messages")
    log = run.log()
    assert "recycling: RSS " in log and "over the limit of 200 MiB" in log, log[-3000:]
    assert len({d.pid for d in oks(record)}) >= 2
    assert "nothing recycles it" not in log
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0


def test_a_worker_growing_with_no_limit_set_is_warned_about(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "leak", "RMG", 6, ["--batch-size", "1"], PROBE_LEAK_MB="50",
                         PROBE_SLEEP_MS="600")
    wait_until(lambda: len(oks(record)) >= 6, 60, "6 messages")
    wait_until(lambda: "nothing recycles it" in run.log(), 60, "the growth warning")  # the bound ends a failure only
    log = run.log()
    assert "set max_memory_per_worker (--max-memory-per-worker 512MiB)" in log
    assert len({d.pid for d in oks(record)}) == 1, "nothing recycles a worker when no limit is set"
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
