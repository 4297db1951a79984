"""``rmqrun topic create|update|delete|list|describe``: what ``mqadmin updateTopic`` & co. do.

Where a topic lives is chosen as with ``mqadmin updateTopic``: ``-b ADDR``
one broker, ``-c CLUSTER`` every master of a cluster (from the name server's
cluster table); with neither, the one cluster the name server knows (refused,
listing them, when there are several). ``create`` refuses a topic that
already exists on a target broker and ``update`` one that does not; ``update``
keeps every field not given. ``delete`` removes the topic from every master of
the cluster, then from the name servers, as ``mqadmin deleteTopic``.
``list`` asks the name server; ``describe`` (:mod:`rmqrun.cli.topic.describe`)
shows the route and every read queue's offsets, marked where it is not
written. The topic is ``NAME`` or ``-t/--topic`` (:mod:`rmqrun.cli.topic.options`).

``--order`` also writes the name server's ORDER_TOPIC_CONFIG entry, as
``mqadmin updateTopic -o true`` does: with ``-c`` (or the only cluster)
``"<broker>:<write queues>"`` for every broker of the cluster, joined by
``;``; with ``-b`` that broker's item merged into the entry already there.
Producers hash an ordered topic's keys over that list (``orderTopicConf``
in the route, when the name server has ``orderMessageEnable``). Beyond
mqadmin: ``update --no-order`` removes the broker's item (or the entry), an
``update`` of an ordered topic rewrites it with the new write-queue counts,
and ``delete`` removes it, so a topic created again later is not pinned to a
stale queue count.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rmqrun.admin.session import AdminError, admin_session
from rmqrun.admin.topic import targets
from rmqrun.cli.cluster import resolve_cluster, run_admin
from rmqrun.cli.flags import Shown, json_option
from rmqrun.cli.namespace_option import resolve_namespace
from rmqrun.cli.topic.describe import describe
from rmqrun.cli.topic.options import cluster_args, the_topic, topic_args, user_topic_name, where_args
from rmqrun.client.admin import AdminClient, TopicConfig
from rmqrun.client.route import PERM_READ, PERM_WRITE, perm_to_string
from rmqrun.client.admin import ORDER_TOPIC_CONFIG
from rmqrun.errors import ConfigError
from rmqrun.namespace import has_namespace, unwrap

_PERMS = {"RW": PERM_READ | PERM_WRITE, "R": PERM_READ, "W": PERM_WRITE, "-": 0,
          "6": PERM_READ | PERM_WRITE, "4": PERM_READ, "2": PERM_WRITE, "0": 0}
#: topics the broker keeps for itself; ``list`` hides them unless --all
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
                           "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC"})


def parse_perm(value: str) -> int:
    perm = _PERMS.get(value.strip().upper())
    if perm is None:
        raise ConfigError(f"--perm {value!r} is invalid: one of rw, r, w, - (or mqadmin's 6, 4, 2, 0)")
    return perm


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


def _shape(create: bool) -> Any:
    """The topic's shape options: ``create`` shows the defaults it uses, ``update`` that it keeps the current."""
    def shown(default: str) -> str:
        return default if create else "unchanged"

    def wrap_(fn: Any) -> Any:
        fn = click.option("--order/--no-order", default=None, cls=Shown, shown=shown("--no-order"),
                          help="an ordered topic (mqadmin -o)")(fn)
        fn = click.option("-p", "--perm", metavar="[rw|r|w|-]", cls=Shown, shown=shown("rw"),
                          help="permission (or mqadmin's 6, 4, 2, 0)")(fn)
        fn = click.option("-w", "--write-queues", type=click.IntRange(1, 1024), cls=Shown, shown=shown("8"),
                          help="write queue count")(fn)
        fn = click.option("-r", "--read-queues", type=click.IntRange(1, 1024), cls=Shown, shown=shown("8"),
                          help="read queue count")(fn)
        return click.option("-q", "--queues", type=click.IntRange(1, 1024), cls=Shown, shown=shown("8"),
                            help="read and write queue count at once")(fn)
    return wrap_


def _counts(queues: int | None, read: int | None, write: int | None) -> tuple[int | None, int | None]:
    if queues is not None and (read is not None or write is not None):
        raise ConfigError("give --queues, or --read-queues/--write-queues, not both")
    return (queues, queues) if queues is not None else (read, write)


@click.group()
def topic() -> None:
    """Create, change, delete, list and inspect topics (like mqadmin updateTopic, topicList, topicStatus)."""


@topic.command()
@topic_args
@_shape(create=True)
@where_args
def create(name: str | None, topic_flag: str | None, queues: int | None, read_queues: int | None,
           write_queues: int | None, perm: str | None, order: bool | None, namesrv: str | None,
           config_file: str | None, broker: str | None, cluster: str | None, namespace: str | None,
           security_flags: dict[str, Any]) -> None:
    """Create topic NAME (8 read and 8 write queues unless told otherwise)."""
    name = user_topic_name(the_topic(name, topic_flag), "create", namespace, config_file)
    read, write = _counts(queues, read_queues, write_queues)
    config = TopicConfig(name, read or 8, write or 8, parse_perm(perm) if perm else PERM_READ | PERM_WRITE,
                         bool(order))
    addr = resolve_cluster(namesrv, config_file, security_flags)

    async def main() -> list[str]:
        async with admin_session(addr, "rmqrun-topic") as (_, admin):
            brokers, cluster_name = await targets(admin, broker, cluster)
            for b in brokers:
                if name in await admin.topic_configs(b):
                    raise AdminError(f"topic {name!r} already exists on broker {b} (use 'rmqrun topic update')")
            for b in brokers:
                await admin.create_or_update_topic(b, config)
            if config.order:
                order_conf.append(await write_order_conf(admin, name, cluster_name,
                                                         {b: config.write_queue_nums for b in brokers}, True))
            return brokers

    order_conf: list[str | None] = []
    done = run_admin(main)
    click.echo(f"created {name}: {config.read_queue_nums} read / {config.write_queue_nums} write queue(s), "
               f"perm {perm_to_string(config.perm)}, order {str(config.order).lower()} on {', '.join(done)}"
               + (f"; name server order conf {order_conf[0]}" if order_conf and order_conf[0] else ""))


