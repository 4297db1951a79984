"""Recycling by count with the threads and asyncio worker classes (issue #36), at the pool's level.

A worker running several calls (and batches) at once that reaches ``max_messages`` or ``max_memory`` lets
every call it began finish, answers every batch it was given, and is replaced: no message is lost or run twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rmqrun.pipe.wire import Status
from rmqrun.remoting.message import encode_stored
from tests.integration.handlers import classes_handler
from tests.integration.test_pool_basic import Harness, run
from tests.integration.test_worker_classes_pool import H, HA, bodies, record  # noqa: F401 (record: the fixture)


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_a_worker_at_its_message_count_finishes_its_calls_in_flight_and_is_replaced(
        record: Path, worker_class: str, handler: str) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=4, max_messages=4,
                           max_messages_jitter=0) as h:
            (first,) = h.pids(0)
            # 9 messages given at once, in three batches run side by side: the count is passed mid-way
            batches = [h.submit(0, bodies("sleep", "sleep", "sleep", queue_id=q)) for q in (1, 2, 3)]
            results = [await h.result(b) for b in batches]
            assert all(r.statuses == bytes(3) for r in results)  # each call begun ran to its end
            assert {r.pid for r in results} == {first}  # the retiring worker answers all it was given
            await h.wait_for(lambda: first not in h.pids(), what="the retired worker's exit")
            later = h.submit(0, bodies("sleep", "sleep", queue_id=4))
            res = await h.result(later)
            assert res.statuses == bytes(2) and res.pid != first
            recs = classes_handler.records(record)
            ran = Counter((r[0], r[1]) for r in recs)
            assert ran == Counter({(q, i): 1 for q in (1, 2, 3) for i in range(3)} | {(4, 0): 1, (4, 1): 1}), ran
            assert classes_handler.overlapping([r for r in recs if r[5] == first]) >= 2
            assert not h.lost and not h.fatal
    run(main())


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_a_worker_over_its_memory_limit_starts_no_further_call_and_is_replaced(
        record: Path, worker_class: str, handler: str) -> None:
    """Calls at once each keep 40 MiB: once RSS is over ``max_memory`` no further call starts in that worker;
    those it began finish, the rest of the batch goes back NOT_RUN, and the replacement runs it."""
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=4, max_memory=150 << 20) as h:
            (first,) = h.pids(0)
            # ~40 MiB at boot: at most 3 leaks fit and 4 calls run at once, so 8 can never all start here
            batch = h.submit(0, bodies(*["leak:40"] * 8))
            res = await h.result(batch)
            ran = [i for i, st in enumerate(res.statuses) if st == Status.SUCCESS]
            not_run = [i for i, st in enumerate(res.statuses) if st == Status.NOT_RUN]
            assert res.pid == first and ran and not_run and sorted(ran + not_run) == list(range(8)), res.statuses
            await h.wait_for(lambda: first not in h.pids(), what="the retired worker's exit")
            recs = classes_handler.records(record)
            # every call begun there finished, and none started after the limit was seen
            assert sorted(r[1] for r in recs if r[5] == first) == ran
            again = h.submit(0, b"".join(bytes(encode_stored(topic="T", body=b"sleep", properties={}, queue_id=0,
                                                             queue_offset=i)) for i in not_run))
            res2 = await h.result(again)
            assert res2.statuses == bytes(len(not_run)) and res2.pid != first
            assert Counter(r[1] for r in classes_handler.records(record)) == Counter(range(8))  # each once
            assert not h.lost and not h.fatal
    run(main())
