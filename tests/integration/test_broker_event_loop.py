"""The embedded broker on each event loop: ``rmqrun broker --event-loop``, ``python -m rmqrun.broker
--event-loop`` (BrokerProcess) and ``start_in_thread``; the start line says which loop, a SIGTERM stops it cleanly
with what was only in memory saved, and a choice it cannot make is refused before anything starts."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
from pathlib import Path

import pytest

from rmqrun.broker.app import BrokerProcess, EmbeddedBroker
from rmqrun.errors import ConfigError
from rmqrun.pull.consumer import PullConsumer
from tests.integration.broker_kit import LOOPS
from tests.integration.cli_kit import Child, env_without_uvloop, free_port, produce, run_cli

pytestmark = pytest.mark.timeout(120)


def _need(loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="the optional rmqrun[uvloop] extra is not installed")


def _other(loop: str) -> str:
    return "asyncio" if loop == "uvloop" else "uvloop"


@pytest.mark.parametrize("loop", LOOPS)
def test_rmqrun_broker_runs_on_the_loop_chosen_and_a_sigterm_saves_what_was_in_memory(tmp_path: Path,
                                                                                       loop: str) -> None:
    _need(loop)
    _need(_other(loop))
    data = tmp_path / "data"
    # async flush: what is not fsynced yet (messages, the offsets) reaches the disk at the broker's pace or at the stop
    args = ["broker", "--data-dir", str(data), "--namesrv-port", str(free_port()), "--broker-port", "0",
            "--flush", "async", "--event-loop", loop]
    with Child(args, tmp_path, name=f"broker-{loop}") as child:
        child.wait_output("RMQRUN_BROKER_READY", 60, stream="stdout")
        start = next(ln for ln in child.stderr.splitlines() if "name server on" in ln)
        assert f", event loop: {loop}" in start, start
        namesrv = child.stdout.split("namesrv=", 1)[1].split()[0]
        produce(namesrv, "EVL", 20)
        with PullConsumer(namesrv, "GEVL") as pc:
            queues = pc.fetch_subscribe_message_queues("EVL")
            maxes = {mq.queue_id: pc.max_offset(mq) for mq in queues}
            assert sum(maxes.values()) == 20
            for mq in queues:
                pc.update_consume_offset(mq, maxes[mq.queue_id])
            pc.persist_consume_offsets()
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    # the next life, on the other loop as python -m rmqrun.broker --event-loop: everything is there
    with BrokerProcess(data, flush_mode="async", event_loop=_other(loop), log_path=tmp_path / "again.log") as bp:
        with PullConsumer(bp.namesrv_address, "GEVL") as pc:
            queues = pc.fetch_subscribe_message_queues("EVL")
            assert {mq.queue_id: pc.max_offset(mq) for mq in queues} == maxes
            assert {mq.queue_id: pc.fetch_consume_offset(mq) for mq in queues} == maxes
        assert bp.stop() == 0
    log = (tmp_path / "again.log").read_text()  # (its start line comes after the READY line: read once it ended)
    assert f", event loop: {_other(loop)}" in log, log[-2000:]


def test_uvloop_asked_for_but_missing_exits_2_naming_the_flag(tmp_path: Path) -> None:
    env = env_without_uvloop(tmp_path)
    proc = run_cli(["broker", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0", "--broker-port", "0",
                    "--event-loop", "uvloop"], env=env, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("rmqrun: error: --event-loop=uvloop but uvloop is not installed "
                                   "(pip install 'rmqrun[uvloop]', or --event-loop auto / asyncio)")
    assert not (tmp_path / "data").exists(), "refused before anything started"


def test_an_unknown_loop_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli(["broker", "--data-dir", str(tmp_path / "data"), "--event-loop", "trio"], timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "Invalid value for '--event-loop': 'trio' is not one of 'auto', 'uvloop', 'asyncio'" in proc.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("loop", LOOPS)
def test_a_broker_on_a_thread_runs_on_the_loop_it_was_given(tmp_path: Path, loop: str) -> None:
    _need(loop)
    with EmbeddedBroker(tmp_path / "d", event_loop=loop) as eb:
        assert eb._loop is not None
        assert type(eb._loop).__module__.split(".")[0] == loop, type(eb._loop)
        produce(eb.namesrv_address, "EVT", 3)  # and it serves


def test_a_broker_on_a_thread_runs_on_auto_by_default(tmp_path: Path) -> None:
    expected = "uvloop" if _has_uvloop() else "asyncio"
    with EmbeddedBroker(tmp_path / "d") as eb:
        assert type(eb._loop).__module__.split(".")[0] == expected, type(eb._loop)


def test_an_unknown_loop_is_refused_before_the_thread_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"event_loop='trio' is invalid: one of auto, uvloop, asyncio"):
        EmbeddedBroker(tmp_path / "d", event_loop="trio")
    assert not (tmp_path / "d").exists()


def test_async_with_runs_on_the_running_loop(tmp_path: Path) -> None:
    async def main() -> str:
        async with EmbeddedBroker(tmp_path / "d", event_loop="uvloop" if _has_uvloop() else "asyncio"):
            return type(asyncio.get_running_loop()).__module__.split(".")[0]

    assert asyncio.run(main()) == "asyncio"  # the thread's choice is not the running loop's


def _has_uvloop() -> bool:
    return importlib.util.find_spec("uvloop") is not None
