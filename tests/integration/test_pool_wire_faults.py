"""The pool when a worker's pipe carries garbage, and when a worker process cannot be started.

Real worker processes. The garbage is written by a handler straight onto its
worker's socket (the fd the worker was started with), as a buggy C extension
or a stray ``os.write`` would. Spawn failures are made where the operating
system makes them: ``subprocess.Popen`` raising the ``OSError`` fork gives when
the machine is out of processes.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

import rmqrun.supervisor.worker_process as process_mod
from rmqrun.supervisor.pool import PoolClosedError, PoolError
from tests.integration.test_pool_basic import Harness, S, module_dir, records, run, statuses  # noqa: F401

GARBAGE_HANDLER = """
    import os, sys

    def handle(msg):
        if msg.properties.get("GARBAGE"):
            # sys.argv[1] is the worker's end of the socket pair to the supervisor
            os.write(int(sys.argv[1]), bytes.fromhex(os.environ["RMQRUN_TEST_GARBAGE"]))
"""


def _fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.mark.parametrize("garbage", [
    "0000000563" + b"hello".hex(),  # a well-formed length, an unknown frame kind (99)
    "00000000ff",                   # a frame of length 0
    "ffffffff00" + "00" * 16,       # a length past MAX_FRAME: must not wait for 4 GiB that never come
], ids=["unknown-kind", "zero-length", "huge-length"])
def test_a_worker_writing_garbage_on_its_pipe_is_killed_and_its_batch_given_back(
        garbage: str, module_dir: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir("garbage_writer", GARBAGE_HANDLER)
    monkeypatch.setenv("RMQRUN_TEST_GARBAGE", garbage)

    async def scenario() -> None:
        # no time limit: only the frame check can end the batch
        async with Harness("garbage_writer:handle", time_limit=0) as h:
            (pid,) = h.pids(0)
            batch = h.submit(0, records([{}, {"GARBAGE": "1"}, {}], start=40))
            (lost,) = await h.wait_for(lambda: h.lost, what="the batch given back")
            assert lost.pid == pid and lost.worker_id == 0
            assert "protocol error" in lost.reason
            assert [b.batch_id for b in lost.batches] == [batch.batch_id], "the batch is given back, not lost"
            assert not lost.in_call, "a protocol error is not blamed on a message"
            assert batch.batch_id not in h.results, "no result was made up for it"
            # the slot has a fresh process that runs normal work
            await h.wait_for(lambda: [p for p in h.pids(0) if p != pid], what="a replacement")
            again = h.submit(0, records(3, start=40))
            assert statuses(await h.result(again)) == [S.SUCCESS] * 3
            assert pid not in h.pids() and h.pool.restarts == 1 and not h.fatal
    run(scenario())


def _failing_popen(real: type[subprocess.Popen], fail: Callable[[], bool]):  # type: ignore[no-untyped-def]
    def popen(*args, **kwargs):  # type: ignore[no-untyped-def]
        if fail():
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real(*args, **kwargs)
    return popen


def test_a_replacement_that_cannot_be_spawned_fails_the_pool_and_loses_no_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            (pid,) = h.pids(0)
            fds_before = _fds()
            monkeypatch.setattr(process_mod.subprocess, "Popen", _failing_popen(subprocess.Popen, lambda: True))
            bad = h.submit(0, records([{"MISBEHAVE": "exit_hard"}, {}], start=7))
            (fatal,) = await h.wait_for(lambda: h.fatal, what="on_fatal")
            assert isinstance(fatal, PoolError)
            assert "cannot start a replacement for worker 0" in str(fatal) and "Resource temporarily" in str(fatal)
            (lost,) = await h.wait_for(lambda: h.lost, what="the batch given back")
            assert lost.pid == pid and [b.batch_id for b in lost.batches] == [bad.batch_id]
            with pytest.raises(PoolClosedError, match="failed: cannot start a replacement"):
                h.submit(0, records(1))
            assert h.pids() == [] and h.pool.restarts == 0
            # the dead worker's socket, sentinel and progress fds are closed, and the failed spawn leaked none
            assert _fds() <= fds_before
    run(scenario())


def test_a_worker_that_wants_recycling_keeps_working_when_no_replacement_can_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property", max_messages=1, max_messages_jitter=0) as h:
            (pid,) = h.pids(0)
            fds_before = _fds()
            attempts: list[int] = []
            monkeypatch.setattr(process_mod.subprocess, "Popen",
                                _failing_popen(subprocess.Popen, lambda: attempts.append(1) is None))
            first = h.submit(0, records(1))
            assert statuses(await h.result(first)) == [S.SUCCESS]
            await h.wait_for(lambda: attempts, what="the recycling attempt")
            assert _fds() <= fds_before, "the failed spawn leaked descriptors"
            # it was kept: the same process takes the next batch, nothing failed
            second = h.submit(0, records(2, start=1))
            result = await h.result(second)
            assert statuses(result) == [S.SUCCESS, S.SUCCESS] and result.pid == pid
            assert h.pool.recycles == 0 and not h.fatal and not h.lost
    run(scenario())


def test_a_spawn_failure_at_start_kills_the_workers_already_started(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):  # type: ignore[no-untyped-def]
        if started:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(process_mod.subprocess, "Popen", popen)
    fds_before = _fds()
    h = Harness("workers.noop:handle", workers=2)

    async def scenario() -> None:
        with pytest.raises(OSError, match="Resource temporarily unavailable"):
            await h.pool.start()

    run(scenario())
    (first,) = started
    assert first.poll() is not None, "the worker that did start is not left behind"
    assert h.pool.state == "stopped"
    with pytest.raises(PoolClosedError):
        h.pool.submit(0, records(1))  # type: ignore[arg-type]
    assert _fds() <= fds_before


STRAY_HANDLER = """
    import os, sys

    from rmqrun.pipe.wire import Done, Stop, encode

    def handle(msg):
        kind = msg.properties.get("STRAY")
        if not kind:
            return
        frame = {"unknown-done": Done(987654, b"\\x00", (0,), (0,)),
                 "stop": Stop()}[kind]
        # sys.argv[1] is the worker's end of the socket pair; between two frames of its own
        os.write(int(sys.argv[1]), encode(frame))
