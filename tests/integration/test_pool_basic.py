"""The pool with real worker processes: results in both modes, boot errors, hooks, graceful stop.

Also home of the small harness the other ``test_pool_*`` files import.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import textwrap
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Hashable

import pytest

from rmqrun.remoting.message import encode_stored
from rmqrun.pipe.wire import Batch, BatchResult, ConsumeMode, Status
from rmqrun.supervisor.pool import Pool, PoolError, WorkerBootError, WorkerLost
from rmqrun.supervisor.pool_config import PoolConfig
from tests.integration.engine_kit import pool_config
from tests.waiting import eventually_async

C = ConsumeMode.CONCURRENT
O = ConsumeMode.ORDERLY
S = Status


def records(props: list[dict[str, str]] | int = 1, *, start: int = 0, queue_id: int = 0, topic: str = "T") -> bytes:
    """Stored-message records; ``props`` is a list of property dicts or a message count."""
    specs = [{} for _ in range(props)] if isinstance(props, int) else props
    return b"".join(bytes(encode_stored(topic=topic, body=b"payload", properties=p, queue_id=queue_id,
                                        queue_offset=start + i)) for i, p in enumerate(specs))


def run(coro: Awaitable[Any], timeout: float = 60.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


class Harness:
    """A Pool with its callbacks recorded, as an async context manager (start / stop)."""

    def __init__(self, handler: str, **settings: Any) -> None:
        settings.setdefault("workers", 1)
        settings.setdefault("log_level", "WARNING")
        settings.setdefault("boot_timeout", 30.0)
        self.results: dict[int, BatchResult] = {}
        self.lost: list[WorkerLost] = []
        self.fatal: list[PoolError] = []
        self.pool = Pool(pool_config(handler, **settings), on_result=self._on_result,
                         on_worker_lost=self.lost.append, on_fatal=self.fatal.append)
        self._ids = itertools.count(1)
        self.stopped_with: list[Batch] | None = None

    def _on_result(self, result: BatchResult) -> None:
        assert result.batch_id not in self.results, "a batch reported twice"
        self.results[result.batch_id] = result

    async def __aenter__(self) -> "Harness":
        await self.pool.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.pool.state != "stopped":
            self.stopped_with = await self.pool.stop(5)

    def submit(self, worker_id: int, data: bytes, mode: ConsumeMode = C, key: Hashable = "q",
               auto_commit: bool = True) -> Batch:
        batch = Batch(next(self._ids), key, mode, "broker-a", data, auto_commit=auto_commit)
        self.pool.submit(worker_id, batch)
        return batch

    async def wait_for(self, cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        """:func:`tests.waiting.eventually_async`, kept as a method for the pool tests that call it."""
        return await eventually_async(cond, what=what, timeout=timeout)

    async def result(self, batch: Batch, timeout: float = 20.0) -> BatchResult:
        return await self.wait_for(lambda: self.results.get(batch.batch_id), timeout, f"batch {batch.batch_id}")

    def pids(self, worker_id: int | None = None) -> list[int]:
        return [w.pid for w in self.pool.workers() if worker_id is None or w.worker_id == worker_id]


def statuses(result: BatchResult) -> list[Status]:
    return [Status(b) for b in result.statuses]


@pytest.fixture()
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Path]:
    """Write a handler module into a directory on sys.path (which workers inherit)."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        return path

    return write


# --------------------------------------------------------------------------- tests

