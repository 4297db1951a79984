"""``rmqrun status --json`` / ``--watch`` and how status finds a group's topics (issue #15).

The group's topics come from the broker's consume statistics, so a topic the
group never committed on is not listed unless asked for, and then shows no
consumer offset and no lag (not 0 and the whole backlog).
"""

from __future__ import annotations

import asyncio
import json
import time
import re
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_cli, wait_for


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("status")) as broker:
        yield broker


def commit_all(eb: Any, group: str, topic: str, offset: int) -> dict[int, int]:
    """Commit min(offset, max) on every queue; returns each queue's max offset."""
    async def main() -> dict[int, int]:
        inst = ClientInstance(eb.namesrv_address, instance_name="status-test")
        try:
            out = {}
            for q in range(4):
                mq = MessageQueue(topic, "broker-a", q)
                out[q] = await inst.broker.get_max_offset(eb.broker_address, mq)
                await inst.broker.update_consumer_offset(eb.broker_address, group, mq, min(offset, out[q]),
                                                         oneway=False)
            return out
        finally:
            await inst.close()
    return asyncio.run(main())


def status(eb: Any, *args: str) -> Any:
    return run_cli(["status", "--namesrv", eb.namesrv_address, *args])


def test_json_and_topics_from_consume_stats(eb: Any) -> None:
    produce(eb.namesrv_address, "SJ_Done", 12)
    produce(eb.namesrv_address, "SJ_Never", 8)
    high = commit_all(eb, "GSJ", "SJ_Done", 2)

    found = status(eb, "--group", "GSJ", "--json")
    assert found.returncode == 0, found.stderr
    out = json.loads(found.stdout)
    assert out["group"] == "GSJ" and isinstance(out["at"], int)
    # only the topic the group has offsets on: not SJ_Never, not every topic of the name server
    assert {q["topic"] for q in out["queues"]} == {"SJ_Done"}
    assert [(q["queue"], q["broker_offset"], q["consumer_offset"], q["lag"]) for q in out["queues"]] == \
        [(i, high[i], 2, high[i] - 2) for i in range(4)]
    assert out["total"] == {"queues": 4, "broker_offset": 12, "consumer_offset": 8, "lag": 4}
    # the store time of the last consumed message (offset 1), as the broker's consume statistics say it
    now_ms = time.time() * 1000
    assert all(now_ms - 120_000 < q["consumed_up_to_ms"] <= now_ms for q in out["queues"]), out["queues"]

    # asked for a topic the group never consumed: no offset and no lag, in JSON and in the table
    both = status(eb, "--group", "GSJ", "--topic", "SJ_Done", "--topic", "SJ_Never", "--json")
    assert both.returncode == 0, both.stderr
    never = [q for q in json.loads(both.stdout)["queues"] if q["topic"] == "SJ_Never"]
    assert len(never) == 4 and sum(q["broker_offset"] for q in never) == 8
    assert all(q["consumer_offset"] is None and q["lag"] is None and q["consumed_up_to_ms"] is None for q in never)
    table = status(eb, "--group", "GSJ", "--topic", "SJ_Never")
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines() if line.startswith("SJ_Never")]
    assert len(rows) == 4 and all(r[4:] == ["-", "-", "-"] for r in rows)


def test_unknown_group_is_exit_1(eb: Any) -> None:
    proc = status(eb, "--group", "GSJ_Nobody", "--json")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "consumer group 'GSJ_Nobody' is unknown" in proc.stderr


def test_watch_prints_a_json_line_per_round_until_interrupted(eb: Any, tmp_path: Path) -> None:
    produce(eb.namesrv_address, "SJ_Watch", 4)
    commit_all(eb, "GSJW", "SJ_Watch", 0)
    args = ["status", "--namesrv", eb.namesrv_address, "--group", "GSJW", "--json", "--watch", "--interval", "0.2"]
    with Child(args, tmp_path, env=child_env()) as child:
        wait_for(lambda: len(child.stdout.splitlines()) >= 2, 30, "two rounds")
        produce(eb.namesrv_address, "SJ_Watch", 4)
        wait_for(lambda: json.loads(child.stdout.splitlines()[-1])["total"]["broker_offset"] == 8, 30,
                 "a later round seeing the new messages")
        child.signal(signal.SIGINT)
        assert child.wait(20) == 0
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    assert all(line["group"] == "GSJW" for line in lines)
    assert lines[0]["total"]["lag"] == 4 and lines[-1]["total"]["lag"] == 8