@topic.command()
@topic_args
@_shape(create=False)
@where_args
def update(name: str | None, topic_flag: str | None, queues: int | None, read_queues: int | None,
           write_queues: int | None, perm: str | None, order: bool | None, namesrv: str | None,
           config_file: str | None, broker: str | None, cluster: str | None, namespace: str | None,
           security_flags: dict[str, Any]) -> None:
    """Change topic NAME; fields not given keep their value."""
    name = user_topic_name(the_topic(name, topic_flag), "update", namespace, config_file)
    read, write = _counts(queues, read_queues, write_queues)
    new_perm = parse_perm(perm) if perm else None
    if read is None and write is None and new_perm is None and order is None:
        raise ConfigError("nothing to change: give --queues, --read-queues, --write-queues, --perm or --order")
    addr = resolve_cluster(namesrv, config_file, security_flags)

    async def main() -> list[str]:
        lines = []
        async with admin_session(addr, "rmqrun-topic") as (_, admin):
            brokers, _cluster = await targets(admin, broker, cluster)
            current = {b: (await admin.topic_configs(b)).get(name) for b in brokers}
            missing = [b for b, c in current.items() if c is None]
            if missing:
                raise AdminError(f"topic {name!r} does not exist on broker {', '.join(missing)} "
                                 "(use 'rmqrun topic create')")
            written: dict[str, TopicConfig] = {}
            for b, old in current.items():
                assert old is not None
                cfg = TopicConfig(name, read if read is not None else old.read_queue_nums,
                                  write if write is not None else old.write_queue_nums,
                                  new_perm if new_perm is not None else old.perm,
                                  order if order is not None else old.order,
                                  old.topic_filter_type, old.topic_sys_flag)
                await admin.create_or_update_topic(b, cfg)
                written[b] = cfg
                lines.append(f"updated {name} on {b}: {cfg.read_queue_nums} read / {cfg.write_queue_nums} write "
                             f"queue(s), perm {perm_to_string(cfg.perm)}, order {str(cfg.order).lower()}")
            ordered = {b: c.write_queue_nums for b, c in written.items() if c.order}
            if ordered or order is False:
                conf = await write_order_conf(admin, name, _cluster, ordered or
                                              {b: c.write_queue_nums for b, c in written.items()}, bool(ordered))
                lines.append(f"name server order conf of {name}: {conf or 'none'}")
        return lines

    click.echo("\n".join(run_admin(main)))


@topic.command()
@topic_args
@click.option("-c", "--cluster", cls=Shown, shown="the only cluster", help="the cluster to delete it from")
@cluster_args
def delete(name: str | None, topic_flag: str | None, cluster: str | None, config_file: str | None,
           namesrv: str | None, namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Delete topic NAME from every master of the cluster, then from the name servers."""
    name = user_topic_name(the_topic(name, topic_flag), "delete", namespace, config_file)
    addr = resolve_cluster(namesrv, config_file, security_flags)

    async def main() -> list[str]:
        async with admin_session(addr, "rmqrun-topic") as (_, admin):
            brokers, cluster_name = await targets(admin, None, cluster)
            holding = [b for b in brokers if name in await admin.topic_configs(b)]
            if not holding:
                raise AdminError(f"topic {name!r} does not exist in cluster {cluster_name}")
            for b in brokers:
                await admin.delete_topic_in_broker(b, name)
            await admin.delete_topic_in_namesrv(name, cluster_name)
            if await admin.get_kv_config(ORDER_TOPIC_CONFIG, name) is not None:
                await admin.delete_kv_config(ORDER_TOPIC_CONFIG, name)
            return holding

    done = run_admin(main)
    click.echo(f"deleted {name} from {', '.join(done)} and the name server")


@topic.command(name="list")
@click.option("--all", "show_all", is_flag=True, help="include the broker's system topics")
@json_option("a JSON array")
@cluster_args
def list_(show_all: bool, as_json: bool, config_file: str | None, namesrv: str | None,
          namespace: str | None, security_flags: dict[str, Any]) -> None:
    """The topics the name server knows, sorted (with --namespace: that namespace's, by their plain names)."""
    addr = resolve_cluster(namesrv, config_file, security_flags)
    ns = resolve_namespace(namespace, config_file)

    async def main() -> list[str]:
        async with admin_session(addr, "rmqrun-topic") as (_, admin):
            names = await admin.topic_list()
            if show_all:
                return names
            info = await admin.cluster_info()
            hidden = (SYSTEM_TOPICS | set(info.clusters) | set(info.brokers)
                      | {f"{c}_REPLY_TOPIC" for c in info.clusters})
            return [n for n in names if n not in hidden]

    names = run_admin(main)
    if ns:
        names = sorted(unwrap(ns, n) for n in names if has_namespace(ns, n))
    click.echo(json.dumps(names) if as_json else "\n".join(names))


topic.add_command(describe)
