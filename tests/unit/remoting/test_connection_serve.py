"""How a server-side :class:`Connection` serves requests (issue #32): a handler starts on the reader and, when it
answers without waiting, its answer leaves with the others of what was read; a handler that waits goes on as a
task from where it stopped and still answers, without holding up the requests after it; a handler that is
cancelled or fails ends alone, the connection goes on.

A real :class:`RemotingServer` on loopback, a real client :class:`Connection`; the client writes its requests in
one go (one send) where the test needs several of them read together, and a raw socket cuts a request in two
where the test needs the reader to wait for the rest of one.
"""

from __future__ import annotations

import asyncio
import struct
from contextlib import asynccontextmanager
from typing import AsyncIterator

from rmqrun.remoting import frame
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.server import RemotingServer

BOUND = 20.0  # a failure bound only: every wait here ends on an answer or an event
AT_ONCE, WAITS, CANCELLED, FAILS, CLOSES = 9001, 9002, 9003, 9004, 9005


def _run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, BOUND))  # type: ignore[arg-type]


class Served:
    """A server whose handlers answer at once, after an event, or end by a cancellation or an error."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0, name="serve-test")
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.server.register(AT_ONCE, self._at_once)
        self.server.register(WAITS, self._waits)
        self.server.register(CANCELLED, self._cancelled)
        self.server.register(FAILS, self._fails)
        self.server.register(CLOSES, self._closes)
        #: the ``n`` of every request an AT_ONCE handler served
        self.served: list[str] = []

    async def _at_once(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.served.append(cmd.ext_fields["n"])
        return cmd.response(0, None, {"echo": cmd.ext_fields["n"]})

    async def _waits(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.waiting.set()
        await self.release.wait()
        await asyncio.sleep(0)  # a second wait, on a bare yield: the task goes on through both
        return cmd.response(0, None, {"echo": "waited " + cmd.ext_fields["n"]})

    async def _cancelled(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise asyncio.CancelledError()

    async def _fails(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        raise ValueError("handler bug")

    async def _closes(self, conn: Connection, cmd: RemotingCommand) -> None:
        conn.close()  # as a refused credential or a bad request closes it: nothing after it is served


def _req(code: int, n: int) -> RemotingCommand:
    return RemotingCommand(code, {"n": str(n)})


@asynccontextmanager
async def _connected() -> AsyncIterator[tuple[Served, Connection]]:
    """A served server and a client connection to it, both closed after."""
    served = Served()
    await served.server.start()
    try:
        conn = await Connection.open(served.server.address)
        try:
            yield served, conn
        finally:
            conn.close()
    finally:
        await served.server.stop()


def test_requests_read_together_are_all_answered_in_order() -> None:
    async def main() -> None:
        async with _connected() as (served, conn):
            # gathered: the client writes all twenty in one send, the server reads them in one go
            answers = await asyncio.gather(*(conn.request(_req(AT_ONCE, i), BOUND) for i in range(20)))
            assert [a.ext_fields["echo"] for a in answers] == [str(i) for i in range(20)]
            again = await conn.request(_req(AT_ONCE, 99), BOUND)  # and one alone, read on its own
            assert again.ext_fields["echo"] == "99"
    _run(main())


def test_a_waiting_handler_answers_later_and_does_not_hold_up_the_next_requests() -> None:
    async def main() -> None:
        async with _connected() as (served, conn):
            slow = asyncio.ensure_future(conn.request(_req(WAITS, 1), BOUND))
            await served.waiting.wait()
            quick = await conn.request(_req(AT_ONCE, 2), BOUND)  # answered while the first one waits
            assert quick.ext_fields["echo"] == "2"
            assert not slow.done()
            served.release.set()
            assert (await slow).ext_fields["echo"] == "waited 1"
    _run(main())


def test_a_cancelled_or_failing_handler_ends_alone_and_the_connection_goes_on() -> None:
    async def main() -> None:
        async with _connected() as (served, conn):
            failed = await conn.request(_req(FAILS, 1), BOUND)
            assert failed.code != 0 and "handler bug" in (failed.remark or "")
            cancelled = asyncio.ensure_future(conn.request(_req(CANCELLED, 2), 1.0))
            after = await conn.request(_req(AT_ONCE, 3), BOUND)
            assert after.ext_fields["echo"] == "3"
            assert not conn.closed and len(served.server.connections) == 1
            cancelled.cancel()  # it never gets an answer (as before, when it ran as a task of its own)
    _run(main())


def test_an_answer_leaves_while_the_next_request_is_still_arriving() -> None:
    # A raw socket writes one whole request and the start of the next in one send: the first answer must come
    # before the rest of the second is written (the reader waits for that rest, its answers may not).
    async def main() -> None:
        served = Served()
        await served.server.start()
        host, port = served.server.address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            first, second = frame.encode(_req(AT_ONCE, 1)), frame.encode(_req(AT_ONCE, 2))
            writer.write(first + second[:10])
            answer = await _read_answer(reader)
            assert answer.ext_fields["echo"] == "1"
            writer.write(second[10:])
            assert (await _read_answer(reader)).ext_fields["echo"] == "2"
        finally:
            writer.close()
            await served.server.stop()
    _run(main())


async def _read_answer(reader: asyncio.StreamReader) -> RemotingCommand:
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    return frame.decode(await reader.readexactly(length))


def test_a_handler_that_closes_the_connection_ends_the_reading_of_what_came_with_its_request() -> None:
    """Requests read in the same go as one whose handler closes the connection are not served (their side
    effects, a stored message say, must not happen on a connection that was closed); the client's requests
    fail with the connection's close."""
    async def main() -> None:
        async with _connected() as (served, conn):
            assert (await conn.request(_req(AT_ONCE, 0), BOUND)).ext_fields["echo"] == "0"
            # gathered: one send, read together: the closing request first, two behind it
            results = await asyncio.gather(conn.request(_req(CLOSES, 1), BOUND), conn.request(_req(AT_ONCE, 2), BOUND),
                                           conn.request(_req(AT_ONCE, 3), BOUND), return_exceptions=True)
            assert all(isinstance(r, Exception) for r in results), results
            assert served.served == ["0"]
    _run(main())
