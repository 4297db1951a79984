"""Dead letters, first-class (issue #22 item 3): counted, named in one log line, listed, re-driven once.

A real ``rmqrun run`` dead-letters messages on the embedded broker (over TCP) through both of the
broker's ways into ``%DLQ%<group>``: a message that fails until max_reconsume_times is used up, and one
the handler sends there at once (delay level -1). Then real ``rmqrun dlq`` processes list, show and
re-drive them: the re-drive moves each message back to its topic once (a second run moves none), keeps
its body, keys, tags, user properties and message id, and drops the retry bookkeeping.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.topics import TopicConfig
from tests.integration.cli_kit import Child, child_env, free_port, produce, run_cli, wait_for

pytestmark = pytest.mark.timeout(240)

FATES = {0: "ok", 1: "fail", 2: "ok", 3: "dlq", 4: "fail", 5: "ok"}
DEAD = {i for i, fate in FATES.items() if fate != "ok"}


def props(i: int) -> dict[str, str]:
    return {"idx": str(i), "KEYS": f"k{i} order-{i}", "TAGS": f"tag{i}", "fate": FATES[i], "user": f"u{i}"}


@pytest.fixture
def eb(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """The embedded broker with every retry level 1 s, so a message that fails twice reaches the DLQ in seconds
    (this module's own, in place of the integration conftest's)."""
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async",
                        message_delay_levels=" ".join(["1s"] * 18)).start_in_thread()
    try:
        yield eb
    finally:
        eb.stop_in_thread()


def dead_letter_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "dead-lettered message" in line]


def scrape(port: int) -> dict[tuple[str, ...], float]:
    """The dead-letter counter's samples by (group, topic, reason)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("rmqrun_messages_dead_lettered_total{"):
            labels, value = line[len("rmqrun_messages_dead_lettered_total{"):].split("} ")
            pairs = dict(p.split("=", 1) for p in labels.split(","))
            out[(pairs["group"].strip('"'), pairs["topic"].strip('"'), pairs["reason"].strip('"'))] = float(value)
    return out


#: dead letters by reason: concurrently, ReconsumeLater(delay_level=-1) goes to the DLQ at once; orderly has
#: no delay levels (Java's orderly listener only suspends), so that message fails like the others
EXPECTED = {"concurrently": {"max_reconsume": 2, "handler": 1}, "orderly": {"max_reconsume": 3, "handler": 0}}


def dead_letter_a_run(eb: EmbeddedBroker, tmp_path: Path, group: str, topic: str, mode: str = "concurrently") -> str:
    """Run ``rmqrun run`` until every doomed message is dead-lettered; check counter and lines; its log."""
    extra = ["--orderly"] if mode == "orderly" else []
    expected = EXPECTED[mode]
    port = free_port()
    args = ["run", "tests.integration.handlers.dlq_handler:handle", "--namesrv", eb.namesrv_address, "--group", group,
            "--topic", topic, "--workers", "1", "--max-reconsume-times", "1", "--metrics-port", str(port),
            "--consume-from", "CONSUME_FROM_FIRST_OFFSET", *extra]
    with Child(args, tmp_path, env=child_env(RMQRUN_SUSPEND_CURRENT_QUEUE_TIME_MS="100"), name=group) as run:
        run.wait_output("metrics on http://")
        wait_for(lambda: len(dead_letter_lines(run.stderr)) >= len(DEAD), 90, "a dead-letter line per message")
        time.sleep(1.0)  # nothing more may come: one line per message, not one per attempt
        counts = scrape(port)
        run.signal(signal.SIGTERM)
        assert run.wait(30) == 0, run.stderr[-3000:]
        log = run.stderr
    lines = dead_letter_lines(log)
    assert len(lines) == len(DEAD), "\n".join(lines)
    assert counts[(group, topic, "max_reconsume")] == expected["max_reconsume"], counts
    assert counts[(group, topic, "handler")] == expected["handler"], counts
    assert counts[(group, topic, "undecodable")] == 0, counts  # known topics start at 0 for every reason
    by_reason = {reason: [ln for ln in lines if f"to %DLQ%{group} ({reason}): " in ln]
                 for reason in ("max_reconsume", "handler")}
    assert {r: len(v) for r, v in by_reason.items()} == expected, lines
    for line in by_reason["max_reconsume"]:
        # failed twice (first delivery + one retry), named with where it was consumed and why it failed
        assert f" of {topic} to %DLQ%{group}" in line and ", attempts 2, " in line, line
        assert "offset " in line and "last error: " in line, line
    assert sum("on purpose" in line for line in by_reason["max_reconsume"]) == 2, lines
    for line in by_reason["handler"]:
        assert ", attempts 1, last error: the handler asked for the DLQ (delay level -1)" in line, line
    return log


