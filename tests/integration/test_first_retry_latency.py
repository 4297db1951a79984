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
the retry queue is assigned at the first rebalance, and when the retried message
reaches it the pull held there is woken by its arrival (not left to its 15 s
hold, let alone a 30 s route poll): the events, not how long they took.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.signals_kit import Runs, produce, read_deliveries, wait_until


def _arrivals(eb: EmbeddedBroker, topic: str) -> list[tuple[int, int]]:
    """(pulls held on the queue before, after) each message stored in ``topic``: woken ones leave the hold."""
    hold = eb.broker.hold
    seen: list[tuple[int, int]] = []
    real = hold.notify_arrival

    def notify(t: str, queue_id: int, max_offset: int, tags_code: Any = None) -> None:
        before = hold.held_on(t, queue_id)
        real(t, queue_id, max_offset, tags_code)
        if t == topic:
            seen.append((before, hold.held_on(t, queue_id)))

    hold.notify_arrival = notify  # type: ignore[method-assign]
    return seen


def test_a_new_groups_first_retry_is_not_delayed_by_route_discovery(eb, runs: Runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    record = tmp_path / "deliveries"
    arrivals = _arrivals(eb, "%RETRY%G_first_retry")
    produce(eb, "FirstRetry", 8)
    run = runs.start("first-retry", "tests.integration.handlers.probe_handler:record", namesrv=eb.namesrv_address,
                     group="G_first_retry", topic="FirstRetry", args=["--workers", "1"],
                     settings={"RMQRUN_REBALANCE_INTERVAL_MS": "20000", "RMQRUN_POLL_NAME_SERVER_INTERVAL_MS": "30000"},
                     env={"PROBE_RECORD": str(record), "PROBE_FAIL_IDX": "3", "PROBE_FAIL_TIMES": "1"})
    assert "%RETRY%G_first_retry" in run.log(), "the retry queue is assigned at the first rebalance"
    wait_until(lambda: any(d.event == "fail" for d in read_deliveries(record)), 30, "the first failure")
    wait_until(lambda: any(d.event == "ok" and d.idx == 3 for d in read_deliveries(record)), 40,
               "the retried message handled")
    # the retried message's arrival in the retry queue woke the pull held there (or found none held: the
    # consumer's next pull then finds it at once), so it was not left to the hold's timer
    assert len(arrivals) == 1, arrivals
    before, after = arrivals[0]
    assert before == 0 or after < before, f"a pull held on the retry queue was not woken: {arrivals}"
    oks = sorted(d.idx for d in read_deliveries(record) if d.event == "ok")
    assert oks == list(range(8))
