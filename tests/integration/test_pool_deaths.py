"""Worker deaths: every batch a dead worker held comes back, the slot is refilled, crash loops stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

import psutil
import pytest

from rmqrun.supervisor.pool import CrashLoopError, PoolClosedError, WorkerBootError
from tests.integration.test_pool_basic import O, S, Harness, module_dir, records, run, statuses  # noqa: F401
from tests.waiting import eventually


def test_sigkill_mid_batch_gives_back_every_unfinished_batch_and_the_replacement_runs_them() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            (old_pid,) = h.pids(0)
            a = h.submit(0, records([{}, {"MISBEHAVE": "hang"}]), O, key="oq")
            b = h.submit(0, records(2, start=2))
            await h.wait_for(lambda: h.pool.workers()[0].running_batch_id == a.batch_id, what="a running")
            os.kill(old_pid, signal.SIGKILL)
            (lost,) = await h.wait_for(lambda: h.lost, what="on_worker_lost")
            assert lost.worker_id == 0 and lost.pid == old_pid and lost.exitcode == -signal.SIGKILL
            assert lost.reason == "killed by SIGKILL"
            assert [x.batch_id for x in lost.batches] == [a.batch_id, b.batch_id]  # submission order
            assert lost.started_batch_id == a.batch_id
            assert not h.results
            # the slot was refilled before the callback ran: resubmitting to it just works
            (new_pid,) = h.pids(0)
            assert new_pid != old_pid
            retry = h.submit(0, records(2, start=2))
            result = await h.result(retry)
            assert statuses(result) == [S.SUCCESS, S.SUCCESS] and result.pid == new_pid
            assert not h.fatal
    run(scenario())


@pytest.mark.parametrize("action, exitcode", [
    ("kill_self", -signal.SIGKILL),
    ("segfault", -signal.SIGSEGV),
    ("exit_hard", 7),
    ("escape", 1),
])
def test_every_kind_of_death_is_reaped_and_replaced(action: str, exitcode: int) -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            (pid,) = h.pids(0)
            bad = h.submit(0, records([{"MISBEHAVE": action}]))
            (lost,) = await h.wait_for(lambda: h.lost, what="on_worker_lost")
            assert lost.exitcode == exitcode and lost.pid == pid
            assert [x.batch_id for x in lost.batches] == [bad.batch_id] and lost.started_batch_id == bad.batch_id
            ok = h.submit(0, records(1))
            assert statuses(await h.result(ok)) == [S.SUCCESS]
            assert h.results[ok.batch_id].pid != pid
    run(scenario())


def test_a_crash_loop_stops_with_a_clear_error_instead_of_spinning() -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", crash_limit=2, crash_window=60) as h:
            # deaths inside a handler call are explained by a message: they never trip the guard
            for i in range(3):
                h.submit(0, records([{"MISBEHAVE": "kill_self"}]))
                await h.wait_for(lambda: len(h.lost) == i + 1, what=f"death {i + 1} in a call")
            assert not h.fatal
            # deaths no message explains (an idle worker killed from outside) do
            for i in range(3):
                await h.wait_for(lambda: [w.state for w in h.pool.workers()] == ["ready"], what="ready worker")
                (pid,) = h.pids(0)
                os.kill(pid, signal.SIGKILL)
                await h.wait_for(lambda: pid not in h.pids(), what=f"idle death {i + 1}")
            await h.wait_for(lambda: h.fatal, what="the guard tripping")
            (fatal,) = h.fatal
            assert isinstance(fatal, CrashLoopError)
            assert str(fatal).startswith("workers died 3 times within 60 s (limit 2); last: worker 0 (pid ")
            assert "killed by SIGKILL (deaths counted: at boot or outside a handler call" in str(fatal)
            assert "crash_limit / crash_window" in str(fatal)
            assert h.pool.workers() == []  # nothing respawned
            with pytest.raises(PoolClosedError, match="failed: workers died 3 times"):
                h.submit(0, records(1))
    run(scenario())


def test_a_replacement_that_cannot_import_the_handler_is_fatal_at_once(
        module_dir: Callable[[str, str], Path]) -> None:
    path = module_dir("pool_breaks_mod", "def handle(msg):\n    pass\n")

    async def scenario() -> None:
        async with Harness("pool_breaks_mod:handle", crash_limit=50) as h:
            (pid,) = h.pids(0)
            path.write_text("def handle(msg)  # broken on disk after start\n")
            os.kill(pid, signal.SIGKILL)
            (fatal,) = await h.wait_for(lambda: h.fatal, what="on_fatal")
            assert isinstance(fatal, WorkerBootError) and fatal.exit_code == 3
            assert "a replacement for worker 0 cannot load the handler" in str(fatal)
            assert "SyntaxError" in str(fatal)
            assert h.pool.workers() == []
    run(scenario())


SUPERVISOR_SCRIPT = """
import asyncio, sys
from rmqrun.supervisor.pool import Pool, PoolConfig
from rmqrun.pipe.worker_config import WorkerConfig

async def main():
    worker = WorkerConfig("workers.noop:handle", log_level="WARNING", batch_size=1, time_limit=900.0)
    pool = Pool(PoolConfig(worker, workers=2), on_result=print, on_worker_lost=print)
    await pool.start()
    print(" ".join(str(w.pid) for w in pool.workers()), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_workers_exit_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "supervisor.py"
    script.write_text(SUPERVISOR_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[2]))
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        proc.kill()
        proc.wait()
        def alive() -> list[int]:
            return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

        eventually(lambda: not alive(), what="the orphaned workers to exit", interval=0.05)
    finally:
        proc.kill()
