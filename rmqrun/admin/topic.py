"""Topics as the brokers and name servers hold them: create, update, delete, list, describe (mqadmin updateTopic & co.).

Where a topic lives is chosen as with ``mqadmin updateTopic`` (:func:`targets`):
one broker, every master of a cluster (from the name server's cluster table),
or with neither the one cluster the name server knows (refused, listing them,
when there are several). An ordered topic also has the name server's
ORDER_TOPIC_CONFIG entry (:func:`write_order_conf`), kept in step with the
brokers' write-queue counts by create, update and delete.

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

from dataclasses import dataclass
from typing import Any

from rmqrun.admin.session import AdminError, Cluster, admin_session
from rmqrun.topic_names import SYSTEM_TOPICS
from rmqrun.client.admin import ORDER_TOPIC_CONFIG, AdminClient, TopicConfig
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import is_readable, is_writeable, perm_to_string
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.time_text import iso_ms


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
    return "-" if not ms or ms <= 0 else iso_ms(ms)


def access(queue_id: int, read_queues: int, write_queues: int, perm: int) -> str:
    """``rw``, ``r-``, ``-w`` or ``--``: whether consumers read the queue and producers write it."""
    readable = queue_id < read_queues and is_readable(perm)
    writable = queue_id < write_queues and is_writeable(perm)
    return ("r" if readable else "-") + ("w" if writable else "-")


async def _queues(instance: ClientInstance, admin: AdminClient, master: str, name: str, broker_name: str,
                  read_queues: int, write_queues: int, perm: int) -> list[dict[str, Any]]:
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


@dataclass(frozen=True)
class TopicUpdate:
    """What :func:`update_topic` wrote: each broker's new config, and the name server's order entry when it was
    rewritten (``order_conf_written``; ``order_conf`` None: there is none now)."""

    written: dict[str, TopicConfig]
    order_conf_written: bool = False
    order_conf: str | None = None


def _order_items(conf: str | None) -> dict[str, str]:
    """``"a:8;b:8"`` -> {"a": "a:8", "b": "b:8"}, keyed by broker name as mqadmin merges them."""
    items: dict[str, str] = {}
    for item in (conf or "").split(";"):
        if item.strip():
            items[item.split(":")[0]] = item
    return items


async def write_order_conf(admin: AdminClient, topic: str, cluster: str | None, write_queues: dict[str, int],
                           order: bool) -> str | None:
    """Make the name server's ORDER_TOPIC_CONFIG entry of ``topic`` say what the brokers now hold.

    ``write_queues``: broker address -> write-queue count just written. ``cluster`` None
    means ``-b`` (merge this broker's item into the entry); else the whole entry is the
    cluster's brokers. Returns the entry as written (None: there is none now).
    """
    info = await admin.cluster_info()
    by_name = {info.broker_name_of(addr) or addr: count for addr, count in write_queues.items()}
    if cluster is not None:
        names = sorted(info.clusters.get(cluster, [])) or sorted(by_name)
        old = _order_items(await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic))
        items = {n: f"{n}:{by_name[n]}" if n in by_name else old.get(n, "") for n in names} if order else {}
    else:
        items = _order_items(await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic))
        for n, count in by_name.items():
            if order:
                items[n] = f"{n}:{count}"
            else:
                items.pop(n, None)
    conf = ";".join(v for v in items.values() if v)
    if conf:
        await admin.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
        return conf
    if await admin.get_kv_config(ORDER_TOPIC_CONFIG, topic) is not None:
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
    return None


async def create_topic(cluster: str | Cluster, config: TopicConfig, *, broker: str | None = None,
                       cluster_name: str | None = None) -> tuple[list[str], str | None]:
    """Create ``config.topic`` on ``broker`` or every master of the cluster (mqadmin updateTopic), refusing one
    that already exists on any of them; an ordered topic's name server order entry is written too. The brokers
    written, and that entry (None: none)."""
    async with admin_session(cluster, "rmqrun-topic") as (_, admin):
        brokers, chosen = await targets(admin, broker, cluster_name)
        for b in brokers:
            if config.topic in await admin.topic_configs(b):
                raise AdminError(f"topic {config.topic!r} already exists on broker {b} (use 'rmqrun topic update')")
        for b in brokers:
            await admin.create_or_update_topic(b, config)
        conf = None
        if config.order:
            conf = await write_order_conf(admin, config.topic, chosen,
                                          {b: config.write_queue_nums for b in brokers}, True)
        return brokers, conf


async def update_topic(cluster: str | Cluster, name: str, *, read_queues: int | None = None,
                       write_queues: int | None = None, perm: int | None = None, order: bool | None = None,
                       broker: str | None = None, cluster_name: str | None = None) -> TopicUpdate:
    """Change the fields given of topic ``name`` on ``broker`` or every master of the cluster, keeping the others;
    refused where a broker lacks the topic. The order entry follows: rewritten for an ordered topic's new queue
    counts, removed by ``order=False``."""
    async with admin_session(cluster, "rmqrun-topic") as (_, admin):
        brokers, chosen = await targets(admin, broker, cluster_name)
        current = {b: (await admin.topic_configs(b)).get(name) for b in brokers}
        missing = [b for b, c in current.items() if c is None]
        if missing:
            raise AdminError(f"topic {name!r} does not exist on broker {', '.join(missing)} "
                             "(use 'rmqrun topic create')")
        written: dict[str, TopicConfig] = {}
        for b, old in current.items():
            assert old is not None
            cfg = TopicConfig(name, read_queues if read_queues is not None else old.read_queue_nums,
                              write_queues if write_queues is not None else old.write_queue_nums,
                              perm if perm is not None else old.perm,
                              order if order is not None else old.order,
                              old.topic_filter_type, old.topic_sys_flag)
            await admin.create_or_update_topic(b, cfg)
            written[b] = cfg
        ordered = {b: c.write_queue_nums for b, c in written.items() if c.order}
        if ordered or order is False:
            conf = await write_order_conf(admin, name, chosen, ordered or
                                          {b: c.write_queue_nums for b, c in written.items()}, bool(ordered))
            return TopicUpdate(written, True, conf)
        return TopicUpdate(written)


async def delete_topic(cluster: str | Cluster, name: str, *, cluster_name: str | None = None) -> list[str]:
    """Delete topic ``name`` from every master of the cluster, then from the name servers and their order
    entry (mqadmin deleteTopic); the brokers that held it. Refused when none did."""
    async with admin_session(cluster, "rmqrun-topic") as (_, admin):
        brokers, chosen = await targets(admin, None, cluster_name)
        holding = [b for b in brokers if name in await admin.topic_configs(b)]
        if not holding:
            raise AdminError(f"topic {name!r} does not exist in cluster {chosen}")
        for b in brokers:
            await admin.delete_topic_in_broker(b, name)
        await admin.delete_topic_in_namesrv(name, chosen)
        if await admin.get_kv_config(ORDER_TOPIC_CONFIG, name) is not None:
            await admin.delete_kv_config(ORDER_TOPIC_CONFIG, name)
        return holding


async def list_topics(cluster: str | Cluster, *, show_all: bool = False) -> list[str]:
    """The topics the name server knows (wire names), without the broker's own (system topics, the cluster and
    broker names, reply topics) unless ``show_all``."""
    async with admin_session(cluster, "rmqrun-topic") as (_, admin):
        names = await admin.topic_list()
        if show_all:
            return names
        info = await admin.cluster_info()
        hidden = (set(SYSTEM_TOPICS) | set(info.clusters) | set(info.brokers)
                  | {f"{c}_REPLY_TOPIC" for c in info.clusters})
        return [n for n in names if n not in hidden]
