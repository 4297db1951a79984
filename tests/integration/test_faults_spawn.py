"""A running consumer whose dead worker cannot be replaced: it stops with exit code 1 and loses nothing.

Embedded broker over TCP, the supervisor (engine + real worker processes) on the
test's loop. The worker is SIGKILLed from outside while idle; its replacement
cannot be spawned (``subprocess.Popen`` raising the ``OSError`` fork gives when
the machine is out of processes). The next run, with spawning working again,
must continue exactly where the first one committed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
from pathlib import Path

import pytest

import rmqrun.supervisor.worker_process as process_mod
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "workers.orderly_record:handle"


def test_a_worker_that_cannot_be_replaced_stops_the_run_with_1_and_nothing_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))
    real_popen = subprocess.Popen

    def no_more_processes(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SF1", 5)
            cfg = consumer_config(eb.namesrv_address, "GSF1", "SF1", broker_suspend_max_time_ms=300)
            r = Running(cfg, pool_config(HANDLER, workers=1))
            async with r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [m for m in engine.table if m.topic == "SF1"]
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 5, what="the first 5 committed")
                (worker,) = r.supervisor.executor.pool.workers()
                monkeypatch.setattr(process_mod.subprocess, "Popen", no_more_processes)
                os.kill(worker.pid, signal.SIGKILL)
                assert r.task is not None
                code = await asyncio.wait_for(asyncio.shield(r.task), 60)
                assert code == 1, "a pool that cannot replace its worker ends the run with 1"
                monkeypatch.setattr(process_mod.subprocess, "Popen", real_popen)
            assert (await committed_offsets(eb, "GSF1", "SF1"))[0] == 5
            assert read_records(record) == [(0, o) for o in range(5)]

            await produce(eb.namesrv_address, "SF1", 5, start=5)
            async with Running(cfg, pool_config(HANDLER, workers=1)) as again:
                await wait_for(lambda: len(read_records(record)) >= 10, what="the next 5")
                assert await again.stop() == 0
            assert read_records(record) == [(0, o) for o in range(10)], "continued where it committed, once each"
            assert (await committed_offsets(eb, "GSF1", "SF1"))[0] == 10

    asyncio.run(asyncio.wait_for(main(), 120))
