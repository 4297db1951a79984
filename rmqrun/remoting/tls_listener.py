"""A listener that serves TLS and plain clients on one port (Java's permissive ``tlsMode``).

Each accepted socket is classified by its first byte before anything reads
it: 0x16 (a TLS handshake record) gets a server-side TLS transport, anything
else a plain one. The byte is peeked (MSG_PEEK), not consumed, so the TLS
layer or the frame decoder sees the stream from its start. RocketMQ clients
always speak first, so waiting for that byte costs nothing; a socket that
says nothing for ``first_byte_timeout`` seconds is closed (Java closes idle
channels after 120 s as well).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Awaitable, Callable

from loguru import logger

from rmqrun.aio import wait_for

TLS_HANDSHAKE = 0x16
StreamCallback = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None] | None]


class SniffingListener:
    def __init__(self, host: str, port: int, ssl_context: ssl.SSLContext, on_streams: StreamCallback, *,
                 first_byte_timeout: float = 120.0, handshake_timeout: float = 10.0) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.on_streams = on_streams
        self.first_byte_timeout = first_byte_timeout
        self.handshake_timeout = handshake_timeout
        self._sock: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family, backlog=1024)
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._accept_task = asyncio.get_running_loop().create_task(self._accept_loop(), name="tls-sniff-accept")

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        while True:
            try:
                client, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:  # e.g. EMFILE: keep serving the others
                logger.warning("accept on {}:{} failed: {}", self.host, self.port, exc)
                await asyncio.sleep(0.1)
                continue
            client.setblocking(False)
            task = loop.create_task(self._classify(client))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _classify(self, client: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            first = await wait_for(_peek_byte(loop, client), self.first_byte_timeout)
            if first is None:  # closed before saying anything
                client.close()
                return
            use_tls = first == TLS_HANDSHAKE
            reader = asyncio.StreamReader(limit=2 ** 16)
            protocol = asyncio.StreamReaderProtocol(reader)
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, client, ssl=self.ssl_context if use_tls else None,
                ssl_handshake_timeout=self.handshake_timeout if use_tls else None)
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        except asyncio.CancelledError:
            client.close()
            raise
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as exc:
            logger.info("connection to {}:{} dropped before its first frame: {!r}", self.host, self.port, exc)
            client.close()
            return
        result = self.on_streams(reader, writer)
        if result is not None:
            await result

    async def stop(self) -> None:
        if self._accept_task is not None:
            self._accept_task.cancel()
            try:
                await self._accept_task
            except asyncio.CancelledError:
                pass
            self._accept_task = None
        for task in list(self._pending):
            task.cancel()
        if self._sock is not None:
            self._sock.close()
            self._sock = None


async def _peek_byte(loop: asyncio.AbstractEventLoop, client: socket.socket) -> int | None:
    """The first byte the client sent, left in the socket; None if it closed first."""
    while True:
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(client.fileno(), lambda: readable.done() or readable.set_result(None))
        try:
            await readable
        finally:
            loop.remove_reader(client.fileno())
        try:
            data = client.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            continue
        return data[0] if data else None
