"""``rmqrun offsets reset`` against the embedded broker, offline and online.

Nothing moves without ``--execute``: each change below is first shown, then
checked unchanged, then executed and read back as exactly the plan.

Offline: no client of the group is connected; the stored offsets are written
and read back with QUERY_CONSUMER_OFFSET. Online: a real ``rmqrun run``
consumes the topic, the reset goes through the broker
(INVOKE_BROKER_TO_RESET_OFFSET, RESET_CONSUMER_CLIENT_OFFSET) and the running
consumer is seen handling the same queue offsets again, from the reset point.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_args, run_cli, wait_for
from tests.integration.handlers.record_handler import records


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("offsets")) as broker:
        yield broker


def stored(eb: Any, group: str, topic: str) -> dict[int, int | None]:
    async def main() -> dict[int, int | None]:
        inst = ClientInstance(eb.namesrv_address, instance_name="offsets-test")
        try:
            return {q: await inst.broker.query_consumer_offset(eb.broker_address, group,
                                                                MessageQueue(topic, "broker-a", q))
                    for q in range(4)}
        finally:
            await inst.close()
    return asyncio.run(main())


def highs(eb: Any, topic: str) -> dict[int, int]:
    async def main() -> dict[int, int]:
        inst = ClientInstance(eb.namesrv_address, instance_name="offsets-test")
        try:
            return {q: await inst.broker.get_max_offset(eb.broker_address, MessageQueue(topic, "broker-a", q))
                    for q in range(4)}
        finally:
            await inst.close()
    return asyncio.run(main())


def commit(eb: Any, group: str, topic: str, offsets: dict[int, int]) -> None:
    async def main() -> None:
        inst = ClientInstance(eb.namesrv_address, instance_name="offsets-test")
        try:
            for q, o in offsets.items():
                await inst.broker.update_consumer_offset(eb.broker_address, group, MessageQueue(topic, "broker-a", q),
                                                         o, oneway=False)
        finally:
            await inst.close()
    asyncio.run(main())


def reset(eb: Any, *args: str) -> Any:
    return run_cli(["offsets", "reset", "--namesrv", eb.namesrv_address, *args])


def plan_of(proc: Any) -> dict[int, int | None]:
    """Queue -> new offset of a ``--json`` answer."""
    return {r["queue"]: r["new"] for r in json.loads(proc.stdout)["rows"]}


def test_offline_reset_every_target_and_dry_run(eb: Any) -> None:
    produce(eb.namesrv_address, "OFF", 20)
    high = highs(eb, "OFF")
    assert sum(high.values()) == 20 and min(high.values()) >= 3
    commit(eb, "GOFF", "OFF", {0: 2, 1: 2, 2: 2, 3: 2})

    dry = reset(eb, "--group", "GOFF", "--topic", "OFF", "--to", "earliest", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == ("would reset group GOFF on OFF to earliest (offline: no consumer of the "
                                          "group is online, the stored offsets are written)")
    assert "  broker-a  queue 2: 2 -> 0" in dry.stdout and "dry run: nothing changed" in dry.stdout
    assert dry.stdout.splitlines()[-1] == ("dry run: nothing changed (8 messages to consume again, 0 messages to "
                                           "skip); add --execute to apply this plan")
    assert stored(eb, "GOFF", "OFF") == {0: 2, 1: 2, 2: 2, 3: 2}

    # without --execute (and without --dry-run) it is the same plan, and nothing changes
    plain = reset(eb, "--group", "GOFF", "--topic", "OFF", "--to-earliest")
    assert plain.returncode == 0 and plain.stdout == dry.stdout, plain.stderr
    assert stored(eb, "GOFF", "OFF") == {0: 2, 1: 2, 2: 2, 3: 2}

    done = reset(eb, "--group", "GOFF", "--topic", "OFF", "--to", "earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("reset group GOFF on OFF to earliest (offline")
    assert "dry run" not in done.stdout and "--execute" not in done.stdout
    assert stored(eb, "GOFF", "OFF") == {0: 0, 1: 0, 2: 0, 3: 0}

    # a queue offset, kept within [min, max]
    assert reset(eb, "--group", "GOFF", "--topic", "OFF", "--to-offset", "3", "--execute").returncode == 0
    assert stored(eb, "GOFF", "OFF") == {0: 3, 1: 3, 2: 3, 3: 3}
    assert reset(eb, "-g", "GOFF", "-t", "OFF", "--to-offset", "99", "--execute").returncode == 0
    assert stored(eb, "GOFF", "OFF") == high

    # a time: the first message stored at or after it, per queue
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    produce(eb.namesrv_address, "OFF", 8)  # after the mark
    commit(eb, "GOFF", "OFF", {0: 0, 1: 0, 2: 0, 3: 0})
    js = reset(eb, "--group", "GOFF", "--topic", "OFF", "--to-timestamp-ms", str(mark), "--json", "--execute")
    assert js.returncode == 0, js.stderr
    out = json.loads(js.stdout)
    assert out["path"] == "offline" and out["clients"] == [] and out["dry_run"] is False and out["executed"] is True
    assert [(r["queue"], r["old"], r["new"]) for r in out["rows"]] == [(q, 0, high[q]) for q in range(4)]
    assert stored(eb, "GOFF", "OFF") == high
    iso = datetime.fromtimestamp(mark / 1000, timezone.utc).isoformat()
    for spelling in ("--to-datetime", "--to"):  # --to keeps taking a time: it cannot be misread
        commit(eb, "GOFF", "OFF", {0: 0, 1: 0, 2: 0, 3: 0})
        assert reset(eb, "--group", "GOFF", "--topic", "OFF", spelling, iso).returncode == 0
        assert stored(eb, "GOFF", "OFF") == {0: 0, 1: 0, 2: 0, 3: 0}, "no --execute: nothing changed"
        assert reset(eb, "--group", "GOFF", "--topic", "OFF", spelling, iso, "--execute").returncode == 0
        assert stored(eb, "GOFF", "OFF") == high

    assert reset(eb, "--group", "GOFF", "--topic", "OFF", "--to-latest", "--execute").returncode == 0
    assert stored(eb, "GOFF", "OFF") == highs(eb, "OFF") != high


def test_execute_changes_exactly_the_plan(eb: Any) -> None:
    produce(eb.namesrv_address, "PLAN", 24)
    high = highs(eb, "PLAN")
    commit(eb, "GPLAN", "PLAN", {0: 5, 1: 1, 2: 4})  # queue 3 untouched: the broker answers 0 for it
    commit(eb, "GPLAN_OTHER", "PLAN", {0: 1, 1: 1, 2: 1, 3: 1})
    before = stored(eb, "GPLAN", "PLAN")
    assert before == {0: 5, 1: 1, 2: 4, 3: 0}

    shown = reset(eb, "--group", "GPLAN", "--topic", "PLAN", "--shift-by", "-3", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["executed"] is False
    planned = plan_of(shown)
    assert planned == {0: 2, 1: 0, 2: 1, 3: 0}, "shifted back by 3 within [min, max]"
    text = reset(eb, "--group", "GPLAN", "--topic", "PLAN", "--shift-by", "-3")
    assert "  broker-a  queue 0: 5 -> 2" in text.stdout and "  broker-a  queue 3: 0 -> 0" in text.stdout
    assert "(7 messages to consume again, 0 messages to skip)" in text.stdout
    assert stored(eb, "GPLAN", "PLAN") == before, "showing the plan changed nothing"

    done = reset(eb, "--group", "GPLAN", "--topic", "PLAN", "--shift-by", "-3", "--json", "--execute")
    assert done.returncode == 0, done.stderr
    assert plan_of(done) == planned
    assert stored(eb, "GPLAN", "PLAN") == planned, "exactly the plan"
    assert stored(eb, "GPLAN_OTHER", "PLAN") == {0: 1, 1: 1, 2: 1, 3: 1}, "another group is not touched"

    forward = reset(eb, "--group", "GPLAN", "--topic", "PLAN", "--shift-by", "1000", "--json", "--execute")
    assert forward.returncode == 0 and plan_of(forward) == high
    assert stored(eb, "GPLAN", "PLAN") == high


def test_epoch_seconds_are_refused_not_clamped(eb: Any) -> None:
    """The reported case: ``--to 1714564800`` (seconds) moved every queue to its end, exit 0."""
    produce(eb.namesrv_address, "SECS", 8)
    commit(eb, "GSECS", "SECS", {0: 1, 1: 1, 2: 1, 3: 1})
    for extra in ([], ["--execute"]):
        proc = reset(eb, "--group", "GSECS", "--topic", "SECS", "--to", "1714564800", *extra)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == ("rmqrun: error: --to '1714564800' is ambiguous: a number may be a queue offset, epoch "
                               "milliseconds or epoch seconds; give --to-offset 1714564800, --to-timestamp-ms "
                               "1714564800 or --to-datetime (an ISO time)\n")
    # the same number as milliseconds is shown as the date it is, before anything moves
    proc = reset(eb, "--group", "GSECS", "--topic", "SECS", "--to-timestamp-ms", "1714564800")
    assert proc.returncode == 0 and "to 1714564800 ms (1970-01-20T20:16:04.800Z)" in proc.stdout.splitlines()[0]
    assert stored(eb, "GSECS", "SECS") == {0: 1, 1: 1, 2: 1, 3: 1}


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "yesterday"], "--to 'yesterday' is invalid: one of earliest, latest or an ISO time"),
    (["--to", "-5"], "--to '-5' is ambiguous"),
    (["--to", "2024-13-45T00:00:00"], "--to '2024-13-45T00:00:00' is invalid"),
    (["--to-datetime", "soon"], "--to-datetime 'soon' is invalid: give an ISO 8601 time"),
    ([], "missing the target: give one of --to-earliest, --to-latest, --to-datetime, --to-timestamp-ms, "
         "--to-offset, --shift-by, --to"),
    (["--to-offset", "1", "--to-latest"], "give one target, not --to-latest and --to-offset"),
    (["--to-latest", "--execute", "--dry-run"], "give --execute or --dry-run, not both"),
    # a time no date can name was a traceback (year 3170843 is out of range)
    (["--to-timestamp-ms", "99999999999999999"], "--to-timestamp-ms 99999999999999999 is after the year 9999"),
])
def test_bad_targets_are_one_line_exit_2(eb: Any, args: list[str], message: str) -> None:
    proc = reset(eb, "--group", "GOFF", "--topic", "OFF", *args)
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_an_offset_past_the_end_is_clamped_with_a_warning_and_an_unknown_group_is_named(eb: Any) -> None:
    """``--to-offset 99999`` was silently kept at each queue's end, and a plan for a group no broker has seen
    (a typo) printed ``0 -> 0`` rows as if it were real: both are said in the plan now."""
    produce(eb.namesrv_address, "CLAMP", 8)
    high = highs(eb, "CLAMP")
    commit(eb, "GCLAMP", "CLAMP", {0: 0, 1: 0, 2: 0, 3: 0})
    proc = reset(eb, "--group", "GCLAMP", "--topic", "CLAMP", "--to-offset", "99999")
    assert proc.returncode == 0, proc.stderr
    for q in range(4):
        assert (f"  broker-a  queue {q}: 0 -> {high[q]}  (warning: 99999 is past the queue's end [0, {high[q]}]: "
                f"clamped to {high[q]})") in proc.stdout, proc.stdout
    assert "unknown" not in proc.stdout, "a group with stored offsets is known"
    js = json.loads(reset(eb, "--group", "GCLAMP", "--topic", "CLAMP", "--to-offset", "99999", "--json").stdout)
    assert [r["note"] for r in js["rows"]] == [f"99999 is past the queue's end [0, {high[q]}]: clamped to {high[q]}"
                                               for q in range(4)] and js["warnings"] == []
    inside = reset(eb, "--group", "GCLAMP", "--topic", "CLAMP", "--to-offset", "1")
    assert "warning" not in inside.stdout, inside.stdout

    typo = reset(eb, "--group", "GClampTypo", "--topic", "CLAMP", "--to-earliest")
    assert typo.returncode == 0, typo.stderr
    assert ("warning: group GClampTypo is unknown to every broker (no stored offsets, subscriptions or consumers): "
            "check the name; with --execute these offsets create it") in typo.stdout.splitlines(), typo.stdout
    js = json.loads(reset(eb, "--group", "GClampTypo", "--topic", "CLAMP", "--to-earliest", "--json").stdout)
    assert js["warnings"] and "GClampTypo is unknown" in js["warnings"][0]


def test_unknown_topic_is_exit_1(eb: Any) -> None:
    proc = reset(eb, "--group", "GOFF", "--topic", "NoSuchTopicOff", "--to-earliest")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "rmqrun: error: topic 'NoSuchTopicOff' does not exist on the name server"


def test_online_reset_reaches_a_running_consumer_which_consumes_again(eb: Any, tmp_path: Path) -> None:
    produce(eb.namesrv_address, "ONL", 20)
    record = tmp_path / "seen.txt"
    env = child_env(RMQRUN_HANDLER_RECORD=str(record))
    args = run_args(eb.namesrv_address, "GONL", "ONL", "tests.integration.handlers.record_handler:handle", "--workers", "2")
    with Child(args, tmp_path, env=env) as child:
        wait_for(lambda: len(records(record)) >= 20, 60, "the first 20 messages")
        first = Counter((t, q, o) for t, q, o, _, _ in records(record))
        assert len(first) == 20 and all(n == 1 for n in first.values())

        # explicit offsets cannot be sent to running clients in RocketMQ 4.x: refused, nothing moves
        for explicit in (["--to-offset", "0"], ["--shift-by", "-1"]):
            refused = reset(eb, "--group", "GONL", "--topic", "ONL", *explicit, "--execute")
            assert refused.returncode == 1
            assert "has 1 consumer online; running clients can be reset by time only" in refused.stderr

        dry = reset(eb, "--group", "GONL", "--topic", "ONL", "--to", "earliest", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "(online: through the broker to 1 running consumer of the group" in dry.stdout
        plain = reset(eb, "--group", "GONL", "--topic", "ONL", "--to-earliest")
        assert plain.returncode == 0, plain.stderr  # the running consumer may commit between the two: same head
        assert plain.stdout.splitlines()[0] == dry.stdout.splitlines()[0]
        assert plain.stdout.splitlines()[-1].endswith("; add --execute to apply this plan")
        time.sleep(1.0)
        assert len(records(record)) == 20, "a plan without --execute changes nothing"

        online = reset(eb, "--group", "GONL", "--topic", "ONL", "--to", "earliest", "--execute")
        assert online.returncode == 0, online.stderr
        assert online.stdout.startswith("reset group GONL on ONL to earliest (online: through the broker to 1 "
                                        "running consumer of the group, which continue from the new offsets)")
        assert all(line.endswith("-> 0") for line in online.stdout.splitlines()[1:])
        wait_for(lambda: len(records(record)) >= 40, 60, "the 20 messages consumed again")
        again = Counter((t, q, o) for t, q, o, _, _ in records(record)[20:])
        assert again == first, "the running consumer went back to offset 0 of every queue"

        # by time: only what was stored after the mark comes again
        time.sleep(0.05)
        mark = datetime.now(timezone.utc)
        time.sleep(0.05)
        produce(eb.namesrv_address, "ONL", 4)
        wait_for(lambda: len(records(record)) >= 44, 60, "the 4 new messages")
        new = Counter((t, q, o) for t, q, o, _, _ in records(record)[40:])
        by_time = reset(eb, "--group", "GONL", "--topic", "ONL", "--to-datetime", mark.isoformat(), "--execute")
        assert by_time.returncode == 0 and "(online:" in by_time.stdout, by_time.stderr
        wait_for(lambda: len(records(record)) >= 48, 60, "the 4 messages after the mark consumed again")
        assert Counter((t, q, o) for t, q, o, _, _ in records(record)[44:]) == new
        time.sleep(1.0)
        assert len(records(record)) == 48, "nothing before the mark came again"
        child.signal(signal.SIGTERM)
        assert child.wait(60) == 0

    # the consumer stopped (unregistered): the next reset is offline
    after = reset(eb, "--group", "GONL", "--topic", "ONL", "--to", "latest", "--execute")
    assert after.returncode == 0 and "(offline:" in after.stdout, after.stderr
    assert stored(eb, "GONL", "ONL") == highs(eb, "ONL")
