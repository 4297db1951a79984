"""``rmqrun run`` on each event loop: it consumes, stops on SIGTERM and says which loop it used."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.cli_kit import Child, child_env, env_without_uvloop, embedded_broker, produce, run_args, run_cli


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_run_consumes_and_stops_on_each_loop(tmp_path: Path, choice: str) -> None:
    if choice == "uvloop":
        pytest.importorskip("uvloop", reason="the optional rmqrun[uvloop] extra is not installed")
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "EL", 20)
        args = run_args(eb.namesrv_address, "GEL", "EL", "workers.noop:handle", "--workers", "2",
                        "--event-loop", choice)
        with Child(args, tmp_path, env=child_env(RMQRUN_STATUS_INTERVAL="0.2")) as child:
            child.wait_output(f"event loop: {choice}")
            child.wait_output(" 20 consumed", timeout=60)
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0
            assert "stopped: 20 messages consumed, 0 failed" in child.stderr


def test_uvloop_asked_for_but_missing_exits_2_naming_the_setting(tmp_path: Path) -> None:
    env = env_without_uvloop(tmp_path)
    proc = run_cli(["run", "workers.noop:handle", "--namesrv", "127.0.0.1:1", "--group", "G", "--topic", "T",
                    "--event-loop", "uvloop"], env=env, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("rmqrun: error: event_loop=uvloop but uvloop is not installed")
