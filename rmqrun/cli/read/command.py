"""``rmqrun read --topic T``: print what is in a topic (what ``mqadmin printMsg``, ``kcat -C`` or
``kafka-console-consumer`` are for).

A :class:`~rmqrun.pull.AsyncPullConsumer` reads every chosen queue from its
start offset. Without ``--follow`` it reads up to the queues' ends as they
were when it started (or up to ``--to``), merging the queues by store time so
the output reads like the topic's history, and exits. With ``--follow`` it then
keeps one long-polling pull per queue and prints messages as they arrive, until
``--count`` is reached, ``--timeout`` seconds pass without a message, or
SIGINT/SIGTERM (exit 0).

Without ``--group`` nothing is committed: the pulls carry no commit offset, so
reading never moves any consumer group. With ``--group G`` the read starts at
G's committed offsets (unless ``--from`` says otherwise) and commits, per
queue, the offset after the last message printed (every few seconds while
following, and at the end), so the next ``--group G`` read goes on from there,
as ``kafka-console-consumer --group`` does. Bad option values are one
``rmqrun: error:`` line and exit 2; a topic the cluster does not have, or a name
server or broker that does not answer, exit 1 (as ``rmqrun check`` and
``rmqrun spark``: 2 is for what the command line itself gets wrong).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import click

from rmqrun.aio import run_until_set, stop_on_signals
from rmqrun.cli.exit_codes import EXIT_INTERRUPTED, fail
from rmqrun.cli.flags import Shown, config_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option
from rmqrun.cli.read.format import StartAt, body_record, json_line, length_prefixed_record, text_line
from rmqrun.cli.read.options import Options, parse_options
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.client.errors import ClientError
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.model import Message, MessageQueue
from rmqrun.pull.errors import FilterNotSupportedError
from rmqrun.remoting.errors import AccessDeniedError, RemotingError, TlsError

if TYPE_CHECKING:
    from rmqrun.pull import AsyncPullConsumer, PullResult

READ_GROUP = "rmqrun_read"
FOLLOW_HOLD = 15.0  # seconds the broker holds a follow pull (the push consumer's suspend time)
FOLLOW_RETRY = 1.0  # seconds between tries while a broker does not answer (the push consumer's back-off)
COMMIT_INTERVAL = 5.0  # seconds between commits of a --group read that follows (Kafka's auto-commit interval)
KEY_QUERY_MAX = 64  # what mqadmin queryMsgByKey asks each broker for
END_OF_TIME_MS = 2**63 - 1


@dataclass
class Cursor:
    """One queue being read: the next offset, the end to stop at (None: follow) and what was pulled.

    ``buffer`` holds what was pulled and not printed yet, in queue order, so the
    offset a ``--group`` read commits is always known (:meth:`position`).
    """

    mq: MessageQueue
    next: int
    end: int | None
    not_before_ms: int | None = None
    buffer: deque[Message] = field(default_factory=deque)
    at_end: bool = False
    #: ``--to`` a time: messages stored from then on are not printed
    stop_ms: int | None = None
    #: the first offset found stored at or after ``stop_ms``: the queue ends there
    stop_offset: int | None = None
    #: where the read of this queue began (a commit only happens once it moved)
    start: int = -1

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.next

    def keep(self, msg: Message) -> bool:
        if self.end is not None and msg.queue_offset >= self.end:
            return False
        if self.stop_offset is not None and msg.queue_offset >= self.stop_offset:
            return False
        if self.stop_ms is not None and msg.store_timestamp >= self.stop_ms:
            self.stop_offset = msg.queue_offset
            return False
        return self.not_before_ms is None or msg.store_timestamp >= self.not_before_ms

    @property
    def limit(self) -> int | None:
        """The first offset not to print (``--to`` or the end at the start), if known yet."""
        ends = [e for e in (self.end, self.stop_offset) if e is not None]
        return min(ends) if ends else None

    def position(self) -> int:
        """The offset after everything printed: the first unprinted message, else where pulling goes
        on (messages skipped by the tag filter count as read), never past the queue's limit."""
        if self.buffer:
            return self.buffer[0].queue_offset
        limit = self.limit
        return self.next if limit is None else min(self.next, limit)


