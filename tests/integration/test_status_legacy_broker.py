"""``rmqrun status`` against a broker without GET_CONSUME_STATS (older brokers answer REQUEST_CODE_NOT_SUPPORTED).

Then the group's topics are found the older way: every topic on the name server
(system, retry and DLQ topics aside) whose brokers say the group consumes it
(QUERY_TOPIC_CONSUME_BY_WHO), plus the group's retry topic. The embedded broker
is made to refuse GET_CONSUME_STATS as such a broker would; everything else is
its real answers over TCP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.admin import status
from rmqrun.broker.processors.common import answer
from rmqrun.cli.status.format import render
from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.engine_kit import broker, produce


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


def _legacy(eb) -> list[int]:  # type: ignore[no-untyped-def]
    asked: list[int] = []

    async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
        asked.append(cmd.code)
        return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
    eb.broker.server.register(RequestCode.GET_CONSUME_STATS, not_supported)
    return asked


def test_the_group_topics_are_found_per_topic_when_consume_stats_is_not_supported(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "SL_Done", 6)
            await produce(eb.namesrv_address, "SL_Other", 4)
            probe = ClientInstance(eb.namesrv_address, instance_name="probe")
            try:
                for q in range(2):
                    mq = MessageQueue("SL_Done", eb.config.broker_name, q)
                    await probe.broker.update_consumer_offset(eb.broker_address, "GSL", mq, 1, oneway=False)
            finally:
                await probe.close()
            asked = _legacy(eb)
            rows = await status.progress(eb.namesrv_address, "GSL")
            assert asked, "the broker was not asked for consume stats first"
            assert {r.mq.topic for r in rows} == {"SL_Done"}, "only the topic the group consumes"
            assert sum(r.broker_offset for r in rows) == 6
            assert [r.consumer_offset for r in rows] == [1, 1]
            assert sum(r.lag or 0 for r in rows) == 4
            table = render(rows, "GSL")
            assert "SL_Done" in table and "SL_Other" not in table
            # a topic asked for by name is shown even if the group never consumed it
            named = await status.progress(eb.namesrv_address, "GSL", ["SL_Other"])
            assert {r.mq.topic for r in named} == {"SL_Other"}
            assert sum(r.broker_offset for r in named) == 4
    run(main())


def test_an_unknown_group_on_a_legacy_broker_is_reported_as_unknown(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SL_Any", 2)
            _legacy(eb)
            with pytest.raises(status.UnknownGroupError, match="consumer group 'GSL_Nobody' is unknown"):
                await status.progress(eb.namesrv_address, "GSL_Nobody")
            assert render([], "GSL_Nobody").startswith("group GSL_Nobody: no topics found")
    run(main())
