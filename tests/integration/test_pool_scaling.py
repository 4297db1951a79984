"""add_worker / remove_worker (TTIN/TTOU) and reload (HUP) with real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import psutil
import pytest

from rmqrun.supervisor.pool import PoolError, WorkerBootError
from tests.integration.test_pool_basic import S, Harness, module_dir, records, run, statuses  # noqa: F401

V1 = """
    import time
    import rmqrun
    def handle(msg):
        time.sleep(float(msg.properties.get("SLEEP", "0")))
        return rmqrun.ReconsumeLater(delay_level=1)   # version 1
"""
V2 = """
    import time
    def handle(msg):
        time.sleep(float(msg.properties.get("SLEEP", "0")))
        return None   # version 2: succeeds (a different length, so no stale bytecode either)
"""


def test_add_and_remove_workers() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            assert h.pool.add_worker() == 1 and h.pool.size == 2 and h.pool.worker_ids == [0, 1]
            new = h.submit(1, records(1))  # accepted at once, runs once the new worker has booted
            r = await h.result(new)
            assert statuses(r) == [S.SUCCESS] and r.worker_id == 1
            (pid1,) = h.pids(1)
            busy = h.submit(1, records([{"MISBEHAVE": "sleep"}]))  # RMQRUN_HANDLER_SLEEP_MS default: 200 ms
            assert h.pool.remove_worker() == 1
            assert h.pool.size == 1
            with pytest.raises(PoolError, match="no worker 1"):
                h.submit(1, records(1))
            assert statuses(await h.result(busy)) == [S.SUCCESS]  # the removed worker finished what it held
            await h.wait_for(lambda: pid1 not in h.pids(), what="removed worker exit")
            assert h.pids(1) == [] and not h.lost
            with pytest.raises(PoolError, match="cannot remove the last worker"):
                h.pool.remove_worker()
    run(scenario())


def test_reload_runs_fresh_code_and_lets_old_workers_finish(module_dir: Callable[[str, str], Path]) -> None:
    path = module_dir("pool_reload_mod", V1)

    async def scenario() -> None:
        async with Harness("pool_reload_mod:handle", workers=2) as h:
            old = set(h.pids())
            before = h.submit(0, records(1))
            assert statuses(await h.result(before)) == [S.RECONSUME_LATER]
            in_flight = h.submit(1, records([{"SLEEP": "0.5"}]))
            path.write_text(V2.replace("\n    ", "\n"))
            await h.pool.reload()
            fresh = set(h.pids()) - old
            assert len(fresh) == 2
            after = [h.submit(w, records(1)) for w in (0, 1)]
            for b in after:
                r = await h.result(b)
                assert statuses(r) == [S.SUCCESS] and r.pid in fresh
            r = await h.result(in_flight)  # started on the old code, finished there
            assert statuses(r) == [S.RECONSUME_LATER] and r.pid in old
            await h.wait_for(lambda: not old & set(h.pids()), what="old workers retired")
            assert not h.lost and not h.fatal
    run(scenario())


def test_reload_with_broken_code_keeps_the_old_workers(module_dir: Callable[[str, str], Path]) -> None:
    path = module_dir("pool_reload_bad_mod", V1)

    async def scenario() -> None:
        # Children this test process had before the pool (a Spark JVM or a resource tracker left by an earlier
        # test in the same pytest worker) are not the pool's.
        others = {c.pid for c in psutil.Process().children()}
        async with Harness("pool_reload_bad_mod:handle") as h:
            old = h.pids()
            path.write_text("import missing_dependency_for_reload_test\n")
            with pytest.raises(WorkerBootError, match="No module named 'missing_dependency_for_reload_test'"):
                await h.pool.reload()
            assert h.pids() == old
            b = h.submit(0, records(1))
            r = await h.result(b)
            assert statuses(r) == [S.RECONSUME_LATER] and r.pid == old[0]
            await h.wait_for(lambda: [c.pid for c in psutil.Process().children() if c.pid not in others] == old,
                             what="the failed new workers reaped")
            assert not h.fatal and not h.lost
    run(scenario())
