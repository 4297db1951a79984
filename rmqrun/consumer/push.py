"""The push consumer engine (Java ``DefaultMQPushConsumerImpl``), minus the threads.

It owns the client instance (client id, connections, routes, heartbeats),
the subscriptions (plus ``%RETRY%<group>`` in clustering mode), the table of
assigned queues with their pull tasks and process queues, the offset store,
rebalancing and locks, and the consume service of its mode. It consumes by
awaiting an :class:`~rmqrun.consumer.executor.Executor`; where that runs the
handler is not its business.

Start order follows Java: subscriptions, client start, routes, heartbeat to
every broker, first rebalance. Shutdown: stop pulling, let in-flight jobs
finish within the grace period, persist offsets, unlock orderly queues,
unregister from the group, close connections.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from loguru import logger

from rmqrun.aio import after_writes_done, cancel_and_wait
from rmqrun.client.errors import BrokerNotFoundError
from rmqrun.client.failure_log import FailureLog
from rmqrun.client.instance import ClientInstance, ConsumerCallbacks
from rmqrun.consumer.allocate_nearby import client_instance_name
from rmqrun.consumer.broker_mode import ModeWatch, PullModeCheck
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.consume_services import PullService, pull_service
from rmqrun.consumer.dead_letters import DeadLetters, Failure
from rmqrun.consumer.executor import ConsumeJob, Executor, JobResult
from rmqrun.consumer.filter_check import check_filters
from rmqrun.consumer.oldest import store_timestamps_ms
from rmqrun.consumer.offsets import (
    LocalFileOffsetStore, OffsetStore, OffsetUnreadableError, ReadOffsetType, RemoteOffsetStore,
)
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.puller import pull_loop
from rmqrun.consumer.rebalance import Rebalancer
from rmqrun.consumer.retry import SendBack, undecodable_label
from rmqrun.consumer.running_info import ConsumeStatusTable, consume_directly_result, running_info
from rmqrun.model import MessageQueue, RecordData, Status
from rmqrun.namespace import unwrap
from rmqrun.protocol.bodies import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.remoting.message import decode_messages
from rmqrun.topic_names import is_retry_topic, retry_topic


#: upper bounds (seconds) of the handler latency histogram's buckets; +Inf is implied
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: bounds of the store → handler-start histogram: from a consumer keeping up (tens of ms) to a backlog of an hour
WAIT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(slots=True)
class LatencyHistogram:
    """Bucket counts with Prometheus histogram semantics (``le`` bounds), without the dependency."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, n: int = 1) -> None:
        """Count ``n`` observations of ``value`` (a job's messages share its per-message time)."""
        self.counts[bisect_left(self.bounds, value)] += n  # the first bound >= value: Prometheus' ``le``
        self.total += value * n
        self.count += n

    def observe_since(self, began_s: float, stamps_ms: Sequence[int]) -> None:
        """One observation per stamp of ``max(0, began_s - stamp / 1000)``: exactly :meth:`observe_each`'s
        counts, in one step when the job's newest and oldest stamp fall in the same bucket.

        ``began_s - x / 1000`` never increases as ``x`` grows (IEEE rounding is monotone), and
        neither does the bucket index of the result, so the bucket of every stamp in between
        is that bucket too; the usual job (one pull's records, stored within milliseconds)
        then costs two bisects and a ``sum`` instead of a bisect per message.
        """
        shortest = began_s - max(stamps_ms) / 1000
        if shortest >= 0.0:
            bounds = self.bounds
            i = bisect_left(bounds, shortest)
            if i == bisect_left(bounds, began_s - min(stamps_ms) / 1000):
                n = len(stamps_ms)
                self.counts[i] += n
                self.total += began_s * n - sum(stamps_ms) / 1000
                self.count += n
                return
        self.observe_each([max(0.0, began_s - s / 1000) for s in stamps_ms])

    def observe_each(self, values: Sequence[float]) -> None:
        """Count one observation of each value (one per message: a loop without a call per value)."""
        counts, bounds = self.counts, self.bounds
        for value in values:
            counts[bisect_left(bounds, value)] += 1
        self.total += sum(values)
        self.count += len(values)


