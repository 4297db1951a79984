"""Acks of finished POP messages, coalesced into BATCH_ACK_MESSAGE requests.

An ack per message is POP's main cost (one request and one broker write per
message; measured, half a no-op handler's throughput). Java's push consumer
sends one ACK_MESSAGE each; the 5.x broker also takes BATCH_ACK_MESSAGE (what
the 5.x proxy sends), which acks any number of messages of one broker in one
request. So a message whose call has ended waits a few ms for others to
finish, and they go together (at most ``ACK_BATCH_MAX`` per request): 10 ms
(``ACK_LINGER_S``) while requests fill up, growing to 0.1 s (``ACK_LINGER_MAX_S``,
and at most 1 % of the invisible time) while the timer finds them under half full,
so a slow consumer sends fewer, fuller requests. A broker that does not know batch acks gets one ACK_MESSAGE each.
Each message is acked with its newest receipt (after any extension). A message
queued for its ack no longer counts as un-acked for the pop loop's flow control
(Java decrements its PopProcessQueue once ``ackAsync`` is sent, not answered):
holding the slot through the linger and the round trip kept the pipeline at a few
messages and the loop idle; the job itself still waits for the broker's answer.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any, Awaitable, Callable, Protocol, Sequence

from loguru import logger

from rmqrun.client.pop_api import AckStatus, PopClient, PopNotSupportedError, RunReceipts
from rmqrun.consumer.pop_queue import OFFSET, OWN_RECEIPT, RECEIPT, RUN, PopEntry, PopProcessQueue
from rmqrun.model import MessageQueue
from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError

#: how long a finished message waits for others to share its ack request, at the least (a busy consumer's:
#: its requests fill up to ``ACK_BATCH_MAX`` before that)
ACK_LINGER_S = 0.01
ACK_BATCH_MAX = 256
#: the linger at the most: it doubles after each request its timer sent under half full (a slow consumer:
#: fewer requests, and fewer wake-ups of the broker, per message) and is back at ``ACK_LINGER_S`` once
#: ``ACK_BATCH_MAX`` messages fill a request first
ACK_LINGER_MAX_S = 0.1
#: and never more than this share of the invisible time, so an ack still reaches the broker well before its
#: message's invisibility lapses (a killed instance's lingering acks are lost as its un-acked messages are: they
#: come back after the invisible time either way)
ACK_LINGER_SHARE = 0.01


class AckContext(Protocol):
    """What the batcher uses of its engine (``pop_stats``: a PopStats, counted in ``acks``/``ack_failures``)."""

    config: Any
    pop_client: PopClient
    pop_stats: Any

    async def broker_addr(self, mq: MessageQueue) -> str: ...


@dataclass(slots=True, eq=False)
class _Waiter:
    """One :meth:`AckBatcher.ack_all` call's wait: how many of its messages have no answer yet, and the future
    set once none is left (one per job, not a future per message: their callbacks were a tenth of a no-op
    POP consumer's supervisor CPU)."""

    left: int
    done: "asyncio.Future[None]"

    def answered(self, n: int) -> None:
        self.left -= n
        if self.left <= 0 and not self.done.done():
            self.done.set_result(None)


@dataclass(slots=True, eq=False)
class _Pending:
    """Messages of one job on their way to one broker's next batch ack, with the receipts they ack with
    (a job's worth per object, not one per message); ``receipts`` None: each acks with its run's receipt
    (none has one of its own: the usual case, no receipt made per message)."""

    pq: PopProcessQueue
    entries: list[PopEntry]
    receipts: list[ReceiptHandle] | None
    waiter: _Waiter

    def cut(self, i: int, j: int | None = None) -> "_Pending":
        """Its messages ``i`` to ``j`` (a job split across requests, or by broker)."""
        return _Pending(self.pq, self.entries[i:j], None if self.receipts is None else self.receipts[i:j],
                        self.waiter)


_EXTENDING = attrgetter("extending")
_TOPIC = attrgetter("topic")  # a PopEntry is its message
_BROKER = attrgetter("broker_name")  # a receipt's, or a run's


class AckBatcher:
    def __init__(self, engine: AckContext, single_ack: Callable[[PopProcessQueue, PopEntry], Awaitable[None]]) -> None:
        self.engine = engine
        self.stats = engine.pop_stats
        self._single_ack = single_ack
        self._pending: dict[str, list[_Pending]] = defaultdict(list)
        #: messages in ``_pending`` per broker
        self._counts: dict[str, int] = defaultdict(int)
        self._timer: asyncio.TimerHandle | None = None
        #: False once a broker refused BATCH_ACK_MESSAGE: single acks from then on
        self.batch_supported = True
        #: how long the next timer waits (between ``ACK_LINGER_S`` and :attr:`linger_max`)
        self.linger = ACK_LINGER_S
        invisible_ms = getattr(engine.config, "pop_invisible_time_ms", None)
        share = ACK_LINGER_MAX_S if not invisible_ms else invisible_ms / 1000 * ACK_LINGER_SHARE
        self.linger_max = max(ACK_LINGER_S, min(ACK_LINGER_MAX_S, share))

    async def ack(self, pq: PopProcessQueue, entry: PopEntry) -> None:
        """Acknowledge one finished message; returns once the broker has answered (or the ack failed)."""
        await self.ack_all(pq, [entry])

    async def ack_all(self, pq: PopProcessQueue, entries: list[PopEntry]) -> None:
        """Acknowledge the finished messages of one job, each with its newest receipt; returns once the broker
        has answered for all of them (or their acks failed). One coroutine for the job, not a task per message,
        and the job's messages handled as one list (settled, out of flow control, queued) unless an
        extension of one of them is on the wire."""
        if not self.batch_supported:
            await asyncio.gather(*(self._single_ack(pq, entry) for entry in entries))
            return
        if not entries:
            return
        loop = asyncio.get_running_loop()
        waiter = _Waiter(len(entries), loop.create_future())
        receipts: list[ReceiptHandle] | None
        if any(map(_EXTENDING, entries)):
            receipts = [entry.settle_now() or await entry.settle() for entry in entries]  # waits for those
        elif any(map(OWN_RECEIPT, entries)):  # an extension's receipt: the message acks with it, not its run's
            receipts = list(map(RECEIPT, entries))
        else:
            receipts = None
        pq.done_all(entries)  # outcomes decided, acks on their way: flow control lets the next pop go
        brokers = list(map(_BROKER, set(map(RUN, entries)) if receipts is None else receipts))
        if brokers.count(brokers[0]) == len(brokers):
            self._queue(brokers[0], _Pending(pq, entries, receipts, waiter))
        else:
            for broker_name in set(brokers):
                picked = [i for i, e in enumerate(entries) if e.run.broker_name == broker_name]
                self._queue(broker_name, _Pending(pq, [entries[i] for i in picked],
                                                  None if receipts is None else [receipts[i] for i in picked],
                                                  waiter))
        if self._timer is None and self._pending:
            self._timer = loop.call_later(self.linger, self._flush_all)
        await waiter.done  # the job's own future: a cancelled job cancels it, and answered() skips a done one

    def _queue(self, broker_name: str, pending: _Pending) -> None:
        self._pending[broker_name].append(pending)
        self._counts[broker_name] += len(pending.entries)
        if self._counts[broker_name] >= ACK_BATCH_MAX:
            self.linger = ACK_LINGER_S  # requests fill up before the timer: a busy consumer
            self._flush_broker(broker_name)

    def _flush_all(self) -> None:
        self._timer = None
        if max(self._counts.values(), default=0) < ACK_BATCH_MAX // 2:  # the clock sent it, under half full
            self.linger = min(self.linger * 2, self.linger_max)
        for broker_name in list(self._pending):
            self._flush_broker(broker_name)

    def _flush_broker(self, broker_name: str) -> None:
        """Send what waits for ``broker_name``, in requests of ``ACK_BATCH_MAX`` messages at most."""
        items = self._pending.pop(broker_name, [])
        self._counts.pop(broker_name, None)
        request: list[_Pending] = []
        room = ACK_BATCH_MAX
        for item in items:
            while item.entries:
                if room == 0:
                    asyncio.ensure_future(self._send(broker_name, request))
                    request, room = [], ACK_BATCH_MAX
                if len(item.entries) <= room:
                    request.append(item)
                    room -= len(item.entries)
                    break
                # a job split across two requests
                request.append(item.cut(0, room))
                item = item.cut(room)
                room = 0
        if request:
            asyncio.ensure_future(self._send(broker_name, request))

    async def _send(self, broker_name: str, items: list[_Pending]) -> None:
        n = sum(len(i.entries) for i in items)
        try:
            first = items[0].entries[0].message
            addr = await self.engine.broker_addr(MessageQueue(first.ack_topic, broker_name, first.queue_id))
            status = await self.engine.pop_client.batch_ack_receipts(
                addr, group=self.engine.config.group, broker_name=broker_name, groups=_job_groups(items))
        except BrokerError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED or isinstance(exc, PopNotSupportedError):
                self.batch_supported = False
                logger.info("broker {} does not take batch acks; acking one message per request", broker_name)
                await asyncio.gather(*(self._single_ack(i.pq, entry) for i in items for entry in i.entries))
            else:
                self._failed(n, exc)
        except Exception as exc:
            self._failed(n, exc)
        else:
            if status is AckStatus.OK:
                self.stats.acks += n
            else:
                self._failed(n, "the broker has none of them at those receipts")
        finally:
            for i in items:
                i.waiter.answered(len(i.entries))

    def _failed(self, n: int, exc: BaseException | str) -> None:
        self.stats.ack_failures += n
        logger.warning("an ack of {} message(s) failed ({}); they come back after their invisible time", n, exc)


def _job_groups(items: list[_Pending]) -> list[tuple[str, Sequence[ReceiptHandle]]]:
    """The receipts of a request's jobs with the topic their messages were sent to (what a batch ack names):
    a job whose messages ack with their runs' receipts (``receipts`` None) as a group per run, its messages'
    offsets (:class:`RunReceipts`: a job goes queue by queue in offset order, so a run's messages are side
    by side, one step per run); any other as a group per job (its messages nearly always share a topic:
    checked in C, one step per job), which the client turns into bitsets run by run in C."""
    out: list[tuple[str, Sequence[ReceiptHandle]]] = []
    for item in items:
        if item.receipts is None:
            offsets = list(map(OFFSET, item.entries))
            i = 0
            for run, same in groupby(map(RUN, item.entries)):
                j = i + len(list(same))
                out.append((run.topic, RunReceipts(run, offsets[i:j])))
                i = j
            continue
        topics = set(map(_TOPIC, item.entries))
        if len(topics) == 1:
            out.append((topics.pop(), item.receipts))
        else:
            split: dict[str, list[ReceiptHandle]] = {}
            for entry, receipt in zip(item.entries, item.receipts):
                split.setdefault(entry.message.topic, []).append(receipt)
            out.extend(split.items())
    return out
