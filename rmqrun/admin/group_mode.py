"""A consumer group's message request mode on the brokers (RocketMQ 5.x): set it, or list what the masters keep.

RocketMQ 5.x brokers keep, per topic and group, a *message request mode*:
PULL (each queue owned by one client, the default) or POP (clients share the
queues). Each master keeps its own table, so :func:`set_group_mode` tells
every master it is given (or the cluster's) and a master that refuses does
not stop the others: each refusal comes back as a :class:`BrokerRefusal`
next to the brokers that took it, never as an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqrun.admin.session import Cluster, admin_session
from rmqrun.admin.topic import targets
from rmqrun.client.assignment import AssignmentClient
from rmqrun.protocol.assignment import MessageRequestMode
from rmqrun.remoting.errors import BrokerError


@dataclass(frozen=True)
class BrokerRefusal:
    """A broker that answered no (a 4.x broker, an unknown topic or group, an ACL refusal)."""

    broker: str
    error: BrokerError


@dataclass(frozen=True)
class GroupMode:
    """One row of a master's table: ``group`` consumes ``topic`` by ``mode`` (``"PULL"`` or ``"POP"``)."""

    broker: str
    topic: str
    group: str
    mode: str
    pop_share_queue_num: int

    def to_json(self) -> dict[str, object]:
        """The row as ``rmqrun group mode --list --json`` prints it (the broker's own field names)."""
        return {"broker": self.broker, "topic": self.topic, "group": self.group, "mode": self.mode,
                "popShareQueueNum": self.pop_share_queue_num}


async def set_group_mode(cluster: str | Cluster, topic: str, group: str, mode: MessageRequestMode | str,
                         pop_share_queue_num: int = 0, *, broker: str | None = None,
                         cluster_name: str | None = None) -> tuple[list[str], list[BrokerRefusal]]:
    """SET_MESSAGE_REQUEST_MODE on ``broker``, or every master of ``cluster_name`` (default: the only cluster);
    the brokers that took it and those that refused. ``topic`` and ``group`` are the wire names; ``mode`` is
    ``"POP"``, ``"PULL"`` or a :class:`MessageRequestMode`."""
    done: list[str] = []
    refused: list[BrokerRefusal] = []
    async with admin_session(cluster, "rmqrun-group") as (instance, admin):
        brokers, _ = await targets(admin, broker, cluster_name)
        client = AssignmentClient(instance.pool)
        for addr in brokers:
            try:
                await client.set_message_request_mode(addr, topic, group, MessageRequestMode.parse(mode),
                                                      pop_share_queue_num=pop_share_queue_num)
            except BrokerError as exc:
                refused.append(BrokerRefusal(addr, exc))
            else:
                done.append(addr)
    return done, refused


async def list_group_modes(cluster: str | Cluster, *, broker: str | None = None,
                           cluster_name: str | None = None) -> tuple[list[GroupMode], list[BrokerRefusal]]:
    """GET_ALL_MESSAGE_REQUEST_MODE of ``broker`` or every master of the cluster: every row any of them keeps
    (wire names), and the brokers that refused."""
    rows: list[GroupMode] = []
    refused: list[BrokerRefusal] = []
    async with admin_session(cluster, "rmqrun-group") as (instance, admin):
        brokers, _ = await targets(admin, broker, cluster_name)
        client = AssignmentClient(instance.pool)
        for addr in brokers:
            try:
                table = await client.message_request_modes(addr)
            except BrokerError as exc:
                refused.append(BrokerRefusal(addr, exc))
                continue
            rows += [GroupMode(addr, r.topic, r.consumer_group, r.mode.value, r.pop_share_queue_num)
                     for r in table.rows()]
    return rows, refused
