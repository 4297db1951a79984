"""What the operator commands (``topic``, ``offsets``) share: the name server, a client, one-line errors.

A bad option is a :class:`ConfigError` (exit 2, raised before anything
touches the network); a cluster that cannot answer or refuses is an
:class:`AdminError` or a remoting error, reported in one line with exit 1.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import asynccontextmanager
from typing import AsyncIterator, Awaitable, Callable, TypeVar

import click

from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.errors import ConfigError, RmqrunError

EXIT_RUNTIME = 1
T = TypeVar("T")


class AdminError(RmqrunError):
    """The cluster answered, but not with what the command needs (unknown topic, no such cluster...)."""


def resolve_namesrv(namesrv: str | None, config_file: str | None) -> str:
    """--namesrv, else the settings table's precedence (RMQRUN_NAMESRV, $NAMESRV_ADDR, the config file)."""
    from rmqrun.cli import settings as table
    resolved = table.resolve({"namesrv": namesrv}, config_file=config_file)
    if not resolved["namesrv"]:
        raise ConfigError("missing namesrv (--namesrv, $NAMESRV_ADDR or RMQRUN_NAMESRV)")
    return str(resolved["namesrv"])


@asynccontextmanager
async def admin_session(namesrv: str, name: str) -> AsyncIterator[tuple[ClientInstance, AdminClient]]:
    instance = ClientInstance(namesrv, instance_name=name)
    try:
        yield instance, AdminClient(instance.pool, instance.namesrv)
    finally:
        await instance.close()


def run_admin(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` and turn a cluster-side failure into one line on stderr and exit 1."""
    from rmqrun.cli import logs
    logs.setup("ERROR", role="admin")
    try:
        return asyncio.run(main())
    except ConfigError:
        raise
    except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
        click.echo(f"rmqrun: error: {exc or type(exc).__name__}", err=True)
        sys.exit(EXIT_RUNTIME)
