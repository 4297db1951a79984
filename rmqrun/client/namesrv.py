"""The name-server client: topic routes, with failover across name servers.

Name servers are independent and each holds every route, so any one of them
can answer. Like the Java client, one address is preferred until it fails;
a connection failure moves on to the next address within the same call, and
any failure makes the next call start elsewhere. A request timeout is not
retried inside the call: the call's whole budget (``mqClientApiTimeout``,
3 s) is spent by then.

Requests announce version 409 (4.9.8), so a 4.9.4+ name server answers in
strict JSON; the parser still reads the bare-integer-key form of older ones.
"""

from __future__ import annotations

import asyncio
import random
from typing import Sequence


from rmqrun.aio import wait_for
from rmqrun.client.errors import NameServerUnavailableError
from rmqrun.client.failure_log import FailureLog
from rmqrun.client.route import TopicRouteData
from rmqrun.protocol.headers import GetRouteInfoRequestHeader
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import HANDSHAKE_CUT, ConnectionPool
from rmqrun.remoting.errors import (
    ConnectionClosedError,
    ProtocolError,
    RequestTimeoutError,
    TlsError,
    error_for_code,
)
from rmqrun.remoting.frame import RemotingCommand

DEFAULT_TIMEOUT = 3.0  # ClientConfig.mqClientApiTimeout


#: why a plain connection the server closed without an answer may need ``tls``
PLAIN_DROPPED = "the server closed the connection without answering; if it serves TLS only, set tls"


def parse_addresses(addresses: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` (Java's namesrvAddr form) or a list, to a clean list."""
    items = addresses.split(";") if isinstance(addresses, str) else list(addresses)
    out = [a.strip() for a in items if a and a.strip()]
    if not out:
        raise ValueError(f"no name server address in {addresses!r}")
    for addr in out:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"name server address {addr!r} is not host:port")
    return out


#: a failing name server is one incident per address, process-wide: the client instances of successive
#: start attempts (and of one run's consumer and producers) share it
_FAILURES = FailureLog()


class NameServerClient:
    def __init__(self, addresses: str | Sequence[str], pool: ConnectionPool, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.addresses = parse_addresses(addresses)
        self.pool = pool
        self.timeout = timeout
        # Java starts at a random index so clients spread over the name servers.
        self._index = random.randrange(len(self.addresses))

    @property
    def preferred(self) -> str:
        return self.addresses[self._index % len(self.addresses)]

    def _skip(self, address: str) -> None:
        if self.preferred == address:
            self._index = (self._index + 1) % len(self.addresses)

    def _warn(self, address: str, state: str, cause: str) -> None:
        """A failing name server is an incident (its start, a summary now and then, its end): a consumer
        retrying through an outage (start-up waits for the cluster, route refreshes) must not log every
        attempt."""
        _FAILURES.failed(address, f"name server {address}", cause, state=state)

    async def request(self, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Send ``cmd`` to a name server, failing over on connection errors."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout if timeout is None else timeout)
        last: BaseException | None = None
        dropped = False
        for _ in range(len(self.addresses)):
            address = self.preferred
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                conn = await wait_for(self.pool.get(address), remaining)
            except (ConnectionClosedError, asyncio.TimeoutError) as exc:
                self._warn(address, "unreachable", str(exc))
                last = exc
                self._skip(address)
                continue
            try:
                resp = await conn.request(cmd, max(deadline - loop.time(), 0.001))
            except ConnectionClosedError as exc:
                self._warn(address, "dropped the connection", str(exc))
                dropped = True
                last = exc
                self._skip(address)
            except RequestTimeoutError as exc:
                # a hung name server (the connection up, no answer): an incident like a dead one, so the
                # route refresh of every topic need not say it, and its end is logged too
                self._warn(address, "not answering", str(exc))
                self._skip(address)
                raise
            else:
                _FAILURES.recovered(address)
                return self.pool.check(address, cmd, resp)
        if isinstance(last, TlsError):  # not an outage: the settings or the certificate must change
            raise last
        # a TLS handshake the server cut short (a plain port given tls) keeps its hint in the one line shown;
        # a plain connection closed unanswered is what a TLS-only (enforcing) server does to plain clients
        hint = ""
        if last is not None and HANDSHAKE_CUT in str(last):
            hint = f" ({HANDSHAKE_CUT})"
        elif dropped and not (self.pool.security is not None and self.pool.security.tls):
            hint = f" ({PLAIN_DROPPED})"
        raise NameServerUnavailableError(
            f"no name server answered among {';'.join(self.addresses)}{hint}") from last

    async def get_route(self, topic: str, timeout: float | None = None) -> TopicRouteData:
        """The topic's route; raises TopicNotExistError (code 17) when the name server has none."""
        cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext())
        resp = await self.request(cmd, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, RequestCode.GET_ROUTEINFO_BY_TOPIC)
        if not resp.body:
            raise ProtocolError(f"name server answered the route of {topic!r} with an empty body")
        return TopicRouteData.from_json(resp.body, topic)
