"""The sender of a command signal is named with the metrics endpoint on too (issue #33, item 12).

``--metrics-port`` used to start a thread (the event loop's resolver) before the
supervisor blocked its command signals, so the kernel handed SIGTERM to that
thread and the line lost ``from pid N (...)``: in almost every systemd unit.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.integration.cli_kit import free_port
from tests.integration.signals_kit import Runs, produce


def test_sigterm_names_its_sender_when_the_metrics_endpoint_is_on(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "SIGM", 2)
    run = runs.start("run", "workers.noop:handle", namesrv=eb.namesrv_address, group="GSIGM", topic="SIGM",
                     args=["--workers", "1", "--metrics-port", str(free_port()), "--metrics-host", "localhost"])
    assert "metrics on http://" in run.log(), run.log()[-2000:]
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert f"SIGTERM received from pid {os.getpid()} (" in run.log(), run.log()[-2000:]
