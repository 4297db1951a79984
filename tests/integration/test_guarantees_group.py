"""Two ``rmqrun run`` processes in one orderly group; one is killed with SIGKILL mid-stream.

The survivor takes the dead one's queues once the broker's lock on them
expires (``lock_max_live_ms``, shortened here from RocketMQ's 60 s) and
continues each from the committed offset: per queue the handler's sequence
never skips ahead, and restarts only where the dead process had not
committed yet.
"""

from __future__ import annotations

import signal
from pathlib import Path


from tests.integration.signals_kit import (
    Runs, committed, oks, produce, queue_max_offsets, start_broker, wait_until,
)

HANDLER = "tests.integration.handlers.probe_handler:record"


def test_orderly_group_member_killed_its_queues_continue_in_order_elsewhere(tmp_path: Path, runs: Runs) -> None:
    total = 480
    eb = start_broker(tmp_path, lock_max_live_ms=3000)
    try:
        produce(eb, "GK", total, sharding_keys=4)
        sizes = queue_max_offsets(eb, "GK")
        record = tmp_path / "records.txt"

        def start(name: str):  # type: ignore[no-untyped-def]
            return runs.start(name, HANDLER, namesrv=eb.namesrv_address, group="GGK", topic="GK",
                              args=["--workers", "1", "--orderly"],
                              env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "15"})
        a = start("a")
        b = start("b")
        pids_b = set(b.worker_pids())
        # B has taken queues and committed some progress on them
        wait_until(lambda: any(d.pid in pids_b for d in oks(record)), 30, "B consuming")
        wait_until(lambda: len(oks(record)) >= 150, 30, "150 messages")
        commit_before = committed(eb, "GGK", "GK")
        b.kill9()
        b.wait_group_gone()
        wait_until(lambda: len({(d.queue_id, d.offset) for d in oks(record)}) >= total, 60, "everything")
        wait_until(lambda: committed(eb, "GGK", "GK") == sizes, 10, "all committed", interval=0.2)
        a.signal(signal.SIGTERM)
        assert a.wait(30) == 0, a.log()[-3000:]

        by_queue: dict[int, list[tuple[int, int]]] = {}
        for d in oks(record):
            by_queue.setdefault(d.queue_id, []).append((d.offset, d.pid))
        moved = 0
        for q, seq in by_queue.items():
            offsets = [o for o, _ in seq]
            top, restarts = -1, 0
            for prev, x in zip([-1] + offsets, offsets):
                assert x <= top + 1, f"queue {q}: skipped ahead to {x} after {top}: {offsets}"
                restarts += x != prev + 1
                top = max(top, x)
            assert sorted(set(offsets)) == list(range(sizes[q])), f"queue {q}: lost messages"
            assert restarts <= 1, f"queue {q}: {restarts} restarts: {offsets}"
            last_b = max((k for k, (_, p) in enumerate(seq) if p in pids_b), default=None)
            if last_b is not None and last_b + 1 < len(seq):
                moved += 1
                # the survivor took over at (or after) what B had committed before it was killed
                assert seq[last_b + 1][0] >= max(commit_before[q], 0)
        assert moved >= 1, "some queue moved from the killed member to the survivor"
    finally:
        eb.stop_in_thread()
