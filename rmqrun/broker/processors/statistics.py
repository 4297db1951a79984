"""The broker's statistics as ``mqadmin statsAll``, ``exportMetrics`` and ``brokerConsumeStats`` read them.

VIEW_BROKER_STATS_DATA answers one named statistic (``TOPIC_PUT_NUMS`` of a topic, ``GROUP_GET_NUMS``
of ``topic@group``, ...) over the last minute, hour and day from :class:`~rmqrun.broker.stats.StatsTable`;
a statistic nothing has written yet is SYSTEM_ERROR "The stats <name> <key> not exist", as in Java
(``statsAll`` shows 0 for it). GET_BROKER_CONSUME_STATS is ``consumerProgress`` for every
subscription group at once, with the sum of their lag (``totalDiff``).
"""

from __future__ import annotations

from typing import Any

from rmqrun.broker.processors.common import BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.processors.inspect import InspectProcessor
from rmqrun.protocol.admin import GetConsumeStatsInBrokerHeader, ViewBrokerStatsDataRequestHeader
from rmqrun.protocol.bodies import dumps
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand


class StatisticsProcessor:
    def __init__(self, broker: BrokerContext, inspect: InspectProcessor) -> None:
        self.broker = broker
        self.inspect = inspect

    async def view_broker_stats_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, ViewBrokerStatsDataRequestHeader)
        except BadRequest as bad:
            return bad.response
        data = self.broker.stats.table.get(h.stats_name, h.stats_key)
        if data is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist",
                          typed=False)
        return answer(cmd, body=data.encode(), typed=False)

    def consume_stats_list(self, *, order_only: bool) -> tuple[list[dict[str, list[Any]]], int]:
        """(one {group: [ConsumeStats per topic]} per subscription group, the lag of them all)."""
        b = self.broker
        assert b.topics is not None
        out: list[dict[str, list[Any]]] = []
        total_diff = 0
        for group in b.store.subscription_groups.all():
            stats = []
            for topic in b.store.consumer_offsets.topics_of(group):
                tc = b.topics.get(topic)
                if tc is None or (order_only and not tc.order):
                    continue
                tps, table = self.inspect.consume_stats(group, topic)
                if not table:  # the online group does not subscribe to it any more
                    continue
                total_diff += sum(o["brokerOffset"] - o["consumerOffset"] for o in table.values())
                stats.append({"consumeTps": tps, "offsetTable": table})
            out.append({group: stats})
        return out, total_diff

    async def get_broker_consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, GetConsumeStatsInBrokerHeader)
        except BadRequest as bad:
            return bad.response
        stats, total_diff = self.consume_stats_list(order_only=h.is_order)
        body = {"brokerAddr": self.broker.address, "consumeStatsList": stats, "totalDiff": total_diff}
        return answer(cmd, body=dumps(body), typed=False)
