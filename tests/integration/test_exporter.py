"""``rmqrun exporter``: a group's lag from the broker alone, with no consumer of the group running.

A real ``rmqrun exporter`` process is scraped over HTTP (with the strict
text-format reader of the metrics tests) while nothing consumes: every number
is checked against offsets the test committed itself, a commit made while it
runs shows within one reading, and once the broker is gone the group's series
vanish instead of repeating the last good lag.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.namesrv import BrokerEntry
from rmqrun.model import MessageQueue
from rmqrun.pull import AsyncPullConsumer
from tests.integration.cli_kit import Child, embedded_broker, free_port, produce, run_cli, wait_for
from tests.integration.test_metrics_endpoint import Scrape, scrape

TOPIC = "ExT"
GROUP = "GEx"


def commit(namesrv: str, offsets: dict[int, int]) -> None:
    """Store the group's offsets per queue id, as a consumer that then stopped would have."""
    async def main() -> None:
        async with AsyncPullConsumer(namesrv, GROUP) as c:
            for qid, offset in offsets.items():
                await c.update_consume_offset(MessageQueue(TOPIC, "broker-a", qid), offset)
    asyncio.run(main())


def dead_letter(namesrv: str, addr: str, n: int) -> None:
    """Send n messages of the topic to the group's DLQ, as a consumer past its retries would (delay level -1)."""
    async def main() -> None:
        async with AsyncPullConsumer(namesrv, "GProbe") as c:
            mq = max(await c.fetch_subscribe_message_queues(TOPIC), key=lambda q: q.queue_id)
            for msg in (await c.pull(mq, "*", 0, n)).messages[:n]:
                await c._client().broker.consumer_send_msg_back(
                    addr, group=GROUP, commit_log_offset=msg.commit_log_offset, delay_level=-1,
                    origin_msg_id=msg.msg_id, origin_topic=TOPIC, max_reconsume_times=16)
    asyncio.run(main())


def max_offsets(namesrv: str) -> dict[str, int]:
    async def main() -> dict[str, int]:
        async with AsyncPullConsumer(namesrv, "GProbe") as c:
            return {str(mq.queue_id): await c.max_offset(mq) for mq in await c.fetch_subscribe_message_queues(TOPIC)}
    return asyncio.run(main())


def lag_by_queue(s: Scrape, name: str = "rmqrun_queue_lag_messages") -> dict[str, float]:
    return {lab["queue_id"]: v for lab, v in s.all(name) if lab["group"] == GROUP and lab["topic"] == TOPIC}


