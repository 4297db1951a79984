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