"""


@pytest.mark.parametrize("kind", ["unknown-done", "stop"])
def test_a_well_formed_frame_the_pool_does_not_expect_is_logged_and_changes_nothing(
        kind: str, module_dir: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A result for a batch the worker was never given, or a supervisor-only frame coming back: the pool
    ignores it (no result made up, nothing killed) and the batch in flight finishes normally."""
    module_dir("stray_writer", STRAY_HANDLER)

    async def scenario() -> None:
        async with Harness("stray_writer:handle", time_limit=0) as h:
            (pid,) = h.pids(0)
            batch = h.submit(0, records([{}, {"STRAY": kind}, {}], start=10))
            result = await h.result(batch)
            assert statuses(result) == [S.SUCCESS] * 3 and result.pid == pid
            assert 987654 not in h.results, "no result was made up for a batch nobody sent"
            assert h.pids(0) == [pid] and not h.lost and not h.fatal and h.pool.restarts == 0
    run(scenario())


def test_a_second_stop_waits_for_the_first(module_dir: Callable[[str, str], Path]) -> None:
    async def scenario() -> None:
        h = Harness("workers.noop:handle", workers=2)
        await h.__aenter__()
        try:
            first, second = await asyncio.gather(h.pool.stop(5.0), h.pool.stop(5.0))
            assert first == [] and second == []
            assert h.pool.state == "stopped" and h.pids() == []
        finally:
            await h.__aexit__(None, None, None)
    run(scenario())


STUBBORN_HANDLER = """
    import os, signal, time

    def handle(msg):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a handler that ignores the polite stop
        open(os.environ["RMQRUN_TEST_STUBBORN"], "w").write(str(os.getpid()))
        time.sleep(3600)
"""


def test_a_worker_that_ignores_sigterm_is_killed_after_the_grace_and_its_batch_counted(
        module_dir: Callable[[str, str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir("stubborn", STUBBORN_HANDLER)
    marker = tmp_path / "stubborn.pid"
    monkeypatch.setenv("RMQRUN_TEST_STUBBORN", str(marker))

    async def scenario() -> None:
        h = Harness("stubborn:handle", time_limit=0)
        await h.__aenter__()
        try:
            batch = h.submit(0, records(2, start=3))
            await h.wait_for(lambda: marker.exists() and marker.read_text(), what="the handler running")
            pid = int(marker.read_text())
            cut = await h.pool.stop(0.3)
            assert [b.batch_id for b in cut] == [batch.batch_id], "the batch cut short is reported"
            # the handler ignores SIGTERM and never returns: gone means killed once the grace was over
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            assert h.pool.state == "stopped"
        finally:
            await h.__aexit__(None, None, None)
    run(scenario())
