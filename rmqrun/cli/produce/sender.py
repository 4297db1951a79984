"""``rmqrun produce``: send messages from a count, a file or stdin, with a progress bar.

Sends run concurrently (a window of ``concurrency`` unanswered sends), which
is what makes a backlog of tens of thousands of messages take seconds, not
minutes. Order still holds where it must: messages that share a sharding key
go to one queue (Java's SelectMessageQueueByHash) and each is sent only after
the previous one with that key was stored, so an orderly consumer sees them
in input order. Messages without a sharding key are spread round robin; lines
of a file or of stdin keep their order within each queue (``keep_order``, on
by default for them), generated messages carry no order.

Templates (``--keys``, ``--sharding-key``, ``--body``) replace ``{i}`` with
the message's index (0-based) and ``{i%N}`` with the index modulo N, so
``--sharding-key 'order-{i%8}'`` spreads a run over eight ordered streams.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, Iterable, Mapping

from rmqrun.client.producer import OutgoingMessage, Producer
from rmqrun.remoting import message_props as m
from rmqrun.remoting.errors import AccessDeniedError, TlsError

_TEMPLATE_RE = re.compile(r"\{i(?:%(\d+))?\}")
#: anything that looks like a field, ``{name...}`` (JSON braces such as ``{"k": {i}}`` do not)
_FIELD_RE = re.compile(r"\{[A-Za-z_][^{}\s\"]*\}")

RESERVED_PROPERTIES = m.SYSTEM_PROPERTIES


@dataclass(frozen=True)
class Template:
    """A string with ``{i}`` / ``{i%N}`` placeholders."""

    text: str

    def __post_init__(self) -> None:
        for match in _FIELD_RE.finditer(self.text):
            if not _TEMPLATE_RE.fullmatch(match.group(0)):
                raise ValueError(f"template {self.text!r}: unknown field {match.group(0)}; the fields are {{i}} "
                                 "(the message number) and {i%N}")
        for match in _TEMPLATE_RE.finditer(self.text):
            if match.group(1) is not None and int(match.group(1)) == 0:
                raise ValueError(f"template {self.text!r}: {{i%0}} divides by zero")

    def render(self, i: int) -> str:
        return _TEMPLATE_RE.sub(lambda mt: str(i % int(mt.group(1)) if mt.group(1) else i), self.text)


def parse_properties(pairs: Iterable[str]) -> dict[str, str]:
    """``k=v`` strings to a mapping; refuses a missing ``=``, an empty key, reserved names and text the
    properties string cannot carry (a separator character, bytes that were not UTF-8)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--property {pair!r}: expected KEY=VALUE")
        if key in RESERVED_PROPERTIES:
            raise ValueError(f"--property {pair!r}: {key} is a system property (use the dedicated option, "
                             "or another name)")
        m.check_property_text(f"--property {key!r}: its name", key)
        m.check_property_text(f"--property {key!r}: its value", value)
        out[key] = value
    return out


@dataclass(frozen=True)
class ProduceSpec:
    """What each message carries besides its body."""

    topic: str
    tags: str | None = None
    keys: Template | None = None
    sharding_key: Template | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    delay_level: int = 0


@dataclass
class ProduceReport:
    sent: int = 0
    failed: int = 0
    seconds: float = 0.0
    first_error: str | None = None
    #: the cluster refused (ACL) or a TLS handshake failed: sending stopped there (later sends would too)
    refused: bool = False
    #: messages stored per queue id (all brokers together), to show how they spread
    per_queue: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def stored(self, n: int, queue_id: int) -> None:
        """``n`` messages stored in queue ``queue_id``."""
        self.sent += n
        self.per_queue[str(queue_id)] = self.per_queue.get(str(queue_id), 0) + n

    def lost(self, n: int, exc: BaseException) -> None:
        """``n`` messages whose send failed with ``exc``; the first error is kept for the summary."""
        self.failed += n
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (AccessDeniedError, TlsError)):
            self.refused = True  # every further send would be refused the same way

    def summary(self, topic: str) -> str:
        text = (f"sent {self.sent} message(s) to {topic} in {self.seconds:.2f} s ({self.rate:.0f} msg/s), "
                f"{self.failed} failed")
        if self.first_error:
            text += f"; first error: {self.first_error}"
        if self.refused:
            text += "; stopped at the refusal (the rest was not sent)"
        return text


async def generated(count: int, body: Template) -> AsyncIterator[bytes]:
    for i in range(count):
        yield body.render(i).encode("utf-8")


