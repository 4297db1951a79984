"""A group's offsets on one topic moved: the plan worked out, and applied only when asked (``rmqrun offsets reset``).

Nothing changes unless the command is given ``--execute`` (as Kafka's
``kafka-consumer-groups --reset-offsets``): without it the plan, per queue
``old -> new`` and the path it would take, is printed and the exit code is 0.
With it, exactly the queues and offsets of the plan are written. The target
is one option per kind (:mod:`rmqrun.admin.offsets_target`), never a guess.

Two paths, as ``mqadmin resetOffsetByTime`` takes them:

- **online** (a client of the group is connected): INVOKE_BROKER_TO_RESET_OFFSET
  to each master of the topic; the broker works out every queue's offset for
  the time and pushes the table to the running clients
  (RESET_CONSUMER_CLIENT_OFFSET), which drop what they cached and continue
  from there. Writing stored offsets behind their back would be overwritten by
  their next commit, so this is the only correct path while they run.
- **offline** (nobody connected): each queue's new offset is worked out here
  (min offset, max offset, SEARCH_OFFSET_BY_TIMESTAMP, the offset given or
  the stored one shifted, kept within [min, max]) and stored with
  UPDATE_CONSUME_OFFSET.

RocketMQ 4.x resets running clients by *time* only, so an explicit offset or a
shift is refused while clients are online.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rmqrun.admin.session import AdminError, Cluster, admin_session
from rmqrun.admin.offsets_target import Target
from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import subscribe_queues
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError, TopicNotExistError


@dataclass
class QueuePlan:
    """One queue of the plan: its stored offset (None: never committed) and the new one (None: a shift of a
    queue with no stored offset, which has no position to shift from and is left alone)."""

    mq: MessageQueue
    old: int | None
    new: int | None
    #: why ``new`` is not what was asked (an offset or a shift past the queue's ends is kept within them)
    note: str | None = None


async def _online_clients(instance: ClientInstance, addrs: list[str], group: str) -> list[str]:
    ids: set[str] = set()
    for addr in addrs:
        try:
            ids.update(await instance.broker.get_consumer_list(addr, group))
        except BrokerError:
            continue  # Java answers SYSTEM_ERROR "no consumer for this group"
    return sorted(ids)


async def plan(instance: ClientInstance, group: str, topic: str, target: Target) -> tuple[list[QueuePlan],
                                                                                          dict[str, str]]:
    """Per queue the stored offset and the one ``target`` means; and each broker name's master."""
    try:
        route = await instance.update_route(topic)
    except TopicNotExistError:
        raise AdminError(f"topic {topic!r} does not exist on the name server") from None
    masters = {bd.broker_name: bd.master_address for bd in route.broker_datas if bd.master_address}

    async def one(mq: MessageQueue) -> QueuePlan:
        addr = masters.get(mq.broker_name)
        if addr is None:
            raise AdminError(f"broker {mq.broker_name} of {topic} has no master")
        old = await instance.broker.query_consumer_offset(addr, group, mq)
        low = await instance.broker.get_min_offset(addr, mq)
        high = await instance.broker.get_max_offset(addr, mq)
        new: int | None
        note = None
        if target.kind == "earliest":
            new = low
        elif target.kind == "latest":
            new = high
        elif target.kind == "time":
            new = await instance.broker.search_offset(addr, mq, target.value)
        else:
            if target.kind == "shift":  # a queue never committed has no position to shift from
                asked = None if old is None or old < 0 else old + target.value
            else:
                asked = target.value
            new = None if asked is None else min(max(asked, low), high)
            if asked is not None and new != asked:
                side = "end" if asked > high else "start"
                note = f"{asked} is past the queue's {side} [{low}, {high}]: clamped to {new}"
        return QueuePlan(mq, old, new, note)

    rows = await asyncio.gather(*(one(mq) for mq in sorted(subscribe_queues(route, topic))))
    return list(rows), masters


async def reset(namesrv: str | Cluster, group: str, topic: str, target: Target, execute: bool) -> dict[str, object]:
    """The plan, carried out when ``execute``: the rows say what each queue was and what it is now (or would be)."""
    async with admin_session(namesrv, "rmqrun-offsets") as (instance, admin):
        rows, masters = await plan(instance, group, topic, target)
        clients = await _online_clients(instance, sorted(set(masters.values())), group)
        path = "online" if clients else "offline"
        if clients and target.timestamp is None:
            consumers = f"{len(clients)} consumer" + ("" if len(clients) == 1 else "s")
            raise AdminError(
                f"group {group} has {consumers} online; running clients can be reset by time "
                f"only (earliest, latest, a time), not to {target.describe()}: stop them and run this again")
        if execute and clients:
            applied = await _reset_online(admin, masters, group, topic, target)
            if applied is None:
                path = "offline"  # every client left meanwhile: the stored offsets of the plan are written
            else:
                for r in rows:
                    r.new = applied.get(r.mq, r.new)
        if execute and path == "offline":
            await _write_offsets(instance, masters, group, rows)
        return {"group": group, "topic": topic, "to": target.describe(), "path": path, "clients": clients,
                "dry_run": not execute, "rows": rows, "warnings": await _warnings(instance, group, clients)}


async def _warnings(instance: ClientInstance, group: str, clients: list[str]) -> list[str]:
    """What the operator should read before saying yes: a group no broker knows is most likely a typo (a broker
    answers offset 0 for a group it never saw, so the plan alone looks like a real one)."""
    from rmqrun.admin.status import group_view
    if clients:
        return []
    view = await group_view(instance, group)
    if view is None or view.committed or view.subscribed or view.online:
        return []
    return [f"group {group} is unknown to every broker (no stored offsets, subscriptions or consumers): check the "
            "name; with --execute these offsets create it"]


async def _write_offsets(instance: ClientInstance, masters: dict[str, str], group: str,
                         rows: list[QueuePlan]) -> None:
    """The offline path: exactly the plan's rows are stored, a row with no new offset left as it is."""
    for r in rows:
        if r.new is not None:
            await instance.broker.update_consumer_offset(masters[r.mq.broker_name], group, r.mq, r.new,
                                                         oneway=False)


async def _reset_online(admin: AdminClient, masters: dict[str, str], group: str, topic: str,
                        target: Target) -> dict[MessageQueue, int] | None:
    """The broker's table of new offsets; None when every broker says no client is online (code 206)."""
    assert target.timestamp is not None
    table: dict[MessageQueue, int] = {}
    answered = False
    for name, addr in sorted(masters.items()):
        try:
            table.update(await admin.reset_offset_online(addr, group, topic, target.timestamp))
            answered = True
        except BrokerError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise AdminError(f"broker {name} ({addr}) cannot pass a reset on to running clients "
                                 "(INVOKE_BROKER_TO_RESET_OFFSET not supported): stop the consumers of "
                                 f"{group} and run this again to reset the stored offsets") from None
            raise
    return table if answered else None
