"""The broker goes away under a running ``rmqrun run`` and comes back: nothing is lost, nothing doubled.

A real ``rmqrun run`` (supervisor + worker processes) consumes from an embedded
broker on fixed loopback ports. The broker is stopped (its pulls and commits
are refused: connection refused), kept down for a while, then started again on
the same ports and data directory. rmqrun must ride through it without exiting,
pick the queues up again where it was, handle what is produced afterwards, and
commit it, with every message handled exactly once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.cli_kit import free_port
from tests.integration.signals_kit import (
    Runs, committed, oks, per_queue, produce, queue_max_offsets, start_broker, wait_until,
)

pytestmark = pytest.mark.timeout(240)
HANDLER = "tests.integration.handlers.probe_handler:record"
DOWN_S = 4.0


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_a_broker_restarted_under_a_running_consumer_loses_and_doubles_nothing(tmp_path: Path, runs: Runs,
                                                                               orderly: bool) -> None:
    ns_port, broker_port = free_port(), free_port()
    record = tmp_path / "deliveries"
    eb = start_broker(tmp_path, namesrv_port=ns_port, broker_port=broker_port, auto_create_queue_nums=2)
    try:
        produce(eb, "Bounce", 20)
        run = runs.start("bounce", HANDLER, namesrv=eb.namesrv_address, group="G_bounce", topic="Bounce",
                         args=["--workers", "2", *(["--orderly"] if orderly else [])], env={"PROBE_RECORD": str(record)},
                         settings={"RMQRUN_POLL_NAME_SERVER_INTERVAL_MS": "1000",
                                   "RMQRUN_HEARTBEAT_INTERVAL_MS": "1000"})
        wait_until(lambda: len(oks(record)) == 20, 60, "the first 20 handled")
        before = queue_max_offsets(eb, "Bounce")
        wait_until(lambda: committed(eb, "G_bounce", "Bounce") == before, 30, "the first 20 committed")

        eb.stop_in_thread()
        eb = None
        down_since = time.monotonic()
        while time.monotonic() - down_since < DOWN_S:
            assert run.poll() is None, f"rmqrun exited while the broker was down:\n{run.log()[-3000:]}"
            time.sleep(0.2)
        assert "failed" in run.log(), "the refused pulls / commits are logged"

        eb = start_broker(tmp_path, namesrv_port=ns_port, broker_port=broker_port, auto_create_queue_nums=2)
        # the broker kept its data and the group's offsets across the restart
        assert committed(eb, "G_bounce", "Bounce") == before
        produce(eb, "Bounce", 20, start=20)
        after = queue_max_offsets(eb, "Bounce")
        assert sum(after.values()) == 40
        wait_until(lambda: len(oks(record)) >= 40, 90, "the 20 produced after the restart handled")
        wait_until(lambda: committed(eb, "G_bounce", "Bounce") == after, 60, "everything committed")
        assert run.poll() is None
        run.signal(signal.SIGTERM)
        assert run.wait(30) == 0
        done = oks(record)
        assert sorted(d.idx for d in done) == list(range(40)), "each message handled exactly once"
        assert committed(eb, "G_bounce", "Bounce") == after
        if orderly:  # each queue handled in offset order, before and after the restart
            for q, offsets in per_queue(done).items():
                assert offsets == sorted(offsets), f"queue {q} out of order: {offsets}"
    finally:
        if eb is not None:
            eb.stop_in_thread()
