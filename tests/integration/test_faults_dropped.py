"""A queue given away at rebalance stops getting new work (concurrent mode).

``rmqrun run --workers 1`` drains a backlog; a second instance of the same
group joins and takes half of the queues. Java checks a ProcessQueue's dropped
flag when a consume request starts; rmqrun skips a dropped queue's job
wherever it waits (the executor's queue, the worker's pipe). So the messages
handled twice are bounded by what was in flight at the handover, plus what the
first instance finished after its last offset commit (the new owner starts
from the committed offset, as in Java).
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from pathlib import Path

from tests.integration.signals_kit import Runs, oks, produce, start_broker, wait_until

HANDLER = "tests.integration.handlers.probe_handler:record"


def test_a_joining_instance_gets_half_the_queues_and_duplicates_are_bounded_by_in_flight_work(
        tmp_path: Path, runs: Runs) -> None:
    total = 3000
    workers, max_inflight, pull_batch = 1, 64, 32
    persist_ms, sleep_ms = 200, 2
    eb = start_broker(tmp_path)
    try:
        produce(eb, "TDQ", total)
        record = tmp_path / "records.txt"

        def start(name: str):  # type: ignore[no-untyped-def]
            return runs.start(name, HANDLER, namesrv=eb.namesrv_address, group="GDQ", topic="TDQ",
                              args=["--workers", str(workers)],
                              settings={"RMQRUN_MAX_INFLIGHT_MESSAGES": str(max_inflight),
                                        "RMQRUN_PERSIST_OFFSET_INTERVAL_MS": str(persist_ms),
                                        "RMQRUN_PULL_BATCH_SIZE": str(pull_batch)},
                              env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": str(sleep_ms)})
        a = start("a")
        wait_until(lambda: len(oks(record)) >= 300, 60, "A consuming")
        b = start("b")
        pids_b = set(b.worker_pids())
        wait_until(lambda: any(d.pid in pids_b for d in oks(record)), 60, "B consuming")
        wait_until(lambda: len({d.idx for d in oks(record)}) >= total, 120, "every message handled")
        for p in (a, b):
            p.signal(signal.SIGTERM)
        assert a.wait(30) == 0 and b.wait(30) == 0
        counts = Counter(d.idx for d in oks(record))
        dupes = sum(c - 1 for c in counts.values())
        # In flight on A at the handover: what its worker holds (running + pipelined, at most
        # max_inflight messages, or one pull batch more than that when a batch of 32 is given to an
        # idle worker). Plus what A finished in one offset-commit period before the handover, which
        # the new owner consumes again from the committed offset, as in Java: one period at A's
        # rate (one worker, sleep_ms per message) is persist_ms / sleep_ms messages.
        in_flight = workers * (max_inflight + pull_batch)
        unpersisted = persist_ms // sleep_ms + pull_batch
        assert dupes <= in_flight + unpersisted, f"{dupes} messages handled twice (bound {in_flight + unpersisted})"
        discarded = re.findall(r"was dropped while (\d+) messages were consumed", a.log())
        assert sum(map(int, discarded)) <= in_flight, discarded
    finally:
        eb.stop_in_thread()
