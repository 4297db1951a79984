"""Calls in flight per worker with the threads and asyncio worker classes (issue #36), real worker processes.

The pool's status of a worker (what ``rmqrun_worker_inflight_calls`` and the status page show) reads N while
N calls of two batches run at once in it, and 0 once they have returned.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_pool_basic import Harness, run
from tests.integration.test_worker_classes_pool import H, HA, bodies


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_the_calls_in_flight_of_a_worker_read_n_while_n_calls_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker_class: str, handler: str) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("RMQRUN_HANDLER_CLASSES_GATE", str(gate))

    def calls(h: Harness) -> int:
        (status,) = [s for s in h.pool.workers() if s.current]
        return status.calls

    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=8) as h:
            assert calls(h) == 0
            a = h.submit(0, bodies("gate", "gate", "gate", queue_id=1))
            b = h.submit(0, bodies("gate", "gate", queue_id=2))
            await h.wait_for(lambda: calls(h) == 5, what="5 calls in flight over two batches")
            assert a.batch_id not in h.results and b.batch_id not in h.results  # all still held at the gate
            gate.touch()
            assert (await h.result(a)).statuses == bytes(3) and (await h.result(b)).statuses == bytes(2)
            await h.wait_for(lambda: calls(h) == 0, what="no call in flight")
    run(main())
