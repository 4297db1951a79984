"""A request marked ``send_now`` is written when it is made, with the frames queued before it in the same loop turn;
any other request leaves at the end of the turn, in one write with the rest (``Connection.request``). The POP
client marks its pops so (docs/benchmarks/pop/history.md): within Java's window a pop's round trip paces a
no-op POP drain.

A real client :class:`Connection` to a raw listening socket on loopback; the test never yields to the event loop
between making the requests and reading the socket, so what arrives was written inside that one step.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from rmqrun.client.pop_api import PopClient
from rmqrun.remoting import frame as codec
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand


def _split(data: bytes) -> tuple[list[RemotingCommand], bytes]:
    """The whole frames at the start of ``data``, and what is left of a frame still arriving."""
    out, pos = [], 0
    while pos + 4 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        if pos + 4 + length > len(data):
            break
        out.append(codec.decode(data[pos + 4:pos + 4 + length]))
        pos += 4 + length
    return out, data[pos:]


def _read_now(peer: socket.socket) -> bytes:
    """What the peer has received so far (nothing: b"")."""
    data = b""
    while True:
        try:
            chunk = peer.recv(65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def test_a_send_now_request_leaves_at_once_with_what_was_queued_before_it() -> None:
    async def main() -> None:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            conn = await Connection.open(f"127.0.0.1:{listener.getsockname()[1]}")
            peer, _ = listener.accept()
            peer.setblocking(False)
            try:
                first = conn.request(RemotingCommand(RequestCode.HEART_BEAT, {"n": "1"}), 5)
                first.send(None)  # queued: its write waits for the end of the turn
                assert _read_now(peer) == b"", "a plain request is written at the end of the turn"
                urgent = RemotingCommand(RequestCode.POP_MESSAGE, {"n": "2"})
                urgent.send_now = True
                second = conn.request(urgent, 5)
                second.send(None)
                peer.settimeout(5)  # a blocking read inside this step: the loop does not turn meanwhile
                data = b""
                while len(_split(data)[0]) < 2:
                    data += peer.recv(65536)
                frames, rest = _split(data)
                assert [f.ext_fields["n"] for f in frames] == ["1", "2"] and rest == b"", \
                    "the marked request and the one queued before it are on the wire in this step"
                assert b"send_now" not in codec.encode(urgent) and b"sendNow" not in codec.encode(urgent), \
                    "a local mark, never on the wire"
                first.close()
                second.close()
            finally:
                peer.close()
                conn.close()
    asyncio.run(main())


def test_the_pop_client_marks_its_pops_send_now() -> None:
    seen: list[RemotingCommand] = []

    class Recorded(Exception):
        pass

    class Broker:
        async def request(self, addr: str, cmd: RemotingCommand, timeout: Any = None) -> RemotingCommand:
            seen.append(cmd)
            raise Recorded

    with pytest.raises(Recorded):
        asyncio.run(PopClient(Broker()).pop("127.0.0.1:1", group="G", topic="T", broker_name="b"))  # type: ignore[arg-type]
    assert [c.code for c in seen] == [RequestCode.POP_MESSAGE] and seen[0].send_now