def dlq(eb: EmbeddedBroker, group: str, *args: str) -> Any:
    r = run_cli(["dlq", *args, "--group", group, "--namesrv", eb.namesrv_address])
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def listed(eb: EmbeddedBroker, group: str, *args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in dlq(eb, group, "list", "--json", *args).stdout.splitlines()]


def topic_messages(eb: EmbeddedBroker, topic: str) -> list[dict[str, Any]]:
    r = run_cli(["read", "--topic", topic, "--namesrv", eb.namesrv_address, "--format", "json"])
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.mark.parametrize("mode", ["concurrently", "orderly"])
def test_dead_letters_are_counted_logged_listed_and_redriven_once(eb: EmbeddedBroker, tmp_path: Path,
                                                                  mode: str) -> None:
    group, topic = f"GDead{mode.capitalize()}", f"Dead{mode.capitalize()}"
    eb.broker.topics.put(TopicConfig(topic, 2, 2))
    produce(eb.namesrv_address, topic, len(FATES), props=props)
    originals = {int(m["properties"]["idx"]): m for m in topic_messages(eb, topic)}
    dead_letter_a_run(eb, tmp_path, group, topic, mode)

    # list: every dead letter, with where it came from; nothing re-driven yet
    rows = listed(eb, group)
    assert sorted(int(r["keys"][0][1:]) for r in rows) == sorted(DEAD)
    for row in rows:
        idx = int(row["keys"][0][1:])
        assert row["origin_topic"] == topic and row["msg_id"] == originals[idx]["msg_id"]
        assert row["keys"] == [f"k{idx}", f"order-{idx}"] and row["tags"] == f"tag{idx}"
        assert row["size"] == len(f"m{idx}") and row["redriven"] is False
        # the broker's send-back names the stored (offset) id, a re-publish (orderly) the client id, as in Java
        assert row["origin_msg_id"] == originals[idx]["offset_msg_id" if mode == "concurrently" else "msg_id"]

    # show: one message in full, by its message id
    one = rows[0]
    shown = json.loads(dlq(eb, group, "show", "--msg-id", one["msg_id"], "--json").stdout)
    assert shown["queue_offset"] == one["queue_offset"] and shown["body"] == f"m{one['keys'][0][1:]}"
    assert shown["properties"]["RETRY_TOPIC"] == topic and shown["origin_topic"] == topic
    text = dlq(eb, group, "show", "--offset", str(one["queue_offset"])).stdout
    assert "RETRY_TOPIC = " + topic in text and f"m{one['keys'][0][1:]}" in text

    # --dry-run: the plan, and nothing sent or committed
    before = len(topic_messages(eb, topic))
    plan = dlq(eb, group, "redrive", "--dry-run")
    assert plan.stdout.count("would move ") == len(DEAD) and "dry run" in plan.stderr
    assert len(topic_messages(eb, topic)) == before
    assert all(r["redriven"] is False for r in listed(eb, group))

    # the re-drive moves each once
    moved = dlq(eb, group, "redrive")
    assert moved.stdout.count("moved ") == len(DEAD), moved.stdout + moved.stderr
    again = dlq(eb, group, "redrive")
    assert "moved " not in again.stdout and f"moved 0 message(s)" in again.stderr, again.stdout + again.stderr
    assert all(r["redriven"] is True for r in listed(eb, group))

    after = topic_messages(eb, topic)
    copies = [m for m in after if "RMQRUN_REDRIVEN_FROM" in m["properties"]]
    assert len(after) == before + len(DEAD) and len(copies) == len(DEAD)
    for copy in copies:
        idx = int(copy["properties"]["idx"])
        original = originals[idx]
        assert copy["body"] == original["body"] and copy["msg_id"] == original["msg_id"]
        assert copy["keys"] == original["keys"] and copy["tags"] == original["tags"]
        assert copy["properties"]["user"] == f"u{idx}" and copy["properties"]["fate"] == FATES[idx]
        assert copy["properties"]["RMQRUN_REDRIVEN_FROM"].startswith(f"%DLQ%{group}@")
        for bookkeeping in ("RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES",
                            "DELAY"):
            assert bookkeeping not in copy["properties"], copy
        assert copy["reconsume_times"] == 0


