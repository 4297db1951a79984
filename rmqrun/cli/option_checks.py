"""Checks of command-line options shared by the one-shot commands (``read``, ``spark``).

Each takes what the user typed and returns the typed value, or raises
:class:`~rmqrun.errors.ConfigError` whose text names the option and the value,
so every command words the same mistake the same way (exit 2, one line).
"""

from __future__ import annotations

import os

from rmqrun.errors import ConfigError


def namesrv_option(value: str | None) -> str:
    """``--namesrv``, else ``$NAMESRV_ADDR`` (the Java client's variable): ``host:port[;host:port]``."""
    addr = value if value is not None else os.environ.get("NAMESRV_ADDR")
    if not addr or not addr.strip():
        raise ConfigError("missing name server: give --namesrv host:port or set $NAMESRV_ADDR")
    from rmqrun.client.namesrv import parse_addresses
    try:
        parse_addresses(addr)
    except ValueError as exc:
        hint = " (-n is the name server, as in mqadmin; a count is --count)" if addr.strip().isdigit() else ""
        raise ConfigError(f"--namesrv {addr!r}: {exc}{hint}") from None
    return addr.strip()


def int_option(value: str, option: str, minimum: int) -> int:
    """A whole number of at least ``minimum``."""
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not an integer") from None
    if number < minimum:
        raise ConfigError(f"{option} {value!r} must be >= {minimum}")
    return number


def tags_option(topic: str, tags: str | None) -> str:
    """``--tags``: a tag expression (``*`` when not given) that a subscription accepts."""
    expression = tags if tags is not None else "*"
    from rmqrun.protocol.subscription import build_subscription_data
    try:
        build_subscription_data(topic, expression)
    except ValueError as exc:
        raise ConfigError(f"--tags {tags!r}: {exc}") from None
    return expression


def from_config(config_file: str | None, namesrv: str | None, topic: str | None,
                namespace: str | None) -> tuple[str | None, str | None, str | None]:
    """``--config FILE`` of ``read`` and ``spark``: the name server, topic and namespace the flags did not give,
    taken from the same YAML file ``rmqrun run`` reads (RMQRUN_* variables over it, as there).

    Only where to read: never the group, whose offsets a read would commit and to whose retry topic spark
    would send failures; a group is always named on the command line.
    """
    if not config_file:
        return namesrv, topic, namespace
    from rmqrun.cli import settings as table
    from rmqrun.cli.namespace_option import resolve_namespace
    resolved = table.resolve({}, config_file=config_file)
    if namesrv is None and resolved["namesrv"]:
        namesrv = str(resolved["namesrv"])
    if topic is None:
        if resolved["subscriptions"]:
            raise ConfigError(f"{config_file} subscribes to several topics: give --topic")
        topic = resolved["topic"][0] if isinstance(resolved["topic"], (list, tuple)) else resolved["topic"]
    return namesrv, topic, resolve_namespace(namespace, config_file)
