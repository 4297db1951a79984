"""What the pool learns from a worker that dies mid-batch, and skipping batches of dropped queues."""

from __future__ import annotations

import os
import signal

import pytest

from rmqrun.pipe.wire import Batch, ConsumeMode
from tests.integration.test_pool_basic import Harness, O, S, records, run, statuses


@pytest.mark.parametrize("mode", [None, O])
def test_a_death_mid_batch_reports_the_finished_results_and_the_call(mode) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", crash_limit=1) as h:
            (pid,) = h.pids(0)
            bad = h.submit(0, records([{}, {}, {"MISBEHAVE": "exit_hard"}, {}, {}], start=10),
                           *([mode] if mode else []))
            (lost,) = await h.wait_for(lambda: h.lost, what="on_worker_lost")
            assert lost.exitcode == 7 and lost.pid == pid and lost.started_batch_id == bad.batch_id
            assert lost.in_call
            prog = lost.progress
            assert prog is not None and prog.batch_id == bad.batch_id
            assert prog.done == 2 and list(prog.statuses) == [S.SUCCESS, S.SUCCESS]
            assert (prog.call_start, prog.call_end) == (2, 3)
            # a death inside a handler call is the message's doing: crash_limit=1 is not touched
            bad2 = h.submit(0, records([{"MISBEHAVE": "exit_hard"}]))
            await h.wait_for(lambda: len(h.lost) == 2, what="second death")
            assert h.lost[1].started_batch_id == bad2.batch_id and h.lost[1].in_call
            assert not h.fatal
            ok = h.submit(0, records(1))
            assert statuses(await h.result(ok)) == [S.SUCCESS]
    run(scenario())


def test_exit_3_from_a_ready_worker_is_a_crash_not_a_boot_failure() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            h.submit(0, records([{"MISBEHAVE": "exit3"}]))
            (lost,) = await h.wait_for(lambda: h.lost, what="on_worker_lost")
            assert lost.exitcode == 3 and lost.in_call
            assert lost.reason == "exit code 3"  # not "BOOT_ERROR": the handler exited, it did load
            assert not h.fatal
            ok = h.submit(0, records(1))
            assert statuses(await h.result(ok)) == [S.SUCCESS]
    run(scenario())


def test_a_death_outside_a_handler_call_is_not_blamed_on_a_message() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            (pid,) = h.pids(0)
            os.kill(pid, signal.SIGKILL)  # idle: no batch, no call
            await h.wait_for(lambda: pid not in h.pids() and h.pids(0), what="replacement")
            assert h.lost == [] and not h.fatal
            assert h.pool._crash_guard.count, "the death counts against the crash-loop guard"
    run(scenario())


def test_a_batch_waiting_in_a_workers_pipe_is_skipped_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_SLEEP_MS", "400")

    async def scenario() -> None:
        async with Harness("workers.misbehave:sleep") as h:
            running = h.submit(0, records(1), key="kept")
            queued = h.submit(0, records(2, start=5), key="dropped")
            await h.wait_for(lambda: h.pool.workers()[0].running_batch_id == running.batch_id, what="running")
            assert not h.pool.skip(running.batch_id)  # what runs, finishes
            assert h.pool.skip(queued.batch_id)
            skipped = await h.result(queued)
            assert statuses(skipped) == [S.NOT_RUN, S.NOT_RUN]
            assert skipped.error == "skipped: its queue was dropped"
            assert list(skipped.queue_offsets) == [5, 6]
            assert statuses(await h.result(running)) == [S.SUCCESS]
    run(scenario())


def test_batch_id_0_is_not_mistaken_for_a_skipped_one() -> None:
    async def scenario() -> None:
        async with Harness("workers.noop:handle") as h:
            batch = Batch(0, "q", ConsumeMode.CONCURRENT, "broker-a", records(1))
            h.pool.submit(0, batch)
            assert statuses(await h.result(batch)) == [S.SUCCESS]
    run(scenario())


@pytest.mark.parametrize("mode, failed", [(None, S.RECONSUME_LATER), (O, S.SUSPEND)])
def test_a_hard_time_limit_kill_keeps_what_the_batch_had_finished(mode, failed) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", time_limit=0.3, kill_grace=0.4) as h:
            stuck = h.submit(0, records([{}, {}, {"MISBEHAVE": "hang_hard"}, {}], start=3),
                             *([mode] if mode else []))
            result = await h.result(stuck, timeout=10)
            assert result.timed_out and "hard time limit" in (result.error or "")
            assert statuses(result) == [S.SUCCESS, S.SUCCESS, failed, S.NOT_RUN]
            assert list(result.queue_offsets) == [3, 4, 5, 6]
    run(scenario())
