"""Time limits (soft in the worker, hard by SIGKILL) and recycling (message count, memory)."""

from __future__ import annotations

import pytest

from tests.integration.test_pool_basic import O, S, Harness, records, run, statuses


def test_soft_time_limit_fails_the_slow_call_and_keeps_the_worker() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", time_limit=0.5, kill_grace=10) as h:
            (pid,) = h.pids(0)
            slow = h.submit(0, records([{}, {"MISBEHAVE": "hang"}, {}]))
            result = await h.result(slow, timeout=10)
            assert result.timed_out
            assert statuses(result) == [S.SUCCESS, S.RECONSUME_LATER, S.NOT_RUN]
            assert "soft time limit (0.5 s) exceeded" in (result.error or "")
            assert result.pid == pid and h.pids(0) == [pid] and not h.lost
            after = h.submit(0, records(1))  # the same process goes on
            assert statuses(await h.result(after)) == [S.SUCCESS]
    run(scenario())


@pytest.mark.parametrize("mode, failed", [(None, S.RECONSUME_LATER), (O, S.SUSPEND)])
def test_hard_time_limit_kills_the_worker_and_reports_the_batch_failed(mode, failed) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        # crash_limit=1: hard-limit kills are the pool's own doing and must not count as crashes
        async with Harness("workers.misbehave:by_property", time_limit=0.3, kill_grace=0.4, crash_limit=1) as h:
            for round_ in range(2):
                (pid,) = h.pids(0)
                stuck = h.submit(0, records([{"MISBEHAVE": "hang_hard"}, {}], start=7),
                                 *([mode] if mode else []), key=f"k{round_}")
                queued = h.submit(0, records(1, start=9), key="other")
                result = await h.result(stuck, timeout=10)
                assert result.timed_out and result.pid == pid
                # the hung call fails, the message after it never ran: neither is committed as a success
                assert statuses(result) == [failed, S.NOT_RUN]
                assert list(result.queue_offsets) == [7, 8]
                assert "hard time limit: worker 0 (pid" in (result.error or "")
                lost = await h.wait_for(lambda: len(h.lost) == round_ + 1 and h.lost[-1], what="queued batch back")
                assert [b.batch_id for b in lost.batches] == [queued.batch_id] and lost.started_batch_id is None
                assert "hard time limit" in lost.reason
                assert h.pids(0) != [pid]
            assert not h.fatal
            ok = h.submit(0, records(1))
            assert statuses(await h.result(ok)) == [S.SUCCESS]
    run(scenario())


def test_max_messages_recycles_gracefully_with_the_replacement_started_first() -> None:
    async def scenario() -> None:
        async with Harness("workers.noop:handle", max_messages=5, max_messages_jitter=0) as h:
            (first,) = h.pids(0)
            pids = []
            for i in range(7):
                b = h.submit(0, records(1, start=i))
                pids.append((await h.result(b)).pid)
            assert pids[:5] == [first] * 5
            assert pids[5] != first and pids[6] == pids[5]
            await h.wait_for(lambda: first not in h.pids(), what="old worker exit")
            assert not h.lost and not h.fatal
    run(scenario())


def test_recycling_does_not_lose_batches_queued_on_the_retiring_worker() -> None:
    async def scenario() -> None:
        async with Harness("workers.noop:handle", max_messages=3, max_messages_jitter=0) as h:
            (first,) = h.pids(0)
            batches = [h.submit(0, records(1, start=i)) for i in range(8)]  # all queued before the limit hits
            results = [await h.result(b) for b in batches]
            assert all(statuses(r) == [S.SUCCESS] for r in results)
            assert {r.pid for r in results} == {first}  # the retiring worker finishes everything it was given
            later = [h.submit(0, records(1, start=i)) for i in range(8, 10)]
            later_pids = {(await h.result(b)).pid for b in later}
            assert len(later_pids) == 1 and first not in later_pids
            assert not h.lost
    run(scenario())


def test_memory_limit_recycles_a_leaking_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_LEAK_MB", "40")

    async def scenario() -> None:
        async with Harness("workers.misbehave:leak", max_memory=150 << 20) as h:
            (first,) = h.pids(0)
            pids = []
            for i in range(5):
                b = h.submit(0, records(1, start=i))
                pids.append((await h.result(b)).pid)
                if pids[-1] != first:
                    break
            assert pids[0] == first and pids[-1] != first, pids  # ~40 MiB baseline + 40 MiB per message
            assert 2 <= pids.index(pids[-1]) <= 4
            await h.wait_for(lambda: first not in h.pids(), what="old worker exit")
            assert not h.lost and not h.fatal
    run(scenario())