def test_results_of_both_modes_come_back_from_real_workers() -> None:
    async def scenario() -> None:
        async with Harness("workers.flaky:scripted", workers=2) as h:
            assert h.pool.size == 2 and len(set(h.pids())) == 2
            conc = h.submit(0, records([{"RESULT": r} for r in ("ok", "raise", "reconsume:2", "bad")], start=10))
            orderly = h.submit(1, records([{"RESULT": r} for r in ("ok", "suspend:300", "ok")], start=20), O,
                               key="oq")
            manual = h.submit(1, records([{"RESULT": r} for r in ("commit", "rollback")], start=30), O, key="mq",
                              auto_commit=False)
            r1, r2, r3 = await h.result(conc), await h.result(orderly), await h.result(manual)
            assert statuses(r1) == [S.SUCCESS, S.RECONSUME_LATER, S.RECONSUME_LATER, S.RECONSUME_LATER]
            assert list(r1.delay_levels) == [0, 0, 2, 0]
            assert list(r1.queue_offsets) == [10, 11, 12, 13]
            assert r1.worker_id == 0 and r1.pid == h.pids(0)[0] and r1.batch is conc and r1.queue_key == "q"
            assert "FlakyError: scripted failure" in (r1.error or "")
            assert statuses(r2) == [S.SUCCESS, S.SUSPEND, S.NOT_RUN] and r2.suspend_ms == 300
            assert r2.worker_id == 1 and r2.mode is O
            assert statuses(r3) == [S.COMMIT, S.ROLLBACK]
            assert not h.lost and not h.fatal
    run(scenario())


def test_batch_handler_in_a_worker_sees_lists_and_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "record.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(out))

    async def scenario() -> None:
        async with Harness("workers.orderly_record:handle_batch", batch_size=3) as h:
            batches = [h.submit(0, records(5, start=5 * i, queue_id=2), O) for i in range(3)]
            for b in batches:
                assert statuses(await h.result(b)) == [S.SUCCESS] * 5
    run(scenario())
    assert out.read_text().splitlines() == [f"2 {i}" for i in range(15)]


def test_a_handler_that_does_not_import_stops_the_start_with_the_loader_message() -> None:
    async def scenario() -> None:
        h = Harness("workers.noop:hanlde", workers=2)
        with pytest.raises(WorkerBootError) as err:
            await h.pool.start()
        assert err.value.exit_code == 3  # the loader's exit, not the boot timeout's "not ready after"
        assert "Failed to find attribute 'hanlde' in 'workers.noop'" in str(err.value)
        assert "did you mean 'workers.noop:handle'?" in str(err.value)
        assert h.pool.state == "stopped" and h.pool.workers() == []
        with pytest.raises(PoolError):
            h.submit(0, records(1))
    run(scenario())


def test_a_failing_worker_init_stops_the_start() -> None:
    async def scenario() -> None:
        h = Harness("workers.noop:handle", worker_init="workers.misbehave:init_fails")
        with pytest.raises(WorkerBootError) as err:
            await h.pool.start()
        assert err.value.exit_code == 4
        assert "worker_init 'workers.misbehave:init_fails' raised RuntimeError: worker_init failing on purpose" \
            in str(err.value)
    run(scenario())


HOOKS = """
    import os, time
    def _log(text):
        with open(os.environ["HOOK_LOG"], "a") as f:
            f.write(text + "\\n")
    def init(info):
        _log(f"init {info.worker_id} {info.pid}")
    def bye(info):
        _log(f"exit {info.worker_id} {info.pid}")
    def slow(msg):
        time.sleep(float(msg.properties.get("SLEEP", "0")))
"""


