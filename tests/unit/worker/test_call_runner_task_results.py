"""A threads / asyncio call's result is written by the call itself as it ends (rmqrun/worker/call_runners.py).

A worker that runs several calls at once can be killed by one of them (``os._exit`` in a handler, a crash in C)
while the others are in flight. Whatever had finished must keep its result, so the supervisor does not run it
again (the hunt of 2026-11-29 caught a finished message of an asyncio worker handled twice: its task had
returned, and a task that killed the worker ran before the scheduler wrote the result). These tests drive the
real scheduler on its own loop, with a stand-in for the worker around it, and a thread's call wrapper alone.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from rmqrun.pipe.wire import ConsumeMode, Run, Status
from rmqrun.worker.batch_outcome import BatchOutcome
from rmqrun.worker.call_runners import CallRunner, _labelled
from rmqrun.worker.call_slots import CallSlots


def _worker(fn: Any) -> SimpleNamespace:
    logged: list[str] = []
    return SimpleNamespace(
        config=SimpleNamespace(batch_size=1, time_limit=0.0, kill_grace=10.0, max_memory=0),
        handler=SimpleNamespace(fn=fn, is_batch=False, ref="tests:fn"),
        _terminating=False, _memory_check=lambda: False, logged=logged,
        _log_exception=lambda exc, offset: logged.append(f"{offset}: {exc}"),
        _map_result=lambda *a: False, stop_calls=lambda reason: None)


def _run(fn: Any, msgs: list[str], slots: CallSlots, mode: ConsumeMode = ConsumeMode.CONCURRENT) -> BatchOutcome:
    runner = CallRunner(_worker(fn), "asyncio", 4)
    outcome = BatchOutcome(len(msgs))
    try:
        runner.loop.run_until_complete(runner.run_batch(
            Run(1, mode, True, "broker-a", b""), msgs, list(range(100, 100 + len(msgs))), [None] * len(msgs),
            outcome, slots))
    finally:
        runner.close()
    return outcome


def test_a_finished_call_s_result_is_written_before_any_other_task_runs() -> None:
    slots = CallSlots(4, None)
    returned: list[str] = []
    seen: dict[str, int] = {}

    async def fn(msg: str) -> None:
        if msg == "first":
            returned.append(msg)
            return None
        while not returned:  # the other call: it looks as soon as "first" has returned
            await asyncio.sleep(0)
        seen["first final"] = slots.final[0]

    outcome = _run(fn, ["first", "second"], slots)
    assert seen["first final"] == 1, "a call's result was not written when the next task ran"
    assert list(outcome.statuses) == [Status.SUCCESS, Status.SUCCESS]
    assert slots.in_flight == 0


def test_a_raising_call_s_failure_is_written_in_its_own_step_too() -> None:
    slots = CallSlots(4, None)
    raised: list[str] = []
    seen: dict[str, int] = {}

    async def fn(msg: str) -> None:
        if msg == "bad":
            raised.append(msg)
            raise RuntimeError("no")
        while not raised:
            await asyncio.sleep(0)
        seen["bad final"] = slots.final[0]

    outcome = _run(fn, ["bad", "good"], slots)
    assert seen["bad final"] == 1
    assert list(outcome.statuses) == [Status.RECONSUME_LATER, Status.SUCCESS]
    assert "handler 'tests:fn' raised RuntimeError: no" in outcome.error


def test_an_orderly_batch_stops_at_a_failure_written_in_its_task() -> None:
    """One call at a time; the failure is seen by the scheduler before it starts the next (the queue's order)."""
    slots = CallSlots(4, None)
    calls: list[str] = []

    async def fn(msg: str) -> None:
        calls.append(msg)
        if msg == "b":
            raise RuntimeError("stop here")

    outcome = _run(fn, ["a", "b", "c"], slots, ConsumeMode.ORDERLY)
    assert calls == ["a", "b"]
    assert list(outcome.statuses) == [Status.SUCCESS, Status.SUSPEND, Status.NOT_RUN]


def test_a_thread_s_call_reports_its_end_before_the_thread_lets_go_of_it() -> None:
    """In a thread the result is reported from the thread itself, before the call returns to the pool (the loop
    sees the future later, when another thread may already have killed the worker)."""
    ends: list[tuple[int, Any, Any]] = []

    def on_end(index: int, value: Any, exc: BaseException | None) -> None:
        ends.append((index, value, type(exc).__name__ if exc else None))

    assert _labelled(lambda m: ends.append(("called", m, None)) or "v", "msg", 3, None, on_end) == "v"
    assert ends == [("called", "msg", None), (3, "v", None)]
    ends.clear()

    def boom(m: str) -> None:
        raise ValueError(m)

    with pytest.raises(ValueError):
        _labelled(boom, "bad", 5, None, on_end)
    assert ends == [(5, None, "ValueError")]


def test_a_threads_batch_writes_each_result_once_under_the_runner_s_lock() -> None:
    """The threads class end to end through the scheduler: results from the threads, every slot freed once."""
    slots = CallSlots(4, None)
    runner = CallRunner(_worker(lambda m: None if m != "bad" else 1 / 0), "threads", 4)
    outcome = BatchOutcome(5)
    try:
        runner.loop.run_until_complete(runner.run_batch(
            Run(1, ConsumeMode.CONCURRENT, True, "broker-a", b""), ["a", "b", "bad", "c", "d"], list(range(5)),
            [None] * 5, outcome, slots))
    finally:
        runner.close()
    assert list(outcome.statuses) == [Status.SUCCESS, Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS,
                                      Status.SUCCESS]
    assert slots.in_flight == 0 and sorted(slots.free) == [0, 1, 2, 3]
    assert runner.in_flight == 0
