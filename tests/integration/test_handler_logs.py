"""A handler's own output goes through rmqrun's logging, labelled with the message it is handling.

A real ``rmqrun run`` consumes from the embedded broker with
``tests.integration.handlers.chatty_handler:handle``, which logs at DEBUG, INFO,
WARNING and ERROR, prints, writes to ``sys.stderr`` and calls
``warnings.warn`` for every message. In JSON mode every line rmqrun writes
must be one JSON object, and each handler line must carry the worker id and
the topic, queue and offset the producer was told it stored the message at;
below the configured level nothing shows. In text mode the lines are
readable and carry the same labels.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path

import pytest

from rmqrun.client.producer import Producer
from tests.integration.cli_kit import Child, embedded_broker, run_args, wait_for

pytestmark = pytest.mark.timeout(120)
HANDLER = "tests.integration.handlers.chatty_handler:handle"
N = 4


def send(namesrv: str, topic: str, n: int) -> dict[str, tuple[str, int, int]]:
    """Body → (broker, queue id, queue offset) where the broker stored it."""
    async def main() -> dict[str, tuple[str, int, int]]:
        out = {}
        async with Producer(namesrv, "PG_handler_logs") as producer:
            for i in range(n):
                r = await producer.send(topic, f"m{i}".encode())
                out[f"m{i}"] = (r.queue.broker_name, r.queue.queue_id, r.queue_offset)
        return out
    return asyncio.run(main())


def run_chatty(tmp_path: Path, topic: str, *extra: str) -> tuple[str, dict[str, tuple[str, int, int]]]:
    """Consume N messages with the chatty handler, stop with SIGTERM: rmqrun's stderr (stdout must be empty)
    and where each message was stored."""
    with embedded_broker(tmp_path) as eb:
        stored = send(eb.namesrv_address, topic, N)
        args = run_args(eb.namesrv_address, "G" + topic, topic, HANDLER, "--workers", "2", *extra)
        with Child(args, tmp_path) as child:
            wait_for(lambda: child.stderr.count("chatty-error") >= N, 60, f"{N} handler error lines")
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0
            assert child.stdout == "", f"the handler's print reached stdout: {child.stdout!r}"
            return child.stderr, stored


def test_handler_lines_are_json_objects_with_worker_and_message(tmp_path: Path) -> None:
    err, stored = run_chatty(tmp_path, "HLJ", "--log-format", "json", "--log-level", "INFO")
    records = []
    for line in err.splitlines():
        try:
            records.append(json.loads(line)["record"])
        except (ValueError, KeyError) as exc:
            raise AssertionError(f"not one JSON log object per line: {line!r}") from exc
    seen: dict[tuple[str, str], str] = {}
    for rec in records:
        m = re.search(r"chatty-(\w+) (m\d+)", rec["message"])
        if not m:
            continue
        kind, body = m.groups()
        extra = rec["extra"]
        assert isinstance(extra["worker_id"], int) and extra["pid"] > 0, rec
        assert (extra["topic"], extra["broker"], extra["queue"], extra["offset"]) == ("HLJ", *stored[body]), rec
        assert (kind, body) not in seen, f"{kind} line for {body} twice"
        seen[(kind, body)] = rec["level"]["name"]
    expected = {"info": "INFO", "warning": "WARNING", "error": "ERROR", "print": "INFO", "stderr": "WARNING",
                "warn": "WARNING"}
    for body in stored:
        got = {kind: level for (kind, b), level in seen.items() if b == body}
        # warnings.warn shows once per call site (Python's default filter), in whichever worker got there first
        if "warn" not in got:
            expected_here = {k: v for k, v in expected.items() if k != "warn"}
        else:
            expected_here = expected
        assert got == expected_here, f"{body}: {got}"
    assert any(kind == "warn" for kind, _ in seen), "warnings.warn never reached the log"
    assert "chatty-debug" not in err, "a DEBUG line shown at level INFO"
    # the error line's braces are the handler's text, not a loguru format field
    assert any("{not a format field}" in r["message"] for r in records)


def test_handler_lines_in_text_mode_are_readable_and_filtered_by_level(tmp_path: Path) -> None:
    err, stored = run_chatty(tmp_path, "HLT", "--log-level", "WARNING")
    for body, (broker, queue, offset) in stored.items():
        for kind, level in (("warning", "WARNING"), ("error", "ERROR"), ("stderr", "WARNING")):
            pattern = (rf"^\S+ \S+ \| {level} +\| worker \d+ pid \d+ \| HLT {re.escape(broker)}:{queue}@{offset} \| "
                       rf".*chatty-{kind} {body}\b")
            assert re.search(pattern, err, re.M), f"no readable {kind} line for {body}:\n{err[-3000:]}"
    for below in ("chatty-debug", "chatty-info", "chatty-print"):
        assert below not in err, f"{below} shown at level WARNING"
    assert "Traceback" not in err
