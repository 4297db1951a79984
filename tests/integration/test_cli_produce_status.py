"""``rmqrun produce`` and ``rmqrun status`` against a real embedded broker.

What ``produce`` sent is read back with raw pulls (tests/integration/broker_kit.py),
so tags, keys, properties, bodies and the queue chosen by a sharding key are
checked as the broker stored them. ``status`` is checked against offsets the
test commits itself.
"""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.model import Message, MessageQueue
from rmqrun.remoting.errors import TopicNotExistError
from tests.integration.broker_kit import Client, drain
from tests.integration.cli_kit import RMQRUN, ROOT, child_env, embedded_broker, produce, run_cli


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("produce")) as broker:
        yield broker


def stored(eb, topic: str, expect: int) -> list[Message]:  # type: ignore[no-untyped-def]
    async def main() -> list[Message]:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            await client.heartbeat("reader@1", "G_reader", {topic: "*"})
            return await drain(client, "G_reader", topic, 4, expect=expect, deadline_s=10)
        finally:
            await client.close()
    return asyncio.run(main())


def test_generated_messages_with_tags_keys_properties(eb) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "PT", "--count", "40", "--tags", "TagA",
                    "--keys", "order-{i}", "--property", "source=test", "--property", "n=1=2",
                    "--body", "payload {i} of 40"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sent 40 message(s) to PT in ") and proc.stdout.rstrip().endswith("0 failed")
    assert proc.stderr == "", "no progress bar when stderr is not a terminal"
    msgs = stored(eb, "PT", 40)
    assert len(msgs) == 40
    bodies = sorted(m.body.decode() for m in msgs)
    assert bodies == sorted(f"payload {i} of 40" for i in range(40))
    for m in msgs:
        i = int(m.body.decode().split()[1])
        assert m.tags == "TagA" and m.keys == f"order-{i}"
        assert m.properties["source"] == "test" and m.properties["n"] == "1=2"
    assert len({m.queue_id for m in msgs}) == 4, "without a sharding key messages spread over the queues"


def test_sharding_key_keeps_each_key_in_one_queue_in_order(eb) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "OT", "--count", "60",
                    "--sharding-key", "user-{i%5}", "--body", "{i}", "--concurrency", "16"])
    assert proc.returncode == 0, proc.stderr
    msgs = stored(eb, "OT", 60)
    queues: dict[int, set[int]] = defaultdict(set)
    order: dict[int, list[int]] = defaultdict(list)
    for m in sorted(msgs, key=lambda m: (m.queue_id, m.queue_offset)):
        i = int(m.body)
        queues[i % 5].add(m.queue_id)
        order[i % 5].append(i)
    assert all(len(q) == 1 for q in queues.values()), queues
    for key, seq in order.items():
        assert seq == sorted(seq) and len(seq) == 12, f"key {key} out of order: {seq}"


def test_lines_of_stdin_and_file_and_batches(eb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "LT"], input=b"alpha\nbeta\r\ngamma")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sent 3 message(s)")
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "LT", "--file", str(path),
                    "--count", "50", "--batch", "16"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sent 50 message(s)")
    bodies = {m.body for m in stored(eb, "LT", 53)}
    assert {b"alpha", b"beta", b"gamma"} <= bodies
    assert {b"line %d" % i for i in range(50)} <= bodies and b"line 50" not in bodies


@pytest.mark.parametrize("args, message", [
    (["--property", "novalue"], "--property 'novalue': expected KEY=VALUE"),
    (["--property", "TAGS=x"], "TAGS is a system property"),
    (["--batch", "4", "--sharding-key", "k"], "--batch cannot be combined with --sharding-key"),
    (["--keys", "k{i%0}"], "divides by zero"),
    (["--topic", "bad topic"], "topic='bad topic' (command line --topic) is invalid"),
])
def test_bad_produce_options_are_exit_2(eb, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    base = ["produce", "--namesrv", eb.namesrv_address, "--count", "1"]
    if "--topic" not in args:
        base += ["--topic", "XT"]
    proc = run_cli(base + args)
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--keys", "order-1\x02__STARTDELIVERTIME\x019999999999999"],
     "--keys contains the control character \\x02 (U+0002), which RocketMQ uses to separate properties"),
    (["--keys", "k1\x02DELAY\x013"], "--keys contains the control character \\x02 (U+0002)"),
    (["--tags", "a\x01b"], "--tags contains the control character \\x01 (U+0001), which RocketMQ uses to "
                           "separate a property's name from its value"),
    (["--sharding-key", "s\x02DELAY\x011"], "--sharding-key contains the control character \\x02"),
    (["--property", "k=v\x02DELAY\x013"], "--property 'k': its value contains the control character \\x02"),
    (["--tags", "T\udcff"], "--tags is not valid UTF-8 text"),  # the bytes T 0xff on the command line
])
def test_a_separator_in_keys_tags_or_properties_is_refused_and_nothing_is_sent(
        eb, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    """A key holding ``\\x02DELAY\\x013`` would become keys plus a delay property: exit 2, the option named."""
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--count", "1", "--topic", "SepT", *args])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr

    async def route_exists() -> bool:
        inst = ClientInstance(eb.namesrv_address, instance_name="route-probe")
        try:
            await inst.get_route("SepT")
            return True
        except TopicNotExistError:
            return False
        finally:
            await inst.close()
    assert not asyncio.run(route_exists()), "the refused run sent something (the broker created the topic)"


def test_nothing_to_send_without_count_file_or_stdin(eb) -> None:  # type: ignore[no-untyped-def]
    # stdin is empty (not a terminal): zero lines is a valid, empty send
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "XT"], input=b"")
    assert proc.returncode == 0 and proc.stdout.startswith("sent 0 message(s)")


