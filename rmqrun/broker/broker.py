"""The embedded broker: one store, the broker's tables and services, one remoting server.

:class:`Broker` wires the parts the way ``BrokerController`` does and owns
their lifecycle. Everything runs on one asyncio loop: processors, long polls,
the schedule service and the expiry scan share state without locks; only the
store's flusher and checkpoint threads run apart (and talk back through
futures).

:meth:`Broker.put_message` is the single door to the commit log, so the rules
every write obeys live in one place: a delay level diverts the message to the
schedule topic, SYNC flush waits for the fsync (RocketMQ's
``syncFlushTimeout``, 5 s by default, then FLUSH_DISK_TIMEOUT), and held pulls on the
queue are woken.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

import psutil
from loguru import logger

from rmqrun.aio import wait_for
from rmqrun.broker.acl.config import load_acl_file
from rmqrun.broker.acl.validator import AclValidator
from rmqrun.broker.config import BrokerConfig, FlushMode
from rmqrun.broker.groups import ConsumerManager
from rmqrun.broker.locks import RebalanceLockManager
from rmqrun.broker.longpoll import HeldPull, PullHoldService
from rmqrun.broker.messages import InnerMessage, delay_level_of
from rmqrun.broker.pop.ck_log import CheckpointLog
from rmqrun.broker.pop.order_info import OrderInfoTable
from rmqrun.broker.pop.polling import PopPolling
from rmqrun.broker.pop.revive import ReviveService
from rmqrun.broker.pop.service import PopService
from rmqrun.broker.processors.registry import register_all
from rmqrun.broker.schedule import ScheduleService
from rmqrun.broker.stats import BrokerStats
from rmqrun.broker.store import MessageStore
from rmqrun.broker.subscription_groups import SubscriptionGroupTable
from rmqrun.broker.tls import tls_server_options
from rmqrun.broker.topics import TopicTable
from rmqrun.broker.writes import FlushTimeout, Stored
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.message_props import PROPERTY_TRANSACTION_PREPARED
from rmqrun.remoting.msg_id import offset_msg_id
from rmqrun.remoting.server import RemotingServer


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.store = MessageStore(config.data_dir, config.store)
        tls = tls_server_options(config.tls_cert, config.tls_key, config.tls_mode)
        self.server = RemotingServer(config.host, config.port, name="broker", **tls)
        #: The ACL check when ``config.acl_file`` is set (None: signatures are ignored, as with aclEnable=false).
        self.acl: AclValidator | None = None
        if config.acl_file is not None:
            self.acl = AclValidator(load_acl_file(config.acl_file))
            self.server.guard = self.acl.guard
        self.consumers = ConsumerManager(
            channel_expired_ms=config.channel_expired_ms, notify=config.notify_consumer_ids_changed,
            notify_enabled_for=self._notify_enabled_for)
        self.locks = RebalanceLockManager(config.lock_max_live_ms)
        self.hold = PullHoldService(self._replay_held_pull)
        self.pop_polling = PopPolling(self._replay_held_pop)
        #: POP consumption (created at start: its checkpoint log lives in the data directory)
        self.pop: PopService = None  # type: ignore[assignment]
        self.revive: ReviveService | None = None
        self.delays_ms = config.delay_levels_ms
        self.stats = BrokerStats(config.cluster_name)
        #: The name server this broker is known by (set by whoever starts both; admin answers show it).
        self.namesrv_address: str | None = None
        self.topics: TopicTable | None = None
        self.groups: SubscriptionGroupTable | None = None
        self.schedule: ScheduleService | None = None
        #: Bytes of commit log that count as "in memory" (accessMessageInMemoryMaxRatio of RAM).
        self.memory_window = psutil.virtual_memory().total * config.access_message_in_memory_max_ratio // 100
        self._housekeeping: asyncio.Task[None] | None = None
        self._started = False
        # The processors see this broker only through processors.context.BrokerContext, which it satisfies.
        self.processors = register_all(self)

    # ------------------------------------------------------------------ lifecycle

    @property
    def address(self) -> str:
        """What clients connect to and what every stored message names as its store host."""
        return f"{self.config.store_host}:{self.server.port}"

    async def start(self) -> None:
        await asyncio.to_thread(self.store.open)
        for problem in self.store.config_problems:
            logger.warning("store config file problem: {}", problem)
        self.topics = TopicTable(self.config, self.store.topic_configs)
        self.groups = SubscriptionGroupTable(self.config, self.store.subscription_groups)
        adopted = self.topics.adopt_orphan_queues(self.store.queues())
        if adopted:
            logger.warning("topics with stored messages but no config were re-created: {}", adopted)
        self.store.topic_configs.flush()
        await self.server.start()
        self.server.on_disconnect.append(self._connection_closed)
        self.schedule = ScheduleService(self.store, self.delays_ms, self.put_message,
                                        persist_interval_s=self.config.persist_interval_ms / 1000)
        self.schedule.start()
        await self._start_pop()
        self._housekeeping = asyncio.get_running_loop().create_task(self._scan_channels(), name="broker-housekeeping")
        self._started = True
        logger.info("broker {} ({}) serving on {} with data in {}", self.config.broker_name,
                    self.config.cluster_name, self.address, self.config.data_dir)

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            try:
                await self._housekeeping
            except asyncio.CancelledError:
                pass
        self.hold.clear()
        self.pop_polling.clear()
        await self.server.stop()
        if self.schedule is not None:
            await self.schedule.stop()
        await self._stop_pop()
        await self.consumers.close()
        await asyncio.to_thread(self.store.close)
        logger.info("broker {} stopped", self.config.broker_name)

    async def _start_pop(self) -> None:
        ck_log = CheckpointLog(self.config.data_dir / "pop", fsync=self.config.store.flush_mode is FlushMode.SYNC)
        await asyncio.to_thread(ck_log.open)
        self.pop = PopService(self, ck_log)
        orders = OrderInfoTable.in_data_dir(self.config.data_dir)
        await asyncio.to_thread(orders.load)
        if orders.problem:
            logger.warning("order-mode POP state: {}", orders.problem)
        self.pop.orders = orders
        self.revive = ReviveService(self.pop)
        self.pop.wake_revive = self.revive.wake
        self.pop.on_unblocked.append(self.pop_polling.wake)
        self.store.arrival_listeners.append(self.pop_polling.on_arrival)
        self.revive.start()

    async def _stop_pop(self) -> None:
        if self.revive is not None:
            await self.revive.stop()
        if self.pop_polling.on_arrival in self.store.arrival_listeners:
            self.store.arrival_listeners.remove(self.pop_polling.on_arrival)
        if self.pop is not None:
            self.pop.ck_log.close()
            if self.pop.orders is not None:
                try:
                    self.pop.orders.flush()
                except OSError as exc:
                    logger.error("saving the order-mode POP state failed: {}", exc)

    def _connection_closed(self, conn: Connection) -> None:
        self.hold.connection_closed(conn)
        self.pop_polling.connection_closed(conn)
        self.consumers.connection_closed(conn)

    def _notify_enabled_for(self, group: str) -> bool:
        sgc = self.groups.get(group) if self.groups is not None else None
        return sgc is None or sgc.notify_consumer_ids_changed_enable

    async def _scan_channels(self) -> None:
        interval = self.config.channel_scan_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.consumers.scan_expired()
            except Exception as exc:  # pragma: no cover - a bug here must not stop the scans
                logger.opt(exception=exc).error("channel expiry scan failed")

    # ------------------------------------------------------------------ writes

    async def put_message(self, msg: InnerMessage) -> Stored:
        """Store one message (diverting delayed ones to the schedule topic)."""
        if delay_level_of(msg.properties) > 0 and msg.properties.get(PROPERTY_TRANSACTION_PREPARED) != "true":
            msg.divert_to_schedule(len(self.delays_ms), self.delays_ms)
        return (await self.put_messages([msg]))[0]

    async def put_messages(self, msgs: Sequence[InnerMessage]) -> list[Stored]:
        """Store messages of one queue back to back (a batch), then wake that queue's held pulls."""
        topic, queue_id = msgs[0].topic, msgs[0].queue_id
        records = [m.to_record() for m in msgs]
        codes = [m.tags_code for m in msgs]
        results = self.store.put_many(topic, queue_id, records, codes)
        self.stats.on_put(len(results), sum(len(r) for r in records))
        for result, code in zip(results, codes):
            self.hold.notify_arrival(topic, queue_id, result.queue_offset + 1, code)
        if self.config.store.flush_mode is FlushMode.SYNC:
            try:
                await wait_for(self.store.flush_to(results[-1].end_offset),
                                       self.config.sync_flush_timeout_ms / 1000)
            except asyncio.TimeoutError:
                raise FlushTimeout(results) from None
        return [Stored(r, topic, queue_id, offset_msg_id(m.store_host, r.commit_log_offset))
                for r, m in zip(results, msgs)]

    # ------------------------------------------------------------------ long polling

    def _replay_held_pull(self, held: HeldPull) -> None:
        self.processors.pull.replay(held)

    def _replay_held_pop(self, held: HeldPull) -> None:
        self.processors.pop.replay(held)

    def in_disk(self, commit_log_offset: int) -> bool:
        """``checkInDiskByCommitOffset``: further behind the log's end than memory would hold."""
        return self.store.commit_log_max_offset - commit_log_offset > self.memory_window
