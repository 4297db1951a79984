"""The first retry of a brand-new group comes back after its delay, not after a route refresh.

Issue 14 item 8: with the Java push consumer on the embedded broker a retried
message once came back after ~30 s instead of 10 s. The broker wakes the held
pull on every append (tests/integration/test_broker_longpoll_paths.py); what
fits the symptom is the Java client's route discovery of a new
``%RETRY%<group>``: the broker creates that topic on the consumer's first
heartbeat, but the Java client fetches its routes just before that heartbeat
(and in a scheduled task started 10 ms earlier, which races with it); when the
fetch loses the race, the retry queue has no route, is not assigned and is not
pulled until the next route poll, ``pollNameServerInterval`` = 30 s later. A
rerun against the same broker (topic already there) never shows it.

rmqrun's rebalance asks the name server for any route it has not cached, so
its first rebalance, after the heartbeat, already takes the retry queue. This
test pins that with the default route-poll and rebalance periods (30 s, 20 s):
a fresh group's first retry (1 s delay levels) must be handled well within the
broker's 15 s long-poll hold, let alone a 30 s route poll.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.signals_kit import Runs, produce, read_deliveries, wait_until


def test_a_new_groups_first_retry_is_not_delayed_by_route_discovery(eb, runs: Runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "deliveries"
    produce(eb, "FirstRetry", 8)
    run = runs.start("first-retry", "tests.integration.probe_handler:record", namesrv=eb.namesrv_address,
                     group="G_first_retry", topic="FirstRetry", args=["--workers", "1"],
                     settings={"RMQRUN_REBALANCE_INTERVAL_MS": "20000", "RMQRUN_POLL_NAME_SERVER_INTERVAL_MS": "30000"},
                     env={"PROBE_RECORD": str(record), "PROBE_FAIL_IDX": "3", "PROBE_FAIL_TIMES": "1"})
    assert "%RETRY%G_first_retry" in run.log(), "the retry queue is assigned at the first rebalance"
    wait_until(lambda: any(d.event == "fail" for d in read_deliveries(record)), 30, "the first failure")
    failed_at = time.monotonic()
    wait_until(lambda: any(d.event == "ok" and d.idx == 3 for d in read_deliveries(record)), 40,
               "the retried message handled")
    waited = time.monotonic() - failed_at
    assert waited < 10, f"the first retry took {waited:.1f} s (delay 1 s): a held pull was not woken or the " \
                        "retry queue was found only by a later route refresh"
    oks = sorted(d.idx for d in read_deliveries(record) if d.event == "ok")
    assert oks == list(range(8))
