"""A frozen supervisor is not a hung handler: the long-call watch counts a call's age only while it runs.

After a SIGSTOP of the supervisor (or a paused VM) every call in progress looked as old as the pause, so the watch
took back the work queued behind it at once; in key mode that work then ran beside the lock-gap rule's wait, behind
another instance's commit (``test_orderly_lock_gap.py``). The watch notices that it did not run and measures calls
from the moment it runs again.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from rmqrun.supervisor.long_calls import FROZEN_GAP_S, LongCallWatch


class _Pool:
    def __init__(self, began: float) -> None:
        self.live = SimpleNamespace(in_call=True, call_began=began, call_start=0, call_end=1)
        self.worker_ids = [0, 1]
        self.skipped: list[int] = []

    def workers(self) -> list[SimpleNamespace]:
        return [SimpleNamespace(worker_id=0, pid=100, running_batch_id=7),
                SimpleNamespace(worker_id=1, pid=101, running_batch_id=None)]

    def live_call(self, batch_id: int) -> SimpleNamespace:
        return self.live

    def queued_behind(self, batch_id: int) -> list[int]:
        return [8]

    def skip(self, batch_id: int) -> bool:
        self.skipped.append(batch_id)
        return True

    def cut(self, batch_id: int, index: int) -> bool:
        return False


def _watch(began: float) -> tuple[LongCallWatch, _Pool]:
    pool = _Pool(began)
    batch = SimpleNamespace(batch_id=7, mode=None, count=1, queue_key="q", queue_offsets=lambda: [5])
    config = SimpleNamespace(worker=SimpleNamespace(time_limit=900.0))
    executor = SimpleNamespace(pool=pool, dispatcher=None, config=config, flying_batch=lambda batch_id: (batch, None))
    return LongCallWatch(executor, threshold=5.0), pool  # type: ignore[arg-type]


async def _tick(watch: LongCallWatch) -> None:
    watch._tick()
    watch.stop()


def test_a_call_long_by_the_clock_of_a_running_supervisor_is_marked() -> None:
    watch, pool = _watch(time.monotonic() - 40)
    asyncio.run(_tick(watch))
    assert pool.skipped == [8], "a 40 s call seen by a supervisor that kept running is a long call"


def test_after_a_freeze_the_same_call_is_measured_from_the_resume() -> None:
    watch, pool = _watch(time.monotonic() - 40)
    watch._last_tick = time.monotonic() - (watch.period + FROZEN_GAP_S + 38)  # the watch did not run for ~40 s
    asyncio.run(_tick(watch))
    assert pool.skipped == [], "the pause itself counted as handler time"
    watch._awake_since -= 6  # six seconds awake since the resume, the call still in progress: now it is long
    watch._last_tick = time.monotonic()
    asyncio.run(_tick(watch))
    assert pool.skipped == [8]
