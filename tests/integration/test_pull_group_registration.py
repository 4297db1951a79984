"""A pull consumer that commits registers its group, like Java's DefaultLitePullConsumer.

Against the embedded broker: after the first commit the broker lists the consumer in the group
(GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST with CONSUME_ACTIVELY and its topic) and has
created ``%RETRY%<group>``, the topic ``mqadmin consumerProgress`` and the Dashboard find groups by; after
it closes it has left the group, the retry topic stays and ``rmqrun status`` shows the group's progress. A
consumer that only reads registers nothing, and one committing for a group whose push consumers run does
not join their rebalance.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.pull import AsyncPullConsumer
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.errors import BrokerError
from tests.integration.cli_kit import run_cli
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce

TOPIC = "RgT"


async def online(namesrv: str, addr: str, group: str) -> tuple[list[str], str, frozenset[str]]:
    """(client ids, consume type, subscribed topics) of the group as the broker sees it; ([], "", {}) if none."""
    inst = ClientInstance(namesrv, instance_name="probe")
    try:
        ids = await inst.broker.get_consumer_list(addr, group)
        conn = await AdminClient(inst.pool, inst.namesrv).consumer_connection(addr, group)
        return sorted(ids), conn.consume_type, conn.topics
    except BrokerError as exc:
        assert exc.code == ResponseCode.CONSUMER_NOT_ONLINE or "no consumer" in str(exc).lower(), exc
        return [], "", frozenset()
    finally:
        await inst.close()


async def topics(namesrv: str) -> list[str]:
    inst = ClientInstance(namesrv, instance_name="probe")
    try:
        return await AdminClient(inst.pool, inst.namesrv).topic_list()
    finally:
        await inst.close()


async def drain(c: AsyncPullConsumer, commit: bool) -> int:
    """Pull every queue of TOPIC to its end; commit the ends if asked. Returns the messages read."""
    n = 0
    for mq in await c.fetch_subscribe_message_queues(TOPIC):
        result = await c.pull(mq, "TagA || TagB", 0, 32)
        n += len(result.messages)
        if commit:
            await c.update_consume_offset(mq, result.next_begin_offset)
    if commit:
        await c.persist_consume_offsets()
    return n


def test_a_committing_pull_consumer_registers_its_group_and_leaves_it_on_close(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            ns, addr = eb.namesrv_address, eb.broker_address
            await produce(ns, TOPIC, 12, tags=["TagA", "TagB", "TagC"])
            async with AsyncPullConsumer(ns, "GRead") as reader:      # reads, never commits
                assert await drain(reader, commit=False) == 8
                assert (await online(ns, addr, "GRead"))[0] == []
            assert "%RETRY%GRead" not in await topics(ns)

            c = AsyncPullConsumer(ns, "GReg")
            await c.start()
            assert await drain(c, commit=True) == 8
            ids, kind, subscribed = await online(ns, addr, "GReg")
            assert ids == [c.client_id] and kind == "CONSUME_ACTIVELY" and subscribed == {TOPIC}
            assert "%RETRY%GReg" in await topics(ns)                  # what mqadmin finds groups by
            # mqadmin consumerStatus: the broker forwards GET_CONSUMER_RUNNING_INFO to the pull consumer
            conn = await Connection.open(addr)
            try:
                info = await conn.request(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": "GReg", "clientId": c.client_id, "jstackEnable": "false"}), 10)
            finally:
                conn.close()
            assert info.code == ResponseCode.SUCCESS, info.remark
            running = fastjson.loads(info.body)
            assert running["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
            assert running["properties"]["PROP_NAMESERVER_ADDR"] == ns + ";"
            assert [(x["topic"], x["subString"]) for x in running["subscriptionSet"]] == [(TOPIC, "TagA || TagB")]
            assert running["mqTable"] == {}
            await c.close()
            assert (await online(ns, addr, "GReg"))[0] == []          # unregistered at once, not after 2 min
            assert "%RETRY%GReg" in await topics(ns)

            # rmqrun status (another process) shows the group and what it committed
            proc = await asyncio.to_thread(run_cli, ["status", "--namesrv", ns, "--group", "GReg", "--json"])
            assert proc.returncode == 0, proc.stderr
            rows = [r for r in json.loads(proc.stdout)["queues"] if r["topic"] == TOPIC]
            assert len(rows) == 4 and all(r["lag"] == 0 and r["consumer_offset"] == r["broker_offset"]
                                          for r in rows), rows

            async with AsyncPullConsumer(ns, "GOptOut", register=False) as quiet:
                await drain(quiet, commit=True)
                assert (await online(ns, addr, "GOptOut"))[0] == []
            assert "%RETRY%GOptOut" not in await topics(ns)

    asyncio.run(asyncio.wait_for(main(), 180))


def test_a_pull_consumer_does_not_join_a_group_its_push_consumers_run(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            ns, addr = eb.namesrv_address, eb.broker_address
            await produce(ns, TOPIC, 8)
            async with Running(consumer_config(ns, "GPush", TOPIC), pool_config("workers.noop:handle", 1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                push_id = engine.instance.client_id
                async with AsyncPullConsumer(ns, "GPush") as backfill:
                    await drain(backfill, commit=True)
                    ids, kind, _ = await online(ns, addr, "GPush")
                    assert ids == [push_id] and kind == "CONSUME_PASSIVELY"   # the rebalance sees only them
                    assert backfill._registration is not None and backfill._registration.registered is False
                assert await r.stop() == 0

    asyncio.run(asyncio.wait_for(main(), 180))
