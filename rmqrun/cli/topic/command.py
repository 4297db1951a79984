"""``rmqrun topic create|update|delete|list|describe``: what ``mqadmin updateTopic`` & co. do.

The options and what is printed; the calls are :mod:`rmqrun.admin.topic`.

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

from rmqrun.admin.topic import create_topic, delete_topic, list_topics, update_topic
from rmqrun.cli.cluster import resolve_cluster, run_admin
from rmqrun.cli.flags import Shown, json_option
from rmqrun.cli.namespace_option import resolve_namespace
from rmqrun.cli.topic.describe import describe
from rmqrun.cli.topic.options import cluster_args, the_topic, topic_args, user_topic_name, where_args
from rmqrun.client.admin import TopicConfig
from rmqrun.client.route import PERM_READ, PERM_WRITE, perm_to_string
from rmqrun.errors import ConfigError
from rmqrun.namespace import has_namespace, unwrap

_PERMS = {"RW": PERM_READ | PERM_WRITE, "R": PERM_READ, "W": PERM_WRITE, "-": 0,
          "6": PERM_READ | PERM_WRITE, "4": PERM_READ, "2": PERM_WRITE, "0": 0}


def parse_perm(value: str) -> int:
    perm = _PERMS.get(value.strip().upper())
    if perm is None:
        raise ConfigError(f"--perm {value!r} is invalid: one of rw, r, w, - (or mqadmin's 6, 4, 2, 0)")
    return perm


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

    done, order_conf = run_admin(lambda: create_topic(addr, config, broker=broker, cluster_name=cluster))
    click.echo(f"created {name}: {config.read_queue_nums} read / {config.write_queue_nums} write queue(s), "
               f"perm {perm_to_string(config.perm)}, order {str(config.order).lower()} on {', '.join(done)}"
               + (f"; name server order conf {order_conf}" if order_conf else ""))


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

    done = run_admin(lambda: update_topic(addr, name, read_queues=read, write_queues=write, perm=new_perm,
                                          order=order, broker=broker, cluster_name=cluster))
    lines = [f"updated {name} on {b}: {cfg.read_queue_nums} read / {cfg.write_queue_nums} write queue(s), perm "
             f"{perm_to_string(cfg.perm)}, order {str(cfg.order).lower()}" for b, cfg in done.written.items()]
    if done.order_conf_written:
        lines.append(f"name server order conf of {name}: {done.order_conf or 'none'}")
    click.echo("\n".join(lines))


@topic.command()
@topic_args
@click.option("-c", "--cluster", cls=Shown, shown="the only cluster", help="the cluster to delete it from")
@cluster_args
def delete(name: str | None, topic_flag: str | None, cluster: str | None, config_file: str | None,
           namesrv: str | None, namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Delete topic NAME from every master of the cluster, then from the name servers."""
    name = user_topic_name(the_topic(name, topic_flag), "delete", namespace, config_file)
    addr = resolve_cluster(namesrv, config_file, security_flags)

    done = run_admin(lambda: delete_topic(addr, name, cluster_name=cluster))
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

    names = run_admin(lambda: list_topics(addr, show_all=show_all))
    if ns:
        names = sorted(unwrap(ns, n) for n in names if has_namespace(ns, n))
    click.echo(json.dumps(names) if as_json else "\n".join(names))


topic.add_command(describe)