@dataclass(slots=True)
class ConsumeStats:
    """Counters for status lines, metrics and the demo's summary.

    ``handler_latency`` holds the handler's time per message: a job's time in
    its worker (or, when the executor does not say, as awaited here) divided
    by its messages. ``store_to_handler`` holds, per message, the time from the
    broker storing it to its worker beginning the job that carries it: what a
    backlog or a pool short of workers costs, which the handler time does not
    show. The start is the result's arrival minus the worker's own time on the
    job (the pipe adds microseconds); a broker clock ahead of this host's
    counts as 0.
    """

    consumed: int = 0
    failed: int = 0
    #: records that did not decode (unknown compression, corrupt body, bad properties): sent to the DLQ unhandled
    undecodable: int = 0
    jobs: int = 0
    busy_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    handler_latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    store_to_handler: LatencyHistogram = field(default_factory=lambda: LatencyHistogram(WAIT_BUCKETS))

    def record(self, n: int, elapsed: float, result: JobResult, records: Sequence[Any] = (),
               stored: Sequence[int] | None = None) -> None:
        """Count a finished job of ``n`` messages, awaited for ``elapsed`` s; ``records`` are its stored
        records (or messages), read for their store time only; ``stored``: those store times (epoch ms, one per
        record, 0 where unknown) when the caller has them already (POP reads them with the answer), so no
        record is read again."""
        self.jobs += 1
        self.busy_seconds += elapsed
        verdicts = result.verdicts
        ok = verdicts.count(Status.SUCCESS)
        self.consumed += ok
        if n > 0:
            spent = result.handler_seconds if result.handler_seconds is not None else elapsed
            self.handler_latency.observe(spent / n, n)
            not_run = ok != len(verdicts) and Status.NOT_RUN in verdicts  # all SUCCESS: none to leave out
            if stored is not None:
                if not_run:
                    stored = [s for s, v in zip(stored, result.verdicts) if v is not Status.NOT_RUN]
                if stored and min(stored) <= 0:
                    stored = [s for s in stored if s > 0]
            else:
                if records and not_run:
                    # never reached the handler (an earlier failure, a limit, a shutdown)
                    records = [r for r, v in zip(records, result.verdicts) if v is not Status.NOT_RUN]
                stored = store_timestamps_ms(records) if records else ()
            if stored:
                self.store_to_handler.observe_since(time.time() - spent, stored)


