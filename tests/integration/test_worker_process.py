"""One worker process without a pool: WorkerProcess reports frames and its death through the callbacks it is given.

Real ``python -m rmqrun.worker`` processes; no Pool anywhere, which is the
point: the process layer needs nothing of the pool but the loop and two callbacks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys

from rmqrun.pipe.wire import Boot, ExitCode, Frame, Ready, Stop, encode
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.worker_process import WorkerProcess, spawn_worker
from tests.integration.test_pool_basic import run
from tests.waiting import eventually_async


class Recorder:
    """The two callbacks, recording what arrives in order; ``exited`` is set by the first death."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self.exited = asyncio.Event()

    def on_frame(self, proc: WorkerProcess, frame: Frame) -> None:
        self.events.append(("frame", frame))

    def on_exit(self, proc: WorkerProcess, code: int) -> None:
        self.events.append(("exit", code))
        self.exited.set()

    def frames(self) -> list[object]:
        return [f for kind, f in self.events if kind == "frame"]


def _spawn(rec: Recorder) -> WorkerProcess:
    wcfg = WorkerConfig("workers.noop:handle", log_level="WARNING", batch_size=1, time_limit=900.0)
    boot = encode(Boot(0, dataclasses.asdict(wcfg), list(sys.path)))
    return spawn_worker(asyncio.get_running_loop(), 0, boot, rec.on_frame, rec.on_exit)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_a_worker_told_to_stop_reports_ready_then_exits_0_once_and_close_releases_its_fds() -> None:
    async def scenario() -> None:
        rec = Recorder()
        proc = _spawn(rec)
        await eventually_async(lambda: any(isinstance(f, Ready) for f in rec.frames()))
        proc.write([encode(Stop())])
        await asyncio.wait_for(rec.exited.wait(), 20)
        await asyncio.sleep(0.05)  # a second on_exit would come from a second sentinel wake-up
        assert [e for e in rec.events if e[0] == "exit"] == [("exit", ExitCode.OK)]
        assert rec.events[-1] == ("exit", ExitCode.OK)
        fds = (proc.fd, proc.sentinel, proc.progress_fd)
        proc.close()
        assert all(_closed(fd) for fd in fds)
    run(scenario())


def test_a_killed_worker_is_reported_with_its_signal_and_the_reason_it_was_killed_for() -> None:
    async def scenario() -> None:
        rec = Recorder()
        proc = _spawn(rec)
        await eventually_async(lambda: any(isinstance(f, Ready) for f in rec.frames()))
        proc.kill("test", signal.SIGKILL)
        await asyncio.wait_for(rec.exited.wait(), 20)
        assert proc.kill_reason == "test"
        assert rec.events[-1] == ("exit", -signal.SIGKILL)
        assert isinstance(rec.frames()[0], Ready)
        proc.close()
    run(scenario())