async def lines_of(read_line: Callable[[], bytes], limit: int | None = None) -> AsyncIterator[bytes]:
    """Lines from a blocking reader (a file or stdin), read off the event loop; newline stripped."""
    loop = asyncio.get_running_loop()
    n = 0
    while limit is None or n < limit:
        line = await loop.run_in_executor(None, read_line)
        if not line:
            return
        yield line.rstrip(b"\r\n") if line.endswith(b"\n") else line
        n += 1


async def _chunks(bodies: AsyncIterator[bytes], size: int) -> AsyncIterator[tuple[int, list[bytes]]]:
    """The bodies in chunks of ``size`` (the last one may be shorter), each with the index of its first body."""
    first, chunk = 0, []
    async for body in bodies:
        chunk.append(body)
        if len(chunk) >= size:
            yield first, chunk
            first, chunk = first + len(chunk), []
    if chunk:
        yield first, chunk


async def produce(producer: Producer, spec: ProduceSpec, bodies: AsyncIterator[bytes], *,
                  concurrency: int = 64, batch: int = 1, keep_order: bool = False,
                  on_sent: Callable[[int], None] | None = None) -> ProduceReport:
    """Send every body; returns counts. ``on_sent(n)`` is called as sends finish (stored or failed).

    ``batch`` > 1 sends that many messages per request (SEND_BATCH_MESSAGE, one
    queue per request): much faster for a backlog, but with no sharding key
    and no delay level, as in the Java client.

    ``keep_order`` (without a sharding key): round robin over the topic's queues chosen
    here, each send waiting for the previous one of its queue, so every queue holds its
    share in input order; tried once, as Java's ``send(msg, mq)``.
    """
    if concurrency < 1 or batch < 1:
        raise ValueError("concurrency and batch must be at least 1")
    if batch > 1 and (spec.sharding_key is not None or spec.delay_level):
        raise ValueError("batches cannot carry a sharding key or a delay level; send one by one (batch 1)")
    report = ProduceReport()
    window = asyncio.Semaphore(concurrency)
    previous: dict[str, asyncio.Task[None]] = {}
    tasks: set[asyncio.Task[None]] = set()
    started = time.monotonic()

    def outgoing(i: int, body: bytes) -> OutgoingMessage:
        return OutgoingMessage(body, spec.tags, spec.keys.render(i) if spec.keys else None,
                               spec.properties or None, spec.delay_level)

    lanes = await producer.writable_queues(spec.topic) if keep_order and spec.sharding_key is None else []

    async def send(first: int, chunk: list[bytes], key: str | None, before: asyncio.Task[None] | None) -> None:
        try:
            if before is not None:
                await asyncio.wait([before])  # its failure is counted there; order is what matters here
            msgs = [outgoing(first + j, body) for j, body in enumerate(chunk)]
            lane = lanes[(first // batch) % len(lanes)] if lanes else None
            if len(msgs) == 1:
                result = await producer.send_message(spec.topic, msgs[0], queue=lane,
                                                     sharding_key=None if lanes else key)
            else:
                result = await producer.send_batch(spec.topic, msgs, queue=lane)
            report.stored(len(msgs), result.queue.queue_id)
        except Exception as exc:  # a failed send is reported, not fatal to the rest
            report.lost(len(chunk), exc)
        finally:
            window.release()
            if on_sent is not None:
                on_sent(len(chunk))

    def forget(task: asyncio.Task[None], key: str | None) -> None:
        tasks.discard(task)
        if key is not None and previous.get(key) is task:
            del previous[key]

    async def submit(first: int, chunk: list[bytes]) -> None:
        await window.acquire()
        if report.refused:  # refused while this one waited for room
            window.release()
            return
        if lanes:  # the chunk's queue is its lane: chained like a sharding key's messages
            key: str | None = str((first // batch) % len(lanes))
        else:
            key = spec.sharding_key.render(first) if spec.sharding_key else None
        task = asyncio.ensure_future(send(first, chunk, key, previous.get(key) if key is not None else None))
        tasks.add(task)
        if key is not None:
            previous[key] = task
        task.add_done_callback(lambda t, k=key: forget(t, k))

    try:
        async for first, chunk in _chunks(bodies, batch):
            if report.refused:
                break
            await submit(first, chunk)
        if tasks:
            await asyncio.wait(list(tasks))
    finally:
        for task in list(tasks):
            task.cancel()
        report.seconds = time.monotonic() - started
    return report
