"""``rmqrun offsets reset``: move a consumer group's offsets on one topic.

Two paths, as ``mqadmin resetOffsetByTime`` takes them:

- **online** (a client of the group is connected): INVOKE_BROKER_TO_RESET_OFFSET
  to each master of the topic; the broker works out every queue's offset for
  the time and pushes the table to the running clients
  (RESET_CONSUMER_CLIENT_OFFSET), which drop what they cached and continue
  from there. Writing stored offsets behind their back would be overwritten by
  their next commit, so this is the only correct path while they run.
- **offline** (nobody connected): each queue's new offset is worked out here
  (min offset, max offset, SEARCH_OFFSET_BY_TIMESTAMP, or the offset given,
  kept within [min, max]) and stored with UPDATE_CONSUME_OFFSET.

RocketMQ 4.x resets running clients by *time* only, so an explicit offset is
refused while clients are online. ``--to`` takes ``earliest``, ``latest``, an
ISO-8601 time (no zone: local time), an epoch in milliseconds (an integer of
13 digits or more) or a queue offset (a smaller integer). ``--dry-run`` prints
per queue old -> new and the path that would be taken, and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from rmqrun.cli.admin_session import AdminError, Cluster, admin_session, resolve_cluster, run_admin
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.security_options import security_options
from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import subscribe_queues
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap_queue, wrap
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError, TopicNotExistError

#: integers at least this large are epoch milliseconds (2001-09-09 onwards), smaller ones queue offsets
EPOCH_MS_FLOOR = 10 ** 12
#: the timestamp INVOKE_BROKER_TO_RESET_OFFSET reads as "the max offset"
LATEST_TIMESTAMP = -1


@dataclass(frozen=True)
class Target:
    """Where to reset to: exactly one of ``kind`` earliest / latest / time / offset."""

    kind: str
    value: int = 0
    text: str = ""

    @property
    def timestamp(self) -> int | None:
        """The timestamp the broker is sent on the online path; None for an explicit offset."""
        return {"earliest": 0, "latest": LATEST_TIMESTAMP, "time": self.value}.get(self.kind)

    def describe(self) -> str:
        if self.kind == "time":
            return f"{self.text} ({self.value} ms)"
        return self.text


def parse_to(value: str) -> Target:
    text = value.strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        return Target(low, text=low)
    allowed = "earliest, latest, an ISO time (2024-05-01T12:00:00+00:00), epoch ms or a queue offset"
    if text.lstrip("-").isdigit():
        n = int(text)
        if n < 0:
            raise ConfigError(f"--to {value!r} is invalid: a negative number; one of {allowed}")
        return Target("time", n, text) if n >= EPOCH_MS_FLOOR else Target("offset", n, f"offset {n}")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ConfigError(f"--to {value!r} is invalid: one of {allowed}") from None
    return Target("time", int(moment.timestamp() * 1000), text)


@dataclass
class QueuePlan:
    mq: MessageQueue
    old: int | None
    new: int


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
        if target.kind == "earliest":
            new = low
        elif target.kind == "latest":
            new = high
        elif target.kind == "time":
            new = await instance.broker.search_offset(addr, mq, target.value)
        else:
            new = min(max(target.value, low), high)
        return QueuePlan(mq, old, new)

    rows = await asyncio.gather(*(one(mq) for mq in sorted(subscribe_queues(route, topic))))
    return list(rows), masters


def _table(rows: list[QueuePlan]) -> list[str]:
    return [f"  {r.mq.broker_name}  queue {r.mq.queue_id}: {'-' if r.old is None else r.old} -> {r.new}"
            for r in rows]


async def reset(namesrv: str | Cluster, group: str, topic: str, target: Target, dry_run: bool) -> dict[str, object]:
    async with admin_session(namesrv, "rmqrun-offsets") as (instance, admin):
        rows, masters = await plan(instance, group, topic, target)
        clients = await _online_clients(instance, sorted(set(masters.values())), group)
        path = "online" if clients else "offline"
        if clients and target.timestamp is None:
            raise AdminError(
                f"group {group} has {len(clients)} consumer(s) online; running clients can be reset by time "
                f"only (earliest, latest, a time), not to {target.describe()}: stop them and run this again")
        if not dry_run and clients:
            applied = await _reset_online(admin, masters, group, topic, target)
            if applied is None:
                path = "offline"  # every client left meanwhile
            else:
                for r in rows:
                    r.new = applied.get(r.mq, r.new)
        if not dry_run and path == "offline":
            for r in rows:
                await instance.broker.update_consumer_offset(masters[r.mq.broker_name], group, r.mq, r.new,
                                                             oneway=False)
        return {"group": group, "topic": topic, "to": target.describe(), "path": path, "clients": clients,
                "dry_run": dry_run, "rows": rows}


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


@click.group()
def offsets() -> None:
    """Move a consumer group's offsets (like mqadmin resetOffsetByTime)."""


@offsets.command(name="reset")
@click.option("--group", required=True, help="consumer group")
@click.option("--topic", required=True, help="topic whose queues are reset")
@click.option("--to", "to", required=True, metavar="WHERE",
              help="earliest | latest | ISO time | epoch ms (13+ digits) | queue offset")
@click.option("--dry-run", is_flag=True, help="print per queue old -> new and the path, change nothing")
@click.option("--json", "as_json", is_flag=True, help="one JSON object")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="take namesrv from this YAML")
@click.option("--namesrv", help="name server address(es) (default $NAMESRV_ADDR)")
@namespace_option
@security_options
def reset_cmd(group: str, topic: str, to: str, dry_run: bool, as_json: bool, config_file: str | None,
              namesrv: str | None, namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Reset GROUP's offsets on TOPIC: online through the broker to running clients, else stored offsets."""
    from rmqrun.cli.settings import BY_KEY
    group = BY_KEY["group"].convert(group, "command line --group")
    topic = BY_KEY["topic"].convert(topic, "command line --topic")
    target = parse_to(to)
    addr = resolve_cluster(namesrv, config_file, security_flags)
    ns = resolve_namespace(namespace, config_file)
    out = run_admin(lambda: reset(addr, wrap(ns, group), wrap(ns, topic), target, dry_run))
    rows: list[QueuePlan] = out["rows"]  # type: ignore[assignment]
    if ns:  # the plain names in what is printed; the namespace said once
        out = {**out, "group": group, "topic": topic, "namespace": ns}
        for r in rows:
            r.mq = unwrap_queue(ns, r.mq)
    if as_json:
        out = {**out, "rows": [{"topic": r.mq.topic, "broker": r.mq.broker_name, "queue": r.mq.queue_id,
                                "old": r.old, "new": r.new} for r in rows], "at": int(time.time() * 1000)}
        click.echo(json.dumps(out))
        return
    clients = out["clients"]
    if out["path"] == "online":
        how = (f"online: through the broker to {len(clients)} running consumer(s) "  # type: ignore[arg-type]
               "of the group, which continue from the new offsets")
    else:
        how = "offline: no consumer of the group is online, the stored offsets are written"
    verb = "would reset" if dry_run else "reset"
    in_ns = f" in namespace {ns}" if ns else ""
    click.echo(f"{verb} group {group} on {topic}{in_ns} to {target.describe()} ({how})")
    click.echo("\n".join(_table(rows)))
    if dry_run:
        click.echo("dry run: nothing changed")
