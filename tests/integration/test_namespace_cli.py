"""The one-shot commands and the pull consumer under a namespace, against a real embedded broker.

``produce`` must store into ``ns%topic`` (the broker's topic table is asked),
``read`` and the :class:`~rmqrun.pull.PullConsumer` must find the messages by
the plain name and show the plain name, offsets must be stored under
``ns%group`` / ``ns%topic``, and ``status`` must find them by the plain group
and print plain topics. A bad namespace is refused before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqrun.pull import PullConsumer
from tests.integration.cli_kit import child_env, embedded_broker, run_cli
from tests.integration.test_cli_produce_status import stored

NS = "MQ_INST_cli"
TOPIC = "NsCli"
GROUP = "GNsPull"


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("namespace")) as broker:
        yield broker


@pytest.fixture(scope="module")
def produced(eb) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--namespace", NS, "--topic", TOPIC,
                    "--count", "12", "--tags", "TagA", "--body", "ns body {i}"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"sent 12 message(s) to {TOPIC} in "), proc.stdout


def test_produce_stores_into_the_wrapped_topic_with_the_instance_id(  # type: ignore[no-untyped-def]
        eb, produced) -> None:
    names = set(eb.broker.topics.names())
    assert f"{NS}%{TOPIC}" in names and TOPIC not in names, names
    msgs = stored(eb, f"{NS}%{TOPIC}", 12)
    assert sorted(m.body for m in msgs) == sorted(f"ns body {i}".encode() for i in range(12))
    assert {m.topic for m in msgs} == {f"{NS}%{TOPIC}"}
    assert {m.properties.get("INSTANCE_ID") for m in msgs} == {NS}


def test_the_producer_group_is_wrapped_and_send_results_name_the_plain_topic(  # type: ignore[no-untyped-def]
        eb) -> None:
    import asyncio

    from rmqrun.client.producer import Producer

    async def main() -> None:
        async with Producer(eb.namesrv_address, "PGNs", namespace=NS) as producer:
            assert producer.group == f"{NS}%PGNs"
            result = await producer.send("NsResult", b"x")
            assert result.queue.topic == "NsResult"
            batch = await producer.send_batch("NsResult", [b"a", b"b"], queue=result.queue)
            assert batch.queue == result.queue
    asyncio.run(main())
    msgs = stored(eb, f"{NS}%NsResult", 3)
    assert sorted(m.body for m in msgs) == [b"a", b"b", b"x"]
    assert {m.properties.get("INSTANCE_ID") for m in msgs} == {NS}


def test_produce_takes_the_namespace_from_the_environment(eb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "NsEnv", "--count", "3"],
                   env=child_env(RMQRUN_NAMESPACE=NS))
    assert proc.returncode == 0, proc.stderr
    assert f"{NS}%NsEnv" in eb.broker.topics.names() and "NsEnv" not in eb.broker.topics.names()
    config = tmp_path / "ns.yaml"
    config.write_text(f"namespace: {NS}\ntopic: NsFile\n")
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--config", str(config), "--count", "2"])
    assert proc.returncode == 0, proc.stderr
    assert f"{NS}%NsFile" in eb.broker.topics.names() and "NsFile" not in eb.broker.topics.names()


def test_read_finds_the_plain_topic_and_prints_it_plain(eb, produced) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["read", "--namesrv", eb.namesrv_address, "--namespace", NS, "--topic", TOPIC, "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 12 and {r["topic"] for r in rows} == {TOPIC}
    assert sorted(r["body"] for r in rows) == sorted(f"ns body {i}" for i in range(12))
    # without the namespace the plain name is another topic, which does not exist
    proc = run_cli(["read", "--namesrv", eb.namesrv_address, "--topic", TOPIC])
    assert proc.returncode == 1 and TOPIC in proc.stderr, proc.stderr


def test_pull_consumer_round_trip_and_status(eb, produced) -> None:  # type: ignore[no-untyped-def]
    with PullConsumer(eb.namesrv_address, GROUP, namespace=NS) as consumer:
        assert consumer.namespace == NS
        queues = consumer.fetch_subscribe_message_queues(TOPIC)
        assert queues and {mq.topic for mq in queues} == {TOPIC}
        bodies = []
        ids = []
        for mq in queues:
            result = consumer.pull(mq, "TagA", 0, 32)
            assert {m.topic for m in result.messages} <= {TOPIC}
            bodies += [m.body for m in result.messages]
            ids += [m.offset_msg_id for m in result.messages]
            assert consumer.max_offset(mq) == result.next_begin_offset
            assert consumer.min_offset(mq) == 0
            consumer.update_consume_offset(mq, result.next_begin_offset)
        assert sorted(bodies) == sorted(f"ns body {i}".encode() for i in range(12))
        viewed = consumer.view_message(ids[0])
        assert viewed.topic == TOPIC and viewed.body in bodies
    # the offsets are stored under the wrapped group and topic, nowhere else
    offsets = eb.broker.store.consumer_offsets
    assert sum(offsets.offsets(f"{NS}%{GROUP}", f"{NS}%{TOPIC}").values()) == 12
    assert offsets.offsets(GROUP, f"{NS}%{TOPIC}") == {} and offsets.offsets(GROUP, TOPIC) == {}
    with PullConsumer(eb.namesrv_address, GROUP, namespace=NS) as again:
        assert sum(again.fetch_consume_offset(mq) for mq in again.fetch_subscribe_message_queues(TOPIC)) == 12

    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--namespace", NS, "--group", GROUP, "--json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["group"] == GROUP and data["namespace"] == NS
    assert {q["topic"] for q in data["queues"]} == {TOPIC}
    assert data["total"]["consumer_offset"] == 12 and data["total"]["lag"] == 0

    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", GROUP, "--topic", TOPIC],
                   env=child_env(RMQRUN_NAMESPACE=NS))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"group {GROUP} (namespace {NS})"
    rows = [ln for ln in lines[3:] if ln.startswith(TOPIC)]
    assert len(rows) == len(queues) and not any(NS in ln for ln in lines[1:])

    # the plain group is another group, which no broker knows
    proc = run_cli(["status", "--namesrv", eb.namesrv_address, "--group", GROUP])
    assert proc.returncode == 1 and "unknown" in proc.stderr


@pytest.mark.parametrize("args", [
    ["produce", "--topic", "T", "--count", "1"],
    ["status", "--group", "G"],
    ["read", "--topic", "T"],
    ["run", "workers.noop:handle", "--group", "G", "--topic", "T"],
    ["check", "workers.noop:handle", "--group", "G", "--topic", "T"],
])
def test_a_bad_namespace_is_refused_naming_it(eb, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli([*args, "--namesrv", eb.namesrv_address, "--namespace", "bad%ns"])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "bad%ns" in proc.stdout + proc.stderr and "namespace" in proc.stdout + proc.stderr


def test_a_pull_consumer_refuses_a_bad_namespace() -> None:
    with pytest.raises(ValueError, match="namespace 'a%b' is invalid"):
        PullConsumer("127.0.0.1:9876", "G", namespace="a%b")


def test_check_looks_for_the_wrapped_topic(eb, produced) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["check", "workers.noop:handle", "--namesrv", eb.namesrv_address, "--namespace", NS,
                    "--group", "GNsCheck", "--topic", TOPIC])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{TOPIC}: 4 readable queue(s)" in proc.stdout
    assert f"as group GNsCheck in namespace {NS} ({NS}%GNsCheck on the wire)" in proc.stdout
    proc = run_cli(["check", "workers.noop:handle", "--namesrv", eb.namesrv_address,
                    "--group", "GNsCheck", "--topic", TOPIC])
    assert proc.returncode == 1 and f"topic '{TOPIC}' does not exist" in proc.stdout + proc.stderr


def test_topic_and_offsets_commands_act_on_the_wrapped_names(eb, produced) -> None:  # type: ignore[no-untyped-def]
    addr = ["--namesrv", eb.namesrv_address, "--namespace", NS]
    proc = run_cli(["topic", "create", "NsAdmin", "--queues", "2", *addr])
    assert proc.returncode == 0, proc.stderr
    names = set(eb.broker.topics.names())
    assert f"{NS}%NsAdmin" in names and "NsAdmin" not in names
    proc = run_cli(["topic", "describe", "NsAdmin", "--json", *addr])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["topic"] == f"{NS}%NsAdmin"
    proc = run_cli(["topic", "list", "--json", *addr])
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert {"NsAdmin", TOPIC} <= set(listed) and not any(NS in n for n in listed), listed
    plain = json.loads(run_cli(["topic", "list", "--json", "--namesrv", eb.namesrv_address]).stdout)
    assert f"{NS}%NsAdmin" in plain and "NsAdmin" not in plain

    proc = run_cli(["offsets", "reset", "--group", "GNsReset", "--topic", TOPIC, "--to", "latest", "--json",
                    "--execute", *addr])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["group"], out["topic"], out["namespace"], out["path"]) == ("GNsReset", TOPIC, NS, "offline")
    assert {r["topic"] for r in out["rows"]} == {TOPIC}
    offsets = eb.broker.store.consumer_offsets
    assert sum(offsets.offsets(f"{NS}%GNsReset", f"{NS}%{TOPIC}").values()) == 12
    assert offsets.offsets("GNsReset", f"{NS}%{TOPIC}") == {}
    proc = run_cli(["offsets", "reset", "--group", "GNsReset", "--topic", TOPIC, "--to", "earliest", "--dry-run",
                    *addr])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"would reset group GNsReset on {TOPIC} in namespace {NS} to ")

    proc = run_cli(["topic", "delete", "NsAdmin", *addr])
    assert proc.returncode == 0, proc.stderr
    assert f"{NS}%NsAdmin" not in eb.broker.topics.names()


def test_run_consumes_the_wrapped_topic_and_logs_plain_names(  # type: ignore[no-untyped-def]
        eb, produced, tmp_path: Path) -> None:
    import signal

    from tests.integration.cli_kit import Child, run_args, wait_for
    from tests.integration.handlers.topic_handler import deliveries

    record = tmp_path / "deliveries.txt"
    env = child_env(RMQRUN_HANDLER_RECORD=str(record), RMQRUN_NAMESPACE=NS)
    args = run_args(eb.namesrv_address, "GNsRun", TOPIC, "tests.integration.handlers.topic_handler:handle", "--workers", "1")
    with Child(args, tmp_path, env=env) as child:
        wait_for(lambda: len(deliveries(record)) >= 12, 60, what="12 deliveries")
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0, child.stderr[-3000:]
    assert {topic for _, topic, _, _ in deliveries(record)} == {TOPIC}
    log = child.stderr
    assert f"consuming {TOPIC}[*] as group GNsRun in namespace {NS}" in log
    assert f"rebalance: took MessageQueue [topic={TOPIC}," in log and f"%RETRY%GNsRun" in log
    assert f"{NS}%" not in log, [ln for ln in log.splitlines() if f"{NS}%" in ln]
    offsets = eb.broker.store.consumer_offsets
    assert sum(offsets.offsets(f"{NS}%GNsRun", f"{NS}%{TOPIC}").values()) == 12
