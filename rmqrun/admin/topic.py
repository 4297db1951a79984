"""Topics as the brokers and name servers hold them: which masters to act on, and a topic described queue by queue.

A broker's GET_TOPIC_STATS_INFO lists write queues only (Java iterates
``writeQueueNums``), so after ``topic update --write-queues 4`` of an 8-queue
topic a listing of it stops at queue 3 while queues 4-7 still hold messages
being read. :func:`describe_topic` lists every queue below max(read, write);
the ones past the stats answer are asked for their min/max offsets one by
one, and each queue is marked ``rw``, ``r-`` (read, no longer written: it
drains) or ``-w`` (written but not read: its messages wait for a read-queue
change).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rmqrun.admin.session import AdminError, Cluster, admin_session
from rmqrun.client.admin import ORDER_TOPIC_CONFIG, AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import is_readable, is_writeable, perm_to_string
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.remoting.errors import TopicNotExistError


async def targets(admin: AdminClient, broker: str | None, cluster: str | None) -> tuple[list[str], str | None]:
    """The broker addresses to act on, and the cluster they belong to (None for -b)."""
    if broker and cluster:
        raise ConfigError("give either -b/--broker or -c/--cluster, not both")
    if broker:
        return [broker], None
    info = await admin.cluster_info()
    if cluster is None:
        if len(info.clusters) != 1:
            names = ", ".join(sorted(info.clusters)) or "none"
            raise ConfigError(f"the name server knows {len(info.clusters)} clusters ({names}): "
                              "choose one with -c/--cluster or a broker with -b/--broker")
        cluster = next(iter(info.clusters))
    masters = info.master_addresses(cluster)
    if not masters:
        known = ", ".join(sorted(info.clusters)) or "none"
        raise AdminError(f"cluster {cluster!r} has no master broker on the name server (clusters: {known})")
    return masters, cluster


def _iso(ms: int | None) -> str:
    if not ms or ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def access(queue_id: int, read_queues: int, write_queues: int, perm: int) -> str:
    """``rw``, ``r-``, ``-w`` or ``--``: whether consumers read the queue and producers write it."""
    readable = queue_id < read_queues and is_readable(perm)
    writable = queue_id < write_queues and is_writeable(perm)
    return ("r" if readable else "-") + ("w" if writable else "-")


async def _queues(instance: ClientInstance, admin: AdminClient, master: str, name: str, broker_name: str, read_queues: int,
                  write_queues: int, perm: int) -> list[dict[str, Any]]:
    """Every queue below max(read, write): the broker's stats, and min/max offsets for the ones it leaves out."""
    stats = {mq.queue_id: s for mq, s in (await admin.topic_stats(master, name)).items()}
    rows = []
    for qid in range(max(read_queues, write_queues, max(stats, default=-1) + 1)):
        s = stats.get(qid)
        if s is not None:
            low, high, last = s.min_offset, s.max_offset, s.last_update_timestamp
        else:
            mq = MessageQueue(name, broker_name, qid)
            low = await instance.broker.get_min_offset(master, mq)
            high = await instance.broker.get_max_offset(master, mq)
            last = None
        rows.append({"queue": qid, "min_offset": low, "max_offset": high, "last_update": _iso(last),
                     "last_update_ms": last, "access": access(qid, read_queues, write_queues, perm),
                     "readable": qid < read_queues, "writable": qid < write_queues})
    return rows


async def describe_topic(cluster: str | Cluster, name: str) -> dict[str, Any]:
    """The topic's route, per broker its queue counts, permission and order flag, and every queue below
    max(read, write) with its access and offsets; what ``rmqrun topic describe --json`` prints."""
    async with admin_session(cluster, "rmqrun-topic") as (instance, admin):
        try:
            route = await admin.namesrv.get_route(name)
        except TopicNotExistError:
            raise AdminError(f"topic {name!r} does not exist on the name server") from None
        brokers = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            bd = next((b for b in route.broker_datas if b.broker_name == qd.broker_name), None)
            master = bd.master_address if bd else None
            queues: list[dict[str, Any]] = []
            order = None
            if master is not None:
                queues = await _queues(instance, admin, master, name, qd.broker_name, qd.read_queue_nums,
                                       qd.write_queue_nums, qd.perm)
                cfg = (await admin.topic_configs(master)).get(name)
                order = cfg.order if cfg else None
            brokers.append({"broker": qd.broker_name, "address": master, "read_queues": qd.read_queue_nums,
                            "write_queues": qd.write_queue_nums, "perm": perm_to_string(qd.perm),
                            "order": order, "queues": queues})
        order_conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG, name)
        return {"topic": name, "order_conf": order_conf, "brokers": brokers}
