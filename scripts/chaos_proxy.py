"""A loopback TCP proxy (asyncio) that the chaos suite puts between rmqrun and the broker, and breaks on demand.

Routing: the broker listens on ``127.0.0.1:P`` and registers ``127.0.0.2:P``
with its name server (``rmqrun broker --advertise-host 127.0.0.2``); this proxy
listens on ``127.0.0.2:P`` and ``127.0.0.2:N`` (the name server) and forwards to
``127.0.0.1``. rmqrun is given ``--namesrv 127.0.0.2:N``, so both the name-server
connection and every broker connection the routes lead to pass through here.

The suite's own producers and audit also reach the broker through the routes,
hence through the proxy; a connection whose client end belongs to this process
is marked ``own`` and is never broken, so the faults hit rmqrun only.

Faults, each on the connections open at the time (``links``):

* ``cut``: both ends reset (SO_LINGER 0), as when a middlebox drops the flow;
* ``stall``: nothing is forwarded either way until :meth:`resume` (bytes are
  held, not lost: the peers see a pause, then everything arrives);
* ``half_open``: the broker's end is reset, the client's end stays open and
  whatever the client sends is swallowed, with no answer and no FIN, until the
  client closes it itself or the proxy gives up (``limit`` seconds). How long the
  client took to notice is recorded (:attr:`Link.noticed_after`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Iterable

import psutil


@dataclass
class Link:
    """One proxied connection: the client's end, the upstream end, and what the chaos did to it."""

    id: int
    route: str
    peer: tuple[str, int]
    own: bool
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    opened: float = field(default_factory=time.monotonic)
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    swallowing: bool = False
    half_open_since: float | None = None
    noticed_after: float | None = None
    closed: bool = False

    def __post_init__(self) -> None:
        self.flowing.set()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN: the peer learns of it only when it reads or writes."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


def _own_local_addresses() -> set[tuple[str, int]]:
    """Local (ip, port) of every TCP socket of this process: who among the peers is us."""
    try:
        return {(c.laddr.ip, c.laddr.port) for c in psutil.Process(os.getpid()).net_connections("tcp") if c.laddr}
    except psutil.Error:
        return set()


class ChaosProxy:
    """Forwards ``listen_host:port`` to ``target_host:port`` for each port given, and injects faults."""

    def __init__(self, listen_host: str, target_host: str, ports: dict[str, int]) -> None:
        self.listen_host = listen_host
        self.target_host = target_host
        self.ports = dict(ports)
        self.links: dict[int, Link] = {}
        self.servers: list[asyncio.base_events.Server] = []
        self._next_id = 0
        self.accepted = 0
        self.half_open_noticed: list[float] = []
        self.half_open_unnoticed = 0

    async def start(self) -> None:
        for name, port in self.ports.items():
            server = await asyncio.start_server(
                lambda r, w, name=name, port=port: self._accept(name, port, r, w), self.listen_host, port)
            self.servers.append(server)

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for link in list(self.links.values()):
            self._close(link)
        for server in self.servers:
            await server.wait_closed()

    def rmqrun_links(self) -> list[Link]:
        """Open connections that are not the suite's own: the ones faults may hit."""
        return [ln for ln in self.links.values() if not ln.own and not ln.closed and ln.half_open_since is None]

    # ------------------------------------------------------------------ faults

    def cut(self, links: Iterable[Link]) -> int:
        n = 0
        for link in links:
            if not link.closed:
                _reset(link.client)
                _reset(link.upstream)
                self._close(link)
                n += 1
        return n

    def stall(self, links: Iterable[Link]) -> int:
        n = 0
        for link in links:
            link.flowing.clear()
            n += 1
        return n

    def resume(self) -> None:
        for link in self.links.values():
            link.flowing.set()

    def half_open(self, links: Iterable[Link], limit: float) -> int:
        n = 0
        for link in links:
            if link.closed:
                continue
            link.swallowing = True
            link.half_open_since = time.monotonic()
            link.flowing.set()
            _reset(link.upstream)
            asyncio.get_running_loop().call_later(limit, self._give_up, link)
            n += 1
        return n

    def half_open_pending(self) -> int:
        """Half-open connections the client has not closed yet."""
        return sum(1 for ln in self.links.values() if ln.half_open_since is not None and not ln.closed)

    def _give_up(self, link: Link) -> None:
        if not link.closed:
            self.half_open_unnoticed += 1
            _reset(link.client)
            self._close(link)

    # ------------------------------------------------------------------ plumbing

    async def _accept(self, name: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")[:2]
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, port)
        except OSError:
            _reset(writer)  # the broker is down: the client sees the refusal as a reset
            return
        own = tuple(peer) in _own_local_addresses()
        self._next_id += 1
        self.accepted += 1
        link = Link(self._next_id, name, tuple(peer), own, writer, up_writer)  # type: ignore[arg-type]
        self.links[link.id] = link
        await asyncio.gather(self._pump(link, reader, up_writer, upstream=False),
                             self._pump(link, up_reader, writer, upstream=True), return_exceptions=True)
        self._close(link)

    async def _pump(self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    upstream: bool) -> None:
        try:
            while not link.closed:
                data = await reader.read(65536)
                if not data:
                    break
                await link.flowing.wait()
                if link.swallowing:
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not upstream and link.half_open_since is not None and link.noticed_after is None and not link.closed:
                # the client closed its end of a half-open connection: it noticed
                link.noticed_after = time.monotonic() - link.half_open_since
                self.half_open_noticed.append(link.noticed_after)
            if not link.swallowing or not upstream:
                self._close(link)

    def _close(self, link: Link) -> None:
        if link.closed:
            return
        link.closed = True
        link.flowing.set()
        for w in (link.client, link.upstream):
            try:
                w.close()
            except Exception:
                pass
        self.links.pop(link.id, None)
