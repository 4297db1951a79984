"""The command line end to end: ``rmqrun produce --msg-trace``, ``rmqrun run --msg-trace``, ``rmqrun trace``.

A message sent by ``rmqrun produce --msg-trace`` and consumed by ``rmqrun run --msg-trace`` (a real
supervisor with worker processes) has its whole path in ``rmqrun trace MSGID``: the Pub of the producer
group, then the consumer group's SubBefore and SubAfter. A message without traces is exit 1 with a line
saying why; a bad trace topic is refused before anything is sent.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.integration.cli_kit import run_cli
from tests.integration.signals_kit import RmqrunProcess, start_broker, wait_until

pytestmark = pytest.mark.timeout(180)


def test_produce_run_and_trace_show_the_whole_path(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, trace_topic_enable=True)
    run: RmqrunProcess | None = None
    try:
        n = eb.namesrv_address
        sent = run_cli(["produce", "-n", n, "-t", "CliTrace", "--count", "1", "--keys", "order-{i}",
                        "--group", "PG_cli", "--msg-trace"])
        assert sent.returncode == 0, sent.stderr
        read = run_cli(["read", "-n", n, "-t", "CliTrace", "--format", "json"])
        (msg_id,) = [json.loads(line)["msg_id"] for line in read.stdout.splitlines()]
        run = RmqrunProcess(tmp_path, "run", "workers.noop:handle", namesrv=n, group="GCliTrace", topic="CliTrace",
                            args=["--workers", "1", "--msg-trace"]).start()

        def traced() -> list[dict]:  # type: ignore[type-arg]
            out = run_cli(["trace", msg_id, "-n", n, "--json"])
            return [json.loads(line) for line in out.stdout.splitlines()] if out.returncode == 0 else []
        # the records are sent half a second after the handler call at most: wait for them, not for time
        wait_until(lambda: [r["type"] for r in traced()] == ["Pub", "SubBefore", "SubAfter"], 60,
                   "the Pub, SubBefore and SubAfter of the message")
        rows = traced()
        assert (rows[0]["group"], rows[0]["topic"], rows[0]["keys"], rows[0]["status"]) == (
            "PG_cli", "CliTrace", "order-0", "success")
        assert [(r["group"], r["keys"]) for r in rows[1:]] == [("GCliTrace", "order-0")] * 2
        assert (rows[2]["status"], rows[2]["result"], rows[1]["retry_times"]) == ("success", "SUCCESS", 0)
        assert rows[1]["request_id"] == rows[2]["request_id"]
        table = run_cli(["trace", msg_id, "-n", n])
        assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:3] == ["TYPE", "GROUP", "CLIENT_HOST"]
        run.signal(signal.SIGTERM)
        assert run.wait(60) == 0
    finally:
        if run is not None:
            run.close()
        eb.stop_in_thread()


def test_no_trace_is_exit_1_and_a_bad_trace_topic_is_refused(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, trace_topic_enable=True)
    try:
        none = run_cli(["trace", "0A0B" * 8, "-n", eb.namesrv_address])
        assert none.returncode == 1 and "no trace of message" in none.stderr
        bad = run_cli(["produce", "-n", eb.namesrv_address, "-t", "T", "--count", "1", "--msg-trace",
                       "--msg-trace-topic", "no such"])
        assert bad.returncode == 2 and "--msg-trace-topic" in bad.stderr
        batch = run_cli(["produce", "-n", eb.namesrv_address, "-t", "T", "--count", "2", "--msg-trace",
                         "--batch", "2"])
        assert batch.returncode == 2 and "drop --batch" in batch.stderr
    finally:
        eb.stop_in_thread()
