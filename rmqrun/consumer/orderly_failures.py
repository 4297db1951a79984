"""A failed orderly call: whose retry it counts, and when its messages go to the DLQ (both orderly modes).

Java's ``checkReconsumeTimes`` judges the messages of the listener call that failed:
each one below ``maxReconsumeTimes`` has its count raised and the queue suspends;
each one at it is sent back for the broker to dead-letter. The orderly services of
rmqrun (by queue and by key) share that rule here, with two differences that keep
the count exact:

* **only messages that ran count.** A job carries several calls, and the worker
  stops at the first call that does not succeed; the messages after it come back
  NOT_RUN. They are not part of the failed call: their count is not raised and
  they are never dead-lettered for a failure they did not have. (The failed call
  used to be taken as the next ``consume_message_batch_max_size`` messages, so
  with a one-message handler the NOT_RUN ones behind it were counted too and, at
  the limit, dead-lettered without ever being handled.)
* **per message, in order.** The messages of a call reach the limit in queue
  order (an older one was in every failed call a newer one was in), so those at
  the limit are a prefix of the call: they go to the DLQ one after another, and
  the rest of the call, below the limit, is retried after the suspension. Waiting
  for *every* message of a call to reach the limit instead (as before) made a
  message retried beyond the limit whenever a newer message joined its call
  later: ``max_reconsume_times=1`` and three calls on the same message.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from rmqrun.consumer import defaults as d
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.dead_letters import Failure
from rmqrun.consumer.process_queue import QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.retry import SendBack, decode_for_retry, reconsume_times, with_reconsume_times
from rmqrun.model import MessageQueue, RecordData, Status
from rmqrun.remoting.errors import ProtocolError


class FailureContext(Protocol):
    """What judging a failed call uses of the push consumer."""

    config: ConsumerConfig
    send_back: SendBack

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool: ...


def clamp_suspend_ms(ms: int, default_ms: int) -> int:
    """suspendCurrentQueueTimeMillis as Java bounds it (10..30000 ms; negative = the configured default)."""
    if ms < 0:
        ms = default_ms
    return max(d.SUSPEND_CURRENT_QUEUE_TIME_MIN_MS, min(d.SUSPEND_CURRENT_QUEUE_TIME_MAX_MS, ms))


def failed_call(entries: Sequence[QueuedMessage], verdicts: Sequence[Status], max_size: int) -> list[QueuedMessage]:
    """The messages of the call that failed: from the first, as long as they share its verdict.

    ``entries`` start at the failed message; ``verdicts`` are theirs. A one-message
    handler's failed call is that message alone (the rest of the job is NOT_RUN);
    a batch handler's is its whole chunk, at most ``max_size`` messages.
    """
    if not entries:
        return []
    bad = verdicts[0]
    n = 1
    while n < min(len(entries), max_size) and verdicts[n] is bad:
        n += 1
    return list(entries[:n])


async def suspend_or_dlq(engine: FailureContext, req: PullRequest, call: Sequence[QueuedMessage], suspend_ms: int,
                         key: str | None = None, error: str | None = None) -> tuple[int, float]:
    """checkReconsumeTimes for one failed call: dead-letter the prefix at the limit, count a retry for the rest.

    Returns (how many messages of the call, from its first, reached the DLQ and are done;
    seconds to suspend: 0 when the whole call moved on). Only in clustering mode does a
    message go to the DLQ (broadcasting has none, as in Java). ``key`` (key mode) and
    ``error`` (the call's) go into the one dead-letter line the send-back logs.
    """
    cfg = engine.config
    limit = cfg.effective_max_reconsume_times
    moved = 0
    if cfg.clustering:
        while moved < len(call) and reconsume_times(call[moved].payload) >= limit:
            if not await dead_letter(engine, req, call[moved], limit, key, error):
                break  # the broker did not take it: it stays first in line, and is retried
            moved += 1
    if moved == len(call):
        return moved, 0.0
    for e in call[moved:]:
        e.payload = with_reconsume_times(e.payload, reconsume_times(e.payload) + 1)
    return moved, clamp_suspend_ms(suspend_ms, cfg.suspend_current_queue_time_ms) / 1000


async def dead_letter(engine: FailureContext, req: PullRequest, entry: QueuedMessage, limit: int,
                      key: str | None = None, error: str | None = None) -> bool:
    """Send one message back at its limit (the broker moves it to ``%DLQ%<group>``); True once it is there.
    The send-back counts it and logs its one dead-letter line (:mod:`.dead_letters`)."""
    try:
        msg = decode_for_retry(entry.payload, req.mq.broker_name)
    except ProtocolError:
        return await engine.dead_letter_undecodable(req.mq, entry.payload, entry.offset, error)
    detail = f"key {key!r}: {error or 'none reported'}" if key is not None else error
    return await engine.send_back.republish(msg, limit, msg.reconsume_times, Failure(req.mq, entry.offset, detail))

