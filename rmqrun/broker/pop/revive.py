"""Revive: popped messages not acked by popTime + invisibleTime go to the pop retry topic (``PopReviveService``).

One task sleeps until the earliest checkpoint is due (or a new one is added), then, for every un-acked
offset of each due checkpoint, re-reads the message and stores a copy in ``%RETRY%<group>_<topic>`` queue 0
(created on demand with one read/write queue; a checkpoint of the retry topic itself revives into the same
retry topic) with ``reconsumeTimes + 1`` and ``1ST_POP_TIME`` kept (set to the pop time the first time).
Only once every copy is stored is the checkpoint dropped, so a stop or crash in between revives again on
restart (at least once). A message the store no longer has (retention) is skipped. In ASYNC flush mode the
task also fsyncs the checkpoint log once a second, and it saves the order-mode state when it changed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loguru import logger

from rmqrun.aio import cancel_and_wait, wait_event
from rmqrun.broker.messages import InnerMessage, read_stored
from rmqrun.broker.pop.checkpoint import PopCheckpoint
from rmqrun.broker.pop.service import PopService, now_ms, record_queue_offset
from rmqrun.broker.store import GetMessageStatus
from rmqrun.broker.topics import PERM_READ, PERM_WRITE
from rmqrun.protocol.pop import PROPERTY_FIRST_POP_TIME, PROPERTY_POP_CK
from rmqrun.topic_names import is_retry_topic, pop_retry_topic
from rmqrun.remoting.message_props import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_RETRY_TOPIC

#: Longest sleep between looks at the table (also the ASYNC-mode fsync period).
TICK_S = 1.0
#: A revive that failed (a full disk) is tried again this much later.
RETRY_MS = 1000
#: The pop retry topic's queue count (PopAckConstants.retryQueueNum).
RETRY_QUEUE_NUMS = 1
#: A checkpoint's un-acked messages within this many offsets of each other are read from the store at once.
READ_SPAN = 64


class ReviveService:
    def __init__(self, pop: PopService) -> None:
        self.pop = pop
        self.broker: Any = pop.broker
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        #: epoch ms at which the sleeping pass loop wakes by itself; None while a pass runs
        self._sleep_until_ms: int | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    def wake(self, revive_at_ms: int | None = None) -> None:
        """A checkpoint was added: its revive time may be earlier than the one slept for.

        One comes with every pop, and waking the loop costs a pass and a new timed wait on the request
        path; a checkpoint that revives no earlier than the loop wakes by itself (``revive_at_ms``) leaves
        it asleep: the pass it would have run finds nothing due. None: wake in any case."""
        until = self._sleep_until_ms
        if revive_at_ms is not None and until is not None and revive_at_ms >= until:
            return
        self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None

    async def _run(self) -> None:
        log = self.pop.ck_log
        last_tick = 0.0
        while not self._stopping:
            self._wake.clear()
            try:
                for ck in log.due(now_ms()):
                    if await self.revive(ck):
                        log.remove(ck.key)
                    else:
                        log.reschedule(ck, now_ms() + RETRY_MS)
                if time.monotonic() - last_tick >= TICK_S:  # not on every wake: a wake comes with every pop
                    last_tick = time.monotonic()
                    await log.sync()
                    self._save_orders()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # pragma: no cover - a bug must not stop reviving
                logger.opt(exception=exc).error("POP revive pass failed")
            nxt = log.next_due()
            delay = TICK_S if nxt is None else min(TICK_S, max(0.0, (nxt - now_ms()) / 1000))
            self._sleep_until_ms = now_ms() + int(delay * 1000)
            try:
                await wait_event(self._wake, delay)
            finally:
                self._sleep_until_ms = None

    def _save_orders(self) -> None:
        """The order-mode state is saved on this task's tick (once a second when it changed)."""
        orders = self.pop.orders
        if orders is None:
            return
        try:
            orders.flush()
        except OSError as exc:
            logger.warning("saving the order-mode POP state failed, will retry: {}", exc)

    async def revive(self, ck: PopCheckpoint) -> bool:
        """Store every un-acked message of ``ck`` in its pop retry topic; False to try again later."""
        broker = self.broker
        retry = ck.topic if is_retry_topic(ck.topic) else pop_retry_topic(ck.group, ck.topic)
        pending = [o for o in ck.unacked()]
        if not pending:
            return True
        broker.topics.create_for_send_back(retry, RETRY_QUEUE_NUMS, PERM_READ | PERM_WRITE)
        done = 0
        records = self._read_pending(ck, pending)
        for offset in pending:
            if ck.is_acked(offset):  # acked while an earlier copy was being stored
                continue
            record = records.get(offset)
            if record is None:
                got = broker.store.get(ck.topic, ck.queue_id, offset, 1)
                if got.status is not GetMessageStatus.FOUND or not got.records:
                    logger.warning("POP revive: {}:{} offset {} is gone from the store, not revived", ck.topic,
                                   ck.queue_id, offset)
                    continue
                record = got.records[0]
            msg = self._retry_message(read_stored(record), retry, ck.pop_time)
            try:
                await broker.put_messages([msg])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("POP revive of {}:{} offset {} into {} failed, will retry: {!r}", ck.topic,
                               ck.queue_id, offset, retry, exc)
                return False
            ck.ack(offset)  # stored: a retry of this checkpoint must not store it twice
            self.pop.counters.revived += 1
            done += 1
        if done:
            broker.stats.on_pop_revive(ck.group, ck.topic, done)
        return True

    def _read_pending(self, ck: PopCheckpoint, pending: list[int]) -> dict[int, Any]:
        """The stored records of ``pending`` (ascending offsets) by offset, read in one store read when they
        lie within :data:`READ_SPAN` offsets (a pop's batch: a read per message was a fifth of a revive's CPU).
        An offset it does not give (gone, or past what one read returns) is read on its own by the caller."""
        first, last = pending[0], pending[-1]
        if last - first >= READ_SPAN or len(pending) == 1:
            return {}
        got = self.broker.store.get(ck.topic, ck.queue_id, first, last - first + 1)
        if got.status is not GetMessageStatus.FOUND:
            return {}
        return {record_queue_offset(r): r for r in got.records}

    def _retry_message(self, stored: Any, retry: str, pop_time: int) -> InnerMessage:
        props = stored.properties.copy()
        props.remove(PROPERTY_POP_CK)
        props.remove(PROPERTY_DELAY_TIME_LEVEL)  # revived now, not delayed again
        if props.get(PROPERTY_RETRY_TOPIC) is None:
            # the topic it was first sent to, as Java's reviveRetry keeps it: a dead letter made from the pop
            # retry topic names that as its origin (dlq --topic, redrive), not %RETRY%<group>_<topic>
            props.put(PROPERTY_RETRY_TOPIC, stored.topic)
        if stored.reconsume_times == 0 or props.get(PROPERTY_FIRST_POP_TIME) is None:
            props.put(PROPERTY_FIRST_POP_TIME, str(pop_time))
        address = self.broker.address
        return InnerMessage(topic=retry, queue_id=0, body=stored.body, properties=props,
                            properties_string=props.to_string(), flag=stored.flag, sys_flag=stored.sys_flag,
                            born_timestamp=stored.born_timestamp, born_host=address, store_host=address,
                            reconsume_times=stored.reconsume_times + 1)
