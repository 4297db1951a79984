"""Slave reads: the consumer pulls from the broker member a pull answer suggests.

A Java master whose reads fall behind answers ``suggestWhichBrokerId=1``; the
client's next pull of that queue goes to the slave (``findBrokerAddressInSubscribe``
with the suggested id), and a pull sent to a slave never carries the commit-offset
flag (``PullAPIWrapper`` clears it: offsets are committed on the master only).

Here the embedded name server routes the broker set as a master and a slave; the
"slave" is a second TCP server of the same broker process serving pulls (and
heartbeats) from the same store, as a caught-up slave would. The master's pull
answers suggest the slave; the slave's suggest the master back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqrun.broker.namesrv import BrokerEntry
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.server import RemotingServer
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "workers.orderly_record:handle"
FLAG_COMMIT_OFFSET = 0x1
SLAVE_ID = 1


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


@dataclass
class MasterAndSlave(BrokerEntry):
    """The broker set as the name server tells it: the master, and a slave at ``slave_address``."""

    slave_address: str = ""

    def broker_data(self, *, int_keys: bool) -> dict[str, Any]:
        data = super().broker_data(int_keys=int_keys)
        data["brokerAddrs"][SLAVE_ID if int_keys else str(SLAVE_ID)] = self.slave_address
        return data


def test_pulls_follow_the_suggested_slave_without_committing_there(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SR", 10)
            procs = eb.broker.processors
            master_pulls: list[int] = []
            slave_pulls: list[int] = []  # the sysFlag of each pull the slave got
            slave_found = [0]

            async def master_pull(conn, cmd):  # type: ignore[no-untyped-def]
                if cmd.ext_fields.get("topic") == "SR":
                    master_pulls.append(int(cmd.ext_fields["sysFlag"]))
                return await procs.pull.pull(conn, cmd)

            real_process = procs.pull.process

            def process(conn, cmd, *, allow_suspend):  # type: ignore[no-untyped-def]
                """Every answer of the master (also a held pull's) says "read from the slave next"."""
                resp = real_process(conn, cmd, allow_suspend=allow_suspend)
                if resp is not None and cmd.ext_fields.get("topic") == "SR" and conn not in slave.connections:
                    resp.ext_fields["suggestWhichBrokerId"] = str(SLAVE_ID)
                return resp

            async def slave_pull(conn, cmd):  # type: ignore[no-untyped-def]
                if cmd.ext_fields.get("topic") == "SR":
                    slave_pulls.append(int(cmd.ext_fields["sysFlag"]))
                resp = await procs.pull.pull(conn, cmd)
                if resp is not None and resp.body:
                    slave_found[0] += 1
                return resp

            slave = RemotingServer("127.0.0.1", 0, name="slave")
            slave.register(RequestCode.PULL_MESSAGE, slave_pull)
            slave.register(RequestCode.HEART_BEAT, eb.broker.server.processors[RequestCode.HEART_BEAT])
            slave.register(RequestCode.UNREGISTER_CLIENT, eb.broker.server.processors[RequestCode.UNREGISTER_CLIENT])
            await slave.start()
            procs.pull.process = process  # type: ignore[method-assign]
            try:
                eb.broker.server.register(RequestCode.PULL_MESSAGE, master_pull)
                eb.namesrv.attach(MasterAndSlave(eb.config.cluster_name, eb.config.broker_name, eb.broker_address,
                                                 eb.broker.topics, slave_address=slave.address))
                cfg = consumer_config(eb.namesrv_address, "GSR", "SR", broker_suspend_max_time_ms=300)
                async with Running(cfg, pool_config(HANDLER)) as r:
                    engine = r.supervisor.engine
                    assert engine is not None
                    (mq,) = [mq for mq in engine.table if mq.topic == "SR"]
                    await wait_for(lambda: len(read_records(record)) >= 10, what="the first 10")
                    await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the commit at 10")
                    n_slave = len(slave_pulls)
                    # pulls made from now on know a committed offset: the master's carry it, the slave's must not
                    await produce(eb.namesrv_address, "SR", 10, start=10)
                    await wait_for(lambda: len(read_records(record)) >= 20, what="all 20")
                    await wait_for(lambda: engine.offset_store.read_memory(mq) == 20, what="the commit at 20")
                    assert len(slave_pulls) > n_slave, "no pull went to the slave once an offset was committed"
                    assert await r.stop() == 0
                assert slave_pulls, "no pull went to the suggested slave"
                assert any(flag & FLAG_COMMIT_OFFSET for flag in master_pulls), "the master never got a commit"
                assert not any(flag & FLAG_COMMIT_OFFSET for flag in slave_pulls), (
                    "a pull sent to a slave carried the commit-offset flag")
                assert sorted(read_records(record)) == [(0, i) for i in range(20)], "each message once"
                assert (await committed_offsets(eb, "GSR", "SR"))[0] == 20
            finally:
                await slave.stop()
    run(main())
