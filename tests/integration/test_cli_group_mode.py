"""``rmqrun group mode`` as a real process against the embedded broker.

What the command did is read back from the broker's own table (and, for --list, compared with it).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.topics import TopicConfig
from rmqrun.protocol.assignment import MessageRequestMode
from rmqrun.remoting.codes import RequestCode
from tests.acl_kit import write_acl
from tests.integration.cli_kit import child_env, embedded_broker, run_cli

pytestmark = pytest.mark.timeout(180)


def mode_cli(eb: Any, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli(["group", "mode", *args, "--namesrv", eb.namesrv_address], env=env)


def test_set_list_and_refusals(tmp_path: Path) -> None:
    with embedded_broker(tmp_path) as eb:
        eb.broker.topics.put(TopicConfig("Orders", 2, 2))
        modes = eb.broker.processors.assignment.modes

        r = mode_cli(eb, "--list")  # nothing set yet: every group pulls
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "no message request mode is set: every group pulls (the broker default)"

        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "POP", "--pop-share-queue-num", "1")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == (f"group Scoring on topic Orders: POP, popShareQueueNum 1 on broker "
                                    f"{eb.broker_address}")
        got = modes.get("Orders", "Scoring")
        assert got is not None and (got.mode, got.pop_share_queue_num) == (MessageRequestMode.POP, 1)

        r = mode_cli(eb, "--list")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["BROKER", "TOPIC", "GROUP", "MODE", "POP_SHARE_QUEUE_NUM"]
        assert lines[1].split() == [eb.broker_address, "Orders", "Scoring", "POP", "1"]

        r = mode_cli(eb, "--group", "Scoring", "--topic", "Orders", "--mode", "pull")
        assert r.returncode == 0, r.stderr
        got = modes.get("Orders", "Scoring")
        assert got is not None and got.mode is MessageRequestMode.PULL
        r = mode_cli(eb, "--list", "--json")
        assert json.loads(r.stdout) == [{"broker": eb.broker_address, "topic": "Orders", "group": "Scoring",
                                         "mode": "PULL", "popShareQueueNum": 0}]

        # Refused by the broker: one line naming it, exit 1, nothing stored.
        r = mode_cli(eb, "-g", "Scoring", "-t", "Nope", "--mode", "pop")
        assert r.returncode == 1
        assert f"broker {eb.broker_address}: topic 'Nope' does not exist" in r.stderr, r.stderr
        r = mode_cli(eb, "-g", "Scoring", "-t", "%RETRY%Scoring", "--mode", "pop")
        assert r.returncode == 1 and "retry topic is not allowed to set mode" in r.stderr, r.stderr
        assert modes.get("Nope", "Scoring") is None and modes.get("%RETRY%Scoring", "Scoring") is None

        # Refused before any I/O: exit 2.
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "push")
        assert r.returncode == 2 and "'push' is not one of 'pop', 'pull'" in r.stderr, r.stderr
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders")
        assert r.returncode == 2 and "missing --mode pop|pull" in r.stderr, r.stderr
        r = mode_cli(eb, "-g", "Scoring", "--mode", "pop")
        assert r.returncode == 2 and "--mode needs the group and the topic" in r.stderr, r.stderr
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "pull", "--pop-share-queue-num", "2")
        assert r.returncode == 2 and "--mode pop only" in r.stderr, r.stderr
        got = modes.get("Orders", "Scoring")
        assert got is not None and got.mode is MessageRequestMode.PULL

        # A broker that does not know the codes (what a 4.x broker answers): the operator is told why.
        for code in (RequestCode.SET_MESSAGE_REQUEST_MODE, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE):
            del eb.broker.server.processors[int(code)]
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "pop")
        assert r.returncode == 1
        assert "does not support SET_MESSAGE_REQUEST_MODE" in r.stderr and "RocketMQ 5.x" in r.stderr, r.stderr
        r = mode_cli(eb, "--list")
        assert r.returncode == 1
        assert "does not support GET_ALL_MESSAGE_REQUEST_MODE" in r.stderr and "RocketMQ 5.x" in r.stderr, r.stderr
        # and no 'every group pulls' beside it (seen against a real 4.9.8 broker): nothing answered to say so
        assert r.stdout == "", r.stdout


def test_acl_refusal_is_one_line(tmp_path: Path) -> None:
    acl = write_acl(tmp_path / "acl.yml", textwrap.dedent("""\
        accounts:
          - accessKey: ops-admin
            secretKey: 'ops-Secret-1234'
            admin: true
        """))
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl)).start_in_thread()
    try:
        eb.broker.topics.put(TopicConfig("Orders", 2, 2))
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "pop",
                     env=child_env(RMQRUN_ACCESS_KEY="ops-admin", RMQRUN_SECRET_KEY="wrong-Secret-9999"))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "access denied" in r.stderr.lower() and "ops-admin" in r.stderr, r.stderr
        assert "wrong-Secret" not in r.stdout + r.stderr
        assert eb.broker.processors.assignment.modes.get("Orders", "Scoring") is None
        r = mode_cli(eb, "-g", "Scoring", "-t", "Orders", "--mode", "pop",
                     env=child_env(RMQRUN_ACCESS_KEY="ops-admin", RMQRUN_SECRET_KEY="ops-Secret-1234"))
        assert r.returncode == 0, r.stderr
        assert eb.broker.processors.assignment.modes.get("Orders", "Scoring") is not None
    finally:
        eb.stop_in_thread()
