"""The asyncio connection and server over real TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rmqrun.remoting import frame
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import ConnectionClosedError, RequestTimeoutError
from rmqrun.remoting.frame import RemotingCommand, SerializeType
from rmqrun.remoting.server import RemotingServer


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _server() -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, name="test", max_frame_size=1024 * 1024)

    async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(cmd.ext_fields.get("sleep", "0")))
        return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)

    async def boom(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise ValueError("handler bug")

    async def silent(conn: Connection, cmd: RemotingCommand) -> None:
        await asyncio.sleep(3600)

    server.register(1, echo)
    server.register(2, boom)
    server.register(3, silent)
    await server.start()
    return server


def test_responses_matched_by_opaque_not_order() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        replies = await asyncio.gather(*(
            conn.request(RemotingCommand(1, {"sleep": str(0.05 * (5 - i)), "i": str(i)}), 5) for i in range(5)))
        assert [r.ext_fields["i"] for r in replies] == ["0", "1", "2", "3", "4"]
        conn.close()
        await server.stop()
    run(main())


def test_binary_serialization_and_unknown_code_and_handler_error() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address, serialize_type=SerializeType.ROCKETMQ)
        r = await conn.request(RemotingCommand(1, {"k": "v"}, body=b"payload"), 5)
        assert r.serialize_type == SerializeType.ROCKETMQ and r.body == b"payload" and r.ext_fields["k"] == "v"
        r = await conn.request(RemotingCommand(999), 5)
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "999" in (r.remark or "")
        r = await conn.request(RemotingCommand(2), 5)
        assert r.code == ResponseCode.SYSTEM_ERROR and "handler bug" in (r.remark or "")
        # the connection survived all of that
        r = await conn.request(RemotingCommand(1), 5)
        assert r.code == 0
        conn.close()
        await server.stop()
    run(main())


def test_timeout_keeps_connection_open() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        with pytest.raises(RequestTimeoutError):
            await conn.request(RemotingCommand(3), 0.2)
        assert not conn.closed
        assert (await conn.request(RemotingCommand(1), 5)).code == 0
        conn.close()
        await server.stop()
    run(main())


@pytest.mark.parametrize("garbage", [
    struct.pack(">i", -5),                                   # negative length
    struct.pack(">i", 2**31 - 1),                            # absurd length
    struct.pack(">i", 2 * 1024 * 1024) + b"x" * 64,          # over this server's 1 MiB limit
    struct.pack(">iI", 8, 4) + b"{bad",                      # invalid JSON header
    struct.pack(">iI", 8, (9 << 24) | 4) + b"abcd",          # unknown serialize type
])
def test_malformed_frame_closes_only_that_connection(garbage: bytes) -> None:
    async def main() -> None:
        server = await _server()
        good = await Connection.open(server.address)
        pending = asyncio.ensure_future(good.request(RemotingCommand(1, {"sleep": "0.3"}), 5))
        host, port = server.address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        await writer.drain()
        # the server hangs up on the bad peer...
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        # ...and the other connection, with a request in flight, is untouched.
        assert (await pending).code == 0
        assert (await good.request(RemotingCommand(1), 5)).code == 0
        good.close()
        await server.stop()
    run(main())


def test_pending_requests_fail_together_when_peer_drops() -> None:
    async def main() -> None:
        server = await _server()
        conn = await Connection.open(server.address)
        pending = [asyncio.ensure_future(conn.request(RemotingCommand(3), 10)) for _ in range(3)]
        await asyncio.sleep(0.1)
        await server.stop()
        errors = await asyncio.gather(*pending, return_exceptions=True)
        assert all(isinstance(e, ConnectionClosedError) for e in errors)
        assert len({id(e) for e in errors}) == 1, "one error object, chaining the cause"
        with pytest.raises(ConnectionClosedError):
            await conn.request(RemotingCommand(1), 1)
    run(main())


def test_pool_reconnects_on_next_use() -> None:
    async def main() -> None:
        server = await _server()
        port = server.port
        pool = ConnectionPool()
        assert (await pool.request(server.address, RemotingCommand(1), 5)).code == 0
        await server.stop()
        await asyncio.sleep(0.1)
        with pytest.raises(ConnectionClosedError):
            await pool.request(f"127.0.0.1:{port}", RemotingCommand(1), 2)
        server2 = RemotingServer("127.0.0.1", port)

        async def ok(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(0, "second")
        server2.register(1, ok)
        await server2.start()
        r = await pool.request(f"127.0.0.1:{port}", RemotingCommand(1), 5)
        assert r.remark == "second"
        await pool.close()
        await server2.stop()
    run(main())


def test_server_initiated_request_reaches_client_handler() -> None:
    async def main() -> None:
        server = await _server()
        got: list[RemotingCommand] = []

        async def on_request(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            got.append(cmd)
            return cmd.response(0, "client answered")
        client = await Connection.open(server.address, handler=on_request)
        await client.request(RemotingCommand(1), 5)
        (server_side,) = server.connections
        reply = await server_side.request(RemotingCommand(40, {"consumerGroup": "G"}), 5)
        assert reply.remark == "client answered" and got[0].ext_fields == {"consumerGroup": "G"}
        await server_side.oneway(RemotingCommand(40, {"consumerGroup": "G2"}))
        for _ in range(50):
            if len(got) == 2:
                break
            await asyncio.sleep(0.02)
        assert got[1].is_oneway and got[1].ext_fields["consumerGroup"] == "G2"
        client.close()
        await server.stop()
    run(main())


def test_connect_refused_is_a_connection_error() -> None:
    async def main() -> None:
        server = await _server()
        port = server.port
        await server.stop()
        with pytest.raises(ConnectionClosedError, match="cannot connect"):
            await Connection.open(f"127.0.0.1:{port}", timeout=2)
    run(main())


def test_frame_encode_refuses_oversized_header() -> None:
    cmd = RemotingCommand(1, {"k": "x" * (1 << 24)})
    with pytest.raises(Exception, match="24-bit"):
        frame.encode(cmd)


def test_frames_written_in_one_turn_are_delivered_even_when_closed_right_after() -> None:
    """Writes are coalesced per loop turn; close() must still send what was queued."""
    async def main() -> None:
        got: list[str] = []
        server = RemotingServer("127.0.0.1", 0)

        async def record(conn: Connection, cmd: RemotingCommand) -> None:
            got.append(cmd.ext_fields["i"])
            return None
        server.register(15, record)
        await server.start()
        conn = await Connection.open(server.address)
        for i in range(5):
            await conn.oneway(RemotingCommand(15, {"i": str(i)}))
        conn.close()
        for _ in range(100):
            if len(got) == 5:
                break
            await asyncio.sleep(0.02)
        assert got == ["0", "1", "2", "3", "4"]
        await server.stop()
    run(main())
