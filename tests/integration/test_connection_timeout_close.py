"""A client connection that stops answering is closed at the first request timeout (Java's default).

Found by the chaos suite (``scripts/chaos.py``, fault ``proxy_half_open``): with a
broker connection left open by a middlebox that no longer forwards anything,
every later request of the client timed out on the same socket and consumption
never resumed. Java's client closes the channel when a synchronous request
times out (``clientCloseSocketIfTimeout``, true by default in 4.9.8); a pooled
connection now does the same, so the next request reconnects.
"""

from __future__ import annotations

import asyncio

import pytest

from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import ConnectionClosedError, RequestTimeoutError
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.test_connection import _server


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_pooled_connection_is_closed_on_timeout_and_the_next_request_reconnects() -> None:
    async def main() -> None:
        server = await _server()
        pool = ConnectionPool()
        first = await pool.get(server.address)
        # another request in flight on the same connection learns of the close at once
        other = asyncio.ensure_future(pool.request(server.address, RemotingCommand(1, {"sleep": "5"}), 10))
        await asyncio.sleep(0.05)
        with pytest.raises(RequestTimeoutError):
            await pool.request(server.address, RemotingCommand(3), 0.2)  # code 3: never answered
        assert first.closed
        with pytest.raises(ConnectionClosedError):
            await other
        reply = await pool.request(server.address, RemotingCommand(1, {"who": "again"}), 5)
        assert reply.ext_fields["who"] == "again"
        second = await pool.get(server.address)
        assert second is not first and not second.closed
        await pool.close()
        await server.stop()
    run(main())


def test_a_silent_peer_that_keeps_the_socket_open_does_not_pin_the_client() -> None:
    """The half-open case itself: the peer accepts, swallows every byte and never answers or closes."""
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            while await reader.read(65536):
                pass

        black_hole = await asyncio.start_server(swallow, "127.0.0.1", 0)
        address = "127.0.0.1:%d" % black_hole.sockets[0].getsockname()[1]
        pool = ConnectionPool()
        for _ in range(2):
            with pytest.raises(RequestTimeoutError):
                await pool.request(address, RemotingCommand(1), 0.2)
        assert len(accepted) == 2  # each timeout closed the socket, so the second request dialled again
        await pool.close()
        for w in accepted:
            w.close()
        black_hole.close()
        await black_hole.wait_closed()
    run(main())


def test_a_bare_connection_keeps_the_old_behaviour() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        with pytest.raises(RequestTimeoutError):
            await conn.request(RemotingCommand(3), 0.2)
        assert not conn.closed and not conn.close_on_timeout
        conn.close()
        await server.stop()
    run(main())
