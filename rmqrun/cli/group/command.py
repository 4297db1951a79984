"""``rmqrun group mode``: switch a consumer group between pull and POP, as ``mqadmin setConsumeMode`` does.

RocketMQ 5.x brokers keep, per topic and group, a *message request mode*:
PULL (each queue owned by one client, the default) or POP (clients share the
queues; the broker hands any message to any client and takes it back unless
acknowledged). ``--mode`` sends SET_MESSAGE_REQUEST_MODE to every master of
the cluster (``-c``, or the only one the name server knows) or to one broker
(``-b``); each master keeps its own table, so all of them are told, and a
master that refuses does not stop the others (each is reported). ``--list``
asks every master for its table (GET_ALL_MESSAGE_REQUEST_MODE) and prints it.

Errors name the broker: a 4.x broker answers REQUEST_CODE_NOT_SUPPORTED (POP
needs RocketMQ 5.x), an unknown topic or group, an ACL refusal. Exit 1 when
any broker refused (2 for a bad option, before any I/O).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from rmqrun.cli.exit_codes import EXIT_RUNTIME, error_line
from rmqrun.cli.flags import Shown, json_option
from rmqrun.cli.topic.options import cluster_args
from rmqrun.errors import ConfigError

_MODE_CODES = {"mode": "SET_MESSAGE_REQUEST_MODE", "list": "GET_ALL_MESSAGE_REQUEST_MODE"}


@click.group()
def group() -> None:
    """Consumer-group settings the brokers keep: `mode` switches a group between pull and POP (RocketMQ 5.x)."""


def broker_failure(addr: str, exc: BaseException, what: str, topic: str = "", group_name: str = "") -> str:
    """One line saying why broker ``addr`` refused ``what`` (``mode`` or ``list``), in an operator's words."""
    from rmqrun.remoting.errors import (
        AccessDeniedError,
        RequestNotSupportedError,
        SubscriptionError,
        TopicNotExistError,
    )
    if isinstance(exc, RequestNotSupportedError):
        return (f"broker {addr} does not support {_MODE_CODES[what]}: message request modes and POP need "
                "RocketMQ 5.x (this broker looks like 4.x)")
    if isinstance(exc, TopicNotExistError):
        return f"broker {addr}: topic {topic!r} does not exist there (create it first: rmqrun topic create)"
    if isinstance(exc, SubscriptionError):
        return (f"broker {addr}: consumer group {group_name!r} does not exist there and the broker does not "
                "create groups on its own (autoCreateSubscriptionGroup=false)")
    if isinstance(exc, AccessDeniedError):
        return f"broker {addr}: {exc}"
    return f"broker {addr}: {exc or type(exc).__name__}"


@group.command()
@click.option("-g", "--group", "group_name", metavar="GROUP", cls=Shown, required_text="required with --mode",
              help="consumer group")
@click.option("-t", "--topic", metavar="TOPIC", cls=Shown, required_text="required with --mode",
              help="topic the group consumes")
@click.option("--mode", type=click.Choice(["pop", "pull"], case_sensitive=False),
              help="POP: clients share the queues; PULL: each queue has one owner (the broker default)")
@click.option("--pop-share-queue-num", type=click.IntRange(min=0), default=0, show_default=True,
              help="POP only: each client pops its own queues and those of the next N clients; 0 = every "
                   "client pops every queue")
@click.option("--list", "list_all", is_flag=True, help="print every mode the masters keep instead of setting one")
@json_option("with --list: a JSON array")
@click.option("--cluster", cls=Shown, shown="the only cluster", help="every master of this cluster")
@click.option("--broker", cls=Shown, shown="every master of the cluster", help="only this broker, host:port")
@cluster_args
def mode(group_name: str | None, topic: str | None, mode: str | None, pop_share_queue_num: int, list_all: bool,
         as_json: bool, cluster: str | None, broker: str | None, config_file: str | None, namesrv: str | None,
         namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Set GROUP's message request mode for TOPIC on every master (mqadmin setConsumeMode), or --list them."""
    from rmqrun.admin.group_mode import list_group_modes, set_group_mode
    from rmqrun.cli.cluster import resolve_cluster, run_admin
    from rmqrun.cli.namespace_option import resolve_namespace
    from rmqrun.cli.settings import BY_KEY
    from rmqrun.namespace import wrap

    if list_all:
        if mode is not None or pop_share_queue_num:
            raise ConfigError("--list prints the modes; give it without --mode and --pop-share-queue-num")
    else:
        if mode is None:
            raise ConfigError("missing --mode pop|pull (or --list to print the modes the brokers keep)")
        if group_name is None or topic is None:
            raise ConfigError("--mode needs the group and the topic: -g/--group GROUP -t/--topic TOPIC")
        if mode.lower() == "pull" and pop_share_queue_num:
            raise ConfigError("--pop-share-queue-num applies to --mode pop only")
    if as_json and not list_all:
        raise ConfigError("--json goes with --list")
    ns = resolve_namespace(namespace, config_file)
    group_name = wrap(ns, BY_KEY["group"].convert(group_name, "command line --group")) if group_name else None
    topic = wrap(ns, BY_KEY["topic"].convert(topic, "command line --topic")) if topic else None
    where = resolve_cluster(namesrv, config_file, security_flags)
    if list_all:
        modes, refused = run_admin(lambda: list_group_modes(where, broker=broker, cluster_name=cluster))
        failures = [broker_failure(r.broker, r.error, "list") for r in refused]
        _print_rows([m.to_json() for m in modes], ns, group_name, topic, as_json, all_answered=not refused)
    else:
        assert mode is not None and group_name is not None and topic is not None
        done, refused = run_admin(lambda: set_group_mode(where, topic, group_name, mode.upper(), pop_share_queue_num,
                                                         broker=broker, cluster_name=cluster))
        failures = [broker_failure(r.broker, r.error, "mode", topic, group_name) for r in refused]
        share = f", popShareQueueNum {pop_share_queue_num}" if mode.lower() == "pop" else ""
        for addr in done:
            click.echo(f"group {group_name} on topic {topic}: {mode.upper()}{share} on broker {addr}")
    for line in failures:
        error_line(line)
    if failures:
        sys.exit(EXIT_RUNTIME)


def _print_rows(rows: list[dict[str, Any]], ns: str | None, group_name: str | None, topic: str | None,
                as_json: bool, all_answered: bool = True) -> None:
    """The modes as a table (or JSON). No row: 'every group pulls' only when every broker asked answered; a
    refusal (a 4.x broker keeps no modes) is said on its own line, and an empty table then proves nothing."""
    from rmqrun.namespace import has_namespace, unwrap
    if ns:
        rows = [{**r, "topic": unwrap(ns, r["topic"]), "group": unwrap(ns, r["group"])} for r in rows
                if has_namespace(ns, r["topic"]) and has_namespace(ns, r["group"])]
    if group_name:
        rows = [r for r in rows if r["group"] == unwrap(ns, group_name)]
    if topic:
        rows = [r for r in rows if r["topic"] == unwrap(ns, topic)]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        if all_answered:
            click.echo("no message request mode is set: every group pulls (the broker default)")
        return
    head = ("BROKER", "TOPIC", "GROUP", "MODE", "POP_SHARE_QUEUE_NUM")
    cells = [head] + [(r["broker"], r["topic"], r["group"], r["mode"], str(r["popShareQueueNum"])) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    for c in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip())
