"""A process worker sends no STARTED as a batch begins: the pool knows when it began, and only once it has.

Its batches run one at a time in the order given, so the head batch begins when the one before it is
answered (DONE), when it is handed to an idle worker, or when the worker becomes ready; it counts as
begun only when the worker's progress block names it. These pin what STARTED used to tell: the hard
limit's clock (never early for a batch that waited behind another), and that a batch the worker never
reached is neither killed for, nor blamed for a death, nor kept from being skipped.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from rmqrun.pipe.wire import BatchResult
from tests.integration.test_pool_basic import S, Harness, records, run, statuses


class Timed(Harness):
    """The harness, with when each result arrived (the pool's loop clock is time.monotonic too)."""

    def __init__(self, handler: str, **settings: object) -> None:
        super().__init__(handler, **settings)
        self.at: dict[int, float] = {}

    def _on_result(self, result: BatchResult) -> None:
        self.at[result.batch_id] = time.monotonic()
        super()._on_result(result)


def test_the_hard_limit_of_a_batch_queued_behind_another_counts_from_its_start_not_its_hand_over() -> None:
    """A: four 0.2 s calls (0.8 s, more than the 0.7 s hard limit, kept alive by its announcements before
    calls); B, handed over with A, hangs. B's clock starts as A is answered: A ends in success, and B is
    killed no sooner than the hard limit after A's DONE, and not long after."""
    async def scenario() -> None:
        async with Timed("workers.misbehave:by_property", time_limit=0.3, kill_grace=0.4, crash_limit=1) as h:
            (pid,) = h.pids(0)
            a = h.submit(0, records([{"MISBEHAVE": "sleep"}] * 4, start=10))
            b = h.submit(0, records([{"MISBEHAVE": "hang_hard"}, {}], start=20), key="other")
            done_a = await h.result(a, timeout=10)
            assert statuses(done_a) == [S.SUCCESS] * 4 and not done_a.timed_out, "A ran whole, nobody killed"
            done_b = await h.result(b, timeout=10)
            assert done_b.timed_out and done_b.pid == pid and statuses(done_b) == [S.RECONSUME_LATER, S.NOT_RUN]
            waited = h.at[b.batch_id] - h.at[a.batch_id]
            assert waited >= 0.7, f"B killed {waited:.3f} s after A's DONE: before its hard limit (0.7 s)"
            assert waited < 0.7 + 3.0, f"B killed {waited:.3f} s after A's DONE: far past its hard limit"
            assert h.pids(0) != [pid] and not h.lost and not h.fatal
    run(scenario())


def test_a_hard_limit_never_kills_for_a_batch_its_stopped_worker_has_not_begun() -> None:
    """A stopped worker given a batch: it is not begun, so the hard limit (0.7 s) never fires for it, and it
    can still be skipped; once the worker goes on it answers that one NOT_RUN and runs the next."""
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", time_limit=0.3, kill_grace=0.4, crash_limit=1) as h:
            (pid,) = h.pids(0)
            warm = h.submit(0, records(1))
            assert statuses(await h.result(warm)) == [S.SUCCESS]
            os.kill(pid, signal.SIGSTOP)
            try:
                x = h.submit(0, records(2, start=5))
                y = h.submit(0, records(1, start=7))
                await asyncio.sleep(1.5)  # twice the hard limit
                assert h.pids(0) == [pid] and not h.lost and not h.fatal, "killed for a batch never begun"
                assert h.pool.live_call(x.batch_id) is None and h.pool.queued_behind(x.batch_id) == []
                assert h.pool.skip(x.batch_id), "a batch the worker has not reached can be skipped"
            finally:
                os.kill(pid, signal.SIGCONT)
            skipped = await h.result(x, timeout=10)
            assert statuses(skipped) == [S.NOT_RUN, S.NOT_RUN] and not skipped.timed_out
            assert statuses(await h.result(y, timeout=10)) == [S.SUCCESS]
            assert h.pids(0) == [pid] and not h.lost and not h.fatal
    run(scenario())


def test_a_death_before_the_worker_reached_its_batch_gives_it_back_unbegun() -> None:
    """Killed while stopped with a batch handed over: the batch comes back untouched (not begun, no suspect);
    killed inside a batch's call with another queued: the one it ran is the begun one, the other is not."""
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", crash_limit=10) as h:
            (pid,) = h.pids(0)
            os.kill(pid, signal.SIGSTOP)
            x = h.submit(0, records(2))
            await asyncio.sleep(0.2)
            os.kill(pid, signal.SIGKILL)
            lost = await h.wait_for(lambda: h.lost and h.lost[-1], what="the batch back")
            assert [b.batch_id for b in lost.batches] == [x.batch_id]
            assert lost.started_batch_id is None and lost.lanes == {} and not lost.in_call
            (pid,) = await h.wait_for(lambda: h.pids(0) != [pid] and h.pids(0), what="a replacement")
            a = h.submit(0, records([{"MISBEHAVE": "sleep"}, {"MISBEHAVE": "hang"}], start=3))
            b = h.submit(0, records(1, start=9), key="other")
            await h.wait_for(lambda: h.pool.live_call(a.batch_id) is not None
                             and h.pool.live_call(a.batch_id).call_start == 1, what="A in its second call")
            assert h.pool.queued_behind(a.batch_id) == [b.batch_id]
            os.kill(pid, signal.SIGKILL)
            lost = await h.wait_for(lambda: len(h.lost) == 2 and h.lost[-1], what="A and B back")
            assert [q.batch_id for q in lost.batches] == [a.batch_id, b.batch_id]
            assert lost.started_batch_id == a.batch_id and lost.in_call and set(lost.lanes) == {a.batch_id}
            assert lost.progress is not None and lost.progress.done == 1, "A's first message has its result"
    run(scenario())
