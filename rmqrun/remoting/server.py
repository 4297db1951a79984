"""A remoting server: accepts connections and routes requests by code.

The embedded name server and broker are each one :class:`RemotingServer`
with a table of processors. An unknown code is answered with
REQUEST_CODE_NOT_SUPPORTED, never left hanging.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from loguru import logger

from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import DEFAULT_MAX_FRAME_SIZE, RemotingCommand

Processor = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]


class RemotingServer:
    def __init__(self, host: str, port: int, *, name: str = "server",
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.max_frame_size = max_frame_size
        self.processors: dict[int, Processor] = {}
        self.connections: set[Connection] = set()
        self.on_disconnect: list[Callable[[Connection], None]] = []
        self._server: asyncio.base_events.Server | None = None

    def register(self, code: int, processor: Processor) -> None:
        self.processors[int(code)] = processor

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]  # resolves port 0 to the one the OS chose
        logger.info("{} listening on {}", self.name, self.address)

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
        processor = self.processors.get(cmd.code)
        if processor is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"{self.name}: request code {cmd.code} not supported")
        return await processor(conn, cmd)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
