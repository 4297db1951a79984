"""Orderly POP (``--orderly --consume-mode pop``): a queue's messages in order, across every instance of the group.

No remoting client has this (the Java push consumer uses POP only with
concurrent listeners); it stands on the broker's order mode (pops with
``order=true``): a popped batch blocks its queue for the whole group while any
of its messages is neither acked nor visible again, and a batch that comes back
is popped again from its first un-acked message, each message carrying its
delivery count (``orderCountInfo``, which becomes its reconsume count).

So one batch per queue is in flight group-wide, and this service keeps the
order inside it: the batch's messages run as orderly jobs of at most
``consume_message_batch_max_size`` messages, one after the other on the worker
the queue is pinned to, each acked as it succeeds (the broker commits up to the
first message still out). At the first failure:

* the message is at ``max_reconsume_times`` (unlimited by default, as in pull
  orderly mode): to ``%DLQ%<group>``, acked, and the batch goes on after it;
* otherwise it runs again *here* after ``suspend_current_queue_time_ms`` (or
  the handler's ``Suspend(ms)``), counted once more, and every message after it
  waits: the batch stays popped by this instance (its invisibility extended as
  for a long call), so the queue stays blocked for the whole group meanwhile,
  as pull orderly mode suspends and retries a locked queue locally and the 5.x
  FIFO clients retry a message in place.

**Reconsume counts.** ``reconsume_times`` counts the handler's failures of that
message and nothing else. The broker's ``orderCountInfo`` counts every pop of a
batch a message was in, also the pops where it only waited behind another
message, so it is not handed to the handler as such (:func:`pop_reconsume_times`):

* a message behind another un-acked message of its queue in the pop cannot
  have failed before (in order, it never ran while one before it was out): 0;
* the first message of its queue in the pop takes the broker's count: the
  batch came back after a stop, a kill or a lapse (failures here are retried
  in place, so never come back through the broker), and a message that takes
  its instance down must still reach the DLQ. The residual: such a head counts
  the redelivery also when it was only cut short, and an instance killed after
  failing a message N times hands the next instance the broker's count (its
  pops), not N;
* each failure here adds one, in the record the worker decodes, so the next
  run of it (and the DLQ decision at ``max_reconsume_times``) sees it.

A job cut short (its worker died, a time limit) is treated like a failure of
its first unfinished message; one never run (a stop) is left alone: the batch
comes back when its invisibility lapses, the queue blocked until then. Long
calls are extended as in concurrent POP, which keeps the queue blocked for
exactly as long as its batch is being worked on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Sequence

from loguru import logger

from rmqrun.consumer import defaults as d
from rmqrun.consumer.dead_letters import DeadLetterReason, Failure
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.consumer.orderly_failures import clamp_suspend_ms
from rmqrun.consumer.pop_consume import PopConsumeService
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue, PopRequest
from rmqrun.consumer.retry import with_reconsume_times
from rmqrun.model import MessageQueue, Status


class PopOrderlyConsumeService(PopConsumeService):
    extends_waiting = True  # the messages behind a suspended failure keep the queue blocked group-wide

    def submit(self, req: PopRequest, entries: Sequence[PopEntry], lane_key: tuple[str, str] | None = None) -> None:
        """One task per queue of the pop (the broker gives each queue's batch to one client at a time)."""
        req.pq.add(entries)
        by_queue: dict[tuple[str, int], list[PopEntry]] = {}
        for entry in entries:
            by_queue.setdefault((entry.message.ack_topic, entry.message.queue_id), []).append(entry)
        for batch in by_queue.values():
            batch.sort(key=lambda e: e.message.queue_offset)
            for i, entry in enumerate(batch):
                _set_reconsume_times(entry, pop_reconsume_times(entry.message.order_count,
                                                                entry.message.reconsume_times, head=i == 0))
            self._spawn(req, batch)

    def _spawn(self, req: PopRequest, entries: list[PopEntry]) -> None:
        self._track(asyncio.ensure_future(self._consume(req, entries)))

    async def _consume(self, req: PopRequest, entries: list[PopEntry]) -> None:
        pq = req.pq
        first = entries[0].message
        mq = MessageQueue(first.ack_topic, first.receipt.broker_name, first.queue_id)
        size = self.config.consume_message_batch_max_size
        i = 0
        try:
            while i < len(entries):
                live = self._not_expired(pq, entries[i:i + size])
                if len(live) < len(entries[i:i + size]) or pq.dropped:
                    # its invisibility lapsed (the broker may hand the batch out again) or the assignment went:
                    # stop here, in order; what is left comes back when it lapses
                    self._release(pq, entries[i:])
                    return
                moved_on, suspend_ms, failed = await self._run_chunk(req, mq, live)
                i += moved_on
                if moved_on == len(live):
                    continue
                if suspend_ms is None:
                    self._release(pq, entries[i:])
                    return
                # the failed message runs again here, counted once more (a message that never ran, behind one
                # that failed in the same job, is not); the rest waits behind it, popped by this instance
                # (extended like a long call), so the queue stays blocked group-wide
                if failed:
                    _set_reconsume_times(entries[i], entries[i].message.reconsume_times + 1)
                await asyncio.sleep(max(clamp_suspend_ms(suspend_ms, self.config.suspend_current_queue_time_ms),
                                        d.SUSPEND_CURRENT_QUEUE_TIME_MIN_MS) / 1000)
        except BaseException:
            self._release(pq, entries[i:])
            raise

    async def _run_chunk(self, req: PopRequest, mq: MessageQueue,
                         chunk: list[PopEntry]) -> tuple[int, int | None, bool]:
        """Run one orderly job: how many of its messages are settled in order (acked or dead-lettered), the
        suspend time (ms) before the first unsettled one runs again (None: leave the rest to come back), and
        whether that one ran and failed (only then does its reconsume count grow)."""
        pq = req.pq
        job = ConsumeJob(mq, True, [e.message.record for e in chunk], [e.message.queue_offset for e in chunk],
                         pq=pq)
        started = time.monotonic()
        try:
            result = await self.engine.executor.run(job)
        except Exception as exc:  # not run at all (shutting down): the batch comes back when it lapses
            logger.debug("orderly POP job of {} not run: {}", mq, exc)
            return 0, None, False
        if any(v is not Status.NOT_RUN for v in result.verdicts):
            self.engine.stats.record(len(chunk), time.monotonic() - started, result, job.records)
            self.engine.status.on_consumed(req.mq.topic, result, time.monotonic() - started)
        return await self._settle_chunk(pq, mq, chunk, result)

    async def _settle_chunk(self, pq: PopProcessQueue, mq: MessageQueue, chunk: list[PopEntry],
                            result: JobResult) -> tuple[int, int | None, bool]:
        verdicts = list(result.verdicts) + [Status.NOT_RUN] * (len(chunk) - len(result.verdicts))
        verdicts = [Status.SUCCESS if v in (Status.COMMIT, Status.ROLLBACK) else v for v in verdicts]
        for i, (entry, verdict) in enumerate(zip(chunk, verdicts)):
            if verdict is Status.SUCCESS:
                await self._ack(pq, entry)
                continue
            if verdict is Status.NOT_RUN and not result.error:
                return i, None, False  # never run (a stop, a dropped assignment): left to come back
            if verdict is Status.UNDECODABLE:
                if await self.engine.dead_letter_undecodable(mq, entry.message.record, entry.message.queue_offset,
                                                             result.error_of(i)):
                    self.stats.dead_lettered += 1
                    await self._ack(pq, entry)
                    continue
            elif verdict is not Status.NOT_RUN:
                self.engine.stats.failed += 1
                if await self._dead_letter_at_limit(mq, entry, result.error_of(i)):
                    await self._ack(pq, entry)
                    continue
            return i, result.suspend_ms, verdict is not Status.NOT_RUN
        return len(chunk), None, False

    async def _dead_letter_at_limit(self, mq: MessageQueue, entry: PopEntry, error: str | None) -> bool:
        msg = entry.message
        limit = self.config.effective_max_reconsume_times
        if msg.reconsume_times < limit:
            return False
        # delay level -1: the broker's copy counts none of these failures (no retry topic in order mode), so
        # the client's count decides, and the DLQ line says so (not "the handler asked for it")
        if not await self.engine.send_back.send_back(msg.record, msg.receipt.broker_name, -1, limit,
                                                     Failure(mq, msg.queue_offset, error),
                                                     reason=DeadLetterReason.MAX_RECONSUME):
            return False
        self.stats.dead_lettered += 1
        return True


def pop_reconsume_times(order_count: int | None, stored: int, *, head: bool) -> int:
    """A freshly popped orderly message's reconsume count (see the module docstring).

    ``order_count`` is the broker's delivery count of it (orderCountInfo; None: none sent), ``stored`` the
    count in its record, ``head``: it is the first message of its queue in the pop (nothing before it is out).
    Only the head can have failed before; behind it, the broker's count is pops it waited through."""
    if head and order_count is not None and order_count > stored:
        return order_count
    return stored


def _set_reconsume_times(entry: PopEntry, times: int) -> None:
    """The count the handler sees (and the DLQ decision reads), in the record the worker decodes."""
    msg = entry.message
    if times != msg.reconsume_times:
        msg.record = memoryview(with_reconsume_times(msg.record, times))
        msg.reconsume_times = times
