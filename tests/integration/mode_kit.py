"""Helpers for the tests of an instance's mode against the broker's table: set a group's mode, count log lines.

``set_mode`` sends what ``rmqrun group mode --mode pop|pull`` sends (SET_MESSAGE_REQUEST_MODE) straight to the
embedded broker; ``set_mode_cli`` runs the command itself, as an operator would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.assignment import AssignmentClient
from rmqrun.client.instance import ClientInstance
from rmqrun.protocol.assignment import MessageRequestMode
from tests.integration.signals_kit import REPO


def set_mode(eb: EmbeddedBroker, group: str, topic: str, mode: MessageRequestMode) -> None:
    async def main() -> None:
        inst = ClientInstance(eb.namesrv_address, instance_name="set-mode")
        try:
            await AssignmentClient(inst.pool).set_message_request_mode(eb.broker_address, topic, group, mode)
        finally:
            await inst.close()
    asyncio.run(main())


def _cli(eb: EmbeddedBroker, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-m", "rmqrun.cli.main", *args, "--namesrv", eb.namesrv_address],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def set_mode_cli(eb: EmbeddedBroker, group: str, topic: str, mode: str) -> str:
    """``rmqrun group mode --group G --topic T --mode MODE``; its output (it must succeed)."""
    return _cli(eb, "group", "mode", "--group", group, "--topic", topic, "--mode", mode)


def create_topic_cli(eb: EmbeddedBroker, topic: str, queues: int) -> str:
    """``rmqrun topic create T -q N``: an empty topic, so the first messages come once the group has settled."""
    return _cli(eb, "topic", "create", topic, "-q", str(queues))


def lines_with(log: str, *parts: str) -> list[str]:
    """The log's lines that contain every one of ``parts``."""
    return [line for line in log.splitlines() if all(p in line for p in parts)]
