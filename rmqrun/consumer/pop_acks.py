"""Acks of finished POP messages, coalesced into BATCH_ACK_MESSAGE requests.

An ack per message is POP's main cost (one request and one broker write per
message; measured, half a no-op handler's throughput). Java's push consumer
sends one ACK_MESSAGE each; the 5.x broker also takes BATCH_ACK_MESSAGE (what
the 5.x proxy sends), which acks any number of messages of one broker in one
request. So a message whose call has ended waits at most ``ACK_LINGER_S`` for
others to finish, and they go together (at most ``ACK_BATCH_MAX`` per
request). A broker that does not know batch acks gets one ACK_MESSAGE each.
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
from typing import Any, Awaitable, Callable, Protocol

from loguru import logger

from rmqrun.client.pop_api import AckStatus, PopClient, PopNotSupportedError
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue
from rmqrun.model import MessageQueue
from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError

#: how long a finished message waits for others to share its ack request
ACK_LINGER_S = 0.01
ACK_BATCH_MAX = 64


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

    def one_answered(self) -> None:
        self.left -= 1
        if self.left <= 0 and not self.done.done():
            self.done.set_result(None)


@dataclass(slots=True, eq=False)
class _Pending:
    pq: PopProcessQueue
    entry: PopEntry
    receipt: ReceiptHandle
    waiter: _Waiter


class AckBatcher:
    def __init__(self, engine: AckContext, single_ack: Callable[[PopProcessQueue, PopEntry], Awaitable[None]]) -> None:
        self.engine = engine
        self.stats = engine.pop_stats
        self._single_ack = single_ack
        self._pending: dict[str, list[_Pending]] = defaultdict(list)
        self._timer: asyncio.TimerHandle | None = None
        #: False once a broker refused BATCH_ACK_MESSAGE: single acks from then on
        self.batch_supported = True

    async def ack(self, pq: PopProcessQueue, entry: PopEntry) -> None:
        """Acknowledge one finished message; returns once the broker has answered (or the ack failed)."""
        await self.ack_all(pq, [entry])

    async def ack_all(self, pq: PopProcessQueue, entries: list[PopEntry]) -> None:
        """Acknowledge the finished messages of one job, each with its newest receipt; returns once the broker
        has answered for all of them (or their acks failed). One coroutine for the job, not a task per message."""
        if not self.batch_supported:
            await asyncio.gather(*(self._single_ack(pq, entry) for entry in entries))
            return
        if not entries:
            return
        loop = asyncio.get_running_loop()
        waiter = _Waiter(len(entries), loop.create_future())
        pending = self._pending
        for entry in entries:
            receipt = entry.settle_now() or await entry.settle()  # waits only for an extension on the wire
            pq.done(entry)  # its outcome is decided and its ack on its way: flow control lets the next pop go
            queue = pending[receipt.broker_name]
            queue.append(_Pending(pq, entry, receipt, waiter))
            if len(queue) >= ACK_BATCH_MAX:
                self._flush_broker(receipt.broker_name)
        if self._timer is None and pending:
            self._timer = loop.call_later(ACK_LINGER_S, self._flush_all)
        await asyncio.shield(waiter.done)

    def _flush_all(self) -> None:
        self._timer = None
        for broker_name in list(self._pending):
            self._flush_broker(broker_name)

    def _flush_broker(self, broker_name: str) -> None:
        items = self._pending.pop(broker_name, [])
        if items:
            asyncio.ensure_future(self._send(broker_name, items))

    async def _send(self, broker_name: str, items: list[_Pending]) -> None:
        try:
            first = items[0].entry.message
            addr = await self.engine.broker_addr(MessageQueue(first.ack_topic, broker_name, first.queue_id))
            status = await self.engine.pop_client.batch_ack(
                addr, group=self.engine.config.group, broker_name=broker_name,
                acks=[(i.entry.message, i.receipt) for i in items])
        except BrokerError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED or isinstance(exc, PopNotSupportedError):
                self.batch_supported = False
                logger.info("broker {} does not take batch acks; acking one message per request", broker_name)
                await asyncio.gather(*(self._single_ack(i.pq, i.entry) for i in items))
            else:
                self._failed(items, exc)
        except Exception as exc:
            self._failed(items, exc)
        else:
            if status is AckStatus.OK:
                self.stats.acks += len(items)
            else:
                self._failed(items, "the broker has none of them at those receipts")
        finally:
            for i in items:
                i.waiter.one_answered()

    def _failed(self, items: list[_Pending], exc: BaseException | str) -> None:
        self.stats.ack_failures += len(items)
        logger.warning("an ack of {} message(s) failed ({}); they come back after their invisible time", len(items),
                       exc)
