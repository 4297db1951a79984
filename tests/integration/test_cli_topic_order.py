"""``rmqrun topic create|update|delete --order`` and the name server's ORDER_TOPIC_CONFIG entry.

As ``mqadmin updateTopic -o true`` does, ``--order`` writes ``"<broker>:<write queues>"`` to
the name server's KV table (namespace ORDER_TOPIC_CONFIG): for every broker of the cluster with
``-c``, merged into the entry already there with ``-b``. What the commands wrote is read back
independently: GET_KV_CONFIG, the route's ``orderTopicConf`` (served when the name server has
``order_message_enable``), the file the name server keeps it in across a restart, and where a
producer's messages land (an ordered topic's producers hash over the entry's queues only).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.admin import ORDER_TOPIC_CONFIG, AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.cli_kit import run_cli


def topic_cli(eb: Any, *args: str) -> Any:
    return run_cli(["topic", *args, "--namesrv", eb.namesrv_address])


def admin_call(eb: EmbeddedBroker, fn: Any) -> Any:
    async def main() -> Any:
        inst = ClientInstance(eb.namesrv_address, instance_name="order-test")
        try:
            return await fn(AdminClient(inst.pool, inst.namesrv), inst)
        finally:
            await inst.close()
    return asyncio.run(main())


def order_conf(eb: EmbeddedBroker, topic: str) -> str | None:
    return admin_call(eb, lambda admin, _inst: admin.get_kv_config(ORDER_TOPIC_CONFIG, topic))


def route_order_conf(eb: EmbeddedBroker, topic: str) -> str | None:
    async def get(_admin: AdminClient, inst: ClientInstance) -> str | None:
        return (await inst.namesrv.get_route(topic)).order_topic_conf
    return admin_call(eb, get)


def items(conf: str | None) -> set[str]:
    return set((conf or "").split(";")) - {""}


@pytest.fixture
def eb(tmp_path: Path):  # type: ignore[no-untyped-def]
    broker = EmbeddedBroker(tmp_path / "broker", flush_mode="async", order_message_enable=True).start_in_thread()
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def test_cluster_mode_writes_every_broker_and_producers_hash_over_it(eb: EmbeddedBroker, tmp_path: Path) -> None:
    made = topic_cli(eb, "create", "TO_Cluster", "--order", "-q", "4", "-c", "DefaultCluster")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().endswith("order true on " + eb.broker_address + "; name server order conf broker-a:4")
    assert order_conf(eb, "TO_Cluster") == "broker-a:4"
    assert route_order_conf(eb, "TO_Cluster") == "broker-a:4"
    desc = json.loads(topic_cli(eb, "describe", "TO_Cluster", "--json").stdout)
    assert desc["order_conf"] == "broker-a:4"

    async def send() -> set[int]:
        async with Producer(eb.namesrv_address, "PG_order_conf") as producer:
            return {(await producer.send("TO_Cluster", b"x", sharding_key=f"k{i}")).queue.queue_id
                    for i in range(40)}
    assert asyncio.run(send()) == {0, 1, 2, 3}
    # The producers of an ordered topic hash over the entry's queues, whatever the broker holds:
    # an entry saying 2 queues (the broker still has 4 writable) keeps keys on queues 0 and 1.
    admin_call(eb, lambda admin, _i: admin.put_kv_config(ORDER_TOPIC_CONFIG, "TO_Cluster", "broker-a:2"))
    assert asyncio.run(send()) == {0, 1}

    # An update of an ordered topic rewrites the entry with the new write-queue count.
    up = topic_cli(eb, "update", "TO_Cluster", "-w", "3")
    assert up.returncode == 0, up.stderr
    assert "name server order conf of TO_Cluster: broker-a:3" in up.stdout
    assert order_conf(eb, "TO_Cluster") == "broker-a:3"

    # Stored on disk in Java's layout, and served again after a restart.
    kv_file = eb.config.data_dir / "namesrv" / "kvConfig.json"
    assert json.loads(kv_file.read_text())["configTable"][ORDER_TOPIC_CONFIG]["TO_Cluster"] == "broker-a:3"
    eb.stop_in_thread()
    eb2 = EmbeddedBroker(eb.config.data_dir, flush_mode="async", order_message_enable=True).start_in_thread()
    try:
        assert order_conf(eb2, "TO_Cluster") == "broker-a:3"
        gone = topic_cli(eb2, "delete", "TO_Cluster")
        assert gone.returncode == 0, gone.stderr
        assert order_conf(eb2, "TO_Cluster") is None
        assert "TO_Cluster" not in json.loads(kv_file.read_text())["configTable"][ORDER_TOPIC_CONFIG]
    finally:
        eb2.stop_in_thread()


def test_broker_mode_merges_its_item_and_no_order_removes_it(eb: EmbeddedBroker) -> None:
    # Another broker of the cluster already has its item (as a second broker's create -b would leave).
    admin_call(eb, lambda admin, _i: admin.put_kv_config(ORDER_TOPIC_CONFIG, "TO_Broker", "broker-b:8"))
    made = topic_cli(eb, "create", "TO_Broker", "--order", "-r", "3", "-w", "3", "-b", eb.broker_address)
    assert made.returncode == 0, made.stderr
    assert items(order_conf(eb, "TO_Broker")) == {"broker-b:8", "broker-a:3"}
    plain = topic_cli(eb, "update", "TO_Broker", "--no-order", "-b", eb.broker_address)
    assert plain.returncode == 0, plain.stderr
    assert order_conf(eb, "TO_Broker") == "broker-b:8"
    # The broker's own flag went off too.
    assert "order false" in plain.stdout


def test_without_order_message_enable_routes_carry_no_order_conf(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "plain", flush_mode="async") as eb:
        made = topic_cli(eb, "create", "TO_Plain", "--order", "-q", "2")
        assert made.returncode == 0, made.stderr
        assert order_conf(eb, "TO_Plain") == "broker-a:2"  # the entry is written ...
        assert route_order_conf(eb, "TO_Plain") is None   # ... but not served, as a default Java name server

        async def raw(_admin: AdminClient, inst: ClientInstance) -> dict[str, RemotingCommand]:
            async def ask(code: int, **ext: str) -> RemotingCommand:
                return await inst.namesrv.request(RemotingCommand(code, dict(ext)))
            return {
                "config": await ask(RequestCode.GET_NAMESRV_CONFIG),
                "miss": await ask(RequestCode.GET_KV_CONFIG, namespace=ORDER_TOPIC_CONFIG, key="TO_Never"),
                "list": await ask(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace=ORDER_TOPIC_CONFIG),
                "no_ns": await ask(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="NO_SUCH_NS"),
                "no_key": await ask(RequestCode.PUT_KV_CONFIG, namespace=ORDER_TOPIC_CONFIG, value="x"),
            }
        got = admin_call(eb, raw)
        assert (got["miss"].code, got["miss"].remark) == (
            ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ORDER_TOPIC_CONFIG Key: TO_Never")
        assert b"orderMessageEnable=false" in (got["config"].body or b"")
        assert got["list"].code == ResponseCode.SUCCESS
        assert json.loads(got["list"].body or b"{}") == {"table": {"TO_Plain": "broker-a:2"}}
        assert (got["no_ns"].code, got["no_ns"].remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                            "No config item, Namespace: NO_SUCH_NS")
        assert (got["no_key"].code, got["no_key"].remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
