"""``rmqrun read``'s --to, --format body / length-prefixed, --timeout and --group, as real child
processes against the embedded broker over real TCP."""

from __future__ import annotations

import asyncio
import json
import signal
import struct
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from tests.integration.cli_kit import RMQRUN, ROOT, Child, child_env, wait_for
from tests.integration.signals_kit import start_broker
from tests.integration.test_cli_read import read, send

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("read-options"))
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def read_bytes(eb: EmbeddedBroker, topic: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*RMQRUN, "read", "--namesrv", eb.namesrv_address, "--topic", topic, *args],
                          env=child_env(), capture_output=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)


def bodies(stdout: str) -> list[str]:
    return [line.rsplit("body=", 1)[1] for line in stdout.splitlines()]


def committed(eb: EmbeddedBroker, group: str, topic: str, qid: int) -> int | None:
    async def main() -> int | None:
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-read-options")
        try:
            return await inst.broker.query_consumer_offset(eb.broker_address, group,
                                                           MessageQueue(topic, "broker-a", qid))
        finally:
            await inst.close()
    return asyncio.run(main())


# ------------------------------------------------------------------ --to

def test_to_an_offset_stops_each_queue_before_it(eb: EmbeddedBroker) -> None:
    send(eb, "RO_to", [(0, None, f"a{i}".encode()) for i in range(5)] + [(1, None, f"b{i}".encode()) for i in range(2)])
    r = read(eb, "RO_to", "--to", "3")
    assert r.returncode == 0, r.stderr
    assert sorted(bodies(r.stdout)) == ["a0", "a1", "a2", "b0", "b1"]  # queue 1 ends before 3 anyway
    r = read(eb, "RO_to", "--queue", "0", "--from", "1", "--to", "offset:3")
    assert bodies(r.stdout) == ["a1", "a2"] and "to offset 3" in r.stderr
    assert bodies(read(eb, "RO_to", "--queue", "0", "--to", "latest").stdout) == [f"a{i}" for i in range(5)]
    assert read(eb, "RO_to", "--queue", "0", "--from", "4", "--to", "2").stdout == ""


