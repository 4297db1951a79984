"""LogLimit: one line per key per interval, the rest held back and counted."""

from __future__ import annotations

from rmqrun.client.log_limit import LogLimit, held_note


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_occurrence_is_allowed_and_repeats_are_held_until_the_interval_passes() -> None:
    clock = Clock()
    limit = LogLimit(30.0, clock)
    assert limit.allow("a") == 0
    clock.now += 10
    assert limit.allow("a") is None
    assert limit.allow("a") is None
    assert limit.allow("b") == 0  # keys are independent
    clock.now += 20  # 30 s after the first line
    assert limit.allow("a") == 2  # allowed, saying two were held back
    assert limit.allow("a") is None


def test_reset_logs_the_next_failure_at_once_and_forgets_the_count() -> None:
    clock = Clock()
    limit = LogLimit(30.0, clock)
    assert limit.allow("k") == 0
    assert limit.allow("k") is None
    limit.reset("k")
    assert limit.allow("k") == 0


def test_held_note() -> None:
    assert held_note(0) == ""
    assert held_note(3) == " (3 more like it since the last report)"


def test_a_periodic_client_task_failing_every_round_is_reported_once(caplog) -> None:  # type: ignore[no-untyped-def]
    """While the cluster is down a periodic job (routes, heartbeats) fails every round: the first failure
    is logged with its traceback, the repeats within the interval at DEBUG only."""
    import asyncio
    import logging

    from rmqrun.client.instance import ClientInstance

    rounds = 0

    async def job() -> None:
        nonlocal rounds
        rounds += 1
        raise ConnectionError("name server down")

    async def main() -> None:
        task = asyncio.ensure_future(ClientInstance._every(0, 0.001, job))
        while rounds < 20:
            await asyncio.sleep(0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert rounds >= 20
    assert len(warnings) == 1 and "periodic client task" in warnings[0].getMessage()
    assert "name server down" in caplog.text  # the traceback of the first failure
