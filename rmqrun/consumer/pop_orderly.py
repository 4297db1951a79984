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
* otherwise it and every message after it become invisible for
  ``suspend_current_queue_time_ms`` (CHANGE_MESSAGE_INVISIBLETIME): the queue
  stays blocked that long, then the broker hands the batch out again from the
  failed message, to whichever instance pops first.

A job cut short (its worker died, a time limit) is treated like a failure of
its first unfinished message; one never run (a stop) is left alone: the batch
comes back when its invisibility lapses, the queue blocked until then. Long
calls are extended as in concurrent POP, which keeps the queue blocked for
exactly as long as its batch is being worked on.
"""

from __future__ import annotations

import time
from typing import Sequence

from loguru import logger

from rmqrun.consumer import defaults as d
from rmqrun.consumer.dead_letters import Failure
from rmqrun.consumer.executor import ConsumeJob, JobResult, Verdict
from rmqrun.consumer.orderly_failures import clamp_suspend_ms
from rmqrun.consumer.pop_consume import PopConsumeService
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue, PopRequest
from rmqrun.consumer.retry import with_reconsume_times
from rmqrun.model import MessageQueue


class PopOrderlyConsumeService(PopConsumeService):
    def submit(self, req: PopRequest, entries: Sequence[PopEntry]) -> None:
        """One task per queue of the pop (the broker gives each queue's batch to one client at a time)."""
        req.pq.add(entries)
        by_queue: dict[tuple[str, int], list[PopEntry]] = {}
        for entry in entries:
            _count_as_reconsume(entry)
            by_queue.setdefault((entry.message.ack_topic, entry.message.queue_id), []).append(entry)
        for batch in by_queue.values():
            batch.sort(key=lambda e: e.message.queue_offset)
            self._spawn(req, batch)

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
                moved_on, suspend_ms = await self._run_chunk(req, mq, live)
                if moved_on < len(live):
                    rest, i = entries[i + moved_on:], len(entries)
                    if suspend_ms is None:
                        self._release(pq, rest)
                    else:
                        await self._suspend(pq, rest, suspend_ms)
                    return
                i += len(live)
        except BaseException:
            self._release(pq, entries[i:])
            raise

    async def _run_chunk(self, req: PopRequest, mq: MessageQueue, chunk: list[PopEntry]) -> tuple[int, int | None]:
        """Run one orderly job: how many of its messages are settled in order (acked or dead-lettered), and
        the suspend time (ms) for the rest of the batch when a failure stopped it (None: leave the rest)."""
        pq = req.pq
        job = ConsumeJob(mq, True, [e.message.record for e in chunk], [e.message.queue_offset for e in chunk],
                         pq=pq)
        started = time.monotonic()
        try:
            result = await self.engine.executor.run(job)
        except Exception as exc:  # not run at all (shutting down): the batch comes back when it lapses
            logger.debug("orderly POP job of {} not run: {}", mq, exc)
            return 0, None
        if any(v is not Verdict.NOT_RUN for v in result.verdicts):
            self.engine.stats.record(len(chunk), time.monotonic() - started, result, job.records)
            self.engine.status.on_consumed(req.mq.topic, result, time.monotonic() - started)
        return await self._settle_chunk(pq, mq, chunk, result)

    async def _settle_chunk(self, pq: PopProcessQueue, mq: MessageQueue, chunk: list[PopEntry],
                            result: JobResult) -> tuple[int, int | None]:
        verdicts = list(result.verdicts) + [Verdict.NOT_RUN] * (len(chunk) - len(result.verdicts))
        verdicts = [Verdict.SUCCESS if v in (Verdict.COMMIT, Verdict.ROLLBACK) else v for v in verdicts]
        for i, (entry, verdict) in enumerate(zip(chunk, verdicts)):
            if verdict is Verdict.SUCCESS:
                await self._ack(pq, entry)
                continue
            if verdict is Verdict.NOT_RUN and not result.error:
                return i, None  # never run (a stop, a dropped assignment): left to come back
            if verdict is Verdict.UNDECODABLE:
                if await self.engine.dead_letter_undecodable(mq, entry.message.record, entry.message.queue_offset,
                                                             result.error):
                    self.stats.dead_lettered += 1
                    await self._ack(pq, entry)
                    continue
            elif verdict is not Verdict.NOT_RUN:
                self.engine.stats.failed += 1
                if await self._dead_letter_at_limit(mq, entry, result):
                    await self._ack(pq, entry)
                    continue
            return i, result.suspend_ms
        return len(chunk), None

    async def _dead_letter_at_limit(self, mq: MessageQueue, entry: PopEntry, result: JobResult) -> bool:
        msg = entry.message
        limit = self.config.effective_max_reconsume_times
        if msg.reconsume_times < limit:
            return False
        if not await self.engine.send_back.send_back(msg.record, msg.receipt.broker_name, -1, limit,
                                                     Failure(mq, msg.queue_offset, result.error)):
            return False
        self.stats.dead_lettered += 1
        return True

    async def _suspend(self, pq: PopProcessQueue, rest: list[PopEntry], suspend_ms: int) -> None:
        """The failed message and all after it: invisible (so the queue blocked) for the suspend time."""
        delay_ms = clamp_suspend_ms(suspend_ms, self.config.suspend_current_queue_time_ms)
        for entry in rest:
            await self._change(pq, entry, max(delay_ms, d.SUSPEND_CURRENT_QUEUE_TIME_MIN_MS))

    async def _change(self, pq: PopProcessQueue, entry: PopEntry, invisible_ms: int) -> None:
        receipt = await entry.settle()
        try:
            addr = await self.engine.broker_addr(MessageQueue(entry.message.ack_topic, receipt.broker_name,
                                                              entry.message.queue_id))
            await self.engine.pop_client.change_invisible(addr, group=self.config.group, message=entry.message,
                                                          invisible_time_ms=invisible_ms, receipt=receipt)
            self.stats.nacks += 1
        except Exception as exc:
            logger.warning("suspending {} queue {} offset {} failed ({}); the queue waits for its invisible time",
                           entry.message.ack_topic, entry.message.queue_id, entry.message.queue_offset, exc)
        finally:
            pq.done(entry)


def _count_as_reconsume(entry: PopEntry) -> None:
    """The broker's delivery count becomes the message's reconsume count, in the record the worker decodes."""
    msg = entry.message
    if msg.order_count is not None and msg.order_count > msg.reconsume_times:
        msg.record = memoryview(with_reconsume_times(msg.record, msg.order_count))
        msg.reconsume_times = msg.order_count
