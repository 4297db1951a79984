"""Where an admin call connects and the client it talks through: :class:`Cluster` and :func:`admin_session`.

A program names the name server (and the ACL/TLS settings, if the cluster
needs them) in a :class:`Cluster`; every admin function takes one, or the
name server address alone. The cluster answering but not with what the call
needs (an unknown topic, no such cluster) is an :class:`AdminError`; a cluster
that cannot answer or refuses raises the remoting errors as they are.
Resolving the name server from flags, ``RMQRUN_*`` variables or a config
file is the command line's business (:mod:`rmqrun.cli.cluster`).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.errors import RmqrunError
from rmqrun.remoting.security import ClientSecurity


class AdminError(RmqrunError):
    """The cluster answered, but not with what the command needs (unknown topic, no such cluster...)."""


@dataclass(frozen=True)
class Cluster:
    """Where an operator command connects: the name server(s) and the connection security."""

    namesrv: str
    security: ClientSecurity | None = None


@asynccontextmanager
async def admin_session(cluster: str | Cluster, name: str) -> AsyncIterator[tuple[ClientInstance, AdminClient]]:
    """A client instance named ``name`` and its admin calls, closed on the way out whatever happens."""
    if isinstance(cluster, str):
        cluster = Cluster(cluster)
    instance = ClientInstance(cluster.namesrv, instance_name=name, security=cluster.security)
    try:
        yield instance, AdminClient(instance.pool, instance.namesrv)
    finally:
        await instance.close()
