"""One log record from a handler is capped, with a marker of how much was cut (issue #26 item 4).

The handler writes 10 MB to stderr (one line) and logs 1 MB through ``logging`` per message.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.signals_kit import Runs, produce, wait_until

H = "tests.integration.handlers.safety_handler"
FLOOD = 10_000_000


@pytest.mark.parametrize("cap", [None, 1024], ids=["default-64KiB", "1KiB"])
def test_a_10_mb_write_to_stderr_is_cut_to_the_cap(tmp_path: Path, eb, runs: Runs, cap: int | None) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "record.txt"
    produce(eb, "FLD", 3)
    settings = {} if cap is None else {"RMQRUN_MAX_LOG_RECORD": "1KiB"}
    run = runs.start("run", f"{H}:flood_stderr", namesrv=eb.namesrv_address, group="GFLD", topic="FLD",
                     args=["--workers", "1"], env={"SAFETY_RECORD": str(record)}, settings=settings)
    wait_until(lambda: record.exists() and len(record.read_text().splitlines()) >= 3, 60, "3 messages")
    wait_until(lambda: run.log().count("after the flood") >= 3, 10, "the lines after the floods")
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    limit = cap or 64 * 1024
    log = run.log()
    floods = [line for line in log.splitlines() if "xxxxxxxx" in line]
    assert len(floods) == 3, [len(x) for x in floods]
    for line in floods:
        assert line.count("x") - line.count("x", line.index(" [... ")) == limit
        assert line.endswith(f" [... {FLOOD - limit} more characters cut: log records are capped at {limit} "
                             f"(setting max_log_record)]"), line[-200:]
    logged = [line for line in log.splitlines() if "yyyyyyyy" in line]  # the same cap through `logging`
    assert len(logged) == 3
    for line in logged:
        assert line.endswith(f" [... {1_000_000 - limit} more characters cut: log records are capped at {limit} "
                             f"(setting max_log_record)]"), line[-200:]
    assert len(log) < 6 * limit + 200_000, "the log holds the cut records, not 33 MB"