class PushConsumer:
    def __init__(self, config: ConsumerConfig, executor: Executor, *,
                 instance: ClientInstance | None = None) -> None:
        #: the user's names, for what users see (logs, metrics); ``config`` holds the names on the wire
        self.user_config = config.validate()
        self.config = config = self.user_config.on_wire()
        self.executor = executor
        self.instance = instance or ClientInstance(
            config.namesrv, instance_name=client_instance_name(config.allocate_strategy, config.machine_room,
                                                               config.instance_name, config.clustering),
            message_model=MessageModel.parse(config.message_model), client_ip=config.client_ip,
            unit_name=config.unit_name,
            poll_name_server_interval=config.poll_name_server_interval_ms / 1000,
            heartbeat_interval=config.heartbeat_interval_ms / 1000, security=config.security)
        # a long-running consumer: an unreachable broker is one incident per address, not a line per request
        if self.instance.broker.failures is None:
            self.instance.broker.failures = FailureLog()
        self._subs: dict[str, SubscriptionData] = config.subscription_data()
        self.offset_store: OffsetStore = self._make_offset_store()
        #: what this consumer dead-lettered, by topic and reason (``rmqrun_messages_dead_lettered_total``)
        self.dead_letters = DeadLetters(self.user_config.group, config.namespace,
                                        tuple(self.user_config.subscriptions))
        self.send_back = SendBack(self.instance, config.group, self.dead_letters)
        self.consume_service: PullService = pull_service(config.mode, self)
        self.rebalancer = Rebalancer(self)
        self.pull_failures = FailureLog()
        self.table: dict[MessageQueue, PullRequest] = {}
        self.removing: set[MessageQueue] = set()
        self.paused = False
        self.stats = ConsumeStats()
        #: per-topic TPS/RT for GET_CONSUMER_RUNNING_INFO's statusTable
        self.status = ConsumeStatusTable()
        #: epoch ms of start(), PROP_CONSUMER_START_TIMESTAMP
        self.started_at_ms = int(time.time() * 1000)
        self._suggested: dict[MessageQueue, int] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        #: renews orderly locks; kept through a graceful stop's drain, so what the drain commits is still ours
        self._lock_renewal: asyncio.Task[None] | None = None
        self._running = False
        #: the broker's mode table against this instance's mode: one warning when they disagree (broker_mode.py)
        self.mode_watch = ModeWatch(self.user_config.group, config.namespace, self.running_mode)
        self.mode_check = PullModeCheck(self)

    #: what :class:`ModeWatch` compares with the broker's table: this engine pulls with a client-side rebalance
    running_mode = "pull"

    # ----------------------------------------------------------------- wiring

    def _make_offset_store(self) -> OffsetStore:
        if self.config.clustering:
            async def commit(mq: MessageQueue, offset: int) -> None:
                addr = self.instance.broker_address(mq.broker_name)
                if addr is None:
                    raise BrokerNotFoundError(f"no address for broker {mq.broker_name}")
                await self.instance.broker.update_consumer_offset(addr, self.config.group, mq, offset)

            async def fetch(mq: MessageQueue) -> int | None:
                addr = self.instance.broker_address(mq.broker_name)
                if addr is None:
                    await self.instance.update_route(mq.topic)
                    addr = self.instance.broker_address(mq.broker_name)
                if addr is None:
                    raise BrokerNotFoundError(f"no address for broker {mq.broker_name}")
                return await self.instance.broker.query_consumer_offset(addr, self.config.group, mq)
            return RemoteOffsetStore(self.config.group, commit, fetch, reported=self.instance.broker.reported)
        store = LocalFileOffsetStore(self.config.group, self.instance.client_id, self.config.offset_store_dir)
        store.load()
        return store

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.config.group, consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.parse(self.config.message_model),
            consume_from_where=ConsumeFromWhere.parse(self.config.consume_from_where),
            subscription_data_set=list(self._subs.values()))

    def subscription(self, topic: str) -> SubscriptionData | None:
        return self._subs.get(topic)

    def subscribed_topics(self) -> list[str]:
        return list(self._subs)

    def pull_requests(self) -> Iterable[PullRequest]:
        return list(self.table.values())

    def queue_thresholds(self) -> tuple[int, float]:
        """Per-queue (messages, MiB) limits; topic-wide limits are shared by the queues we hold."""
        cfg = self.config
        count, mib = cfg.pull_threshold_for_queue, float(cfg.pull_threshold_size_for_queue)
        n = max(1, len(self.table))
        if cfg.pull_threshold_for_topic != -1:
            count = max(1, cfg.pull_threshold_for_topic // n)
        if cfg.pull_threshold_size_for_topic != -1:
            mib = max(1.0, cfg.pull_threshold_size_for_topic / n)
        return count, mib

    # ----------------------------------------------------------------- queue table

    def add_request(self, req: PullRequest) -> None:
        self.table[req.mq] = req
        req.task = asyncio.ensure_future(pull_loop(self, req))

    def stop_pull(self, mq: MessageQueue) -> None:
        req = self.table.get(mq)
        if req is not None and req.task is not None:
            req.task.cancel()

    def remove_request(self, mq: MessageQueue) -> None:
        req = self.table.pop(mq, None)
        if req is not None:
            req.pq.dropped = True
            if req.task is not None:
                req.task.cancel()
        self._suggested.pop(mq, None)

    def wake_rebalance(self) -> None:
        self._wake.set()

    def request_heartbeat(self) -> None:
        asyncio.ensure_future(self._heartbeat_quietly())

    def topic_refused(self, topic: str) -> None:
        """A broker says ``topic`` does not exist: the rebalance checks the name server now (see rebalance.py)."""
        self.rebalancer.suspect(topic)
        self.wake_rebalance()

    async def _heartbeat_quietly(self) -> None:
        try:
            await self.instance.send_heartbeat()
        except Exception as exc:
            logger.debug("heartbeat failed: {}", exc)

    # ----------------------------------------------------------------- broker lookups

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool:
        """A record no worker could decode: to ``%DLQ%<group>`` as stored, counted, logged once.

        True when it has reached its end (the DLQ, or, in broadcasting mode where
        there is no DLQ, dropped with the error logged); False: keep it cached and
        try again later (the broker did not take it).
        """
        label = undecodable_label(record, mq)
        if not self.config.clustering:
            self.stats.undecodable += 1
            logger.error("{} does not decode and is dropped (broadcasting: no DLQ)", label)
            return True
        if not await self.send_back.dead_letter_as_stored(record, mq.broker_name,
                                                          self.config.effective_max_reconsume_times,
                                                          Failure(mq, offset, error or "the record does not decode")):
            return False
        self.stats.undecodable += 1  # the dead-letter line (reason undecodable) names it
        return True

    def note_suggested_broker(self, mq: MessageQueue, broker_id: int) -> None:
        self._suggested[mq] = broker_id

    async def pull_address(self, mq: MessageQueue) -> str:
        """The address to pull ``mq`` from: the broker's suggestion (slave reads), else the master."""
        broker_id = self._suggested.get(mq, 0)
        found = self.instance.find_broker(mq.broker_name, broker_id=broker_id) if broker_id else None
        addr = found.address if found else self.instance.broker_address(mq.broker_name)
        if addr is None:
            await self.instance.update_route(mq.topic)
            addr = self.instance.broker_address(mq.broker_name)
        if addr is None:
            raise BrokerNotFoundError(f"broker {mq.broker_name} of {mq.topic} has no known address")
        return addr

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly assigned queue starts (RebalancePushImpl.computePullFromWhereWithException).

        The committed offset if the group has one; otherwise by consume-from-where.
        Retry topics start at 0 (or max for TIMESTAMP). Raises when the broker cannot
        be asked, so the queue is not taken at a guessed offset.
        """
        last = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            raise OffsetUnreadableError(f"the offset store could not read the offset of {mq}")
        where = self.config.consume_from_where
        is_retry = is_retry_topic(mq.topic)
        if where == "CONSUME_FROM_FIRST_OFFSET":
            return 0
        addr = await self.pull_address(mq)
        if where == "CONSUME_FROM_TIMESTAMP":
            if is_retry:
                return await self.instance.broker.get_max_offset(addr, mq)
            ts = int(time.mktime(time.strptime(self.config.consume_timestamp, "%Y%m%d%H%M%S")) * 1000)
            return await self.instance.broker.search_offset(addr, mq, ts)
        # LAST_OFFSET and its deprecated spellings
        if is_retry:
            return 0
        return await self.instance.broker.get_max_offset(addr, mq)

    async def handle_offset_illegal(self, req: PullRequest) -> None:
        """Java: 10 s later, store the corrected offset, persist it, drop the queue; rebalance retakes it."""
        await asyncio.sleep(10)
        self.offset_store.update(req.mq, req.next_offset, False)
        await self.offset_store.persist(req.mq)
        if self.table.get(req.mq) is req:
            self.remove_request(req.mq)
        logger.info("{}: offset corrected to {}; the next rebalance takes it again", req.mq, req.next_offset)
        self.wake_rebalance()

    # ----------------------------------------------------------------- broker → client requests

    async def _on_ids_changed(self, header: Any) -> None:
        # a broker back from a hang sends the notices it queued meanwhile at once: one line for the one rebalance
        if self._wake.is_set():
            logger.debug("broker says the members of {} changed; a rebalance is due already", self.user_config.group)
        else:
            logger.info("broker says the members of {} changed; rebalancing now", self.user_config.group)
        self.wake_rebalance()

    async def _on_running_info(self, header: Any) -> dict[str, Any]:
        return running_info(self, jstack=bool(getattr(header, "jstack_enable", False)))

    async def _on_consumer_status(self, header: Any) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: this client's offsets of the topic's queues (cloneOffsetTable)."""
        return {mq: self.offset_store.read_memory(mq) for mq in sorted(self.table) if mq.topic == header.topic}

    async def _on_consume_directly(self, header: Any, record: bytes) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: run the one message through the handler, as Java's listener is called.

        Nothing is committed or sent back whatever the verdict: the message is not part of the
        consumer's queues, only a test of the handler (``mqadmin consumeMessage``).
        """
        started = time.monotonic()
        try:
            msg = decode_messages(record, decompress=False)[0]
            job = ConsumeJob(MessageQueue(msg.topic, header.broker_name or "", msg.queue_id), self.config.orderly,
                             [record], [msg.queue_offset], auto_commit=self.config.auto_commit)
            result = await self.executor.run(job)
            error = None
        except Exception as exc:  # a bad record or a pool that is shutting down: say so, as Java does
            result, error = None, f"{type(exc).__name__}: {exc}"
        spent = int((time.monotonic() - started) * 1000)
        logger.info("consumed a message directly for an admin tool: {}", result.verdicts if result else error)
        return consume_directly_result(result, orderly=self.config.orderly, auto_commit=self.config.auto_commit,
                                       spent_ms=spent, error=error)

    async def _on_reset_offset(self, header: Any, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the topic's queues, store the new offsets, rebalance."""
        logger.warning("broker resets offsets of {} queue(s) of {}", len(table), self.user_config.group)
        self.paused = True
        try:
            for mq in list(table):
                req = self.table.get(mq)
                if req is not None:
                    self.remove_request(mq)
            await asyncio.sleep(0.1)
            for mq, offset in table.items():
                self.offset_store.update(mq, offset, False)
                await self.offset_store.persist(mq)
                self.offset_store.remove(mq)
        finally:
            self.paused = False
        self.wake_rebalance()

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self.started_at_ms = int(time.time() * 1000)
        self.instance.register_consumer(
            self.config.group, data=self.consumer_data,
            callbacks=ConsumerCallbacks(consumer_ids_changed=self._on_ids_changed,
                                        running_info=self._on_running_info,
                                        reset_offset=self._on_reset_offset,
                                        consumer_status=self._on_consumer_status,
                                        consume_message_directly=self._on_consume_directly))
        await self.instance.start()
        for topic in self._subs:
            try:
                await self.instance.update_route(topic)
            except TopicNotExistError:
                self.rebalancer.missing.add(topic)  # said here once; the rebalance says nothing more
                if topic != retry_topic(self.config.group):
                    logger.warning("topic {} does not exist yet; it is picked up once it does",
                                   unwrap(self.config.namespace, topic))
        await check_filters(self.instance, self.config.group, self._subs, self.config.namespace)  # SQL92: served?
        if not await self.instance.send_heartbeat() and self.instance.broker_addresses():
            # the routes name brokers but none answers: the cluster is not there yet
            raise BrokerNotFoundError(f"no broker answered the heartbeat among {self.instance.broker_addresses()}")
        self._running = True
        self.consume_service.start()
        await self.rebalancer.rebalance()
        await self.mode_check.check()  # a POP group is said within the first rebalance, not 20 s later
        self._tasks = [
            asyncio.ensure_future(self.rebalancer.run(self._wake)),
            asyncio.ensure_future(self._persist_loop()),
            asyncio.ensure_future(self.mode_check.run(self.config.rebalance_interval_ms / 1000)),
        ]
        self._lock_renewal = asyncio.ensure_future(self.rebalancer.run_lock_renewal())

    async def _persist_loop(self) -> None:
        interval = self.config.persist_offset_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.offset_store.persist_all(self.offset_queues(), self.unconfirmed_offsets())
            except Exception as exc:
                logger.warning("persisting offsets failed: {}", exc)

    def offset_queues(self) -> list[MessageQueue]:
        """The queues whose offsets this client keeps and commits (the store forgets the others at each
        persist): the table's (``mode_follow.py`` adds queues it is handing over)."""
        return list(self.table)

    def unconfirmed_offsets(self) -> set[MessageQueue]:
        """Orderly queues whose offset in memory is not to be persisted: their lock is not held without a gap
        (``lock_gap.py``), so another client may have committed past it."""
        if not (self.config.orderly and self.config.clustering):
            return set()
        return {mq for mq, req in self.table.items() if not req.pq.holds_lock()}

    def stop_pulling(self) -> None:
        """First step of a graceful stop: no new pulls, no rebalance."""
        self.paused = True
        for req in self.table.values():
            if req.task is not None:
                self._tasks.append(req.task)
        for task in self._tasks:
            task.cancel()

    @property
    def in_flight(self) -> int:
        return self.consume_service.in_flight

    async def shutdown(self, grace: float = 30.0) -> None:
        """Graceful stop: finished work is committed, unfinished work is left for redelivery."""
        if not self._running:
            await self.instance.close()
            return
        self._running = False
        self.stop_pulling()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        await after_writes_done()  # what the pulls brought last is the service's before it stops (puller._hand_over)
        await self.consume_service.stop(grace)
        try:
            await self.offset_store.persist_all(self.offset_queues(), self.unconfirmed_offsets())
        except Exception as exc:
            logger.warning("final offset persist failed: {}", exc)
        if self._lock_renewal is not None:
            await cancel_and_wait([self._lock_renewal])
            self._lock_renewal = None
        await self.rebalancer.unlock_all()
        await self.send_back.close()
        try:
            await self.instance.unregister_consumer(self.config.group)
        except Exception as exc:
            logger.warning("unregister from the group failed: {}", exc)
        for req in self.table.values():
            req.pq.dropped = True
        await self.instance.close()
