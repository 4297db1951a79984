"""A hung broker and name server (SIGSTOP, then SIGCONT) are folded as dead ones are (issue #33, item 9).

A stopped process keeps its sockets: connections still open, requests get no
answer. That used to log a ``closing connection ... got no answer in 3s``
line per request, a ``route refresh of T failed`` warning per topic per
refresh (growing with the topic count), never an incident for the name server
nor its end, and on resume one "members of G changed" line per notice the
broker had queued. Now: one incident line for the name server, one for the
broker, one recovery line each, one rebalance line; no warning per topic.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path

import pytest

from rmqrun.broker.app import BrokerProcess
from tests.integration import engine_kit
from tests.integration.cli_kit import Child, child_env, run_args, wait_for

pytestmark = pytest.mark.timeout(240)
TOPICS = [f"Hung{i}" for i in range(4)]


def _lines(text: str, level: str) -> list[str]:
    return [ln for ln in text.splitlines() if re.match(rf"\d{{4}}-\d\d-\d\d [\d:.]+ \| {level}", ln)]


def test_a_hung_broker_and_name_server_are_one_incident_each(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "broker", auto_create_queue_nums=2).start()
    stopped = False
    try:
        for topic in TOPICS:
            asyncio.run(engine_kit.produce(bp.namesrv_address, topic, 2))
        extra = [arg for topic in TOPICS[1:] for arg in ("--topic", topic)]
        env = child_env(RMQRUN_POLL_NAME_SERVER_INTERVAL_MS="500", RMQRUN_READY_BROKER_TIMEOUT="5",
                        RMQRUN_LOG_LEVEL="DEBUG", RMQRUN_STATUS_INTERVAL="0")
        with Child(run_args(bp.namesrv_address, "G_hung", TOPICS[0], "workers.noop:handle", "--workers", "1",
                            *extra), tmp_path, env=env) as child:
            child.wait_output("consuming ", 60)
            wait_for(lambda: "rebalance: now consuming" in child.stderr, 30, "the first rebalance")
            mark = len(child.stderr)
            os.kill(bp.proc.pid, signal.SIGSTOP)
            stopped = True
            wait_for(lambda: f"name server {bp.namesrv_address} not answering: " in child.stderr[mark:], 60,
                     "the name server's incident")
            wait_for(lambda: f"broker {bp.broker_address} unreachable: " in child.stderr[mark:], 60,
                     "the broker's incident")
            # every topic's refresh failed at least twice more: what used to be a warning each
            wait_for(lambda: all(child.stderr[mark:].count(f"route refresh of {t} failed") >= 2 for t in TOPICS),
                     120, "two more route refreshes of every topic")
            hung = child.stderr[mark:]
            # the recovery lines come after this mark: taken before the resume, not after it (under load the
            # name server's recovery was logged before a mark taken after SIGCONT, and never seen past it)
            mark = len(child.stderr)
            os.kill(bp.proc.pid, signal.SIGCONT)
            stopped = False
            warnings = _lines(hung, "WARNING") + _lines(hung, "ERROR")
            # the name server, the broker, not ready (and perhaps an offset commit's incident): never one per topic
            assert len(warnings) <= 6, "\n".join(warnings)
            assert not [w for w in warnings if "route refresh" in w or "closing connection" in w], warnings

            wait_for(lambda: f"name server {bp.namesrv_address} recovered after " in child.stderr[mark:], 60,
                     "the name server's recovery")
            wait_for(lambda: f"broker {bp.broker_address} recovered after " in child.stderr[mark:], 60,
                     "the broker's recovery")
            wait_for(lambda: "ready again: consuming" in child.stderr[mark:], 60, "ready again")
            after = _lines(child.stderr[mark:], "INFO")
            changed = [ln for ln in after if "members of G_hung changed" in ln]
            assert len(changed) <= 1, changed
            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
    finally:
        if stopped:
            os.kill(bp.proc.pid, signal.SIGCONT)
        bp.kill()
