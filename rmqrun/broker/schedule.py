"""Delayed delivery: retries and ``delayTimeLevel`` messages (``ScheduleMessageService``).

A message with a delay level is not stored in its topic but in queue
``level - 1`` of SCHEDULE_TOPIC_XXXX, with its real topic and queue kept in
the REAL_TOPIC / REAL_QID properties (:meth:`InnerMessage.divert_to_schedule`).
All messages of one level have the same delay, so each level's queue is in
due-time order and one task per level is enough: it delivers the head of its
queue when due, sleeps until the next one is, and sleeps until something
arrives when the queue is drained.

Delivery rebuilds the message like ``messageTimeup`` (same body, born time and
host, reconsume count; stored properties keep DELAY, REAL_TOPIC and REAL_QID,
as the real broker's do) and stores it in the real topic, durably in SYNC
flush mode, before the level's offset moves past it. A delivery and the offset
move that covers it are one step a stop cannot split: the step runs in its own
task, shielded from the level task's cancellation, and :meth:`ScheduleService.stop`
waits for the steps in flight before it saves, so after a clean stop every
message stored in its real topic is behind the saved offset and a restart
delivers none of them again. The offsets are saved to
``config/delayOffset.json`` periodically and at stop, so a restart resumes
where delivery stopped; a crash between a delivery and the next save delivers
those messages again (at least once, like RocketMQ).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Awaitable, Callable

from loguru import logger

from rmqrun.aio import cancel_and_wait
from rmqrun.broker.messages import SCHEDULE_TOPIC, InnerMessage, StoredMessage, read_stored
from rmqrun.broker.store import DiskFullError, GetMessageStatus, MessageStore
from rmqrun.broker.store.json_file import JsonFile
from rmqrun.remoting.message_props import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
)

DELAY_OFFSET_FILE = "delayOffset.json"
#: Back-off after a failed delivery (RocketMQ DELAY_FOR_A_WHILE is 100 ms).
RETRY_DELAY_S = 0.1
#: Back-off while the store refuses writes for a full disk (RocketMQ DELAY_FOR_A_PERIOD, 10 s):
#: retention needs a check or two to free space, and retrying every 100 ms only floods the log.
DISK_FULL_RETRY_S = 10.0
BATCH = 32

Deliver = Callable[[InnerMessage], Awaitable[object]]


def message_timeup(stored: StoredMessage) -> InnerMessage | None:
    """The message to deliver for a due schedule record; None if it names no real queue."""
    real_topic = stored.properties.get(PROPERTY_REAL_TOPIC)
    try:
        real_qid = int(stored.properties.get(PROPERTY_REAL_QUEUE_ID) or "")
    except ValueError:
        return None
    if not real_topic:
        return None
    props = stored.properties.copy()
    stored_string = props.to_string()  # re-serialised before the map changes, as in Java
    props.put(PROPERTY_WAIT_STORE_MSG_OK, "false")
    props.remove(PROPERTY_DELAY_TIME_LEVEL)
    return InnerMessage(
        topic=real_topic, queue_id=real_qid, body=stored.body, properties=props,
        properties_string=stored_string, flag=stored.flag, sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp, born_host=stored.born_host, store_host=stored.store_host,
        reconsume_times=stored.reconsume_times,
    )


class ScheduleService:
    def __init__(self, store: MessageStore, delay_levels_ms: list[int], deliver: Deliver, *,
                 persist_interval_s: float = 10.0, offsets_path: Path | None = None) -> None:
        self.store = store
        self.delays = list(delay_levels_ms)
        self._deliver = deliver
        self._file = JsonFile(offsets_path or store.data_dir / "config" / DELAY_OFFSET_FILE)
        self.offsets: dict[int, int] = {}
        self._saved: dict[int, int] = {}
        self._events = {level: asyncio.Event() for level in range(1, len(self.delays) + 1)}
        self._tasks: list[asyncio.Task[None]] = []
        #: Delivery steps under way (see :meth:`_deliver_and_record`); stop() waits for them.
        self._steps: set[asyncio.Task[bool]] = set()
        self._persist_interval = persist_interval_s
        self._stopping = False
        #: Messages delivered since start, for tests and the log.
        self.delivered = 0
        #: Levels whose delivery waits for a full disk (logged once per episode).
        self._disk_full_levels: set[int] = set()

    @property
    def max_level(self) -> int:
        return len(self.delays)

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        data = self._file.load().data
        table = (data or {}).get("offsetTable") or {} if isinstance(data, dict) else {}
        for key, value in table.items():
            try:
                level, offset = int(key), int(value)
            except (TypeError, ValueError):
                continue
            if 1 <= level <= self.max_level:
                # correctDelayOffset: clamp into what the queue still holds.
                lo = self.store.min_offset(SCHEDULE_TOPIC, level - 1)
                hi = self.store.max_offset(SCHEDULE_TOPIC, level - 1)
                self.offsets[level] = min(max(offset, lo), hi)
        self._saved = dict(self.offsets)

    def start(self) -> None:
        self.load()
        self.store.arrival_listeners.append(self._on_arrival)
        loop = asyncio.get_running_loop()
        for level in range(1, self.max_level + 1):
            self._tasks.append(loop.create_task(self._run_level(level), name=f"schedule-level-{level}"))
        self._tasks.append(loop.create_task(self._persist_loop(), name="schedule-persist"))

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        while self._steps:  # a step outlives its cancelled level task: its offset must be in the save below
            await asyncio.gather(*self._steps, return_exceptions=True)
        if self._on_arrival in self.store.arrival_listeners:
            self.store.arrival_listeners.remove(self._on_arrival)
        self.persist()

    def persist(self) -> None:
        if self.offsets == self._saved:
            return
        snapshot = dict(self.offsets)
        self._file.save({"offsetTable": {str(k): v for k, v in sorted(snapshot.items())}})
        self._saved = snapshot

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            event = self._events.get(queue_id + 1)
            if event is not None:
                event.set()

    async def _persist_loop(self) -> None:
        failing = False  # logged once when saving starts failing (a full disk) and once when it works again
        while True:
            await asyncio.sleep(self._persist_interval)
            try:
                self.persist()
            except OSError as exc:
                if not failing:
                    logger.error("saving the delay offsets in {} failed: {} (logged again only once it works "
                                 "again)", self.store.data_dir, exc.strerror or exc)
                failing = True
            else:
                if failing:
                    logger.info("saving the delay offsets in {} works again", self.store.data_dir)
                failing = False

    # ------------------------------------------------------------------ delivery

    async def _run_level(self, level: int) -> None:
        queue_id = level - 1
        delay_ms = self.delays[level - 1]
        event = self._events[level]
        while not self._stopping:
            event.clear()
            offset = self.offsets.get(level, 0)
            result = self.store.get(SCHEDULE_TOPIC, queue_id, offset, BATCH)
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                self.offsets[level] = result.next_begin_offset
                continue
            if result.status != GetMessageStatus.FOUND:
                await event.wait()
                continue
            for record in result.records:
                stored = read_stored(record)
                now = int(time.time() * 1000)
                due = stored.store_timestamp + delay_ms
                if due > now + delay_ms:
                    due = now  # correctDeliverTimestamp: a clock that went back does not stall delivery
                if due > now:
                    await asyncio.sleep((due - now) / 1000.0)
                    break  # re-read from this offset: the record is due now
                if not await self._deliver_and_record(stored, level):
                    await asyncio.sleep(DISK_FULL_RETRY_S if self.store.disk_full else RETRY_DELAY_S)
                    break

    async def _deliver_and_record(self, stored: StoredMessage, level: int) -> bool:
        """Deliver one due record and move its level's offset past it, as one step.

        The level task is cancelled by stop(), and a cancel landing while the
        delivery waits for its SYNC flush used to leave the message stored in its
        real topic with the offset still before it: the next start delivered it
        again. So the step runs in a task of its own that the cancel does not reach
        (shield), and stop() waits for it before saving the offsets.
        """
        step = asyncio.get_running_loop().create_task(self._delivery_step(stored, level),
                                                      name=f"schedule-delivery-{level}")
        self._steps.add(step)
        step.add_done_callback(self._steps.discard)
        return await asyncio.shield(step)

    async def _delivery_step(self, stored: StoredMessage, level: int) -> bool:
        if not await self._deliver_one(stored, level):
            return False
        self.offsets[level] = stored.queue_offset + 1
        return True

    async def _deliver_one(self, stored: StoredMessage, level: int) -> bool:
        msg = message_timeup(stored)
        if msg is None:
            logger.warning("schedule level {} offset {}: no REAL_TOPIC/REAL_QID, skipped", level,
                           stored.queue_offset)
            return True
        try:
            await self._deliver(msg)
        except asyncio.CancelledError:
            raise
        except DiskFullError as exc:
            if level not in self._disk_full_levels:  # once per level and disk-full episode
                logger.warning("delayed messages of level {} wait: {}; delivery retries every {:g} s",
                               level, exc, DISK_FULL_RETRY_S)
                self._disk_full_levels.add(level)
            return False
        except Exception as exc:
            logger.warning("delivering delayed message {} to {} failed, will retry: {!r}", stored.offset_msg_id,
                           msg.topic, exc)
            return False
        self._disk_full_levels.discard(level)
        self.delivered += 1
        return True
