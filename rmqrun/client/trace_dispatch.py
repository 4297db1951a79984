"""The message-trace sender: Java's ``AsyncTraceDispatcher``, on the event loop.

Trace records are produced on the consume and send paths, where nothing may wait for them, so
:meth:`TraceDispatcher.append` only puts a context in a bounded buffer and returns; a full buffer drops the
context and counts it (:attr:`TraceDispatcher.dropped`, the ``rmqrun_trace_dropped_total`` metric), never
the message traced. A background task encodes the buffered contexts (:mod:`rmqrun.protocol.trace`), batches
them per trace topic, and sends a batch as one message through an ordinary
:class:`~rmqrun.client.producer.Producer` (so it is signed like every other request under ACL) when it
reaches ``max_batch_bytes`` (Java: the trace producer's 128,000-byte message limit less 10,000) or its first
record has waited ``max_wait`` seconds (Java: 500 ms). The message's KEYS are every traced message's id
and keys, which is how ``queryMsgTraceById`` (QUERY_MESSAGE by key on the trace topic) finds it.

A send that fails is logged (once per error text and minute) and its records are counted in
:attr:`TraceDispatcher.send_failures`; at most ``max_sends`` sends are in flight, and while they all are the
buffer fills and drops. :meth:`close` sends what is buffered, waiting at most its timeout.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Protocol

from loguru import logger

from rmqrun.aio import wait_event, wait_for
from rmqrun.protocol.trace import DEFAULT_TRACE_TOPIC, TraceContext, TraceTransfer, encode_context, trace_keys

#: AsyncTraceDispatcher's traceContextQueue capacity
DEFAULT_CAPACITY = 1024
#: maxMsgSize (128,000) - 10 * 1000: a segment is sent once its text reaches this many characters
DEFAULT_MAX_BATCH_BYTES = 118_000
#: waitTimeThresholdMil
DEFAULT_MAX_WAIT = 0.5
#: sendMsgTimeout of the trace producer
TRACE_SEND_TIMEOUT = 5.0


class TraceSender(Protocol):
    """What the dispatcher sends with: a :class:`~rmqrun.client.producer.Producer` (which itself may own a
    dispatcher, so this module does not import it)."""

    async def start(self) -> None: ...

    async def send(self, topic: str, body: bytes, *, keys: str, timeout: float) -> Any: ...

    async def close(self) -> None: ...


class TraceDispatcher:
    """Buffers trace contexts and sends them in batches, off the caller's path."""

    def __init__(self, producer_factory: Callable[[], TraceSender], topic: str = DEFAULT_TRACE_TOPIC, *,
                 capacity: int = DEFAULT_CAPACITY, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 max_wait: float = DEFAULT_MAX_WAIT, max_sends: int = 4) -> None:
        if capacity < 1:
            raise ValueError(f"trace buffer capacity must be at least 1, not {capacity}")
        self.topic = topic or DEFAULT_TRACE_TOPIC
        self.capacity = capacity
        self.max_batch_bytes = max_batch_bytes
        self.max_wait = max_wait
        self._producer_factory = producer_factory
        self._producer: TraceSender | None = None
        self._buffer: list[TraceContext] = []
        self._segment: list[TraceTransfer] = []
        self._segment_chars = 0
        self._segment_since = 0.0
        self._wake = asyncio.Event()
        self._sends: set[asyncio.Task[None]] = set()
        self._send_slots = asyncio.Semaphore(max_sends)
        self._max_sends = max_sends
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._logged: dict[str, float] = {}
        #: contexts dropped because the buffer was full (or appended after close)
        self.dropped = 0
        #: trace messages sent, and records in sends that failed
        self.sent_messages = 0
        self.send_failures = 0

    # ----------------------------------------------------------------- the caller's side

    def append(self, ctx: TraceContext) -> bool:
        """Buffer one context; False (and counted) when the buffer is full. Never waits."""
        if self._closing or len(self._buffer) >= self.capacity:
            self.dropped += 1
            return False
        self._buffer.append(ctx)
        if self._task is None:
            self.start()  # on the first record: the owner may build the dispatcher before its loop runs
        if len(self._buffer) == 1:
            self._wake.set()
        return True

    @property
    def pending(self) -> int:
        """Contexts buffered, not yet encoded."""
        return len(self._buffer)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the sending task (on the running loop); :meth:`append` does it on its first record."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def close(self, timeout: float = 3.0) -> None:
        """Send what is buffered (within ``timeout`` seconds), then close the producer."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            try:
                await wait_for(asyncio.shield(self._task), timeout)
            except asyncio.TimeoutError:
                self._task.cancel()
                logger.warning("trace: {} record(s) not sent within {}s of closing", self.pending, timeout)
        for task in list(self._sends):
            task.cancel()
        left = [t for t in (self._task, *self._sends) if t is not None]
        await asyncio.gather(*left, return_exceptions=True)  # cancelled ones end before the producer closes
        if self._producer is not None:
            try:
                await self._producer.close()
            except Exception as exc:  # noqa: BLE001 - closing must not fail the caller's shutdown
                logger.debug("trace producer close: {}", exc)

    # ----------------------------------------------------------------- the background task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._buffer and not self._closing:
                self._wake.clear()
                wait = max(0.0, self._segment_since + self.max_wait - loop.time()) if self._segment else None
                await wait_event(self._wake, wait)
            batch, self._buffer = self._buffer, []
            for ctx in batch:
                if not ctx.beans:
                    continue
                try:
                    transfer = encode_context(ctx)
                except Exception as exc:  # noqa: BLE001 - one bad record must not stop the sender
                    self.dropped += 1
                    self._log_failure(exc)
                    continue
                if not self._segment:
                    self._segment_since = loop.time()
                self._segment.append(transfer)
                self._segment_chars += len(transfer.data)
                if self._segment_chars >= self.max_batch_bytes:
                    await self._flush()
            if self._segment and (self._closing or loop.time() - self._segment_since >= self.max_wait):
                await self._flush()
            if self._closing and not self._buffer:
                if self._sends:
                    await asyncio.gather(*self._sends, return_exceptions=True)
                return
            await asyncio.sleep(0)  # let the loop run between rounds of a busy buffer

    async def _flush(self) -> None:
        segment, self._segment, self._segment_chars = self._segment, [], 0
        await self._send_slots.acquire()  # all sends in flight: wait here while the buffer fills (and drops)
        task = asyncio.ensure_future(self._send(segment))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, segment: list[TraceTransfer]) -> None:
        try:
            producer = await self._started_producer()
            body = "".join(t.data for t in segment).encode("utf-8")
            await producer.send(self.topic, body, keys=trace_keys(segment), timeout=TRACE_SEND_TIMEOUT)
            self.sent_messages += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a trace send never fails consumption
            self.send_failures += len(segment)
            self._log_failure(exc)
        finally:
            self._send_slots.release()

    async def _started_producer(self) -> TraceSender:
        if self._producer is None:
            self._producer = self._producer_factory()
        await self._producer.start()
        return self._producer

    def _log_failure(self, exc: Exception) -> None:
        text = f"{type(exc).__name__}: {exc}"
        now = time.monotonic()
        if now - self._logged.get(text, -120.0) >= 60.0:
            self._logged[text] = now
            logger.warning("trace: sending trace data to {} failed (records dropped): {}", self.topic, text)
