"""Dispatcher: when a concurrent batch may be queued on a busy worker (pipelining), on a fake clock."""

from __future__ import annotations

from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.pipe.wire import ConsumeMode

C = ConsumeMode.CONCURRENT
O = ConsumeMode.ORDERLY


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def measured(per_message: float, workers: int = 1, budget: float = 0.05) -> tuple[Dispatcher, Clock]:
    """A dispatcher that has seen one batch of 4 messages take ``4 * per_message`` seconds."""
    clock = Clock()
    d = Dispatcher(range(workers), max_inflight_messages=64, pipeline_budget=budget, clock=clock)
    assert d.assign(0, "q", C, 4) == 0
    clock.now += 4 * per_message
    d.done(0)
    assert d.per_message_s is not None and abs(d.per_message_s - per_message) < 1e-9
    return d, clock


def test_nothing_is_pipelined_before_a_batch_has_been_measured() -> None:
    d = Dispatcher([0], clock=Clock())
    assert d.assign(1, "q", C, 4) == 0
    assert d.assign(2, "q", C, 4) is None  # the first batch might hang: keep the second here
    assert not d.has_room(1)


def test_short_batches_are_pipelined_up_to_the_message_bound() -> None:
    d, _ = measured(per_message=20e-6)
    ids = [d.assign(i, "q", C, 4) for i in range(1, 20)]
    assert ids[:16] == [0] * 16 and ids[16:] == [None] * 3  # 64 messages: the bound, not the budget


def test_long_batches_wait_for_an_idle_worker() -> None:
    d, clock = measured(per_message=0.01)  # 4 messages = 40 ms: one more would exceed 50 ms
    assert d.assign(1, "q", C, 4) == 0
    assert d.assign(2, "q", C, 4) == 0  # holds 4 * 10 ms <= 50 ms: one may wait behind it
    assert d.assign(3, "q", C, 4) is None  # 80 ms already held
    assert not d.has_room(1)
    clock.now += 0.04
    d.done(1)
    assert d.assign(3, "q", C, 4) == 0


def test_nothing_more_is_queued_behind_a_batch_running_far_too_long() -> None:
    d, clock = measured(per_message=20e-6)
    assert d.assign(1, "q", C, 4) == 0
    assert d.assign(2, "q", C, 4) == 0  # fine: a few microseconds of work
    clock.now += 0.06  # batch 1 has now been running 60 ms: probably a hung call
    assert d.assign(3, "q", C, 4) is None
    assert not d.has_room(1)


def test_a_stuck_worker_is_skipped_for_a_healthy_busy_one() -> None:
    d, clock = measured(per_message=20e-6, workers=2)
    stuck = d.assign(1, "q", C, 4)
    clock.now += 0.06  # the worker is stuck on batch 1
    healthy = d.assign(2, "q", C, 4)
    assert healthy == 1 - stuck
    assert d.assign(3, "q", C, 4) == healthy  # busy but healthy: it pipelines
    assert d.assign(4, "q", C, 4) == healthy
    assert d.load(stuck) == 4


def test_orderly_batches_still_go_to_their_pinned_worker() -> None:
    d = Dispatcher([0], clock=Clock())
    assert d.assign(1, "a", C, 4) == 0
    assert d.assign(2, "b", O, 4) == 0  # pinned: waiting here or in the supervisor is the same


def test_batches_given_back_or_cut_by_a_time_limit_are_not_measured() -> None:
    d, clock = measured(per_message=20e-6)
    d.assign(1, "q", C, 4)
    clock.now += 900
    d.done(1, ran=False)
    assert d.per_message_s is not None and d.per_message_s < 1e-4


def test_a_worker_with_lanes_takes_as_many_batches_at_once_before_the_pipeline_budget_applies() -> None:
    """Threads / asyncio (issue #36): a batch given while a lane is free runs at once, behind nothing; past the
    lanes the process class's rule (nothing pipelined before a batch was measured) holds again."""
    d = Dispatcher([0], clock=Clock(), lanes=3)
    assert [d.assign(i, "q", C, 4) for i in (1, 2, 3)] == [0, 0, 0]
    assert d.assign(4, "q", C, 4) is None and not d.has_room(1)
    d.done(1)
    assert d.has_room(4) and d.assign(4, "q", C, 4) == 0
    # the message bound still holds with free lanes
    bounded = Dispatcher([0], clock=Clock(), lanes=8, max_inflight_messages=8)
    assert bounded.assign(1, "q", C, 4) == 0 and bounded.assign(2, "q", C, 4) == 0
    assert bounded.assign(3, "q", C, 1) is None
    # lanes=1 (the process class): as before
    serial = Dispatcher([0], clock=Clock())
    assert serial.assign(1, "q", C, 4) == 0 and serial.assign(2, "q", C, 4) is None