def test_watch_text_rounds_each_start_with_the_time_they_were_taken(eb: Any, tmp_path: Path) -> None:
    produce(eb.namesrv_address, "SJ_WatchText", 4)
    commit_all(eb, "GSJWT", "SJ_WatchText", 0)
    args = ["status", "--namesrv", eb.namesrv_address, "--group", "GSJWT", "--watch", "--interval", "0.3"]
    header = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \(every 0.3 s; Ctrl-C to stop\)$")
    with Child(args, tmp_path, env=child_env()) as child:
        wait_for(lambda: sum(bool(header.match(ln)) for ln in child.stdout.splitlines()) >= 3, 30, "three rounds")
        child.signal(signal.SIGINT)
        assert child.wait(20) == 0
    lines = child.stdout.splitlines()
    stamps = [header.match(ln) for ln in lines]
    starts = [i for i, m in enumerate(stamps) if m]
    assert starts[0] == 0, "the header comes before each table"
    assert all(lines[i + 1] == "group GSJWT" and lines[i + 2].split()[:2] == ["topic", "broker"] for i in starts[:-1])
    times = [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") for m in stamps if m]
    assert times == sorted(times) and abs((datetime.now() - times[-1]).total_seconds()) < 30


def test_watch_ends_with_exit_0_on_a_signal_whenever_it_lands(eb: Any, tmp_path: Path) -> None:
    """SIGINT (or SIGTERM) at any moment of --watch ends it with exit 0, a round in flight included. Rounds
    every 0.1 s keep one in flight most of the time; the signals land at staggered moments. (A Ctrl-C that
    landed as a round's connection opened used to be lost: the watch ran on until killed.)"""
    produce(eb.namesrv_address, "SJ_WatchStop", 4)
    commit_all(eb, "GSJWS", "SJ_WatchStop", 0)
    args = ["status", "--namesrv", eb.namesrv_address, "--group", "GSJWS", "--watch", "--interval", "0.1"]
    sigs = [signal.SIGINT] * 7 + [signal.SIGTERM] * 3
    children = [Child(args, tmp_path, env=child_env(), name=f"watch{i}") for i in range(len(sigs))]
    try:
        for child in children:
            wait_for(lambda: "group GSJWS" in child.stdout, 30, "a first round")
        for i, (child, sig) in enumerate(zip(children, sigs)):
            time.sleep(0.013 * i)  # a different moment of a round each
            child.signal(sig)
        codes = [child.wait(30) for child in children]
    finally:
        for child in children:
            child.close()
    assert codes == [0] * len(sigs), [c.stderr[-500:] for c in children]


def test_online_group_that_never_committed_shows_its_subscriptions_without_offsets(eb: Any, tmp_path: Path) -> None:
    produce(eb.namesrv_address, "SJ_Online", 8)
    # offsets are persisted once a minute here, so for now the broker stores none for the group
    env = child_env(RMQRUN_PERSIST_OFFSET_INTERVAL_MS="600000")
    args = ["run", "workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "GSJO", "--topic", "SJ_Online",
            "--workers", "1"]
    with Child(args, tmp_path, env=env, name="online") as child:
        child.wait_output("consuming SJ_Online[*] as group GSJO", 60)
        proc = status(eb, "--group", "GSJO", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert {q["topic"] for q in out["queues"]} == {"SJ_Online", "%RETRY%GSJO"}
        assert all(q["consumer_offset"] is None and q["lag"] is None for q in out["queues"])
        assert sum(q["broker_offset"] for q in out["queues"] if q["topic"] == "SJ_Online") == 8
        assert out["total"]["lag"] is None
        child.signal(signal.SIGTERM)
        assert child.wait(60) == 0
    # stopped: its offsets were committed on the way out, and status now shows them
    after = json.loads(status(eb, "--group", "GSJO", "--json").stdout)
    assert [q["consumer_offset"] for q in after["queues"] if q["topic"] == "SJ_Online"] == \
        [q["broker_offset"] for q in after["queues"] if q["topic"] == "SJ_Online"]