def test_graceful_stop_finishes_in_flight_batches_and_calls_exit_hooks(
        module_dir: Callable[[str, str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir("pool_hooks_mod", HOOKS)
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("HOOK_LOG", str(log))

    async def scenario() -> None:
        h = Harness("pool_hooks_mod:slow", workers=2, worker_init="pool_hooks_mod:init",
                    worker_exit="pool_hooks_mod:bye")
        async with h:
            pids = h.pids()
            a = h.submit(0, records([{"SLEEP": "0.4"}]))
            b = h.submit(0, records([{"SLEEP": "0.1"}]))  # queued behind a
            await h.wait_for(lambda: h.pool.workers()[0].running_batch_id == a.batch_id, what="batch a started")
            leftovers = await h.pool.stop(10)
            assert leftovers == []
            assert statuses(h.results[a.batch_id]) == [S.SUCCESS] and statuses(h.results[b.batch_id]) == [S.SUCCESS]
            assert h.pool.workers() == []
            with pytest.raises(PoolError):
                h.submit(0, records(1))
        assert sorted(log.read_text().splitlines()) == sorted(
            [f"init {i} {p}" for i, p in enumerate(pids)] + [f"exit {i} {p}" for i, p in enumerate(pids)])
    run(scenario())


def test_stop_after_grace_interrupts_and_returns_unfinished_batches(
        module_dir: Callable[[str, str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module_dir("pool_hooks_mod2", HOOKS)
    log = tmp_path / "hooks.log"
    monkeypatch.setenv("HOOK_LOG", str(log))

    async def scenario() -> None:
        h = Harness("pool_hooks_mod2:slow", worker_exit="pool_hooks_mod2:bye")
        async with h:
            (pid,) = h.pids()
            a = h.submit(0, records([{}, {"SLEEP": "600"}, {}]))  # longer than run(): only SIGTERM ends it
            b = h.submit(0, records(2, start=3))
            await h.wait_for(lambda: h.pool.workers()[0].running_batch_id == a.batch_id, what="batch a started")
            leftovers = await h.pool.stop(0.3)
            assert [x.batch_id for x in leftovers] == [b.batch_id]
            ra = h.results[a.batch_id]  # SIGTERM interrupted the handler: nothing is committed by mistake
            assert statuses(ra) == [S.SUCCESS, S.NOT_RUN, S.NOT_RUN]
            assert "terminated" in (ra.error or "")
            assert b.batch_id not in h.results and not h.lost
        assert log.read_text().splitlines() == [f"exit 0 {pid}"]
    run(scenario())


def test_submit_checks() -> None:
    async def scenario() -> None:
        async with Harness("workers.noop:handle") as h:
            with pytest.raises(PoolError, match=r"no worker 1; worker ids are 0..0"):
                h.submit(1, records(1))
            b = Batch(5, "q", C, "b", records(1))
            h.pool.submit(0, b)
            with pytest.raises(PoolError, match="batch 5 is already in flight"):
                h.pool.submit(0, Batch(5, "q", C, "b", records(1)))
            await h.result(b)
            assert h.pool.in_flight() == 0
    run(scenario())


def test_batches_larger_than_the_socket_buffer_are_written_without_blocking() -> None:
    big = b"".join(bytes(encode_stored(topic="T", body=bytes([i]) * (512 << 10), queue_offset=i)) for i in range(12))
    assert len(big) > 6 << 20

    async def scenario() -> None:
        async with Harness("workers.noop:handle", workers=2) as h:
            batches = [h.submit(i % 2, big) for i in range(4)]
            ticks = 0

            async def ticker() -> None:  # the loop keeps turning while megabytes drain to the workers
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)

            task = asyncio.ensure_future(ticker())
            for b in batches:
                r = await h.result(b)
                assert statuses(r) == [S.SUCCESS] * 12 and list(r.queue_offsets) == list(range(12))
            task.cancel()
            assert ticks > 3
    run(scenario())


def test_pool_config_is_validated_with_the_values_quoted() -> None:
    # the same words as the settings table's (one rule per field, rmqrun/setting_rules.py), less the source
    from rmqrun.errors import ConfigError
    for kwargs, message in [
        ({"workers": 0}, "workers=0 is invalid: an integer from 1 to 4096"),
        ({"kill_grace": 0}, "kill_grace=0 is invalid: a positive number of seconds"),
        ({"crash_limit": 0}, "crash_limit=0 is invalid: 1 or more"),
        ({"max_messages": -1}, "max_messages=-1 is invalid: 0 or more"),
    ]:
        with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
            pool_config("m:f", **kwargs)
    cfg = pool_config("m:f", workers=3, max_messages=1000)
    assert cfg.worker.max_messages_jitter == 100  # 10% by default
    assert cfg.effective_crash_limit == 10 and pool_config("m:f", workers=8).effective_crash_limit == 16
    assert PoolConfig(cfg.worker).workers == os.cpu_count()
