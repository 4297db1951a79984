"""A client connection reads the socket in pieces of READ_SIZE; frames of any size still arrive whole.

asyncio's plain transport would ask 256 KiB of every ``recv`` (a mapped allocation each
time); :meth:`Connection.open` lowers that. Echoed bodies far larger than one read, and
many small replies in one read, must come back byte for byte.
"""

from __future__ import annotations

import asyncio
import os

from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import READ_SIZE, Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.server import RemotingServer


def test_big_and_many_small_frames_through_reads_of_read_size() -> None:
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, name="test", max_frame_size=16 * 1024 * 1024)

        async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)

        server.register(1, echo)
        await server.start()
        conn = await Connection.open(server.address)
        try:
            transport = conn._writer.transport
            if hasattr(transport, "max_size"):  # asyncio's selector transport (uvloop has no such knob)
                assert transport.max_size == READ_SIZE
            for size in (0, 1, READ_SIZE - 1, READ_SIZE, READ_SIZE + 1, 3 * READ_SIZE + 17, 5 * 1024 * 1024):
                body = os.urandom(size)
                reply = await conn.request(RemotingCommand(1, {"n": str(size)}, body=body), 20)
                assert reply.ext_fields["n"] == str(size) and (reply.body or b"") == body, size
            bodies = [os.urandom(i * 7) for i in range(200)]
            replies = await asyncio.gather(*(conn.request(RemotingCommand(1, {"i": str(i)}, body=b), 20)
                                             for i, b in enumerate(bodies)))
            assert [(r.ext_fields["i"], r.body or b"") for r in replies] == [(str(i), b) for i, b in enumerate(bodies)]
        finally:
            conn.close()
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