def _commit(eb, group: str, topic: str, offsets: dict[int, int]) -> dict[int, int]:  # type: ignore[no-untyped-def]
    """Commit min(offset, max) for the given queues; returns every queue's max offset."""
    async def main() -> dict[int, int]:
        inst = ClientInstance(eb.namesrv_address, instance_name="committer")
        try:
            highs = {}
            for qid in range(4):
                mq = MessageQueue(topic, "broker-a", qid)
                highs[qid] = await inst.broker.get_max_offset(eb.broker_address, mq)
                if qid in offsets:
                    await inst.broker.update_consumer_offset(eb.broker_address, group, mq,
                                                             min(offsets[qid], highs[qid]), oneway=False)
            return highs
        finally:
            await inst.close()
    return asyncio.run(main())


def _rows(out: str) -> dict[str, list[str]]:
    return {" ".join(line.split()[:3]): line.split() for line in out.splitlines()[3:] if line.strip()
            and not line.startswith("-")}


def test_status_per_queue_and_totals(eb) -> None:  # type: ignore[no-untyped-def]
    produce(eb.namesrv_address, "ST", 40)  # round robin: about 10 per queue
    high = _commit(eb, "GST", "ST", {0: 100, 1: 4, 3: 7})
    assert sum(high.values()) == 40 and min(high.values()) >= 7
    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", "GST", "--topic", "ST"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "group GST"
    assert lines[1].split() == ["topic", "broker", "queue", "broker", "offset", "consumer", "offset", "lag",
                                "consumed", "up", "to", "(UTC)"]
    rows = _rows(proc.stdout)
    assert rows["ST broker-a 0"][3:6] == [str(high[0]), str(high[0]), "0"]
    assert rows["ST broker-a 1"][3:6] == [str(high[1]), "4", str(high[1] - 4)]
    assert rows["ST broker-a 3"][3:6] == [str(high[3]), "7", str(high[3] - 7)]
    # the store time of the message before the consumer offset (mqadmin's #LastTime), to the second, in UTC
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert rows["ST broker-a 1"][6] == today and re.fullmatch(r"\d\d:\d\d:\d\d", rows["ST broker-a 1"][7])
    # never committed: the broker answers 0 (Java's rule for a queue still starting at 0) or nothing ("-")
    q2 = rows["ST broker-a 2"][3:6]
    assert q2[0] == str(high[2]) and q2[1] in ("0", "-") and q2[2] == str(high[2])
    committed = high[0] + 4 + 7
    total = lines[-1].split()
    assert total == ["total", "4", "40", str(committed), str(40 - committed)]

    # without --topic, the group's topics are found through the name server and the broker
    found = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", "GST"])
    assert found.returncode == 0, found.stderr
    assert _rows(found.stdout) == rows


def test_status_errors(eb) -> None:  # type: ignore[no-untyped-def]
    produce(eb.namesrv_address, "SE", 4)
    _commit(eb, "GSE", "SE", {0: 1})  # a known group of its own: the test runs alone too
    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", "GSE", "--topic", "NoSuchTopic"])
    assert proc.returncode == 1 and "topic 'NoSuchTopic' does not exist" in proc.stderr
    proc = run_cli(["status", "--namesrv", eb.namesrv_address])
    assert proc.returncode == 2 and "missing group (--group)" in proc.stderr
    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", "NobodyEver"])
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("rmqrun: error: consumer group 'NobodyEver' is unknown: no broker has stored "
                                   "offsets or online consumers for it")


def test_progress_bar_when_stderr_is_a_terminal(eb) -> None:  # type: ignore[no-untyped-def]
    master, slave = pty.openpty()
    proc = subprocess.Popen([*RMQRUN, "produce", "--namesrv", eb.namesrv_address, "--topic", "BT", "--count", "500"],
                            stdout=subprocess.PIPE, stderr=slave, env=child_env(), cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    bar = b"".join(chunks).decode()
    assert "sending to BT" in bar and "500/500" in bar
    assert out.decode().startswith("sent 500 message(s) to BT")