def test_to_a_time_stops_before_messages_stored_from_then(eb: EmbeddedBroker) -> None:
    old = send(eb, "RO_to_time", [(q, None, f"old{q}".encode()) for q in range(4)])
    del old
    time.sleep(0.05)
    boundary = int(time.time() * 1000)
    time.sleep(0.05)
    send(eb, "RO_to_time", [(q, None, f"new{q}".encode()) for q in range(4)])
    r = read(eb, "RO_to_time", "--to", str(boundary), "--format", "json")
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted(rec["body"] for rec in records) == [f"old{q}" for q in range(4)]
    assert all(rec["store_timestamp"] < boundary for rec in records)
    iso = datetime.fromtimestamp(boundary / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    by_iso = read(eb, "RO_to_time", "--to", iso, "--from", iso.replace("Z", "+00:00"))
    assert by_iso.stdout == ""  # from and to the same instant: nothing in between
    after = read(eb, "RO_to_time", "--from", str(boundary))
    assert sorted(bodies(after.stdout)) == [f"new{q}" for q in range(4)]


# ------------------------------------------------------------------ raw bodies

def test_body_format_prints_raw_bodies_one_per_line(eb: EmbeddedBroker) -> None:
    send(eb, "RO_body", [(0, None, b'{"amount": 1}'), (0, None, "é€ \x00 raw".encode()), (0, None, b"two\nlines")])
    r = read_bytes(eb, "RO_body", "--format", "body")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b'{"amount": 1}\n' + "é€ \x00 raw".encode() + b"\ntwo\nlines\n"
    assert b"has a newline in its body; --format length-prefixed keeps bodies apart" in r.stderr


def test_length_prefixed_format_is_binary_safe(eb: EmbeddedBroker) -> None:
    sent = [bytes(range(256)), b"\x00", b"a\nb", b"x" * 70_000]  # (a producer refuses an empty body)
    send(eb, "RO_lp", [(0, None, body) for body in sent])
    r = read_bytes(eb, "RO_lp", "--format", "length-prefixed")
    assert r.returncode == 0, r.stderr
    got, pos = [], 0
    while pos < len(r.stdout):
        (size,) = struct.unpack_from(">I", r.stdout, pos)
        got.append(r.stdout[pos + 4: pos + 4 + size])
        pos += 4 + size
    assert got == sent and b"newline" not in r.stderr


# ------------------------------------------------------------------ --timeout

def test_timeout_waits_for_new_messages_and_stops_when_the_topic_is_idle(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic = "RO_idle"
    send(eb, topic, [(0, None, b"backlog")])
    args = ["read", "--namesrv", eb.namesrv_address, "--topic", topic, "--queue", "0", "--timeout", "3"]
    began = time.monotonic()
    with Child(args, tmp_path) as child:
        child.wait_output("following")
        wait_for(lambda: child.stdout.count("\n") >= 1, what="the backlog")
        send(eb, topic, [(0, None, b"live")])  # within the 3 s: printed, and the idle clock starts again
        wait_for(lambda: child.stdout.count("\n") >= 2, what="the live message")
        printed_live = time.monotonic()
        assert child.wait(30) == 0, child.stderr
        ended = time.monotonic()
    assert bodies(child.stdout) == ["backlog", "live"]
    assert "no message for 3s: stopping" in child.stderr and "2 message(s)" in child.stderr
    assert ended - printed_live >= 2.5 and ended - began < 30


# ------------------------------------------------------------------ --group

def test_group_resumes_where_the_last_read_stopped_and_commits_what_was_printed(eb: EmbeddedBroker) -> None:
    topic = "RO_group"
    send(eb, topic, [(0, "A" if i % 2 else "B", f"g{i}".encode()) for i in range(6)])
    first = read(eb, topic, "--queue", "0", "--group", "CG_ro", "--count", "4")
    assert bodies(first.stdout) == ["g0", "g1", "g2", "g3"]
    assert "committed 1 queue(s) for group CG_ro" in first.stderr
    assert committed(eb, "CG_ro", topic, 0) == 4  # the offset after the last printed, not what was pulled
    second = read(eb, topic, "--queue", "0", "--group", "CG_ro")
    assert bodies(second.stdout) == ["g4", "g5"] and "from the group's committed offsets" in second.stderr
    assert committed(eb, "CG_ro", topic, 0) == 6
    third = read(eb, topic, "--queue", "0", "--group", "CG_ro")
    assert third.stdout == "" and "committed 0 queue(s)" in third.stderr
    # --from overrides the committed offset; a tag filter's skipped messages count as read
    tagged = read(eb, topic, "--queue", "0", "--group", "CG_ro_tags", "--from", "earliest", "--tags", "A")
    assert bodies(tagged.stdout) == ["g1", "g3", "g5"]
    assert committed(eb, "CG_ro_tags", topic, 0) == 6
    # without --group nothing is committed, as before
    read(eb, topic, "--queue", "0")
    assert eb.broker.store.consumer_offsets.offsets("rmqrun_read", topic) == {}


def test_group_stops_at_to_and_commits_no_further(eb: EmbeddedBroker) -> None:
    topic = "RO_group_to"
    send(eb, topic, [(0, None, f"t{i}".encode()) for i in range(5)])
    r = read(eb, topic, "--queue", "0", "--group", "CG_ro_to", "--to", "2")
    assert bodies(r.stdout) == ["t0", "t1"]
    assert committed(eb, "CG_ro_to", topic, 0) == 2  # although the pull read up to 5


def test_following_group_commits_periodically_and_on_a_signal(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic = "RO_group_follow"
    send(eb, topic, [(0, None, b"f0"), (0, None, b"f1")])
    args = ["read", "--namesrv", eb.namesrv_address, "--topic", topic, "--queue", "0", "--group", "CG_ro_f",
            "--follow"]
    with Child(args, tmp_path) as child:
        wait_for(lambda: child.stdout.count("\n") >= 2, what="the backlog")
        # committed while still running (every 5 s), without waiting for the end
        wait_for(lambda: committed(eb, "CG_ro_f", topic, 0) == 2, timeout=20, interval=0.5,
                 what="the periodic commit")
        send(eb, topic, [(0, None, b"f2")])
        wait_for(lambda: child.stdout.count("\n") >= 3, what="the live message")
        child.signal(signal.SIGINT)
        assert child.wait(30) == 0, child.stderr
    assert committed(eb, "CG_ro_f", topic, 0) == 3
    assert "committed 1 queue(s) for group CG_ro_f" in child.stderr


# ------------------------------------------------------------------ --key / --msg-id

def test_key_and_msg_id_find_messages_through_the_index(eb: EmbeddedBroker) -> None:
    topic = "RO_lookup"
    sent = send(eb, topic, [(0, None, b"l0"), (1, None, b"l1"), (2, None, b"l2")])  # keys k0, k1, k2
    by_key = read(eb, topic, "--key", "k1", "--format", "json")
    assert by_key.returncode == 0, by_key.stderr
    assert [json.loads(line)["msg_id"] for line in by_key.stdout.splitlines()] == [sent[1].msg_id]
    assert read(eb, topic, "--key", "k9").stdout == ""
    stored = json.loads(by_key.stdout)["store_timestamp"]
    assert read(eb, topic, "--key", "k1", "--from", str(stored + 1)).stdout == ""  # stored before the range
    assert bodies(read(eb, topic, "--key", "k1", "--to", str(stored + 1)).stdout) == ["l1"]
    by_client_id = read(eb, topic, "--msg-id", sent[2].msg_id)
    assert by_client_id.returncode == 0 and bodies(by_client_id.stdout) == ["l2"], by_client_id.stderr
    by_offset_id = read(eb, topic, "--msg-id", sent[0].offset_msg_id)
    assert bodies(by_offset_id.stdout) == ["l0"], by_offset_id.stderr
    missing = read(eb, topic, "--msg-id", "C0A8010A1F2E18B4AAC2512B3F4E0000")
    assert missing.returncode == 1 and "no broker of topic 'RO_lookup' has message" in missing.stderr


# ------------------------------------------------------------------ --sql

@pytest.mark.parametrize("follow", [[], ["--follow"]])
def test_sql_selector_is_sent_and_a_broker_without_property_filtering_ends_the_read(eb: EmbeddedBroker,
                                                                                     follow: list[str]) -> None:
    send(eb, "RO_sql", [(0, None, b"s0")])
    r = read(eb, "RO_sql", "--sql", "i > 0", *follow, timeout=30)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "does not filter by SQL92" in r.stderr and "enablePropertyFilter=true" in r.stderr
    assert "retrying" not in r.stderr and r.stdout == ""  # a refusal, not an outage to wait out


@pytest.mark.parametrize("args, message", [
    (["--sql", "a > 1", "--tags", "A"], "--sql and --tags: choose one"),
    (["--sql", " "], "--sql '' is empty"),
    (["--key", "a", "--sql", "a > 1"], "cannot be combined with --sql"),
    (["--key", "a", "--msg-id", "b"], "--key and --msg-id: choose one"),
    (["--key", "a", "--follow"], "--key finds messages by the brokers' index; it cannot be combined with "
                                 "--follow/--timeout"),
    (["--msg-id", "AB", "--group", "G"], "cannot be combined with --group"),
    (["--key", "a", "--from", "5"], "cannot be combined with --from/--to other than a time"),
    (["--msg-id", "AB", "--from", "1732435200000"], "cannot be combined with --from/--to"),
    (["--key", "a b"], "--key 'a b' must be one non-empty value without spaces"),
    (["--to", "earliest"], "--to 'earliest' is not latest, an offset"),
    (["--to", "5", "--follow"], "--to reads up to a point and exits"),
    (["--to", "5", "--timeout", "3"], "--to reads up to a point and exits"),
    (["--timeout", "0"], "--timeout '0' is not a positive number of seconds"),
    (["--timeout", "soon"], "--timeout 'soon' is not a positive number of seconds"),
    (["--group", "bad group"], "--group 'bad group' is not a group name"),
    (["--format", "raw"], "--format 'raw' is not one of: text, json, body, length-prefixed"),
])
def test_bad_new_options_are_one_line_and_exit_2(eb: EmbeddedBroker, args: list[str], message: str) -> None:
    r = read(eb, "RO_to", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
