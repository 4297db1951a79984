"""One remoting connection over asyncio streams, used by clients and servers alike.

A single reader task decodes frames. Responses are matched to pending
requests by opaque (not by order: a long-poll pull may be answered long after
later requests). Requests from the peer (a broker's
NOTIFY_CONSUMER_IDS_CHANGED, or any request when this is a server-side
connection) start on the reader and go on as their own tasks only if they
wait, so a slow handler never stalls the reader, and their return value is
sent back as the response.

When the connection closes for any reason, every pending request fails with
one :class:`ConnectionClosedError` that chains the cause. A malformed frame
closes only this connection.

A client connection may carry a :class:`~rmqrun.remoting.security.ClientSecurity`:
it then opens with TLS and signs every request it sends (responses are never
signed, as in Java). A :class:`Connection` returns every answer as it came; the
client's :class:`ConnectionPool` turns an answer that is an ACL refusal into the
non-retriable :class:`AccessDeniedError` naming operation, topic/group and
access key, and tells ``on_refused`` (the client instance stops on it).

A client's connections (those of a :class:`ConnectionPool`) are closed when a
request gets no answer in time, as the Java client does by default
(``clientCloseSocketIfTimeout``): a peer that stopped answering without closing
(a half-open connection: the broker's host gone, a NAT or firewall that dropped
the flow) would otherwise keep every later request timing out on the same dead
socket forever; closed, the next request opens a fresh connection.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
import types
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Generator

from loguru import logger

from rmqrun.aio import retrieve, wait_for
from rmqrun.remoting import frame as codec
from rmqrun.remoting.codes import FLAG_ONEWAY, ResponseCode, request_name
from rmqrun.remoting.errors import (
    AccessDeniedError,
    ConnectionClosedError,
    ProtocolError,
    RemotingError,
    RequestTimeoutError,
    TlsError,
    is_access_refusal,
)
from rmqrun.remoting.frame import DEFAULT_MAX_FRAME_SIZE, RemotingCommand, SerializeType
from rmqrun.remoting.refusal import refusal_error

if TYPE_CHECKING:
    from rmqrun.remoting.security import ClientSecurity

RequestHandler = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]
RefusalListener = Callable[[AccessDeniedError], None]

_LEN = struct.Struct(">i")
_WRITE_HIGH_WATER = 4 * 1024 * 1024
#: a deadline this close when the timer runs counts as reached (the loop may run a timer a clock tick early)
_TIMER_SLACK = 0.001
DEFAULT_CONNECT_TIMEOUT = 3.0
#: why a TLS handshake the server cut short is retried (a restart) yet worth a hint (a plain port)
HANDSHAKE_CUT = "the server closed the connection during the TLS handshake; does it speak TLS at this address?"


class Connection:
    """A framed, multiplexed remoting connection.

    ``handler`` answers requests that the peer sends; ``None`` answers every
    such request with REQUEST_CODE_NOT_SUPPORTED (never leaves it hanging).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 name: str = "", handler: RequestHandler | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 serialize_type: SerializeType = SerializeType.JSON,
                 on_close: Callable[["Connection"], None] | None = None,
                 security: "ClientSecurity | None" = None, close_on_timeout: bool = False) -> None:
        self._reader = reader
        self._writer = writer
        self.name = name or _peer_name(writer)
        self.handler = handler
        self.max_frame_size = max_frame_size
        self.serialize_type = serialize_type
        self._on_close = on_close
        self.security = security
        self.close_on_timeout = close_on_timeout
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        #: per pending request: (loop time it times out at, its code, its timeout); one timer, at the earliest
        self._deadlines: dict[int, tuple[float, int, float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._opaque = itertools.count(1)
        self._closed: ConnectionClosedError | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._read_task: asyncio.Task[None] | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False
        #: a request is being served on the reader (see :meth:`_serve_now`): the reader flushes its answer
        self._serving = False
        self.attributes: dict[str, object] = {}  # owner's per-connection state (e.g. client id)

    # ----------------------------------------------------------------- lifecycle

    @classmethod
    async def open(cls, address: str, *, timeout: float = DEFAULT_CONNECT_TIMEOUT,
                   security: "ClientSecurity | None" = None, **kwargs: object) -> "Connection":
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        ctx = security.ssl_context() if security is not None else None
        try:
            if ctx is None:
                opening = asyncio.open_connection(host, int(port))
            else:
                opening = asyncio.open_connection(host, int(port), ssl=ctx, server_hostname=host,
                                                  ssl_handshake_timeout=timeout)
            reader, writer = await wait_for(opening, timeout)
        except ssl.SSLEOFError as exc:  # the peer hung up mid-handshake: maybe a plain port, maybe a restart
            raise ConnectionClosedError(f"cannot connect to {address}: {HANDSHAKE_CUT}: {exc!r}") from exc
        except ssl.SSLError as exc:
            raise TlsError(f"TLS to {address} failed: {_tls_why(exc, security)}") from exc
        except (ConnectionResetError, asyncio.IncompleteReadError) as exc:
            hint = f" ({HANDSHAKE_CUT})" if ctx is not None else ""
            raise ConnectionClosedError(f"cannot connect to {address}: {exc!r}{hint}") from exc
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            raise ConnectionClosedError(f"cannot connect to {address}: {exc!r}") from exc
        conn = cls(reader, writer, name=address, security=security, **kwargs)  # type: ignore[arg-type]
        conn.start()
        return conn

    def start(self) -> None:
        if self._read_task is None:
            self._read_task = asyncio.get_running_loop().create_task(self._read_loop(), name=f"remoting-read {self.name}")

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def close(self, cause: BaseException | None = None) -> None:
        """Close now; pending requests fail with one ConnectionClosedError chaining ``cause``."""
        if self._closed is not None:
            return
        err = ConnectionClosedError(f"connection {self.name} closed" + (f": {cause}" if cause else ""))
        err.__cause__ = cause
        self._closed = err
        pending, self._pending = self._pending, {}
        self._deadlines.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                # A caller that already gave up (timeout) never retrieves it.
                fut.exception()
        try:
            if self._out and cause is None:
                # frames queued this turn (e.g. a last oneway offset commit) still go out:
                # the transport sends its buffer before it closes
                self._writer.write(b"".join(self._out))
            self._out.clear()
            self._writer.close()
        except Exception:  # pragma: no cover - transport already gone
            pass
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._on_close is not None:
            self._on_close(self)

    async def wait_closed(self) -> None:
        """Wait until the reader has ended (:meth:`close` ends it). How it ended is not the caller's business; a
        cancellation of the caller is, and is raised (``await`` on the reader with its outcome swallowed took that
        cancellation for the reader's own and dropped it: a Ctrl-C landing in a client's close was lost)."""
        reading = self._read_task
        if reading is not None and reading is not asyncio.current_task():  # (a handler on the reader: it ends)
            await asyncio.wait([reading])
            retrieve([reading])

    # ----------------------------------------------------------------- requests

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` and wait for the response with the same opaque."""
        if self._closed is not None:
            raise self._closed
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.flag &= ~FLAG_ONEWAY
        if cmd.serialize_type != self.serialize_type and cmd.serialize_type == SerializeType.JSON:
            cmd.serialize_type = self.serialize_type
        if self.security is not None:
            self.security.sign(cmd)
            cmd.ext_text = None  # the signature joined the ext fields: encoded from them
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        opaque = cmd.opaque
        self._pending[opaque] = fut
        # Not asyncio.wait_for: before Python 3.12 it can swallow a cancellation that
        # lands as the answer arrives (CPython gh-86296). A timer fails the future
        # instead; cancelling the caller cancels the future, and a late answer is dropped.
        # One timer per connection, at the earliest deadline (_expire_due), not one per request:
        # a consumer's pulls all time out later than the one before.
        deadline = loop.time() + timeout
        self._deadlines[opaque] = (deadline, cmd.code, timeout)
        if self._timer is None or deadline < self._timer_at:
            self._arm(loop, deadline)
        try:
            if self._queue(codec.encode(cmd)):  # past the high-water mark: wait for the peer to read
                await self._drain()
            elif cmd.send_now:  # on the wire now, not after the rest of this turn's work
                self._flush()
            return await fut
        except RequestTimeoutError as exc:
            if self.close_on_timeout and self._closed is None:
                # DEBUG: the timeout goes to the caller, and a hung peer times out every request; the broker and
                # name-server clients fold those into one incident per peer (client/failure_log.py)
                logger.debug("closing connection {}: {}", self.name, exc)
                self.close(exc)
            raise
        finally:
            self._deadlines.pop(opaque, None)
            self._pending.pop(opaque, None)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._expire_due)
        self._timer_at = at

    def _expire_due(self) -> None:
        """Fail every pending request past its deadline, and set the timer for the next deadline (if any)."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + _TIMER_SLACK
        deadlines = self._deadlines
        following = None
        for opaque, (deadline, code, timeout) in list(deadlines.items()):
            if deadline <= now:
                del deadlines[opaque]
                fut = self._pending.get(opaque)
                if fut is not None:
                    _expire(fut, code, self.name, timeout)
            elif following is None or deadline < following:
                following = deadline
        if following is not None and self._closed is None:
            self._arm(loop, following)

    async def oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that gets no response."""
        if self._closed is not None:
            raise self._closed
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.flag |= FLAG_ONEWAY
        if cmd.serialize_type == SerializeType.JSON:
            cmd.serialize_type = self.serialize_type
        if self.security is not None:
            self.security.sign(cmd)
            cmd.ext_text = None  # the signature joined the ext fields: encoded from them
        await self._write(codec.encode(cmd))

    async def send_response(self, resp: RemotingCommand) -> None:
        if self._closed is not None:
            return
        await self._write(codec.encode(resp))

    async def _write(self, data: bytes) -> None:
        """Queue a frame; frames written in one loop turn leave in one send().

        A consumer issues many pulls and a broker many answers per turn; one
        syscall for all of them (instead of one each) is a large share of
        either side's CPU on loopback.
        """
        if self._queue(data):
            await self._drain()

    def _queue(self, data: bytes) -> bool:
        """:meth:`_write` up to the wait: True when the transport's buffer is past the high-water mark (the
        frames are flushed now, and the caller waits with :meth:`_drain`). Raises if the connection is closed."""
        if self._closed is not None:
            raise self._closed
        self._out.append(data)
        if not self._flush_scheduled and not self._serving:  # (the reader flushes what its requests answer)
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        if self._writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            self._flush()
            return True
        return False

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError, OSError) as exc:
            self.close(exc)
            raise self._closed from exc  # type: ignore[misc]

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self._closed is not None:
            self._out.clear()
            return
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        try:
            self._writer.write(data)
        except (ConnectionError, RuntimeError, OSError) as exc:
            self.close(exc)

    # ----------------------------------------------------------------- reading

    async def _read_loop(self) -> None:
        cause: BaseException | None = None
        reader, loop = self._reader, asyncio.get_running_loop()
        try:
            while True:
                head = await reader.readexactly(4)
                (length,) = _LEN.unpack(head)
                codec.check_length(length, self.max_frame_size)
                cmd = codec.decode(await reader.readexactly(length))
                if cmd.is_response:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                    # else: the caller timed out long ago; nothing to do.
                else:
                    self._serving = True
                    try:
                        self._serve_now(cmd)
                    finally:
                        self._serving = False
                    if self._closed is not None:  # the handler closed it: nothing more is read
                        break
                    if self._out and not self._flush_scheduled:
                        if reader._buffer:  # more is in: its answers leave with these, at the end of the turn
                            self._flush_scheduled = True
                            loop.call_soon(self._flush)
                        else:  # nothing more to read now: the answers of what was read leave at once
                            self._flush()
        except asyncio.IncompleteReadError as exc:
            cause = exc if exc.partial else None
        except ProtocolError as exc:
            logger.warning("closing {}: {}", self.name, exc)
            cause = exc
        except (ConnectionError, OSError) as exc:
            cause = exc
        except asyncio.CancelledError:
            cause = None
        finally:
            self.close(cause)

    def _serve_now(self, cmd: RemotingCommand) -> None:
        """Serve a request at once, on the reader: most handlers answer without waiting (a pull or pop that
        found messages, an ack), and those need no task of their own (its creation, its first step one loop
        turn later, its done callback). A handler that does wait goes on as a task from where it stopped, so a
        slow one never stalls the reader."""
        coro = self._serve(cmd)
        try:
            waiting = coro.send(None)
        except StopIteration:
            return
        except (Exception, asyncio.CancelledError):  # the answer could not be queued (the connection closed
            return  # meanwhile), or the handler was cancelled: it ends, as its task would have, not the reader
        task = asyncio.get_running_loop().create_task(_go_on(coro, waiting))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, cmd: RemotingCommand) -> None:
        try:
            if self.handler is None:
                resp: RemotingCommand | None = cmd.response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} not supported")
            else:
                resp = await self.handler(self, cmd)
        except asyncio.CancelledError:
            raise
        except RemotingError as exc:
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:  # a bug in a handler must not kill the connection
            logger.opt(exception=exc).error("handler for {} on {} failed", cmd.describe(), self.name)
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is not None and not cmd.is_oneway:
            resp.opaque = cmd.opaque
            await self.send_response(resp)


async def _go_on(coro: Coroutine[Any, Any, None], waiting: Any) -> None:
    """Run the rest of ``coro``, started outside a task and now waiting on ``waiting``, as this task's."""
    await _resume(coro, waiting)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, None], waiting: Any) -> Generator[Any, Any, None]:
    """Hand what ``coro`` waits on to the task running this, and the task's wake-ups (a value, or an exception
    such as a cancellation) back to ``coro``, until it returns."""
    while True:
        try:
            value = yield waiting
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting = coro.send(value)
            except StopIteration:
                return


def _expire(fut: "asyncio.Future[RemotingCommand]", code: int, name: str, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(RequestTimeoutError(f"{request_name(code)} to {name} got no answer in {timeout:.3g}s"))


def _tls_why(exc: ssl.SSLError, security: "ClientSecurity | None") -> str:
    """The handshake failure in words, with the setting that decides it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        where = (f"tls_ca_file={security.tls_ca_file}" if security is not None and security.tls_ca_file
                 else "the system's CAs (set tls_ca_file)")
        return (f"the server's certificate is not accepted: {exc.verify_message or exc.reason} "
                f"(verified against {where}; tls_insecure skips the check, for test clusters only)")
    return exc.reason or str(exc)


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class ConnectionPool:
    """One connection per address, opened on first use and reopened after a drop."""

    def __init__(self, *, handler: RequestHandler | None = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 serialize_type: SerializeType = SerializeType.JSON,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 security: "ClientSecurity | None" = None,
                 on_refused: RefusalListener | None = None) -> None:
        self.handler = handler
        #: carried to every connection: TLS when it opens, a signature on every request
        self.security = security
        self.on_refused = on_refused
        self.connect_timeout = connect_timeout
        self.serialize_type = serialize_type
        self.max_frame_size = max_frame_size
        self._conns: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Future[Connection]] = {}

    async def get(self, address: str) -> Connection:
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        pending = self._opening.get(address)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._opening[address] = fut
        try:
            conn = await Connection.open(address, timeout=self.connect_timeout, handler=self.handler,
                                         serialize_type=self.serialize_type, max_frame_size=self.max_frame_size,
                                         security=self.security, close_on_timeout=True)
            self._conns[address] = conn
            fut.set_result(conn)
            return conn
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()
            raise
        finally:
            del self._opening[address]

    async def request(self, address: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """The answer to ``cmd``; an ACL refusal raises :class:`AccessDeniedError` (see :meth:`check`)."""
        conn = self._conns.get(address)
        if conn is None or conn.closed:  # else :meth:`get` would return it, one coroutine later (a pull each)
            conn = await self.get(address)
        return self.check(address, cmd, await conn.request(cmd, timeout))

    def check(self, address: str, cmd: RemotingCommand, resp: RemotingCommand) -> RemotingCommand:
        """``resp``, unless it is an ACL refusal: then the one-line error, told to ``on_refused`` first.

        Callers that talk to a connection of this pool directly (the name-server client's
        fail-over) pass its answers through here too.
        """
        if is_access_refusal(resp.code, resp.remark):
            error = refusal_error(address, cmd, resp)
            if self.on_refused is not None:
                self.on_refused(error)
            raise error
        return resp

    async def oneway(self, address: str, cmd: RemotingCommand) -> None:
        conn = await self.get(address)
        await conn.oneway(cmd)

    def connections(self) -> dict[str, Connection]:
        return {a: c for a, c in self._conns.items() if not c.closed}

    async def close(self) -> None:
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            conn.close()
        for conn in conns.values():
            await conn.wait_closed()
