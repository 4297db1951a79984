"""``rmqrun topic create|update|delete|list|describe`` as real processes against the embedded broker.

What the commands did is read back independently: the broker's topic table
(GET_ALL_TOPIC_CONFIG through the admin client) and the name server's route.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rmqrun.client.admin import AdminClient, TopicConfig
from rmqrun.client.instance import ClientInstance
from rmqrun.remoting.errors import TopicNotExistError
from tests.integration.cli_kit import embedded_broker, produce, run_cli


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("topic")) as broker:
        yield broker


def topic_cli(eb: Any, *args: str) -> Any:
    return run_cli(["topic", *args, "--namesrv", eb.namesrv_address])


def broker_config(eb: Any, topic: str) -> TopicConfig | None:
    async def main() -> TopicConfig | None:
        inst = ClientInstance(eb.namesrv_address, instance_name="topic-test")
        try:
            return (await AdminClient(inst.pool, inst.namesrv).topic_configs(eb.broker_address)).get(topic)
        finally:
            await inst.close()
    return asyncio.run(main())


def route_queues(eb: Any, topic: str) -> tuple[int, int, int] | None:
    async def main() -> tuple[int, int, int] | None:
        inst = ClientInstance(eb.namesrv_address, instance_name="topic-test")
        try:
            route = await inst.namesrv.get_route(topic)
        except TopicNotExistError:
            return None
        finally:
            await inst.close()
        qd = route.queue_datas[0]
        return qd.read_queue_nums, qd.write_queue_nums, qd.perm
    return asyncio.run(main())


def test_create_update_describe_list_delete(eb: Any) -> None:
    proc = topic_cli(eb, "create", "TC_Orders", "-q", "6")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("created TC_Orders: 6 read / 6 write queue(s), perm RW-, order false")
    cfg = broker_config(eb, "TC_Orders")
    assert cfg is not None and (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.order) == (6, 6, 6, False)
    assert route_queues(eb, "TC_Orders") == (6, 6, 6)

    again = topic_cli(eb, "create", "TC_Orders")
    assert again.returncode == 1
    assert again.stderr.strip() == (f"rmqrun: error: topic 'TC_Orders' already exists on broker {eb.broker_address} "
                                    "(use 'rmqrun topic update')")

    # update keeps what is not given
    up = topic_cli(eb, "update", "TC_Orders", "-w", "4", "--order", "-p", "r")
    assert up.returncode == 0, up.stderr
    cfg = broker_config(eb, "TC_Orders")
    assert cfg is not None and (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.order) == (6, 4, 4, True)
    assert route_queues(eb, "TC_Orders") == (6, 4, 4)
    topic_cli(eb, "update", "TC_Orders", "-p", "rw")

    produce(eb.namesrv_address, "TC_Orders", 8)  # round robin over the 4 write queues: 2 each
    desc = topic_cli(eb, "describe", "TC_Orders", "--json")
    assert desc.returncode == 0, desc.stderr
    out = json.loads(desc.stdout)
    (b,) = out["brokers"]
    assert (b["broker"], b["address"], b["read_queues"], b["write_queues"], b["perm"], b["order"]) == \
        ("broker-a", eb.broker_address, 6, 4, "RW-", True)
    # every queue consumers read (6), not only the 4 write queues Java's GET_TOPIC_STATS_INFO answers for:
    # queues 4 and 5 are read but no longer written, and say so
    assert [(q["queue"], q["min_offset"], q["max_offset"], q["access"]) for q in b["queues"]] == \
        [(0, 0, 2, "rw"), (1, 0, 2, "rw"), (2, 0, 2, "rw"), (3, 0, 2, "rw"), (4, 0, 0, "r-"), (5, 0, 0, "r-")]
    assert all(q["last_update_ms"] > 0 for q in b["queues"][:4])
    text = topic_cli(eb, "describe", "TC_Orders")
    assert text.returncode == 0
    assert f"broker broker-a ({eb.broker_address}): 6 read / 4 write queue(s), perm RW-, order true" in text.stdout
    assert "      4  r-               0           0  -  (read, not written: drains)" in text.stdout.splitlines()
    # -t/--topic as mqadmin and kafka-topics spell it, beside the positional NAME
    assert topic_cli(eb, "describe", "-t", "TC_Orders").stdout == text.stdout
    assert topic_cli(eb, "describe", "--topic", "TC_Orders").stdout == text.stdout

    listed = topic_cli(eb, "list", "--json")
    assert listed.returncode == 0 and "TC_Orders" in json.loads(listed.stdout)
    assert "TBW102" not in json.loads(listed.stdout)
    assert "TBW102" in json.loads(topic_cli(eb, "list", "--all", "--json").stdout)

    gone = topic_cli(eb, "delete", "TC_Orders")
    assert gone.returncode == 0, gone.stderr
    assert broker_config(eb, "TC_Orders") is None
    assert route_queues(eb, "TC_Orders") is None
    assert "TC_Orders" not in topic_cli(eb, "list").stdout.split()
    missing = topic_cli(eb, "delete", "TC_Orders")
    assert missing.returncode == 1 and "topic 'TC_Orders' does not exist in cluster DefaultCluster" in missing.stderr
    nodesc = topic_cli(eb, "describe", "TC_Orders")
    assert nodesc.returncode == 1 and "topic 'TC_Orders' does not exist on the name server" in nodesc.stderr


def test_broker_address_and_cluster_name_choose_where(eb: Any) -> None:
    by_addr = topic_cli(eb, "create", "TC_ByAddr", "-r", "2", "-w", "3", "-b", eb.broker_address)
    assert by_addr.returncode == 0, by_addr.stderr
    assert route_queues(eb, "TC_ByAddr") == (2, 3, 6)
    by_cluster = topic_cli(eb, "create", "TC_ByCluster", "-q", "1", "-c", "DefaultCluster")
    assert by_cluster.returncode == 0, by_cluster.stderr
    assert route_queues(eb, "TC_ByCluster") == (1, 1, 6)
    nowhere = topic_cli(eb, "create", "TC_Nowhere", "-c", "NoSuchCluster")
    assert nowhere.returncode == 1
    assert "cluster 'NoSuchCluster' has no master broker on the name server (clusters: DefaultCluster)" in \
        nowhere.stderr
    assert route_queues(eb, "TC_Nowhere") is None
    by_flag = topic_cli(eb, "create", "-t", "TC_ByFlag", "-q", "2")  # mqadmin's -t
    assert by_flag.returncode == 0 and route_queues(eb, "TC_ByFlag") == (2, 2, 6), by_flag.stderr
    assert topic_cli(eb, "update", "--topic", "TC_ByFlag", "-w", "1").returncode == 0  # kafka-topics' --topic
    assert route_queues(eb, "TC_ByFlag") == (2, 1, 6)
    no_update = topic_cli(eb, "update", "TC_NeverMade", "-q", "2")
    assert no_update.returncode == 1 and "does not exist on broker" in no_update.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["create", "TC_Bad", "-p", "x"], "--perm 'x' is invalid: one of rw, r, w, -"),
    (["create", "TC_Bad", "-q", "2", "-r", "3"], "give --queues, or --read-queues/--write-queues, not both"),
    (["create", "bad topic"], "topic='bad topic' (command line TOPIC) is invalid"),
    (["create", "TC_Bad", "-b", "127.0.0.1:1", "-c", "DefaultCluster"], "give either -b/--broker or -c/--cluster"),
    (["update", "TC_Bad"], "nothing to change"),
    (["create"], "missing the topic: give NAME or -t/--topic NAME"),
    (["create", "TC_Bad", "-t", "TC_Other"], "the topic is given twice ('TC_Bad' and -t 'TC_Other')"),
])
def test_bad_topic_options_are_one_line_exit_2(eb: Any, args: list[str], message: str) -> None:
    proc = topic_cli(eb, *args)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr
    assert route_queues(eb, "TC_Bad") is None


def test_check_names_the_command_that_creates_a_missing_topic(eb: Any, tmp_path: Path) -> None:
    proc = run_cli(["check", "workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "GTC",
                    "--topic", "TC_NotYet"])
    assert proc.returncode == 1
    assert "'rmqrun topic create TC_NotYet'" in proc.stdout
