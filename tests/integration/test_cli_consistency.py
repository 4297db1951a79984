"""One rule for the same thing in every command (issue #33 item 6), each through a real ``rmqrun`` child.

Group names up to 255 characters (Java's ``Validators.checkGroup``) wherever a group is taken; one bound for
``run --workers`` and ``demo --workers``; ``read`` and ``spark`` take the name server and topic from ``--config``
as ``run`` does; every system topic of the broker is protected from ``topic create|delete``; and
``produce --file`` keeps the file's order within each queue by default.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.topics import TopicConfig
from rmqrun.model import Message
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client, drain
from tests.integration.cli_kit import embedded_broker, free_port, produce, run_cli

pytestmark = pytest.mark.timeout(240)

CLOSED = f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("consistency")) as broker:
        yield broker


def stored(eb: Any, topic: str, queues: int, expect: int) -> list[Message]:
    async def main() -> list[Message]:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            await client.heartbeat("reader@1", "G_order_reader", {topic: "*"})
            return await drain(client, "G_order_reader", topic, queues, expect=expect, deadline_s=20)
        finally:
            await client.close()
    return asyncio.run(main())


@pytest.mark.parametrize("command", [
    ["status"], ["read", "--topic", "T"], ["offsets", "reset", "--topic", "T", "--to-earliest"],
    ["spark", "workers.noop:handle", "--topic", "T"], ["dlq", "list"],
])
def test_every_command_takes_a_group_of_255_characters_and_refuses_256(command: list[str]) -> None:
    """``run/check/status/exporter`` refused over 127 while ``read --group`` took 255 (Java's limit)."""
    longest = run_cli([*command, "--group", "G" * 255, "--namesrv", CLOSED], timeout=120)
    assert longest.returncode == 1 and "255" not in longest.stderr, (longest.returncode, longest.stderr)
    over = run_cli([*command, "--group", "G" * 256, "--namesrv", CLOSED])
    assert over.returncode == 2 and "255" in over.stderr and "Traceback" not in over.stderr, over.stderr


def test_run_and_check_take_a_group_of_255_characters() -> None:
    for command in (["check"], ["run"]):
        proc = run_cli([*command, "workers.noop:handle", "--topic", "T", "--group", "G" * 256, "--namesrv", CLOSED])
        said = proc.stdout + proc.stderr  # check reports on stdout
        assert proc.returncode == 2 and "(command line --group) is invalid" in said and "at most 255" in said, said
    proc = run_cli(["check", "workers.noop:handle", "--topic", "T", "--group", "G" * 200, "--namesrv", CLOSED],
                   timeout=120)
    said = proc.stdout + proc.stderr
    assert "ok    settings" in said and "(command line --group) is invalid" not in said, said


def test_run_and_demo_bound_workers_alike() -> None:
    run = run_cli(["run", "workers.noop:handle", "--topic", "T", "--group", "G", "--workers", "4097",
                   "--namesrv", CLOSED])
    demo = run_cli(["demo", "--workers", "4097"])
    assert run.returncode == demo.returncode == 2, (run.stderr, demo.stderr)
    assert "4096" in run.stderr and "4096" in demo.stderr, (run.stderr, demo.stderr)
    assert "1<=x<=4096" in run_cli(["demo", "--help"]).stdout


@pytest.mark.parametrize("topic", ["RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
                                   "TRANS_CHECK_MAX_TIME_TOPIC", "rmq_sys_anything", "TBW102",
                                   "SCHEDULE_TOPIC_XXXX"])
def test_system_topics_cannot_be_created_or_deleted(eb: Any, topic: str) -> None:
    for verb in ("create", "update", "delete"):
        extra = ["-q", "2"] if verb == "update" else []
        proc = run_cli(["topic", verb, topic, *extra, "--namesrv", eb.namesrv_address])
        assert proc.returncode == 2, (verb, proc.stdout, proc.stderr)
        assert f"{topic} is one of the broker's system topics" in proc.stderr, proc.stderr

    async def raw() -> tuple[int, int]:
        """The broker refuses them too, as Java's TopicValidator, whoever asks."""
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            made = await client.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            gone = await client.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
            return made.code, gone.code
        finally:
            await client.close()
    assert asyncio.run(raw()) == (ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_ERROR)


def test_read_and_spark_take_the_name_server_and_topic_from_config(eb: Any, tmp_path: Path) -> None:
    produce(eb.namesrv_address, "CfgRead", 3)
    config = tmp_path / "c.yaml"
    config.write_text(f"namesrv: {eb.namesrv_address}\ntopic: CfgRead\ngroup: GCfg\nhandler: workers.noop:handle\n")
    proc = run_cli(["read", "--config", str(config), "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(line)["body"] for line in proc.stdout.splitlines()) == ["m0", "m1", "m2"]
    committed = run_cli(["status", "--group", "GCfg", "--namesrv", eb.namesrv_address])
    assert committed.returncode == 1, "the config's group is never used: nothing was committed for it"
    # spark reads the same keys: a bad topic in the file is named with the file
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"namesrv: {eb.namesrv_address}\ntopic: 'no such'\nhandler: workers.noop:handle\n")
    proc = run_cli(["spark", "--config", str(bad)])
    assert proc.returncode == 2 and f"config file {bad}" in proc.stderr, proc.stderr


def test_produce_from_a_file_keeps_its_order_in_each_queue(eb: Any, tmp_path: Path) -> None:
    """Lines 1 and 2 were stored at offsets 2 and 1 of a 1-queue topic with the default --concurrency 64."""
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(300)))
    for topic, queues, extra in (("OrderOne", 1, []), ("OrderFour", 4, []), ("OrderBatch", 4, ["--batch", "7"])):
        eb.broker.topics.put(TopicConfig(topic, queues, queues))
        proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", topic, "--file", str(path), *extra])
        assert proc.returncode == 0 and proc.stdout.startswith("sent 300 message(s)"), proc.stdout + proc.stderr
        by_queue: dict[int, list[int]] = {}
        for m in sorted(stored(eb, topic, queues, 300), key=lambda m: (m.queue_id, m.queue_offset)):
            by_queue.setdefault(m.queue_id, []).append(int(m.body.split()[1]))
        assert sum(map(len, by_queue.values())) == 300 and len(by_queue) == queues, by_queue.keys()
        for q, lines in by_queue.items():
            assert lines == sorted(lines), (topic, extra, q, lines[:20])
