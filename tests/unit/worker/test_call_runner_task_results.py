"""The asyncio class writes a call's result in the call's own task step (rmqrun/worker/call_runners.py).

A worker that runs several calls at once can be killed by one of them (``os._exit`` in a handler, a crash in C)
while the others are in flight. Whatever had finished must keep its result, so the supervisor does not run it
again (the hunt of 2026-11-29 caught a finished message of an asyncio worker handled twice: its task had
returned, and a task that killed the worker ran before the scheduler wrote the result). These tests drive the
real scheduler on its own loop, with a stand-in for the worker around it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rmqrun.pipe.wire import ConsumeMode, Run, Status
from rmqrun.worker.batch_outcome import BatchOutcome
from rmqrun.worker.call_runners import CallRunner
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