class Reader:
    def __init__(self, consumer: "AsyncPullConsumer", opts: Options, emit: Callable[[Message], None],
                 note: Callable[[str], None]) -> None:
        self.consumer = consumer
        self.opts = opts
        self.emit = emit
        self.note = note
        self.emitted = 0
        self.cursors: list[Cursor] = []
        #: the follow ended because --timeout seconds passed without a message
        self.idle = False

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
        start, to = self.opts.start, self.opts.to
        end = None if self.opts.follow else high
        stop_ms = None
        if to is not None and to.kind == "offset":
            end = min(high, to.value)
        elif to is not None:
            stop_ms = to.value
        if start.kind == "committed":
            committed = await c.fetch_consume_offset(mq)
            start = StartAt("earliest") if committed < 0 else StartAt("offset", committed)
        if start.kind == "earliest":
            return Cursor(mq, low, end, stop_ms=stop_ms)
        if start.kind == "latest":
            return Cursor(mq, high, end, stop_ms=stop_ms)
        if start.kind == "offset":
            offset = min(max(start.value, low), high)
            if offset != start.value:
                self.note(f"{mq.broker_name}:{mq.queue_id}: offset {start.value} is outside [{low}, {high}], "
                          f"reading from {offset}")
            return Cursor(mq, offset, end, stop_ms=stop_ms)
        # The broker answers the nearest offset, which may be stored just before the time: filter those out.
        return Cursor(mq, await c.search_offset(mq, start.value), end, not_before_ms=start.value, stop_ms=stop_ms)

    async def fill(self, cur: Cursor) -> None:
        """Pull until ``cur`` has a message to show or is at its end."""
        while not cur.buffer and not cur.at_end:
            limit = cur.limit
            if limit is not None and cur.next >= limit:
                cur.at_end = True
                return
            result = await self.consumer.pull(cur.mq, self.opts.tags, cur.next, 32,
                                              expression_type=self.opts.expression_type)
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

    async def _poll(self, cur: Cursor, arrived: "asyncio.Queue[Cursor]") -> None:
        """One queue's long-polling loop: each message pulled is announced once on ``arrived``."""
        failing = False
        while True:
            try:
                result = await self.consumer.pull_block_if_not_found(
                    cur.mq, self.opts.tags, cur.next, 32, timeout=FOLLOW_HOLD,
                    expression_type=self.opts.expression_type)
            except (RemotingError, ClientError) as exc:
                if isinstance(exc, (AccessDeniedError, TlsError, FilterNotSupportedError)):
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
            held = len(cur.buffer)
            if not self._advance(cur, result, at_end_when_empty=False):
                await asyncio.sleep(1.0)  # an answer that moves nowhere: do not spin on it
            for _ in range(len(cur.buffer) - held):
                arrived.put_nowait(cur)

    async def follow(self, cursors: list[Cursor]) -> None:
        """One long-polling pull loop per queue; print in arrival order until ``--count`` or ``--timeout``.

        A message stays in its cursor's buffer until printed (the queue only says
        which cursor to take from next), so a ``--group`` commit never passes one.
        """
        arrived: asyncio.Queue[Cursor] = asyncio.Queue()
        tasks = [asyncio.ensure_future(self._poll(c, arrived)) for c in cursors]
        idle = self.opts.idle_timeout
        last_message = last_commit = time.monotonic()
        try:
            while not self.done:
                deadlines = [last_message + idle] if idle is not None else []
                if self.opts.group:
                    deadlines.append(last_commit + COMMIT_INTERVAL)
                wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                getter = asyncio.ensure_future(arrived.get())
                await asyncio.wait([getter, *tasks], timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    self._out(getter.result().buffer.popleft())
                    last_message = time.monotonic()
                else:
                    getter.cancel()
                for task in tasks:
                    if task.done():
                        task.result()  # a poll loop only ends by raising
                now = time.monotonic()
                if self.opts.group and now - last_commit >= COMMIT_INTERVAL:
                    await self.commit(quiet=True)
                    last_commit = now
                if idle is not None and now - last_message >= idle:
                    self.idle = True
                    self.note(f"no message for {idle:g}s: stopping")
                    return
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def commit(self, *, quiet: bool = False) -> int:
        """Store each queue's :meth:`Cursor.position` for ``--group`` (only those that moved); returns how many.

        While following (``quiet``) a failed write is one note and is tried again at
        the next commit; the last commit's failure ends the read with exit 1.
        """
        moved = [(cur.mq, cur.position()) for cur in self.cursors if cur.position() > cur.start]
        for mq, offset in moved:
            await self.consumer.update_consume_offset(mq, offset)
        try:
            await self.consumer.persist_consume_offsets()
        except RmqrunError as exc:
            if not quiet:
                raise
            self.note(f"commit for group {self.opts.group} failed, retrying in {COMMIT_INTERVAL:g}s: {exc}")
        return len(moved)

    async def lookup(self) -> None:
        """``--msg-id``: the message with that id (client or offset id); ``--key``: the messages with that
        key stored in the ``--from``/``--to`` time range, oldest first, up to ``--count`` (else 64, as mqadmin)."""
        opts = self.opts
        if opts.msg_id is not None:
            self._out(await self.consumer.view_message(opts.msg_id, opts.topic))
            return
        assert opts.key is not None
        begin = opts.start.value if opts.start.kind == "time" else 0
        end = opts.to.value - 1 if opts.to is not None else END_OF_TIME_MS
        found = await self.consumer.query_message(opts.topic, opts.key, opts.count or KEY_QUERY_MAX, begin,
                                                  max(begin, end))
        for addr, exc in found.errors.items():
            self.note(f"broker {addr} did not answer ({exc}); its messages are missing")
        for msg in found.messages:
            if self.done:
                return
            self._out(msg)

    async def run(self) -> None:
        if self.opts.key is not None or self.opts.msg_id is not None:
            await self.lookup()
            return
        self.cursors = cursors = [await self.cursor(mq) for mq in await self.queues()]
        start = "the group's committed offsets" if self.opts.start.kind == "committed" else \
            self.opts.start.describe()
        until = f" to {self.opts.to.describe()}" if self.opts.to is not None else ""
        self.note(f"reading {self.opts.topic} ({len(cursors)} queue(s)) from {start}{until}"
                  + (", following" if self.opts.follow else ""))
        await self.catch_up(cursors)
        if self.opts.follow and not self.done:
            for cur in cursors:
                cur.at_end = False
            await self.follow(cursors)


async def read_main(opts: Options, emit: Callable[[Message], None], note: Callable[[str], None]) -> tuple[int, bool]:
    """Read as ``opts`` say; returns (messages printed, stopped by a signal).

    With ``--group`` what was printed is committed however the read ends (its
    end, ``--count``, ``--timeout``, a signal) before the consumer closes.
    """
    from rmqrun.pull import AsyncPullConsumer
    consumer = AsyncPullConsumer(opts.namesrv, opts.group or READ_GROUP, namespace=opts.namespace,
                                 security=opts.security)
    reader = Reader(consumer, opts, emit, note)
    with stop_on_signals() as stop:
        async with consumer:
            work = await run_until_set(stop, reader.run())
            interrupted = work.cancelled()
            if not interrupted:
                work.result()
            if opts.group:
                committed = await reader.commit()
                note(f"committed {committed} queue(s) for group {opts.group}")
            return reader.emitted, interrupted


def _writer(fmt: str, note: Callable[[str], None]) -> Callable[[Message], None]:
    """How one message reaches stdout: a text line, or raw bytes for the body formats."""
    if fmt in ("text", "json"):
        line = json_line if fmt == "json" else text_line
        out = sys.stdout

        def write_line(msg: Message) -> None:
            out.write(line(msg) + "\n")
            out.flush()
        return write_line
    binary = sys.stdout.buffer
    record = body_record if fmt == "body" else length_prefixed_record
    warned = fmt != "body"

    def write_bytes(msg: Message) -> None:
        nonlocal warned
        if not warned and b"\n" in msg.body:
            warned = True
            note(f"message {msg.msg_id} has a newline in its body; --format length-prefixed keeps bodies apart")
        binary.write(record(msg))
        binary.flush()
    return write_bytes


READ_HELP = """Print the messages of a topic.

\b
Without --follow it reads every queue up to its end (or --to) and exits, the
queues merged by store time. --follow (or --timeout) then waits for new
messages. Nothing is committed unless --group is given: then the read starts at
the group's committed offsets (unless --from says otherwise; the earliest for a
queue the group has none of) and commits, per queue, the offset after the last
message printed (every 5 s while following, and at the end, also on Ctrl-C).

\b
Formats: text (one readable line, the body's first 120 characters escaped),
json (every field; the body as UTF-8 or base64), body (each raw body then a
newline), length-prefixed (each raw body after its length as 4 bytes
big-endian: binary-safe).

--key and --msg-id find messages through the brokers' index instead (what
mqadmin queryMsgByKey, queryMsgByUniqueKey and queryMsgById do).

\b
Examples:
  rmqrun read --topic Orders --from 2024-11-24T08:00:00Z --to 2024-11-24T09:00:00Z
  rmqrun read --topic Orders --format body | jq .amount
  rmqrun read --topic Orders --group audit --timeout 10
  rmqrun read --topic Orders --msg-id C0A8010A1F2E18B4AAC2512B3F4E0000 --format json
"""


@click.command("read", help=READ_HELP)
@click.option("-t", "--topic", cls=Shown, shown="none (needed)", help="topic to read")
@namesrv_flag
@click.option("--from", "from_", metavar="WHERE", cls=Shown, shown="earliest; with --group the group's offsets",
              help="earliest, latest, an offset (per queue), or a time: ISO-8601 or epoch ms")
@click.option("--to", metavar="WHERE", cls=Shown, shown="latest, the end when the read starts",
              help="stop each queue before this offset, or before messages stored from this time "
                   "(ISO-8601 or epoch ms)")
@click.option("--count", metavar="N", cls=Shown, shown="no limit", help="stop after N messages")
@click.option("-f", "--follow", is_flag=True, help="keep waiting for new messages until Ctrl-C / SIGTERM")
@click.option("--timeout", metavar="SECONDS", cls=Shown, shown="none",
              help="wait for new messages (as --follow), stopping after SECONDS without one (exit 0)")
@click.option("-g", "--group", metavar="GROUP", cls=Shown, shown="none: nothing committed",
              help="start from GROUP's committed offsets and commit what was printed")
@click.option("--key", metavar="KEY", cls=Shown, shown="none", help="only the messages with KEY among their keys, "
              "found through the brokers' index (oldest first; --from/--to times bound it)")
@click.option("--msg-id", metavar="ID", cls=Shown, shown="none", help="only the message with this id: its client id "
              "(UNIQ_KEY, what producers log) or its offset id")
@click.option("--tags", metavar="EXPR", cls=Shown, shown="* (every tag)", help="tag expression, e.g. 'TagA || TagB'")
@click.option("--sql", metavar="EXPR", cls=Shown, shown="none", help="SQL92 selector on the properties, e.g. "
              "\"region = 'eu' AND amount > 100\" (the broker evaluates it: a Java broker with "
              "enablePropertyFilter=true; others refuse, exit 1)")
@click.option("--queue", metavar="ID", cls=Shown, shown="every queue", help="only queues with this id")
@click.option("--format", "fmt", default="text", show_default=True, metavar="[text|json|body|length-prefixed]",
              help="text: one readable line per message; json: one object per line with every field; "
                   "body: raw bodies, one per line; length-prefixed: raw bodies after a 4-byte length")
@config_option("the name server, topic, namespace and ACL/TLS (never the group)")
@namespace_option
@security_options
def read(topic: str | None, namesrv: str | None, from_: str | None, to: str | None, count: str | None,
         follow: bool, timeout: str | None, group: str | None, key: str | None, msg_id: str | None,
         tags: str | None, sql: str | None, queue: str | None, fmt: str, config_file: str | None,
         namespace: str | None, security_flags: dict[str, Any]) -> None:
    from rmqrun.cli import logs
    from rmqrun.cli.option_checks import from_config
    namesrv, topic, namespace = from_config(config_file, namesrv, topic, namespace)
    opts = parse_options(namesrv, topic, from_, count, follow, tags, queue, fmt, namespace, to=to, timeout=timeout,
                         group=group, key=key, msg_id=msg_id, sql=sql)
    opts.security = security_for(security_flags, config_file)
    logs.setup("ERROR", role="read")

    def note(text: str) -> None:
        click.echo(f"rmqrun read: {text}", err=True)

    emit = _writer(opts.fmt, note)
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
