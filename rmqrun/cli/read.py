"""``rmqrun read --topic T``: print what is in a topic (what ``mqadmin printMsg`` or ``kcat -C`` are for).

A :class:`~rmqrun.pull.AsyncPullConsumer` reads every chosen queue from its
start offset. Without ``--follow`` it reads up to the queues' ends as they
were when it started, merging the queues by store time so the output reads
like the topic's history, and exits. With ``--follow`` it then keeps one
long-polling pull per queue and prints messages as they arrive, until
``--count`` is reached or SIGINT/SIGTERM (exit 0).

Nothing is committed: the pulls carry no commit offset, so reading never moves
any consumer group. Bad option values are one ``rmqrun: error:`` line and
exit 2; a topic the cluster does not have, or a name server or broker that does
not answer, exit 1 (as ``rmqrun check`` and ``rmqrun spark``: 2 is for what the
command line itself gets wrong).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import click

from rmqrun.cli.exit_codes import EXIT_INTERRUPTED, fail
from rmqrun.cli.flags import Shown, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.option_checks import int_option, namesrv_option, tags_option
from rmqrun.cli.read_format import StartAt, json_line, parse_from, text_line
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.client.errors import ClientError
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.model import Message, MessageQueue
from rmqrun.remoting.errors import AccessDeniedError, RemotingError, TlsError

if TYPE_CHECKING:
    from rmqrun.pull import AsyncPullConsumer, PullResult
    from rmqrun.remoting.security import ClientSecurity

READ_GROUP = "rmqrun_read"
FOLLOW_HOLD = 15.0  # seconds the broker holds a follow pull (the push consumer's suspend time)
FOLLOW_RETRY = 1.0  # seconds between tries while a broker does not answer (the push consumer's back-off)


@dataclass
class Options:
    namesrv: str
    topic: str
    start: StartAt
    count: int | None
    follow: bool
    tags: str
    queue: int | None
    fmt: str
    #: topics are read under this namespace (``ns%topic`` on the wire) and printed plain
    namespace: str | None = None
    #: ACL credentials / TLS (flags, RMQRUN_* variables)
    security: "ClientSecurity | None" = None


def parse_options(namesrv: str | None, topic: str | None, from_: str, count: str | None, follow: bool,
                  tags: str | None, queue: str | None, fmt: str, namespace: str | None = None) -> Options:
    """Check every option before anything touches the network; ConfigError names the bad one."""
    addr = namesrv_option(namesrv)
    if topic is None or not topic.strip():
        raise ConfigError("missing --topic")
    try:
        start = parse_from(from_)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    fmt = fmt.strip().lower()
    if fmt not in ("text", "json"):
        raise ConfigError(f"--format {fmt!r} is not one of: text, json")
    expression = tags_option(topic, tags)
    count_n = None if count is None else int_option(count, "--count", 1)
    queue_id = None if queue is None else int_option(queue, "--queue", 0)
    return Options(addr, topic.strip(), start, count_n, follow, expression, queue_id, fmt,
                   resolve_namespace(namespace))


@dataclass
class Cursor:
    """One queue being read: the next offset, the end to stop at (None: follow) and what was pulled."""

    mq: MessageQueue
    next: int
    end: int | None
    not_before_ms: int | None = None
    buffer: deque[Message] = field(default_factory=deque)
    at_end: bool = False

    def keep(self, msg: Message) -> bool:
        if self.end is not None and msg.queue_offset >= self.end:
            return False
        return self.not_before_ms is None or msg.store_timestamp >= self.not_before_ms


class Reader:
    def __init__(self, consumer: "AsyncPullConsumer", opts: Options, emit: Callable[[Message], None],
                 note: Callable[[str], None]) -> None:
        self.consumer = consumer
        self.opts = opts
        self.emit = emit
        self.note = note
        self.emitted = 0

    @property
    def done(self) -> bool:
        return self.opts.count is not None and self.emitted >= self.opts.count

    def _out(self, msg: Message) -> None:
        self.emit(msg)
        self.emitted += 1

    async def queues(self) -> list[MessageQueue]:
        mqs = await self.consumer.fetch_subscribe_message_queues(self.opts.topic)
        if self.opts.queue is not None:
            chosen = [mq for mq in mqs if mq.queue_id == self.opts.queue]
            if not chosen:
                ids = sorted({mq.queue_id for mq in mqs})
                raise ConfigError(f"--queue {self.opts.queue}: topic {self.opts.topic!r} has queues "
                                  f"{ids[0]}-{ids[-1]}")
            return chosen
        return mqs

    async def cursor(self, mq: MessageQueue) -> Cursor:
        c = self.consumer
        low, high = await c.min_offset(mq), await c.max_offset(mq)
        start = self.opts.start
        end = None if self.opts.follow else high
        if start.kind == "earliest":
            return Cursor(mq, low, end)
        if start.kind == "latest":
            return Cursor(mq, high, end)
        if start.kind == "offset":
            offset = min(max(start.value, low), high)
            if offset != start.value:
                self.note(f"{mq.broker_name}:{mq.queue_id}: offset {start.value} is outside [{low}, {high}], "
                          f"reading from {offset}")
            return Cursor(mq, offset, end)
        # The broker answers the nearest offset, which may be stored just before the time: filter those out.
        return Cursor(mq, await c.search_offset(mq, start.value), end, not_before_ms=start.value)

    async def fill(self, cur: Cursor) -> None:
        """Pull until ``cur`` has a message to show or is at its end."""
        while not cur.buffer and not cur.at_end:
            if cur.end is not None and cur.next >= cur.end:
                cur.at_end = True
                return
            result = await self.consumer.pull(cur.mq, self.opts.tags, cur.next, 32)
            self._advance(cur, result, at_end_when_empty=True)

    def _advance(self, cur: Cursor, result: "PullResult", *, at_end_when_empty: bool) -> bool:
        """Take a pull's answer into ``cur``; False when it neither found nor moved anything."""
        from rmqrun.pull import PullStatus
        status = result.status
        if status is PullStatus.FOUND:
            cur.buffer.extend(m for m in result.messages if cur.keep(m))
        elif status is PullStatus.OFFSET_ILLEGAL:
            self.note(f"{cur.mq.broker_name}:{cur.mq.queue_id}: offset {cur.next} is not stored "
                      f"({result.remark}); continuing at {result.next_begin_offset}")
        moved = result.next_begin_offset != cur.next
        cur.next = result.next_begin_offset
        if status is PullStatus.FOUND or moved:
            return True
        cur.at_end = at_end_when_empty
        return status is PullStatus.NO_NEW_MSG

    async def catch_up(self, cursors: list[Cursor]) -> None:
        """Emit everything up to each cursor's end, the oldest stored message first across queues."""
        while not self.done:
            await asyncio.gather(*(self.fill(c) for c in cursors if not c.buffer and not c.at_end))
            ready = [c for c in cursors if c.buffer]
            if not ready:
                return
            first = min(ready, key=lambda c: (c.buffer[0].store_timestamp, c.mq))
            self._out(first.buffer.popleft())

    async def follow(self, cursors: list[Cursor]) -> None:
        """One long-polling pull loop per queue; print in arrival order until ``--count``."""
        arrived: asyncio.Queue[Message] = asyncio.Queue()

        async def poll(cur: Cursor) -> None:
            failing = False
            while True:
                try:
                    result = await self.consumer.pull_block_if_not_found(cur.mq, self.opts.tags, cur.next, 32,
                                                                         timeout=FOLLOW_HOLD)
                except (RemotingError, ClientError) as exc:
                    if isinstance(exc, (AccessDeniedError, TlsError)):
                        raise  # a refusal never heals by waiting: the read ends with its line
                    # a broker restarting must not end a long-running follow: say so once, retry
                    if not failing:
                        self.note(f"{cur.mq.broker_name}:{cur.mq.queue_id}: {exc}; retrying every "
                                  f"{FOLLOW_RETRY:g}s")
                    failing = True
                    await asyncio.sleep(FOLLOW_RETRY)
                    continue
                if failing:
                    self.note(f"{cur.mq.broker_name}:{cur.mq.queue_id}: reading again")
                    failing = False
                if not self._advance(cur, result, at_end_when_empty=False):
                    await asyncio.sleep(1.0)  # an answer that moves nowhere: do not spin on it
                while cur.buffer:
                    arrived.put_nowait(cur.buffer.popleft())

        tasks = [asyncio.ensure_future(poll(c)) for c in cursors]
        try:
            while not self.done:
                getter = asyncio.ensure_future(arrived.get())
                await asyncio.wait([getter, *tasks], return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    self._out(getter.result())
                    continue
                getter.cancel()
                for task in tasks:
                    if task.done():
                        task.result()  # a poll loop only ends by raising
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self) -> None:
        cursors = [await self.cursor(mq) for mq in await self.queues()]
        self.note(f"reading {self.opts.topic} ({len(cursors)} queue(s)) from {self.opts.start.describe()}"
                  + (", following" if self.opts.follow else ""))
        await self.catch_up(cursors)
        if self.opts.follow and not self.done:
            for cur in cursors:
                cur.at_end = False
            await self.follow(cursors)


