"""Rebalance and orderly queue locks (Java ``RebalanceImpl`` / ``RebalancePushImpl``).

On start, every 20 s and whenever a broker says the group changed, each
subscribed topic's queues are allocated among the group's live members (the
broker's consumer list) by the configured strategy, and this client's table
of queues is brought in line:

* a queue no longer ours is dropped: its pull stops, its offset is persisted
  and forgotten, and for orderly consumption it is unlocked on the broker, but
  only once no job of it is in flight (so no two clients consume it at once);
* a queue newly ours starts at the committed offset, or where
  consume-from-where says when the group has none; for orderly consumption
  it is added only if the broker lock is granted.

Locks are renewed for all orderly queues every 20 s; a queue whose renewal
fails is marked unlocked and neither pulled nor consumed until relocked. A
queue locked again after a gap restarts from the broker's offset, and its
offset is committed only while its lock is held without one (``lock_gap.py``).

A topic deleted under a running consumer: the client keeps a route the name
server no longer has (a transient gap must not empty the table), so its
queues used to stay, every pull logging the broker's refusal with its FAQ
link. When a broker refuses a pull with "topic not exist" the puller tells
:meth:`Rebalancer.suspect`; the next pass asks the name server afresh and, if
it does not know the topic either, drops the topic's queues with one warning.
The topic is picked up again (one info line) once it exists.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import cast

from loguru import logger

from rmqrun.aio import wait_event
from rmqrun.consumer import defaults as d
from rmqrun.consumer.allocate_nearby import AllocateMachineRoomNearby, RoomUnknown, check_own_room
from rmqrun.consumer.allocate_settings import configured_strategy
from rmqrun.consumer.context import OrderedConsumeService, RebalanceContext
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.topic_names import is_retry_topic


def _now_ms() -> int:
    return int(time.time() * 1000)


class Rebalancer:
    def __init__(self, engine: RebalanceContext) -> None:
        self.engine = engine
        self.config = engine.config
        self.strategy = configured_strategy(self.config)
        if isinstance(self.strategy, AllocateMachineRoomNearby) and self.config.clustering:
            check_own_room(self.strategy, engine.instance.client_id, self.config.machine_room or "")
        #: the last allocation error per topic (a broker or consumer in no known room), said once
        self._allocation_errors: dict[str, str] = {}
        self._lock = asyncio.Lock()  # one rebalance at a time
        self.rebalances = 0
        self.lock_losses = 0
        #: subscribed topics the name server does not know (told once); topics a broker said it does not have
        self.missing: set[str] = set()
        self._suspects: set[str] = set()

    @property
    def pass_lock(self) -> asyncio.Lock:
        """Held through each pass: hold it to change which topics are pulled (``mode_follow.py`` takes a
        topic's queues out of the table) without a pass in progress acting on half of the change."""
        return self._lock

    @property
    def orderly_locks(self) -> bool:
        return self.config.orderly and self.config.clustering

    def _orderly_service(self) -> OrderedConsumeService:
        """The consume service, known to be an orderly one (by queue or by key) whenever locks are taken."""
        return cast(OrderedConsumeService, self.engine.consume_service)

    # ----------------------------------------------------------------- rebalance

    async def rebalance(self) -> bool:
        """One pass over all subscribed topics; True when the assignment changed."""
        async with self._lock:
            changed = False
            for topic in self.engine.subscribed_topics():
                try:
                    changed |= await self._rebalance_topic(topic)
                except Exception as exc:
                    (logger.debug if self.engine.instance.broker.reported(exc) else logger.warning)(
                        "rebalance of topic {} failed: {}", topic, exc)
            # queues of topics we no longer subscribe to
            for mq in [mq for mq in self.engine.table if mq.topic not in self.engine.subscribed_topics()]:
                req = self.engine.table[mq]
                req.pq.dropped = True
                if await self._remove_unnecessary(req):
                    self.engine.remove_request(mq)
                    changed = True
            self.rebalances += 1
            if changed:
                logger.info("rebalance: now consuming {} queue(s): {}", len(self.engine.table),
                            ", ".join(f"{mq.topic}@{mq.broker_name}:{mq.queue_id}" for mq in sorted(self.engine.table)))
            return changed

    def suspect(self, topic: str) -> None:
        """A broker refused a pull of ``topic`` as not existing: the next pass asks the name server afresh."""
        self._suspects.add(topic)

    async def _topic_queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues, or None when the name server does not know it (its queues are dropped)."""
        refresh = topic in self._suspects
        self._suspects.discard(topic)
        try:
            mq_all = await self.engine.instance.subscribe_queues(topic, refresh=refresh)
        except TopicNotExistError:
            self.engine.instance.forget_route(topic)
            if topic not in self.missing and not is_retry_topic(topic):
                held = sum(1 for mq in self.engine.table if mq.topic == topic)
                logger.warning("topic {} does not exist on the name server (deleted?): its {} queue(s) here are "
                               "dropped; it is picked up again once it exists", unwrap(self.config.namespace, topic),
                               held)
            self.missing.add(topic)
            return None
        if topic in self.missing:
            self.missing.discard(topic)
            if not is_retry_topic(topic):
                logger.info("topic {} exists again", unwrap(self.config.namespace, topic))
        return mq_all

    async def _rebalance_topic(self, topic: str) -> bool:
        mq_all = await self._topic_queues(topic)
        if mq_all is None:
            return await self._update_table(topic, set())
        if not mq_all:
            return False
        if self.config.clustering:
            cid_all = await self._consumer_ids(topic, mq_all)
            if cid_all is None:  # no broker answered: said by the broker client's incident log or above
                return False
            if not cid_all:
                logger.warning("no consumer ids for group {} on topic {}", self.config.group, topic)
                return False
            try:
                mine = set(self.strategy.allocate(self.config.group, self.engine.instance.client_id,
                                                  sorted(mq_all), sorted(cid_all)))
            except RoomUnknown as exc:
                return self._allocation_failed(topic, str(exc))
            if self._allocation_errors.pop(topic, None) is not None:
                logger.info("topic {}: queues allocated again ({})", topic, self.strategy.name)
        else:
            mine = set(mq_all)
        return await self._update_table(topic, mine)

    def _allocation_failed(self, topic: str, error: str) -> bool:
        """Keep this topic's queues as they are (Java's rebalance does the same when allocate throws)."""
        if self._allocation_errors.get(topic) != error:
            logger.warning("topic {}: cannot allocate queues, keeping the current ones: {}", topic, error)
        self._allocation_errors[topic] = error
        return False

    async def _consumer_ids(self, topic: str, mq_all: list[MessageQueue]) -> list[str] | None:
        """The group's members from the first broker that answers; None when every broker asked failed."""
        brokers = sorted({mq.broker_name for mq in mq_all})
        asked = False
        for name in brokers:
            addr = self.engine.instance.broker_address(name)
            if addr is None:
                continue
            asked = True
            try:
                return await self.engine.instance.broker.get_consumer_list(addr, self.config.group)
            except Exception as exc:
                (logger.debug if self.engine.instance.broker.reported(exc) else logger.warning)(
                    "get consumer list of {} from {} failed: {}", self.config.group, addr, exc)
        return None if asked else []

    async def _update_table(self, topic: str, mine: set[MessageQueue]) -> bool:
        engine = self.engine
        changed = False
        now = _now_ms()
        for mq, req in list(engine.table.items()):
            if mq.topic != topic:
                continue
            if mq not in mine:
                req.pq.dropped = True
                if await self._remove_unnecessary(req):
                    engine.remove_request(mq)
                    changed = True
                    logger.info("rebalance: dropped {}", mq)
            elif req.pq.is_pull_expired(now):
                logger.warning("{} has not been pulled for {} ms; dropping it to recover", mq, now - req.pq.last_pull_timestamp)
                req.pq.dropped = True
                if await self._remove_unnecessary(req):
                    engine.remove_request(mq)
                    changed = True
        for mq in sorted(mine - set(engine.table)):
            if mq in engine.removing:
                continue  # still finishing its removal (orderly job in flight)
            if self.orderly_locks and not await self.lock(mq):
                logger.info("rebalance: {} is locked by another client; not taking it now", mq)
                continue
            engine.offset_store.remove(mq)  # removeDirtyOffset
            try:
                offset = await engine.compute_pull_from_where(mq)
            except Exception as exc:
                logger.warning("rebalance: cannot compute where to start {}: {}", mq, exc)
                continue
            if offset < 0:
                continue
            pq = ProcessQueue(mq)
            if self.orderly_locks:
                pq.locked = True
                pq.last_lock_timestamp = _now_ms()
            engine.add_request(PullRequest(mq, pq, offset))
            changed = True
            logger.info("rebalance: took {} from offset {}", mq, offset)
        return changed

    async def _remove_unnecessary(self, req: PullRequest) -> bool:
        """RebalancePushImpl.removeUnnecessaryMessageQueue; False = try again later."""
        engine = self.engine
        mq = req.mq
        if self.orderly_locks and self._orderly_service().is_busy(mq):
            # a job of this queue is in flight: the orderly loop finishes the removal
            req.pq.inc_try_unlock_times()
            engine.removing.add(mq)
            engine.stop_pull(mq)
            return False
        await self._release(req)
        return True

    async def _release(self, req: PullRequest) -> None:
        """Hand a queue back: persist and forget its offset, then unlock it (orderly).

        An orderly queue whose lock lapsed persists nothing: another client may have
        committed past the offset in memory, which must not move it back.
        """
        mq = req.mq
        if not self.orderly_locks or req.pq.holds_lock():
            await self.engine.offset_store.persist(mq)
        self.engine.offset_store.remove(mq)
        if self.orderly_locks:
            await self.unlock(mq, oneway=True)

    def on_orderly_idle(self, req: PullRequest) -> None:
        """The orderly loop of a dropped queue has finished its last job: complete the removal."""
        if req.mq in self.engine.removing or (req.pq.dropped and req.mq in self.engine.table):
            asyncio.ensure_future(self._finish_removal(req))

    async def _finish_removal(self, req: PullRequest) -> None:
        engine = self.engine
        try:
            await self._release(req)
        finally:
            engine.removing.discard(req.mq)
            if engine.table.get(req.mq) is req:
                engine.remove_request(req.mq)
            engine.wake_rebalance()

    # ----------------------------------------------------------------- locks

    async def lock(self, mq: MessageQueue) -> bool:
        addr = self.engine.instance.broker_address(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await self.engine.instance.broker.lock_batch_mq(
                addr, self.config.group, self.engine.instance.client_id, [mq])
        except Exception as exc:
            logger.warning("lock of {} failed: {}", mq, exc)
            return False
        ok = mq in locked
        req = self.engine.table.get(mq)
        if req is not None:
            if ok:
                req.pq.note_locked(_now_ms())
            else:
                req.pq.locked = False
        return ok

    def _by_broker(self, mqs: list[MessageQueue]) -> list[tuple[str, str, list[MessageQueue]]]:
        """(broker name, address, queues) for each broker with a known address."""
        groups: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            groups[mq.broker_name].append(mq)
        out = []
        for name, group in groups.items():
            addr = self.engine.instance.broker_address(name)
            if addr is not None:
                out.append((name, addr, group))
        return out

    async def lock_all(self) -> None:
        """Renew the broker locks of every orderly queue we hold (lockAll)."""
        if not self.orderly_locks:
            return
        live = [mq for mq, req in self.engine.table.items() if not req.pq.dropped]
        for broker_name, addr, mqs in self._by_broker(live):
            try:
                locked = await self.engine.instance.broker.lock_batch_mq(
                    addr, self.config.group, self.engine.instance.client_id, mqs)
            except Exception as exc:
                logger.warning("lock renewal on {} failed: {}", broker_name, exc)
                continue
            now = _now_ms()
            for mq in mqs:
                req = self.engine.table.get(mq)
                if req is None:
                    continue
                if mq in locked:
                    if not req.pq.locked:
                        logger.info("{} locked again", mq)
                    req.pq.note_locked(now)
                    self._orderly_service().kick(req)
                elif req.pq.locked:
                    logger.warning("{} lost its broker lock; pausing it", mq)
                    self.lock_losses += 1
                    req.pq.locked = False

    async def unlock(self, mq: MessageQueue, *, oneway: bool) -> None:
        addr = self.engine.instance.broker_address(mq.broker_name)
        if addr is None:
            return
        try:
            await self.engine.instance.broker.unlock_batch_mq(
                addr, self.config.group, self.engine.instance.client_id, [mq], oneway=oneway)
        except Exception as exc:
            logger.warning("unlock of {} failed: {} (the broker frees it after 60 s)", mq, exc)

    async def unlock_all(self) -> None:
        """At shutdown: a two-way unlock of every queue, per broker."""
        if not self.orderly_locks:
            return
        for broker_name, addr, mqs in self._by_broker(list(self.engine.table)):
            try:
                await self.engine.instance.broker.unlock_batch_mq(
                    addr, self.config.group, self.engine.instance.client_id, mqs, oneway=False)
            except Exception as exc:
                logger.warning("unlock of {} queue(s) on {} failed: {}", len(mqs), broker_name, exc)
            for mq in mqs:
                req = self.engine.table.get(mq)
                if req is not None:
                    req.pq.locked = False

    # ----------------------------------------------------------------- periodic

    async def run(self, wake: asyncio.Event) -> None:
        """The rebalance service: every 20 s, or sooner when woken (at least 1 s apart)."""
        interval = self.config.rebalance_interval_ms / 1000
        while True:
            await wait_event(wake, interval)
            wake.clear()
            try:
                await self.rebalance()
            except Exception as exc:
                logger.opt(exception=exc).warning("rebalance failed")
            await asyncio.sleep(d.REBALANCE_MIN_INTERVAL_MS / 1000)

    async def run_lock_renewal(self) -> None:
        interval = self.config.lock_interval_ms / 1000
        await asyncio.sleep(d.REBALANCE_LOCK_FIRST_DELAY_MS / 1000)
        while True:
            try:
                await self.lock_all()
            except Exception as exc:
                logger.opt(exception=exc).warning("lock renewal failed")
            await asyncio.sleep(interval)
