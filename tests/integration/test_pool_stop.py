"""What a stop says of what it cuts short (``Pool.stop``).

A batch of six messages whose fourth hangs: the first three finish, then the
stop's grace runs out and SIGTERM interrupts the call. The log must count the
three messages that run again, not the six of the batch: the three that
finished come back as SUCCESS and are committed (issue #31 defect 7).

And of the workers left when the grace is over: only those holding batches are
"still busy"; idle ones that have not exited yet are news only after a grace
of their own (a stuck ``worker_exit``), not on a stop with no grace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from loguru import logger

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import Status as S
from tests.integration.test_pool_basic import Harness, module_dir, records, run, statuses  # noqa: F401


def test_a_stop_counts_only_the_messages_that_run_again() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")

    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            batch = h.submit(0, records([{}, {}, {}, {"MISBEHAVE": "hang"}, {}, {}]))

            def hanging() -> bool:
                for proc in list(h.pool._procs):
                    live = progress_mem.read_live(proc.progress)
                    if live is not None and live.batch_id == batch.batch_id and live.in_call and live.done >= 3:
                        return True
                return False

            await h.wait_for(hanging, what="the fourth message's call hanging")
            await h.pool.stop(0.3)
            result = await h.result(batch, timeout=30)
            assert statuses(result) == [S.SUCCESS] * 3 + [S.NOT_RUN] * 3
            assert h.pool.cut_short_messages == 3

    try:
        run(scenario())
    finally:
        logger.remove(sink)
    (line,) = [ln for ln in lines if "cut short" in ln]
    assert "1 batch(es) cut short (3 messages), redelivered later" in line, line


EXIT_HOOKS = """
    import os, time
    def handle(msg):
        time.sleep(float(msg.properties.get("SLEEP", "0")))
    def slow_bye(info):
        time.sleep(60)
"""


def _warnings_during(scenario: Any) -> list[str]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        run(scenario())
    finally:
        logger.remove(sink)
    return lines


def test_a_stop_without_grace_calls_only_the_workers_holding_batches_busy() -> None:
    """A consumer that cannot start stops its pool with no grace: its idle workers have not exited yet, and
    were said to be 'still busy' (nothing of theirs is cut short). Only the worker holding a batch is."""

    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", workers=2) as h:
            batch = h.submit(0, records([{"MISBEHAVE": "hang"}]))
            await h.wait_for(lambda: h.pool.workers()[0].running_batch_id == batch.batch_id,
                             what="the hanging batch started")
            await h.pool.stop(0)
            assert h.pool.workers() == []

    lines = _warnings_during(scenario)
    assert [ln for ln in lines if "still busy" in ln and "1 worker(s) still busy after 0 s" in ln], lines
    assert not [ln for ln in lines if "2 worker(s)" in ln or "idle worker" in ln], lines


def test_an_idle_pool_stopped_without_grace_warns_of_nothing() -> None:
    async def scenario() -> None:
        async with Harness("workers.noop:handle", workers=2) as h:
            await h.pool.stop(0)
            assert h.pool.workers() == []

    assert _warnings_during(scenario) == []


def test_an_idle_worker_stuck_in_worker_exit_past_the_grace_is_named_so(
        module_dir: Callable[[str, str], Path]) -> None:
    module_dir("pool_stop_exit_mod", EXIT_HOOKS)

    async def scenario() -> None:
        async with Harness("pool_stop_exit_mod:handle", worker_exit="pool_stop_exit_mod:slow_bye") as h:
            await h.pool.stop(1.0)
            assert h.pool.workers() == []

    lines = _warnings_during(scenario)
    assert [ln for ln in lines if "1 idle worker(s) had not exited 1 s after STOP" in ln], lines
    assert not [ln for ln in lines if "still busy" in ln], lines
