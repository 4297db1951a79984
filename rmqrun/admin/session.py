"""What the operator commands (``topic``, ``offsets``) share: the name server, a client, one-line errors.

A bad option is a :class:`ConfigError` (exit 2, raised before anything
touches the network); a cluster that cannot answer or refuses is an
:class:`AdminError` or a remoting error, reported in one line with exit 1.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from rmqrun.cli.exit_codes import fail
from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.remoting.security import ClientSecurity

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


@dataclass(frozen=True)
class Cluster:
    """Where an operator command connects: the name server(s) and the connection security."""

    namesrv: str
    security: ClientSecurity | None = None


def resolve_cluster(namesrv: str | None, config_file: str | None, security_flags: dict[str, Any]) -> Cluster:
    """The name server and the ACL/TLS settings (flags > RMQRUN_* > config file), checked before any I/O."""
    from rmqrun.cli.security_options import security_for
    return Cluster(resolve_namesrv(namesrv, config_file), security_for(security_flags, config_file))


@asynccontextmanager
async def admin_session(cluster: str | Cluster, name: str) -> AsyncIterator[tuple[ClientInstance, AdminClient]]:
    if isinstance(cluster, str):
        cluster = Cluster(cluster)
    instance = ClientInstance(cluster.namesrv, instance_name=name, security=cluster.security)
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
        fail(exc)
