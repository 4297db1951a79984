"""A remoting server: accepts connections and routes requests by code.

The embedded name server and broker are each one :class:`RemotingServer`
with a table of processors. An unknown code is answered with
REQUEST_CODE_NOT_SUPPORTED, never left hanging.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Awaitable, Callable

from loguru import logger

from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import DEFAULT_MAX_FRAME_SIZE, RemotingCommand
from rmqrun.remoting.tls_listener import SniffingListener

Processor = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]
#: Runs before any processor (Java's server RPC hook): None lets the request through,
#: a response refuses it (and is sent unless the request is oneway).
Guard = Callable[[Connection, RemotingCommand], RemotingCommand | None]


class RemotingServer:
    def __init__(self, host: str, port: int, *, name: str = "server",
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, ssl_context: ssl.SSLContext | None = None,
                 tls_mode: str = "permissive") -> None:
        """``ssl_context`` turns TLS on: ``tls_mode`` ``enforcing`` accepts TLS only,
        ``permissive`` TLS and plain on the same port (see tls_listener.py)."""
        if tls_mode not in ("permissive", "enforcing"):
            raise ValueError(f"tls_mode {tls_mode!r} is not permissive or enforcing")
        self.host = host
        self.port = port
        self.name = name
        self.max_frame_size = max_frame_size
        self.processors: dict[int, Processor] = {}
        self.connections: set[Connection] = set()
        self.on_disconnect: list[Callable[[Connection], None]] = []
        self.guard: Guard | None = None
        self.ssl_context = ssl_context
        self.tls_mode = tls_mode
        self._server: asyncio.base_events.Server | None = None
        self._sniffer: SniffingListener | None = None

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        if self.ssl_context is not None and self.tls_mode == "permissive":
            self._sniffer = SniffingListener(self.host, self.port, self.ssl_context, self._accept)
            await self._sniffer.start()
            self.port = self._sniffer.port
        else:
            self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True,
                                                      ssl=self.ssl_context,
                                                      ssl_handshake_timeout=10.0 if self.ssl_context else None)
            sock = self._server.sockets[0]
            self.port = sock.getsockname()[1]  # resolves port 0 to the one the OS chose
        tls = "" if self.ssl_context is None else f" (TLS {self.tls_mode})"
        logger.info("{} listening on {}{}", self.name, self.address, tls)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer, handler=self._dispatch, max_frame_size=self.max_frame_size,
                          on_close=self._closed)
        self.connections.add(conn)
        conn.start()

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        for callback in self.on_disconnect:
            try:
                callback(conn)
            except Exception as exc:  # pragma: no cover - defensive
                logger.opt(exception=exc).error("disconnect callback failed")

    async def _dispatch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.guard is not None:
            refusal = self.guard(conn, cmd)
            if refusal is not None:
                return refusal
        processor = self.processors.get(cmd.code)
        if processor is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"{self.name}: request code {cmd.code} not supported")
        return await processor(conn, cmd)

    async def stop(self) -> None:
        if self._sniffer is not None:
            await self._sniffer.stop()
            self._sniffer = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
