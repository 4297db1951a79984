"""``rmqrun run`` started before its cluster exists waits for it; the CLI's exit codes.

The first test starts a real ``rmqrun run`` against name-server and broker
ports nobody listens on, under a fake systemd (NOTIFY_SOCKET), starts the
embedded broker on those ports about 10 s later and produces: every message
must be handled, READY=1 must come only after the broker is up, and while
waiting rmqrun reports ``STATUS=waiting for the cluster`` and logs the failure
once, not once per attempt. The others pin the exit-code table of
``config/README.md``: configuration error 2, a handler that cannot be loaded
3, anything else (a busy metrics port) 1, and the unit's restart policy.
"""

from __future__ import annotations

import re
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.integration.cli_kit import Child, child_env, free_port, run_args, run_cli, wait_for
from tests.integration.signals_kit import REPO, Runs, oks, produce, start_broker
from tests.integration.test_systemd_notify import FakeSystemd

pytestmark = pytest.mark.timeout(180)


def test_run_started_before_the_broker_waits_and_then_handles_everything(tmp_path: Path, runs: Runs) -> None:
    ns_port, broker_port = free_port(), free_port()
    systemd = FakeSystemd(str(tmp_path / "notify.sock"))
    record = tmp_path / "deliveries"
    eb = None
    try:
        run = runs.start("late", "tests.integration.handlers.probe_handler:record", namesrv=f"127.0.0.1:{ns_port}",
                         group="G_late", topic="Late", args=["--workers", "2"], ready_timeout=0,
                         settings={"RMQRUN_POLL_NAME_SERVER_INTERVAL_MS": "1000"},
                         env={"PROBE_RECORD": str(record), "NOTIFY_SOCKET": systemd.address})
        run.wait_log("cannot start consuming yet", 30, "the first failed start")

        def attempts() -> list[str] | None:
            """STATUS= of every attempt so far, once there are three (rmqrun must not give up meanwhile)."""
            assert run.poll() is None, f"rmqrun gave up while the cluster was down:\n{run.log()[-3000:]}"
            waiting = [f["STATUS"] for _, f in systemd.drain()
                       if f.get("STATUS", "").startswith("waiting for the cluster")]
            return waiting if len(waiting) >= 3 else None

        # three attempts, each reported (the broker comes only after them: counted, not timed)
        waiting = wait_for(attempts, 60, "three attempts reported in STATUS=")
        assert isinstance(waiting, list)
        assert "attempt 1," in waiting[0] and "127.0.0.1:" in waiting[0]
        assert systemd.first("READY") is None, "READY=1 before any broker existed"
        # once, not once per attempt (the interval is 30 s, longer than this wait)
        assert run.log().count("cannot start consuming yet") == 1, run.log()[-3000:]
        assert run.log().count(f"name server 127.0.0.1:{ns_port} unreachable") == 1, run.log()[-3000:]

        eb = start_broker(tmp_path, namesrv_port=ns_port, broker_port=broker_port)
        broker_up = time.monotonic()
        produce(eb, "Late", 40)
        ready = wait_for(lambda: systemd.first("READY", "1"), 60, "READY=1 after the broker came up")
        assert ready["STATUS"].startswith("consuming: ")
        t_ready = next(t for t, f in systemd.drain() if f.get("READY") == "1")
        assert t_ready > broker_up
        wait_for(lambda: len({d.idx for d in oks(record)}) == 40, 60, "all 40 messages handled")
        assert sorted(d.idx for d in oks(record)) == list(range(40)), "each message handled exactly once"
        assert "reached the cluster after" in run.log()
        run.signal(signal.SIGTERM)
        assert run.wait(30) == 0
    finally:
        systemd.close()
        if eb is not None:
            eb.stop_in_thread()


def test_sigterm_while_waiting_for_the_cluster_exits_0(tmp_path: Path, runs: Runs) -> None:
    run = runs.start("wait-term", "workers.noop:handle", namesrv=f"127.0.0.1:{free_port()}", group="G_t",
                     topic="T", args=["--workers", "1"], ready_timeout=0)
    run.wait_log("cannot start consuming yet", 30, "the first failed start")
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert "SIGTERM received while waiting for the cluster" in run.log()


# --------------------------------------------------------------------------- exit codes

def _documented_codes() -> dict[int, str]:
    text = (REPO / "config" / "README.md").read_text()
    table = text.split("### Exit codes", 1)[1]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| [^|]+ \| (yes|no)", table, re.M)}


def test_the_exit_code_table_matches_the_unit() -> None:
    codes = _documented_codes()
    assert set(codes) == {0, 1, 2, 3}
    unit = (REPO / "config" / "rmqrun.service").read_text()
    prevent = re.search(r"^RestartPreventExitStatus=(.*)$", unit, re.M)
    assert prevent is not None
    assert {int(c) for c in prevent.group(1).split()} == {c for c, restart in codes.items() if restart == "no" and c}
    assert re.search(r"^Restart=on-failure$", unit, re.M)


def test_a_configuration_error_exits_2(tmp_path: Path) -> None:
    done = run_cli(run_args(f"127.0.0.1:{free_port()}", "G", "T", "workers.noop:handle", "--workers", "abc"))
    assert done.returncode == 2 == _code_for("setting")
    assert "workers='abc'" in done.stderr


def test_a_handler_that_cannot_be_loaded_exits_3_without_waiting_for_the_cluster(tmp_path: Path) -> None:
    done = run_cli(run_args(f"127.0.0.1:{free_port()}", "G", "T", "workers.noop:no_such_function",
                            "--workers", "1"), timeout=60)
    assert done.returncode == 3 == _code_for("handler")
    assert "no_such_function" in done.stderr
    assert "waiting for the cluster" not in done.stderr  # it never waited (run_cli's 60 s would end a wait)


def test_a_busy_metrics_port_exits_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_cli(run_args(f"127.0.0.1:{free_port()}", "G", "T", "workers.noop:handle", "--workers", "1",
                                "--metrics-port", str(port)), timeout=60)
    assert done.returncode == 1 == _code_for("metrics port")
    assert f"metrics_port={port}" in done.stderr and "cannot listen" in done.stderr


def _code_for(words: str) -> int:
    text = (REPO / "config" / "README.md").read_text().split("### Exit codes", 1)[1]
    for m in re.finditer(r"^\| (\d+) \| ([^|]+) \|", text, re.M):
        if words in m.group(2):
            return int(m.group(1))
    raise AssertionError(f"no exit code in config/README.md mentions {words!r}")