def test_redrive_filters_and_target_topic(eb: EmbeddedBroker, tmp_path: Path) -> None:
    group, topic, elsewhere = "GDeadFilters", "DeadFilters", "DeadElsewhere"
    eb.broker.topics.put(TopicConfig(topic, 2, 2))
    eb.broker.topics.put(TopicConfig(elsewhere, 1, 1))
    produce(eb.namesrv_address, topic, len(FATES), props=props)
    dead_letter_a_run(eb, tmp_path, group, topic)
    rows = listed(eb, group)
    by_idx = {int(r["keys"][0][1:]): r for r in rows}
    first = min(r["store_timestamp"] for r in rows)

    def redrive(redrive_group: str, *args: str) -> list[str]:
        out = dlq(eb, group, "redrive", "--redrive-group", redrive_group, "--to-topic", elsewhere, *args)
        return [line for line in out.stdout.splitlines() if line.startswith("moved ")]

    # by key: only that message, once
    assert [f"keys=k4,order-4" in line for line in redrive("RKey", "--key", "order-4")] == [True]
    assert redrive("RKey", "--key", "order-4") == []
    # by message id (the client id, or the original broker id): only that message
    got = redrive("RId", "--msg-id", by_idx[1]["origin_msg_id"])
    assert len(got) == 1 and f"id={by_idx[1]['msg_id']}" in got[0]
    # --list filters the same way
    assert [r["msg_id"] for r in listed(eb, group, "--msg-id", by_idx[3]["msg_id"])] == [by_idx[3]["msg_id"]]
    # by the topic a message was consumed from
    assert len(listed(eb, group, "--topic", topic)) == len(DEAD) and listed(eb, group, "--topic", "Other") == []
    # a time after every dead letter: nothing taken, and the offset is past them (passed over)
    future = str(int(time.time() * 1000) + 3_600_000)
    assert redrive("RSince", "--since", future) == []
    assert redrive("RSince") == []
    # --until before the first: nothing taken, and the offset stays for a later run
    assert redrive("RUntil", "--until", str(first - 1)) == []
    assert len(redrive("RUntil")) == len(DEAD)
    # --count: at most N per run; the next run goes on from there
    assert len(redrive("RCount", "--count", "2")) == 2
    assert len(redrive("RCount")) == len(DEAD) - 2

    copies = topic_messages(eb, elsewhere)
    assert len(copies) == 1 + 1 + len(DEAD) + len(DEAD)
    assert all(c["properties"]["RMQRUN_REDRIVEN_FROM"].startswith(f"%DLQ%{group}@") for c in copies)


def test_dlq_commands_without_a_dlq_and_bad_options(eb: EmbeddedBroker) -> None:
    r = dlq(eb, "GNeverFailed", "list")
    assert r.stdout == "" and "no DLQ" in r.stderr
    r = dlq(eb, "GNeverFailed", "redrive")
    assert "moved 0 message(s)" in r.stderr
    r = run_cli(["dlq", "show", "--group", "GNeverFailed", "--namesrv", eb.namesrv_address, "--msg-id", "X"])
    assert r.returncode == 1 and "no such message" in r.stderr
    # a DLQ as a RocketMQ 4.x broker creates it (write-only): named, with how to make it readable
    r = run_cli(["topic", "create", "%DLQ%GWriteOnly", "--perm", "w", "--queues", "1",
                 "--namesrv", eb.namesrv_address])
    assert r.returncode == 0, r.stderr
    r = run_cli(["dlq", "list", "--group", "GWriteOnly", "--namesrv", eb.namesrv_address])
    assert r.returncode == 1 and "not readable" in r.stderr and "--perm rw" in r.stderr, r.stderr
    r = run_cli(["topic", "update", "%DLQ%GWriteOnly", "--perm", "rw", "--namesrv", eb.namesrv_address])
    assert r.returncode == 0, r.stderr
    r = dlq(eb, "GWriteOnly", "list")
    assert r.stdout == "" and "is empty" in r.stderr
    r = run_cli(["dlq", "list", "--group", "G", "--namesrv", "127.0.0.1:1"])
    assert r.returncode == 1 and r.stderr.startswith("rmqrun: error: no name server answered"), r.stderr
    for args in (["list"], ["list", "--group", "G", "--since", "yesterday"],
                 ["show", "--group", "G"], ["redrive", "--group", "G", "--to-topic", "bad topic"],
                 ["list", "--group", "G", "--since", "2030-01-01T00:00:00Z", "--until", "2020-01-01T00:00:00Z"]):
        r = run_cli(["dlq", *args, "--namesrv", eb.namesrv_address])
        assert r.returncode == 2 and r.stderr.startswith("rmqrun: error: "), (args, r.stderr)


