"""The threads and asyncio worker classes with real worker processes (issue #36), at the pool's level.

Each batch's calls run up to ``worker_concurrency`` at once; the statuses, the time limit per call, a
call that kills its worker (the progress block names every call in flight and keeps what finished
beyond the prefix), orderly batches one call at a time, and the refusals at boot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.pipe.wire import Batch, Status
from rmqrun.remoting.message import encode_stored
from rmqrun.supervisor.pool import WorkerBootError
from tests.integration.handlers import classes_handler
from tests.integration.test_pool_basic import C, O, Harness, run

H = "tests.integration.handlers.classes_handler:handle"
HA = "tests.integration.handlers.classes_handler:handle_async"


def bodies(*items: str, queue_id: int = 0) -> bytes:
    return b"".join(bytes(encode_stored(topic="T", body=b.encode(), properties={"KEYS": f"k{i}"},
                                        queue_id=queue_id, queue_offset=i)) for i, b in enumerate(items))


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_CLASSES_RECORD", str(path))
    return path


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_a_batchs_calls_run_at_once_and_each_message_has_its_status(record: Path, worker_class: str,
                                                                    handler: str, capfd: pytest.CaptureFixture[str]
                                                                    ) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=8) as h:
            batch = h.submit(0, bodies(*(["sleep"] * 15 + ["raise"])))
            await h.wait_for(lambda: batch.batch_id in h.results, what="the batch's result")
            res = h.results[batch.batch_id]
            assert res.statuses == bytes(15) + bytes([Status.RECONSUME_LATER])
            assert "asked to raise at offset 15" in res.errors[0][1]
            recs = classes_handler.records(record)
            assert sorted(r[1] for r in recs) == list(range(15))
            assert classes_handler.overlapping(recs) >= 2
    run(main())
    # the failure's line is labelled with its own message, not the batch's first
    line = next(x for x in capfd.readouterr().err.splitlines() if "raised RuntimeError" in x and "offset 15)" in x)
    assert " | T broker-a:0@15 | " in line, line


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_an_orderly_batch_runs_one_call_at_a_time_and_stops_at_a_failure(record: Path, worker_class: str,
                                                                          handler: str) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=8) as h:
            batch = h.submit(0, bodies("sleep", "sleep", "sleep", "raise", "sleep"), mode=O)
            await h.wait_for(lambda: batch.batch_id in h.results, what="the batch's result")
            assert h.results[batch.batch_id].statuses == bytes(3) + bytes([Status.SUSPEND, Status.NOT_RUN])
            recs = classes_handler.records(record)
            assert [r[1] for r in recs] == [0, 1, 2]
            assert classes_handler.overlapping(recs) == 1
    run(main())


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_a_call_past_the_time_limit_fails_as_timed_out_alone(record: Path, worker_class: str,
                                                             handler: str) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=4, time_limit=1.0,
                           kill_grace=30.0) as h:
            batch = h.submit(0, bodies("sleep", "hang:20", "sleep", "sleep"))
            await h.wait_for(lambda: batch.batch_id in h.results, what="the batch's result")
            res = h.results[batch.batch_id]
            assert res.statuses == bytes([0, Status.RECONSUME_LATER, 0, 0])
            assert res.timed_out
            assert "soft time limit (1 s) exceeded" in dict(res.errors)[1]
            if worker_class == "threads":
                # the thread cannot be stopped: the worker asks to be recycled and a fresh one takes its slot
                await h.wait_for(lambda: h.pool.recycles == 1, what="the recycle")
                after = h.submit(0, bodies("sleep"))
                await h.wait_for(lambda: after.batch_id in h.results, what="a batch on the fresh worker")
                assert h.results[after.batch_id].statuses == bytes(1)
            else:
                assert h.pool.recycles == 0  # the task was cancelled: nothing is left running
    run(main())


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_a_call_that_kills_its_worker_leaves_each_call_in_flight_named(record: Path, worker_class: str,
                                                                        handler: str) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=4) as h:
            batch: Batch = h.submit(0, bodies("sleep", "hang:0.5", "sleep", "hang:20", "exit", "sleep"))
            await h.wait_for(lambda: h.lost, what="the worker's death")
            lost = h.lost[0]
            assert lost.started_batch_id == batch.batch_id and lost.in_call
            prog = lost.progress
            assert prog is not None
            # "exit" began with "hang:20" in flight (the calls begin in order, four at a time)
            flying = {start for start, _, _ in prog.calls}
            assert {3, 4} <= flying, prog
            finished = set(range(prog.done)) | {i for i, _, _ in prog.later}
            assert finished.isdisjoint(flying)
            # a slot freed by "sleep" 0 or 2 let "exit" begin: what finished beyond the prefix is known (it never
            # runs again), and every message begun is either finished or in flight
            assert finished & {0, 2} and finished | flying >= {0, 1, 2, 3, 4}
            assert all(status == 0 for i, status, _ in prog.later)
    run(main())


def test_the_asyncio_class_refuses_a_plain_handler_and_awaits_an_async_worker_init(record: Path) -> None:
    async def refused() -> None:
        with pytest.raises(WorkerBootError, match=r"plain function but worker_class is asyncio.*'async def'"):
            async with Harness(H, worker_class="asyncio", concurrency=2):
                pass
    run(refused())

    async def main() -> None:
        async with Harness("tests.integration.handlers.classes_handler:handle_after_init", worker_class="asyncio",
                           concurrency=2, worker_init="tests.integration.handlers.classes_handler:init_async") as h:
            batch = h.submit(0, bodies("sleep", "sleep"))
            await h.wait_for(lambda: batch.batch_id in h.results, what="the batch's result")
            assert h.results[batch.batch_id].statuses == bytes(2)
    run(main())


def test_a_coroutine_that_blocks_the_loop_is_killed_at_the_hard_limit_and_only_its_call_fails(record: Path) -> None:
    """``time.sleep`` in an ``async def`` stops the loop, and with it the worker's announcements: the supervisor
    kills it at time_limit + kill_grace; what had finished keeps its status, each call in flight fails."""
    async def main() -> None:
        async with Harness(HA, worker_class="asyncio", concurrency=2, time_limit=1.0, kill_grace=1.0) as h:
            batch = h.submit(0, bodies("sleep", "sleep", "block:30", "sleep", "sleep"))
            await h.wait_for(lambda: batch.batch_id in h.results, 60, what="the hard limit's result")
            res = h.results[batch.batch_id]
            assert res.timed_out and "hard time limit" in (res.error or "")
            # calls 0 and 1 ran first (two at once); "block" began as one of them ended (the other one may still
            # have been in flight, and then a call after it may have begun beside "block")
            assert 0 in res.statuses[:2] and set(res.statuses[:2]) <= {0, Status.RECONSUME_LATER}, res.statuses
            assert res.statuses[2] == Status.RECONSUME_LATER
            assert set(res.statuses[3:]) <= {Status.NOT_RUN, Status.RECONSUME_LATER}, res.statuses
            assert res.statuses[4] == Status.NOT_RUN, res.statuses
            assert sorted(i for i, _ in res.errors) == [i for i in range(5) if res.statuses[i] ==
                                                        Status.RECONSUME_LATER]
    run(main())


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_sigterm_answers_the_batch_with_the_calls_in_flight_not_run(record: Path, worker_class: str,
                                                                    handler: str) -> None:
    """A stop whose grace runs out sends SIGTERM: the worker stops waiting for its calls, answers the batch
    (what finished keeps its status, the calls in flight NOT_RUN: delivered again) and exits by itself."""
    async def main() -> None:
        h = Harness(handler, worker_class=worker_class, concurrency=4)
        async with h:
            batch = h.submit(0, bodies("sleep", "hang:60", "sleep"))
            await h.wait_for(lambda: len(classes_handler.records(record)) == 2, what="the two short calls")
            left = await h.pool.stop(0.5)
            assert batch.batch_id in h.results and left == [], "the worker was killed before it answered"
            assert h.results[batch.batch_id].statuses == bytes([0, Status.NOT_RUN, 0])
            assert h.pool.cut_short_messages == 1
    run(main())


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_batches_run_at_once_and_one_marked_alone_runs_with_nothing_beside_or_after_it(
        record: Path, worker_class: str, handler: str) -> None:
    """Lanes (issue #36): two batches given at once run at once; a batch marked ``alone`` (a suspect's re-run)
    starts once they are answered, and the batch behind it only once it is."""
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=8) as h:
            a = h.submit(0, bodies("sleep", "sleep", "sleep", queue_id=1))
            d = h.submit(0, bodies("sleep", "sleep", "sleep", queue_id=4))
            alone = Batch(9000, "alone", C, "broker-a", bodies("sleep", queue_id=2), alone=True)
            h.pool.submit(0, alone)
            c = h.submit(0, bodies("sleep", "sleep", queue_id=3))
            for batch in (a, d, alone, c):
                assert (await h.result(batch)).statuses == bytes(batch.count)
            recs = classes_handler.records(record)
            by_queue = {q: [(r[3], r[4]) for r in recs if r[0] == q] for q in (1, 2, 3, 4)}
            assert any(s1 < e4 and s4 < e1 for s1, e1 in by_queue[1] for s4, e4 in by_queue[4]), \
                f"two batches given at once did not run at once: {by_queue}"
            ((start, end),) = by_queue[2]
            assert all(e <= start for q in (1, 4) for _, e in by_queue[q]), f"it ran beside others: {by_queue}"
            assert all(s >= end for s, _ in by_queue[3]), f"a batch behind it started beside it: {by_queue}"
    run(main())
