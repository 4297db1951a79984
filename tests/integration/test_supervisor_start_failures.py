"""A supervisor whose consumer cannot start: the workers are stopped and the reason comes out.

Real worker processes are started first (so a handler that does not import fails
fast); when the consumer then cannot be built, they must not be left running. A
configuration error propagates as such (the CLI turns it into its own exit code);
any other error that no retry can cure ends the run with exit status 1.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError
from rmqrun.supervisor.supervisor import EXIT_FATAL, RunSettings, Supervisor
from tests.integration.engine_kit import broker, pool_config


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _run_and_watch(sup: Supervisor) -> tuple[object, list[int]]:
    pids: list[int] = []

    async def watch() -> None:
        while True:
            pool = getattr(sup.executor, "pool", None)
            if pool is not None:
                pids.extend(p for p in (proc.pid for proc in list(getattr(pool, "_procs", ()))) if p not in pids)
            await asyncio.sleep(0.01)
    watcher = asyncio.ensure_future(watch())
    try:
        try:
            outcome: object = await asyncio.wait_for(sup.run(), 60)
        except ConfigError as exc:
            outcome = exc
    finally:
        watcher.cancel()
    return outcome, pids


def test_a_configuration_error_stops_the_workers_and_propagates(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            cfg = ConsumerConfig(group="DEFAULT_CONSUMER", namesrv=eb.namesrv_address, subscriptions={"T": "*"})
            sup = Supervisor(RunSettings(consumer=cfg, pool=pool_config("workers.noop:handle"), grace=5,
                                         status_interval=0))
            outcome, pids = await _run_and_watch(sup)
            assert isinstance(outcome, ConfigError) and "DEFAULT_CONSUMER is reserved" in str(outcome)
            assert pids, "the workers were started first"
            assert not any(_alive(p) for p in pids), "a worker was left running"
    asyncio.run(main())


def test_an_error_no_retry_can_cure_ends_the_run_with_status_1(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqrun.consumer import push

    async def broken_start(self) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("the consumer's start hit a bug (test)")
    monkeypatch.setattr(push.PushConsumer, "start", broken_start)

    async def main() -> None:
        async with broker(tmp_path) as eb:
            cfg = ConsumerConfig(group="GSF", namesrv=eb.namesrv_address, subscriptions={"T": "*"})
            sup = Supervisor(RunSettings(consumer=cfg, pool=pool_config("workers.noop:handle"), grace=5,
                                         status_interval=0))
            outcome, pids = await _run_and_watch(sup)
            assert outcome == EXIT_FATAL
            assert pids and not any(_alive(p) for p in pids)
    asyncio.run(main())
