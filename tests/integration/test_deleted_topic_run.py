"""A topic deleted under a running ``rmqrun run``: one warning, its queues dropped, picked up again once it exists.

The reported case: ``rmqrun topic delete`` under a consumer logged about two warnings a second, each with a FAQ
link line, and the status line went on claiming the old queue count.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_args, run_cli, wait_for
from tests.integration.handlers.record_handler import records

STATUS = re.compile(r"(\d+) consumed \(\d+/s now\), lag \S+, \d+ failed, (\d+) queues?, ")


def last_status(log: str) -> tuple[int, int] | None:
    found = STATUS.findall(log)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def test_a_deleted_topic_is_dropped_with_one_warning_and_comes_back(tmp_path: Path) -> None:
    record = tmp_path / "seen.txt"
    with embedded_broker(tmp_path) as eb:
        ns = eb.namesrv_address
        assert run_cli(["topic", "create", "-t", "DT_Orders", "-q", "4", "-n", ns]).returncode == 0
        produce(ns, "DT_Orders", 8)
        env = child_env(RMQRUN_HANDLER_RECORD=str(record), RMQRUN_STATUS_INTERVAL="0.5",
                        RMQRUN_REBALANCE_INTERVAL_MS="1000")
        args = run_args(ns, "GDT", "DT_Orders", "tests.integration.handlers.record_handler:handle", "--workers", "1")
        with Child(args, tmp_path, env=env) as child:
            wait_for(lambda: len(records(record)) >= 8, 60, "the first 8 messages")
            # 4 queues of the topic and the retry topic's 1
            wait_for(lambda: last_status(child.stderr) == (8, 5), 30, "a status line with 5 queues")

            deleted = run_cli(["topic", "delete", "DT_Orders", "-n", ns])
            assert deleted.returncode == 0, deleted.stderr
            wait_for(lambda: (last_status(child.stderr) or (0, -1))[1] == 1, 30, "a status line with the retry queue")
            time.sleep(5)  # several pull back-offs and rebalances: nothing more is said
            log = child.stderr
            assert log.count("topic DT_Orders does not exist on the name server (deleted?): its 4 queue(s) here "
                             "are dropped; it is picked up again once it exists") == 1, log[-4000:]
            after = log[log.index("(deleted?)"):]
            assert "WARNING" not in after.split("\n", 1)[1], after[-4000:]
            assert "faq" not in log.lower() and "not exist, apply first" not in log
            assert last_status(log) == (8, 1)

            assert run_cli(["topic", "create", "DT_Orders", "-q", "2", "-n", ns]).returncode == 0
            child.wait_output("topic DT_Orders exists again", 60)
            # The group's offsets (2 per queue) are past the recreated, empty queues: the first pull of each is
            # answered OFFSET_MOVED to 0, which the consumer stores (Java: 10 s later) before it pulls again.
            # A message sent before that first pull would make it OFFSET_OVERFLOW_BADLY, corrected to the max
            # offset as 4.9.8 does, skipping what the queue held: so send only once both queues are back at 0.
            offsets = eb.broker.store.consumer_offsets
            wait_for(lambda: all(offsets.query("GDT", "DT_Orders", q) == 0 for q in (0, 1)), 60,
                     "the group's offsets of the recreated queues corrected to 0")
            produce(ns, "DT_Orders", 4)
            try:
                wait_for(lambda: len(records(record)) >= 12, 60, "the 4 messages of the new topic")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the run's log:\n{child.stderr[-6000:]}") from None
            wait_for(lambda: (last_status(child.stderr) or (0, 0))[1] == 3, 30, "a status line with 2 + 1 queues")
            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
