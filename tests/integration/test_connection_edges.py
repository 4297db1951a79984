"""Remoting connection edges over real TCP: late answers, a peer that stops reading, use after close."""

from __future__ import annotations

import asyncio
import socket

import pytest

from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import _WRITE_HIGH_WATER, Connection
from rmqrun.remoting.errors import ConnectionClosedError, RequestTimeoutError
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.test_connection import _server
from tests.waiting import eventually_async


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_late_answer_is_dropped_and_never_taken_for_a_later_request() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        with pytest.raises(RequestTimeoutError, match="got no answer in 0.1s"):
            await conn.request(RemotingCommand(1, {"sleep": "0.5", "who": "late"}), 0.1)
        # the late answer arrives while this one is waiting: it must get its own
        reply = await conn.request(RemotingCommand(1, {"sleep": "1.0", "who": "second"}), 5)
        assert reply.ext_fields["who"] == "second"
        assert not conn.closed
        conn.close()
        await server.stop()
    run(main())


def test_a_peer_that_stops_reading_holds_the_writer_back_and_its_drop_fails_the_request() -> None:
    """Past the write high-water mark a request waits for the peer instead of buffering without
    bound; when the peer goes away, the waiting request fails with ConnectionClosedError."""

    async def main() -> None:
        accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

        async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader._transport.pause_reading()  # type: ignore[attr-defined]
            await accepted.put(writer)

        server = await asyncio.start_server(never_reads, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await Connection.open(f"127.0.0.1:{port}")
        peer = await asyncio.wait_for(accepted.get(), 10)
        big = RemotingCommand(1, {"k": "v"}, body=b"x" * (2 * _WRITE_HIGH_WATER))
        pending = asyncio.ensure_future(conn.request(big, 30))
        # it leaves in a later loop turn and fills the pipe
        transport = conn._writer.transport  # type: ignore[attr-defined]
        await eventually_async(lambda: transport.get_write_buffer_size() > _WRITE_HIGH_WATER,
                               what="the big request past the write high-water mark")
        # a oneway send returns once its bytes are queued: past the mark it is held back instead
        held = asyncio.ensure_future(conn.oneway(RemotingCommand(1, {"k": "held"})))
        for _ in range(50):
            await asyncio.sleep(0.01)
        assert not held.done() and not pending.done() and not conn.closed
        peer.transport.abort()  # the peer dies with unread data: a reset
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(held, 10)
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(pending, 10)
        assert conn.closed
        with pytest.raises(ConnectionClosedError):
            await conn.oneway(RemotingCommand(1))
        with pytest.raises(ConnectionClosedError):
            await conn.request(RemotingCommand(1), 1)
        await conn.send_response(RemotingCommand(1).response(ResponseCode.SUCCESS))  # dropped, never raises
        server.close()
        await server.wait_closed()
    run(main())


def test_requests_time_out_each_at_its_own_deadline_with_one_timer_per_connection() -> None:
    """A connection keeps one timer, at its earliest deadline: a request with a nearer deadline than the
    one armed moves it forward, an answered or cancelled request leaves no timeout behind, and each
    request still fails at its own deadline, in deadline order."""
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        finished: list[str] = []

        async def unanswered(timeout: float) -> None:
            with pytest.raises(RequestTimeoutError, match=f"got no answer in {timeout:g}s"):
                await conn.request(RemotingCommand(3), timeout)  # code 3: never answered
            finished.append(f"{timeout:g}")

        # the longest first, so that each later one arms the timer earlier
        slow = asyncio.ensure_future(unanswered(1.5))
        cancelled = asyncio.ensure_future(conn.request(RemotingCommand(3), 0.3))
        mid = asyncio.ensure_future(unanswered(0.9))
        quick = asyncio.ensure_future(unanswered(0.5))
        reply = await conn.request(RemotingCommand(1, {"who": "answered", "sleep": "0.1"}), 0.2 + 60)
        assert reply.ext_fields["who"] == "answered"
        cancelled.cancel()
        await asyncio.gather(slow, mid, quick)
        assert finished == ["0.5", "0.9", "1.5"]
        assert not conn._deadlines and not conn._pending  # nothing left behind
        assert not conn.closed  # a bare connection stays open after a timeout
        assert conn._timer is None  # and no timer is armed with nothing pending
        conn.close()
        await server.stop()
    run(main())