async def read_main(opts: Options, emit: Callable[[Message], None], note: Callable[[str], None]) -> tuple[int, bool]:
    """Read as ``opts`` say; returns (messages printed, stopped by a signal)."""
    from rmqrun.pull import AsyncPullConsumer
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    consumer = AsyncPullConsumer(opts.namesrv, READ_GROUP, namespace=opts.namespace, security=opts.security)
    reader = Reader(consumer, opts, emit, note)
    try:
        async with consumer:
            work = asyncio.ensure_future(reader.run())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait([work, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                return reader.emitted, True
            work.result()
            return reader.emitted, False
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@click.command("read")
@click.option("-t", "--topic", cls=Shown, shown="none (needed)", help="topic to read")
@namesrv_flag
@click.option("--from", "from_", default="earliest", show_default=True, metavar="WHERE",
              help="earliest, latest, an offset (per queue), or a time: ISO-8601 or epoch ms")
@click.option("--count", metavar="N", cls=Shown, shown="no limit", help="stop after N messages")
@click.option("-f", "--follow", is_flag=True, help="keep waiting for new messages until Ctrl-C / SIGTERM")
@click.option("--tags", metavar="EXPR", cls=Shown, shown="* (every tag)", help="tag expression, e.g. 'TagA || TagB'")
@click.option("--queue", metavar="ID", cls=Shown, shown="every queue", help="only queues with this id")
@click.option("--format", "fmt", default="text", show_default=True, metavar="[text|json]",
              help="text: one readable line per message; json: one object per line with every field")
@namespace_option
@security_options
def read(topic: str | None, namesrv: str | None, from_: str, count: str | None, follow: bool, tags: str | None,
         queue: str | None, fmt: str, namespace: str | None, security_flags: dict[str, Any]) -> None:
    """Print the messages of a topic (nothing is committed to any group)."""
    from rmqrun.cli import logs
    opts = parse_options(namesrv, topic, from_, count, follow, tags, queue, fmt, namespace)
    opts.security = security_for(security_flags, None)
    logs.setup("ERROR", role="read")
    line = json_line if opts.fmt == "json" else text_line
    out = sys.stdout

    def emit(msg: Message) -> None:
        out.write(line(msg) + "\n")
        out.flush()

    def note(text: str) -> None:
        click.echo(f"rmqrun read: {text}", err=True)

    try:
        printed, interrupted = asyncio.run(read_main(opts, emit, note))
    except ConfigError:
        raise
    except BrokenPipeError:
        # the reader of our output went away (| head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except RmqrunError as exc:
        fail(exc, str(exc))
    except (OSError, asyncio.TimeoutError) as exc:
        fail(exc)
    note(f"{printed} message(s)" + (" (stopped by signal)" if interrupted else ""))
    sys.exit(EXIT_INTERRUPTED if interrupted and not opts.follow else 0)
