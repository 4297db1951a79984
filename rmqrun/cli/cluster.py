"""What the operator commands share on the command line: the name server and security they resolve, one-line errors.

A bad option is a :class:`ConfigError` (exit 2, raised before anything
touches the network); a cluster that cannot answer or refuses is an
:class:`~rmqrun.admin.session.AdminError` or a remoting error, reported in
one line with exit 1. The calls themselves are :mod:`rmqrun.admin`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

from rmqrun.admin.session import Cluster
from rmqrun.cli.exit_codes import fail
from rmqrun.errors import ConfigError, RmqrunError

T = TypeVar("T")


def resolve_namesrv(namesrv: str | None, config_file: str | None) -> str:
    """--namesrv, else the settings table's precedence (RMQRUN_NAMESRV, $NAMESRV_ADDR, the config file)."""
    from rmqrun.cli import settings as table
    resolved = table.resolve({"namesrv": namesrv}, config_file=config_file)
    if not resolved["namesrv"]:
        raise ConfigError("missing namesrv (--namesrv, $NAMESRV_ADDR or RMQRUN_NAMESRV)")
    return str(resolved["namesrv"])


def resolve_cluster(namesrv: str | None, config_file: str | None, security_flags: dict[str, Any]) -> Cluster:
    """The name server and the ACL/TLS settings (flags > RMQRUN_* > config file), checked before any I/O."""
    from rmqrun.cli.security_options import security_for
    return Cluster(resolve_namesrv(namesrv, config_file), security_for(security_flags, config_file))


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
