"""How a :class:`Connection` reads its socket (kept while issue #38 tried a one-read-many-frames reader): the start
of a frame whose rest has not come yet is kept, whatever the boundary; a large frame arriving in pieces is whole;
a length prefix out of range closes the connection as soon as it arrives.

A real TCP server on loopback plays the broker and decides where its bytes are cut: the test, in the same event
loop, releases each part only when the client has acted on the one before.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from rmqrun.remoting import frame
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ConnectionClosedError
from rmqrun.remoting.frame import RemotingCommand

BOUND = 20.0  # a failure bound only: every wait here ends on an event


class ScriptedBroker:
    """Answers each request it reads with a frame, but writes what :meth:`release` hands it, when it is told."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.parts: asyncio.Queue[bytes] = asyncio.Queue()
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def read_requests() -> None:
            buf = bytearray()
            while data := await reader.read(65536):
                buf += data
                for cmd in frame.iter_frames(buf):
                    await self.requests.put(cmd)

        reading = asyncio.ensure_future(read_requests())
        try:
            while (part := await self.parts.get()) != b"":
                writer.write(part)
                await writer.drain()
        finally:
            reading.cancel()
            writer.close()

    async def close(self) -> None:
        await self.parts.put(b"")
        assert self.server is not None
        self.server.close()


def _answer(req: RemotingCommand, body: bytes) -> bytes:
    resp = req.response(0, None, {"n": str(len(body))})
    resp.opaque = req.opaque
    resp.body = body
    return frame.encode(resp)


def _request() -> RemotingCommand:
    return RemotingCommand(code=11, ext_fields={"topic": "T"})


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 30, -1])
def test_a_frame_cut_anywhere_after_a_whole_one_is_kept_until_its_rest_comes(cut: int) -> None:
    async def main() -> None:
        broker = ScriptedBroker()
        conn = await Connection.open(await broker.start())
        try:
            first = asyncio.ensure_future(conn.request(_request(), BOUND))
            second = asyncio.ensure_future(conn.request(_request(), BOUND))
            a = await asyncio.wait_for(broker.requests.get(), BOUND)
            b = await asyncio.wait_for(broker.requests.get(), BOUND)
            whole, cut_one = _answer(a, b"first"), _answer(b, b"second" * 10)
            await broker.parts.put(whole + cut_one[:cut])  # one write: a whole frame and the start of one
            assert (await asyncio.wait_for(first, BOUND)).body == b"first"
            assert not second.done()
            await broker.parts.put(cut_one[cut:])
            assert (await asyncio.wait_for(second, BOUND)).body == b"second" * 10
        finally:
            conn.close()
            await broker.close()

    asyncio.run(main())


def test_a_large_answer_arriving_in_pieces_is_whole() -> None:
    async def main() -> None:
        broker = ScriptedBroker()
        conn = await Connection.open(await broker.start())
        try:
            answer = asyncio.ensure_future(conn.request(_request(), BOUND))
            req = await asyncio.wait_for(broker.requests.get(), BOUND)
            body = bytes(range(256)) * 12_000  # ~3 MB: many reads of the socket
            raw = _answer(req, body)
            for i in range(0, len(raw), 100_003):
                await broker.parts.put(raw[i:i + 100_003])
            assert (await asyncio.wait_for(answer, BOUND)).body == body
        finally:
            conn.close()
            await broker.close()

    asyncio.run(main())


def test_a_length_out_of_range_closes_the_connection_without_waiting_for_its_bytes() -> None:
    async def main() -> None:
        broker = ScriptedBroker()
        conn = await Connection.open(await broker.start())
        try:
            answer = asyncio.ensure_future(conn.request(_request(), BOUND))
            await asyncio.wait_for(broker.requests.get(), BOUND)
            await broker.parts.put(struct.pack(">i", 1 << 30))  # only the prefix: nothing more ever comes
            with pytest.raises(ConnectionClosedError):
                await asyncio.wait_for(answer, BOUND)
            assert conn.closed
        finally:
            conn.close()
            await broker.close()

    asyncio.run(main())