def test_dead_letters_under_a_namespace(eb: EmbeddedBroker, tmp_path: Path) -> None:
    """Counted, listed and re-driven with the user's names; on the wire everything is under the namespace."""
    ns, group, topic = "MQ_INST_dlq", "GDeadNs", "DeadNs"
    eb.broker.topics.put(TopicConfig(f"{ns}%{topic}", 1, 1))
    for i in (0, 1):
        r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--namespace", ns, "--topic", topic,
                     "--count", "1", "--property", f"fate={'fail' if i else 'ok'}", "--property", f"idx={i}"])
        assert r.returncode == 0, r.stderr
    args = ["run", "tests.integration.handlers.dlq_handler:handle", "--namesrv", eb.namesrv_address, "--namespace", ns,
            "--group", group, "--topic", topic, "--workers", "1", "--max-reconsume-times", "0",
            "--consume-from", "CONSUME_FROM_FIRST_OFFSET"]
    with Child(args, tmp_path, name="ns") as run:
        wait_for(lambda: dead_letter_lines(run.stderr), 60, "the dead-letter line")
        line = dead_letter_lines(run.stderr)[0]
    assert f" of {topic} to %DLQ%{group} (max_reconsume): queue {topic}/" in line and ns not in line, line
    assert f"%DLQ%{ns}%{group}" in eb.broker.topics

    def cmd(*args: str) -> Any:
        r = run_cli(["dlq", *args, "--group", group, "--namespace", ns, "--namesrv", eb.namesrv_address])
        assert r.returncode == 0, r.stdout + r.stderr
        return r
    rows = [json.loads(x) for x in cmd("list", "--json", "--topic", topic).stdout.splitlines()]
    assert len(rows) == 1 and rows[0]["origin_topic"] == topic
    assert cmd("redrive").stdout.count(f"-> {topic}") == 1
    assert "moved " not in cmd("redrive").stdout
    r = run_cli(["read", "--topic", topic, "--namespace", ns, "--namesrv", eb.namesrv_address, "--format", "json"])
    copies = [m for m in map(json.loads, r.stdout.splitlines()) if "RMQRUN_REDRIVEN_FROM" in m["properties"]]
    assert len(copies) == 1 and copies[0]["properties"]["RMQRUN_REDRIVEN_FROM"].startswith(f"%DLQ%{group}@")
    assert copies[0]["properties"]["idx"] == "1"


def test_a_dead_letter_whose_tags_hold_a_separator_stops_the_redrive_by_name(eb: EmbeddedBroker) -> None:
    """A dead letter stored by another client with ``\\x01`` inside its TAGS value is not sent on: the re-drive
    stops on it with the field named (exit 1), nothing reaches the topic and the offset stays on it."""
    import asyncio

    from rmqrun.remoting.codes import RequestCode, ResponseCode
    from tests.integration.broker_kit import Client, send_ext

    group, topic = "GSepDead", "SepDead"
    eb.broker.topics.put(TopicConfig(topic, 1, 1))
    eb.broker.topics.put(TopicConfig(f"%DLQ%{group}", 1, 1))

    async def store_raw() -> None:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            ext = send_ext(f"%DLQ%{group}", queue_id=0)
            # as a client that joins properties without a check would store it
            ext["i"] = f"TAGS\x01a\x01b\x02KEYS\x01k1\x02RETRY_TOPIC\x01{topic}\x02WAIT\x01true"
            resp = await client.call(RequestCode.SEND_MESSAGE_V2, ext, b"dead")
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        finally:
            await client.close()
    asyncio.run(store_raw())

    r = run_cli(["dlq", "redrive", "--group", group, "--namesrv", eb.namesrv_address])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "tags contains the control character \\x01 (U+0001)" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [row["redriven"] for row in listed(eb, group)] == [False], "the offset stays on the dead letter"
    assert topic_messages(eb, topic) == [], "nothing was sent"
