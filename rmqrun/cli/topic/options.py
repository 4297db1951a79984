"""The options every ``rmqrun topic`` command shares: which topic, where it lives, how to reach the cluster.

The topic is the positional ``NAME`` or ``-t/--topic`` (mqadmin's ``-t``,
kafka-topics' ``--topic``), so a command copied from either tool works; the
two given and different is refused rather than one silently winning.
Letters are mqadmin's: ``-n`` name server, ``-c`` cluster, ``-b`` broker.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.security_options import security_options
from rmqrun.errors import ConfigError


def topic_args(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``NAME`` (optional) and ``-t/--topic``; the command gets ``name`` and ``topic_flag``."""
    fn = click.option("-t", "--topic", "topic_flag", metavar="NAME", cls=Shown, shown="the NAME argument",
                      help="the topic, as mqadmin -t and kafka-topics --topic (instead of NAME)")(fn)
    return click.argument("name", required=False)(fn)


def the_topic(name: str | None, topic_flag: str | None) -> str:
    """The one topic given as NAME or -t/--topic."""
    if name is not None and topic_flag is not None and name != topic_flag:
        raise ConfigError(f"the topic is given twice ({name!r} and -t {topic_flag!r}): give NAME or -t/--topic")
    topic = name if name is not None else topic_flag
    if topic is None:
        raise ConfigError("missing the topic: give NAME or -t/--topic NAME")
    return topic


def topic_name(topic: str, namespace: str | None = None, config_file: str | None = None) -> str:
    """The topic as the cluster names it: checked, then put under ``--namespace`` (flag, env, config)."""
    from rmqrun.cli.settings import BY_KEY
    from rmqrun.namespace import wrap
    return wrap(resolve_namespace(namespace, config_file), str(BY_KEY["topic"].convert(topic, "command line TOPIC")))


def cluster_args(fn: Callable[..., Any]) -> Callable[..., Any]:
    """How to reach the cluster: ``-n``, ``--config``, ``--namespace`` and the ACL/TLS flags."""
    fn = namespace_option(fn)
    fn = security_options(fn)
    fn = config_option("namesrv")(fn)
    return namesrv_flag(fn)


def where_args(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Which brokers: ``-b`` one, ``-c`` every master of a cluster; then :func:`cluster_args`."""
    fn = cluster_args(fn)
    fn = click.option("-c", "--cluster", cls=Shown, shown="the only cluster",
                      help="every master of this cluster")(fn)
    return click.option("-b", "--broker", cls=Shown, shown="every master of the cluster",
                        help="only this broker, host:port")(fn)


def user_topic_name(topic: str, verb: str, namespace: str | None = None, config_file: str | None = None) -> str:
    """:func:`topic_name` for ``create``, ``update`` and ``delete``: a system topic of the broker (TBW102,
    SCHEDULE_TOPIC_XXXX, the transaction and trace topics, ``rmq_sys_*``: Java's ``TopicValidator`` set) is
    refused here, exit 2, whether or not the broker has it yet, as the broker refuses it."""
    from rmqrun.topic_names import is_system_topic
    name = topic_name(topic, namespace, config_file)
    if is_system_topic(name):
        raise ConfigError(f"topic {verb} {name}: {name} is one of the broker's system topics (the broker creates and "
                          "keeps it itself); choose another name")
    return name
