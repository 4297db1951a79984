"""``rmqrun read`` as a real child process against the embedded broker (real TCP, real signals)."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.model import MessageQueue
from tests.integration.cli_kit import Child, child_env, free_port, run_cli, wait_for
from tests.integration.signals_kit import start_broker

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("read"))
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def send(eb: EmbeddedBroker, topic: str, items: Sequence[tuple[int, str | None, bytes]]) -> list:  # type: ignore[type-arg]
    async def main() -> list:  # type: ignore[type-arg]
        async with Producer(eb.namesrv_address, "PG_read_tests") as producer:
            return [await producer.send(topic, body, tags=tags, keys=f"k{i}", properties={"i": str(i)}, queue=qid)
                    for i, (qid, tags, body) in enumerate(items)]
    return asyncio.run(main())


def read(eb: EmbeddedBroker, topic: str, *args: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    return run_cli(["read", "--namesrv", eb.namesrv_address, "--topic", topic, *args], timeout=timeout)


def json_lines(stdout: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture(scope="module")
def history(eb: EmbeddedBroker) -> list:  # type: ignore[type-arg]
    """RT_hist: 8 messages over 4 queues, tags A/B, one binary and one multi-line body."""
    items: list[tuple[int, str | None, bytes]] = [
        (0, "A", b"m0"), (1, "B", b"m1"), (2, "A", b"m2"), (3, None, b"m3"),
        (0, "B", b"line1\nline2"), (1, "A", bytes(range(250, 256)) + b"\x00"), (2, "B", b"m6"), (3, "A", b"m7"),
    ]
    return send(eb, "RT_hist", items)


def test_text_reads_the_whole_topic_in_store_time_order(eb: EmbeddedBroker, history: list) -> None:  # type: ignore[type-arg]
    r = read(eb, "RT_hist")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 8
    first = lines[0]
    assert first.startswith("broker-a:0@0 id=" + history[0].msg_id + " tags=A keys=k0 stored=")
    assert first.endswith(" body=m0")
    assert any(line.endswith("body=line1\\nline2") for line in lines)  # one message, one line
    assert any(line.endswith("body=\\xfa\\xfb\\xfc\\xfd\\xfe\\xff\\x00") for line in lines)
    stored = [line.split(" stored=")[1].split(" ")[0] for line in lines]
    assert stored == sorted(stored)
    assert "8 message(s)" in r.stderr


def test_json_has_every_field_and_says_how_the_body_is_encoded(eb: EmbeddedBroker, history: list) -> None:  # type: ignore[type-arg]
    r = read(eb, "RT_hist", "--format", "json")
    assert r.returncode == 0, r.stderr
    records = json_lines(r.stdout)
    by_id = {rec["msg_id"]: rec for rec in records}
    assert set(by_id) == {s.msg_id for s in history}
    rec = by_id[history[0].msg_id]
    assert (rec["topic"], rec["broker"], rec["queue_id"], rec["queue_offset"]) == ("RT_hist", "broker-a", 0, 0)
    assert (rec["tags"], rec["keys"], rec["properties"]["i"]) == ("A", "k0", "0")
    assert rec["offset_msg_id"] == history[0].offset_msg_id
    assert rec["body"] == "m0" and rec["body_encoding"] == "utf-8"
    assert rec["store_timestamp"] >= rec["born_timestamp"] > 0 and rec["reconsume_times"] == 0
    binary = by_id[history[5].msg_id]
    assert binary["body_encoding"] == "base64"
    assert base64.b64decode(binary["body"]) == bytes(range(250, 256)) + b"\x00"
    assert by_id[history[3].msg_id]["tags"] is None


def test_count_tags_and_queue(eb: EmbeddedBroker, history: list) -> None:  # type: ignore[type-arg]
    r = read(eb, "RT_hist", "--count", "3", "--format", "json")
    assert r.returncode == 0 and len(json_lines(r.stdout)) == 3
    tagged = json_lines(read(eb, "RT_hist", "--tags", "A", "--format", "json").stdout)
    assert sorted(rec["msg_id"] for rec in tagged) == sorted(history[i].msg_id for i in (0, 2, 5, 7))
    one_queue = json_lines(read(eb, "RT_hist", "--queue", "2", "--format", "json").stdout)
    assert [(rec["queue_id"], rec["queue_offset"]) for rec in one_queue] == [(2, 0), (2, 1)]
    both = json_lines(read(eb, "RT_hist", "--queue", "1", "--tags", "B || C", "--format", "json").stdout)
    assert [rec["msg_id"] for rec in both] == [history[1].msg_id]


def test_from_latest_offset_and_time(eb: EmbeddedBroker) -> None:
    topic = "RT_from"
    older = send(eb, topic, [(q, None, f"old{q}".encode()) for q in range(4)])
    r = read(eb, topic, "--format", "json")
    cut = max(rec["store_timestamp"] for rec in json_lines(r.stdout)) + 1
    wait_for(lambda: time.time() * 1000 > cut + 5, what="the clock to pass the cut")
    newer = send(eb, topic, [(q, None, f"new{q}".encode()) for q in range(4)])

    latest = read(eb, topic, "--from", "latest")
    assert latest.returncode == 0 and latest.stdout == ""
    by_offset = json_lines(read(eb, topic, "--from", "1", "--format", "json").stdout)
    assert sorted(rec["msg_id"] for rec in by_offset) == sorted(s.msg_id for s in newer)
    beyond = read(eb, topic, "--from", "7", "--queue", "0")
    assert beyond.returncode == 0 and beyond.stdout == "" and "outside [0, 2]" in beyond.stderr
    for start in (str(cut), datetime.fromtimestamp(cut / 1000, timezone.utc).isoformat(timespec="milliseconds")):
        timed = json_lines(read(eb, topic, "--from", start, "--format", "json").stdout)
        # the broker's search answers the nearest message; read shows only those stored at or after the time
        assert sorted(rec["msg_id"] for rec in timed) == sorted(s.msg_id for s in newer), start
    everything = json_lines(read(eb, topic, "--from", "earliest", "--format", "json").stdout)
    assert len(everything) == len(older) + len(newer)


def test_reading_commits_nothing(eb: EmbeddedBroker, history: list) -> None:  # type: ignore[type-arg]
    assert read(eb, "RT_hist").returncode == 0

    async def offsets() -> list[int | None]:
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-read")
        try:
            return [await inst.broker.query_consumer_offset(eb.broker_address, "rmqrun_read",
                                                            MessageQueue("RT_hist", "broker-a", q))
                    for q in range(4)]
        finally:
            await inst.close()
    assert asyncio.run(offsets()) == [0, 0, 0, 0]  # a group that never committed (the broker's 0)
    assert eb.broker.store.consumer_offsets.offsets("rmqrun_read", "RT_hist") == {}  # nothing stored at all


def held_on(eb: EmbeddedBroker, topic: str) -> int:
    """Pulls the broker holds on ``topic`` now (per topic: another test's dying pulls do not count)."""
    return sum(len(pulls) for (t, _), pulls in list(eb.broker.hold._held.items()) if t == topic)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_follow_prints_new_messages_until_a_signal(eb: EmbeddedBroker, tmp_path: Path, sig: int) -> None:
    topic = f"RT_follow_{sig}"
    send(eb, topic, [(0, None, b"before")])
    args = ["read", "--namesrv", eb.namesrv_address, "--topic", topic, "--from", "latest", "--follow",
            "--format", "json"]
    with Child(args, tmp_path) as child:
        child.wait_output("following")
        wait_for(lambda: held_on(eb, topic) == 4, what="a held pull on each of the 4 queues")
        sent = send(eb, topic, [(q, None, f"live{q}".encode()) for q in range(4)])
        wait_for(lambda: len(child.stdout.splitlines()) >= 4, what="4 lines of output")
        child.signal(sig)
        assert child.wait(30) == 0, child.stderr
    records = json_lines(child.stdout)
    assert sorted(rec["msg_id"] for rec in records) == sorted(s.msg_id for s in sent)
    assert "Traceback" not in child.stderr and "stopped by signal" in child.stderr


def test_follow_with_count_ends_by_itself(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic = "RT_follow_count"
    send(eb, topic, [(1, None, b"old")])
    args = ["read", "--namesrv", eb.namesrv_address, "--topic", topic, "--follow", "--count", "3"]
    with Child(args, tmp_path) as child:
        wait_for(lambda: len(child.stdout.splitlines()) >= 1, what="the backlog line")
        send(eb, topic, [(2, None, b"n1"), (3, None, b"n2"), (0, None, b"n3")])
        assert child.wait(30) == 0, child.stderr
    lines = child.stdout.splitlines()
    assert len(lines) == 3 and lines[0].endswith("body=old")


def test_follow_survives_a_broker_restart(tmp_path: Path) -> None:
    topic = "RT_restart"
    ports = {"namesrv_port": free_port(), "broker_port": free_port()}
    broker = start_broker(tmp_path / "restart", **ports)
    try:
        send(broker, topic, [(0, None, b"one")])
        args = ["read", "--namesrv", broker.namesrv_address, "--topic", topic, "--queue", "0", "--follow"]
        with Child(args, tmp_path) as child:
            wait_for(lambda: held_on(broker, topic) == 1, what="the follow pull to be held")
            broker.stop_in_thread()
            child.wait_output("retrying every")
            assert child.proc.poll() is None, child.stderr
            broker = start_broker(tmp_path / "restart", **ports)  # same ports, same data
            send(broker, topic, [(0, None, b"two")])
            wait_for(lambda: len(child.stdout.splitlines()) >= 2, timeout=60, what="the message sent after the restart")
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0, child.stderr
        assert [line.rsplit("body=", 1)[1] for line in child.stdout.splitlines()] == ["one", "two"]
        assert "reading again" in child.stderr
    finally:
        broker.stop_in_thread()


@pytest.mark.parametrize("args, option", [
    (["--from", "yesterday"], "--from 'yesterday'"),
    (["--from", "-4"], "--from '-4'"),
    (["--count", "0"], "--count '0' must be >= 1"),
    (["--count", "many"], "--count 'many' is not an integer"),
    (["--queue", "-1"], "--queue '-1' must be >= 0"),
    (["--queue", "9"], "--queue 9: topic 'RT_hist' has queues 0-3"),
    (["--format", "xml"], "--format 'xml' is not one of: text, json"),
    (["--tags", "||"], "--tags '||'"),
])
def test_bad_option_values_are_one_line_and_exit_2(eb: EmbeddedBroker, history: list, args: list[str],  # type: ignore[type-arg]
                                                   option: str) -> None:
    r = read(eb, "RT_hist", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqrun: error: ") and option in lines[0], r.stderr
    assert r.stdout == ""


def test_missing_topic_namesrv_and_unknown_topic(eb: EmbeddedBroker) -> None:
    r = run_cli(["read", "--namesrv", eb.namesrv_address])
    assert r.returncode == 2 and r.stderr.strip() == "rmqrun: error: missing --topic"
    env = child_env()
    env.pop("NAMESRV_ADDR", None)
    r = run_cli(["read", "--topic", "T"], env=env)
    assert r.returncode == 2 and "--namesrv" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli(["read", "--topic", "RT_hist", "--namesrv", "not-an-address"])
    assert r.returncode == 2 and "--namesrv 'not-an-address'" in r.stderr
    # -n is the name server, as in mqadmin (it was the count here): a number says what -n is now
    r = run_cli(["read", "-t", "RT_hist", "-n", "5"])
    assert r.returncode == 2 and "--namesrv '5'" in r.stderr, r.stderr
    assert "(-n is the name server, as in mqadmin; a count is --count)" in r.stderr
    r = run_cli(["produce", "-t", "RT_hist", "-n", "5"])
    assert r.returncode == 2 and "(-n is the name server, as in mqadmin; a count is --count)" in r.stderr, r.stderr
    r = run_cli(["read", "--topic", "RT_nowhere"], env=child_env(NAMESRV_ADDR=eb.namesrv_address))
    assert r.returncode == 1 and "'RT_nowhere' does not exist" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_name_server_down_is_one_line_and_exit_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_cli(["read", "--topic", "T", "--namesrv", f"127.0.0.1:{port}"])
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"rmqrun: error: no name server answered among 127.0.0.1:{port}"]


def test_a_reader_that_goes_away_ends_the_read_quietly(eb: EmbeddedBroker) -> None:
    """``rmqrun read ... | head -1``: the pipe closes under the reader; exit 0, no traceback, no error line."""
    import subprocess

    from tests.integration.cli_kit import RMQRUN

    send(eb, "ReadPipe", [(0, None, b"x" * 200)] * 400)  # far more than a pipe buffer
    reader = subprocess.Popen([*RMQRUN, "read", "--namesrv", eb.namesrv_address, "--topic", "ReadPipe"],
                              env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    assert reader.stdout is not None and reader.stderr is not None
    first = reader.stdout.readline()
    assert first, "nothing was printed"
    reader.stdout.close()  # what head does after its first line
    code = reader.wait(60)
    err = reader.stderr.read().decode("utf-8", "replace")
    assert code == 0, err
    assert "Traceback" not in err and "rmqrun: error" not in err