def test_exporter_lag_is_correct_with_no_consumer_running(tmp_path: Path) -> None:
    port = free_port()
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, TOPIC, 40)                       # about 10 per queue
        commit(eb.namesrv_address, {0: 9, 1: 4, 2: 0})              # queue 3: never committed
        produce(eb.namesrv_address, TOPIC, 8)
        dead_letter(eb.namesrv_address, eb.broker_address, 3)
        high = max_offsets(eb.namesrv_address)
        assert sorted(high) == ["0", "1", "2", "3"] and sum(high.values()) == 48
        # queue 3 was never committed: while its first message is in memory the broker answers 0 for it (Java's
        # rule), which is where a consumer of the group would start: its lag is everything in it
        committed = {"0": 9, "1": 4, "2": 0, "3": 0}
        expected = {q: high[q] - committed[q] for q in high}
        args = ["exporter", "--namesrv", eb.namesrv_address, "--group", GROUP, "--group", "GNobody",
                "--metrics-port", str(port), "--interval", "1"]
        with Child(args, tmp_path, name="exporter") as child:
            child.wait_output(f"metrics on http://127.0.0.1:{port}/metrics")
            # a first reading of both groups (they are read one after the other)
            s = wait_for(lambda: (lambda x: x if all(x.value("rmqrun_exporter_up", group=g) == 1
                                                     for g in (GROUP, "GNobody")) else None)(scrape(port)),
                         30, "a first reading of both groups")
            assert lag_by_queue(s) == expected
            assert lag_by_queue(s, "rmqrun_queue_broker_offset") == high
            assert lag_by_queue(s, "rmqrun_queue_consumer_offset") == committed
            for lab, _ in s.all("rmqrun_queue_lag_messages"):
                assert lab["broker"] == "broker-a" and set(lab) == {"group", "topic", "broker", "queue_id"}
            ages = lag_by_queue(s, "rmqrun_queue_oldest_unfinished_age_seconds")
            assert set(ages) == set(high) and all(0 <= a < 600 for a in ages.values())
            first_commit = lag_by_queue(s, "rmqrun_queue_last_commit_timestamp_seconds")
            assert set(first_commit) == set(high) and all(abs(t - time.time()) < 60 for t in first_commit.values())
            # a group nobody ever committed for reads fine and has no queue series
            assert s.value("rmqrun_exporter_up", group="GNobody") == 1
            assert s.value("rmqrun_exporter_group_known", group="GNobody") == 0  # as `rmqrun status -g` says
            assert not [lab for lab, _ in s.all("rmqrun_queue_lag_messages") if lab["group"] == "GNobody"]
            assert s.types["process_resident_memory_bytes"] == "gauge" and "python_info" in s.types
            assert s.value("rmqrun_exporter_read_failures_total", group=GROUP) == 0
            # the group's dead letters, from %DLQ%GEx's offsets; a group without a DLQ has none
            assert s.value("rmqrun_dlq_messages_total", group=GROUP) == 3
            assert s.value("rmqrun_dlq_messages_total", group="GNobody") == 0
            # the example dashboard's exporter panels ask only for series this scrape has
            known = set(s.types) | {name for name, _, _ in s.samples}
            dashboard = json.loads((Path(__file__).parents[2] / "config" / "grafana-dashboard.json").read_text())
            exprs = [t["expr"] for p in dashboard["panels"] if p["description"].startswith("rmqrun exporter:")
                     for t in p["targets"]]
            asked = {name for e in exprs for name in re.findall(r"rmqrun_[a-z_]+", e)}
            assert len(asked) >= 3 and asked <= known, sorted(asked - known)

            # a commit while the exporter runs: the lag and the commit time follow within a reading
            time.sleep(1.1)
            commit(eb.namesrv_address, {1: high["1"]})
            s = wait_for(lambda: (lambda x: x if lag_by_queue(x).get("1") == 0 else None)(scrape(port)), 20,
                         "queue 1 caught up")
            commits = lag_by_queue(s, "rmqrun_queue_last_commit_timestamp_seconds")
            assert commits["1"] > first_commit["1"] and commits["0"] == first_commit["0"]
            assert "1" not in lag_by_queue(s, "rmqrun_queue_oldest_unfinished_age_seconds")

            eb.stop_in_thread()                                       # the broker is gone: no stale numbers
            # both groups' readings failed: the exporter reads one group after the other, so a scrape between the
            # two still holds the second group's last good reading
            s = wait_for(lambda: (lambda x: x if all(x.value("rmqrun_exporter_up", group=g) == 0
                                                     for g in (GROUP, "GNobody")) else None)(scrape(port)),
                         60, "the failed reading of both groups")
            assert not s.all("rmqrun_queue_lag_messages") and not s.all("rmqrun_dlq_messages_total")
            assert (s.value("rmqrun_exporter_read_failures_total", group=GROUP) or 0) >= 1
            assert s.value("rmqrun_exporter_last_read_timestamp_seconds", group=GROUP) is not None
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0
        assert child.stderr.count(f"group {GROUP}: cannot read its lag") == 1, child.stderr


def test_exporter_sums_the_dead_letters_of_every_master(tmp_path: Path) -> None:
    """A cluster of two masters, each holding some of the group's dead letters: the gauge is their sum (the
    last master's alone would read as a drop, a counter reset, to a rate() over it)."""
    port = free_port()
    with embedded_broker(tmp_path / "a") as a:
        b = EmbeddedBroker(tmp_path / "b", flush_mode="async", broker_name="broker-b").start_in_thread()
        try:
            produce(a.namesrv_address, TOPIC, 40)                     # about 10 per queue
            dead_letter(a.namesrv_address, a.broker_address, 3)
            produce(b.namesrv_address, TOPIC, 20)
            dead_letter(b.namesrv_address, b.broker_address, 2)
            # broker-b joins broker-a's name server: one cluster, two masters
            a.namesrv.attach(BrokerEntry(a.config.cluster_name, "broker-b", b.broker_address, b.broker.topics))
            args = ["exporter", "--namesrv", a.namesrv_address, "--group", GROUP, "--metrics-port", str(port),
                    "--interval", "1"]
            with Child(args, tmp_path, name="exporter") as child:
                child.wait_output(f"metrics on http://127.0.0.1:{port}/metrics")
                s = wait_for(lambda: (lambda x: x if x.value("rmqrun_exporter_up", group=GROUP) == 1 else None)(
                    scrape(port)), 20, "a first reading")
                assert s.value("rmqrun_dlq_messages_total", group=GROUP) == 5
                child.signal(signal.SIGTERM)
                assert child.wait(30) == 0
        finally:
            b.stop_in_thread()


def test_a_group_no_broker_knows_is_flagged_once_and_again_when_it_becomes_known(tmp_path: Path) -> None:
    """``--group TypoGroup`` used to serve up 1 and nothing else, with no log line: a lag alert went silent."""
    port = free_port()
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, TOPIC, 8)
        commit(eb.namesrv_address, {0: 1})
        args = ["exporter", "--namesrv", eb.namesrv_address, "--group", "TypoGroup", "--group", GROUP,
                "--metrics-port", str(port), "--interval", "1"]
        with Child(args, tmp_path, name="exporter") as child:
            child.wait_output(f"metrics on http://127.0.0.1:{port}/metrics")
            # the groups are read in turn: wait for the first reading of both (a scrape may fall between them)
            first = wait_for(lambda: (lambda x: x if None not in (
                x.value("rmqrun_exporter_group_known", group="TypoGroup"),
                x.value("rmqrun_exporter_group_known", group=GROUP)) else None)(scrape(port)), 20,
                "a first reading of both groups")
            assert first.value("rmqrun_exporter_group_known", group="TypoGroup") == 0
            assert first.value("rmqrun_exporter_up", group="TypoGroup") == 1  # the cluster answered
            assert first.value("rmqrun_exporter_group_known", group=GROUP) == 1
            read_at = first.value("rmqrun_exporter_last_read_timestamp_seconds", group="TypoGroup")
            # two readings later the warning is still one line, not one per reading
            wait_for(lambda: (scrape(port).value("rmqrun_exporter_last_read_timestamp_seconds", group="TypoGroup")
                              or 0) > read_at + 1.5, 20, "two more readings")
            warning = "group TypoGroup: no broker knows it"
            assert child.stderr.count(warning) == 1, child.stderr
            assert "WARNING" in next(ln for ln in child.stderr.splitlines() if warning in ln)
            assert "group GEx: no broker knows it" not in child.stderr

            async def deploy() -> None:  # the group appears: a consumer of it stores an offset
                async with AsyncPullConsumer(eb.namesrv_address, "TypoGroup") as c:
                    await c.update_consume_offset(MessageQueue(TOPIC, "broker-a", 0), 1)
            asyncio.run(deploy())
            wait_for(lambda: scrape(port).value("rmqrun_exporter_group_known", group="TypoGroup") == 1, 20,
                     "the group known")
            child.wait_output("group TypoGroup: known to the brokers now")
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0
        assert child.stderr.count(warning) == 1, child.stderr


def test_exporter_refuses_a_bad_option_and_a_busy_port(tmp_path: Path) -> None:
    assert run_cli(["exporter", "--namesrv", "127.0.0.1:1", "--metrics-port", "9"]).returncode == 2  # no --group
    bad = run_cli(["exporter", "--namesrv", "127.0.0.1:1", "--group", "bad group!", "--metrics-port", "9"])
    assert bad.returncode == 2 and "group" in bad.stderr
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        proc = run_cli(["exporter", "--namesrv", "127.0.0.1:1", "--group", "G", "--metrics-port", str(taken)])
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1:{taken}" in proc.stderr
    assert "Traceback" not in proc.stderr
