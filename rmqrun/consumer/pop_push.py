"""The push consumer in POP mode (Java 5.x ``DefaultMQPushConsumerImpl`` with ``clientRebalance=false``).

Everything of the pull engine stays: the client instance, heartbeats, the
offset store, and the pull of ``%RETRY%<group>`` (the push retry topic is
always consumed by PULL, as in Java), rebalanced by the client as before. The
user's topics are consumed by POP instead:

* every ``rebalance_interval_ms`` (and when a broker says the group changed)
  QUERY_ASSIGNMENT asks a broker of each topic which queues this client pops.
  In POP mode the answer is queue id -1 per broker: pop every queue, shared
  with the whole group, so a group can have more instances than queues;
* a broker that still has the group in PULL mode for the topic answers with
  this client's share of the queues, allocated like a pull rebalance. rmqrun
  then pops exactly those queues (one warning says how to switch the group with
  ``rmqrun group mode``; the same check warns a pull instance of a group in POP
  mode, see ``broker_mode.py``): each queue still has one consumer, so a group that
  mixes POP instances with pulling clients does not consume a queue twice,
  and switching the mode later needs no restart;
* each assignment has a pop loop (``pop_loop``) and a :class:`PopProcessQueue`;
  an assignment that disappears stops popping; what it had popped still
  finishes and is acked;
* results go through :class:`PopConsumeService` (ack, delay, DLQ, extension), or with ``orderly``
  through :class:`PopOrderlyConsumeService` (pops with ``order=true``, see ``pop_orderly.py``).

A 4.x broker (no QUERY_ASSIGNMENT / POP_MESSAGE) stops the start with a
:class:`ConfigError` saying POP needs RocketMQ 5.x.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable

from loguru import logger

from rmqrun.aio import cancel_and_wait, wait_event
from rmqrun.client.assignment import AssignmentClient
from rmqrun.client.errors import BrokerNotFoundError
from rmqrun.client.pop_api import PopClient, PopNotSupportedError
from rmqrun.client.route import is_readable
from rmqrun.consumer.broker_mode import mode_of, query_assignment
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.consume_services import pop_service
from rmqrun.consumer.executor import Executor
from rmqrun.consumer.pop_consume import PopConsumeService
from rmqrun.consumer.pop_loop import pop_loop
from rmqrun.consumer.pop_queue import PopProcessQueue, PopRequest
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.consumer.push import PushConsumer
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.protocol.assignment import MessageQueueAssignment, MessageRequestMode
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError
from rmqrun.topic_names import retry_topic

def pop_not_supported(topic: str, cause: BaseException) -> ConfigError:
    return ConfigError(f"consume_mode=pop: the broker refuses POP for topic {topic} ({cause}): POP needs RocketMQ "
                       "5.x; use --consume-mode pull with this cluster")


class PopPushConsumer(PushConsumer):
    running_mode = "pop"

    def __init__(self, config: ConsumerConfig, executor: Executor, **kw: Any) -> None:
        super().__init__(config, executor, **kw)
        self.pop_client = PopClient(self.instance.broker)
        self.assignments = AssignmentClient(self.instance.pool)
        self.pop_stats = PopStats()
        self.pop_service: PopConsumeService = pop_service(self.config.mode, self)
        self.pop_table: dict[MessageQueue, PopRequest] = {}
        self._pop_wake = asyncio.Event()
        self._pop_tasks: list[asyncio.Task[Any]] = []
        self._pop_topics = [t for t in self._subs if t != retry_topic(self.config.group)]

    # ----------------------------------------------------------------- what the pull side sees

    def subscribed_topics(self) -> list[str]:
        """The topics the pull rebalance handles: only ``%RETRY%<group>``; the others are popped."""
        return [t for t in self._subs if t not in self._pop_topics]

    def pop_requests(self) -> Iterable[PopRequest]:
        return list(self.pop_table.values())

    @property
    def in_flight(self) -> int:
        return self.consume_service.in_flight + self.pop_service.in_flight

    @property
    def unacked(self) -> int:
        return sum(req.pq.wait_ack_count for req in self.pop_table.values())

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master of ``mq``'s broker: pops, acks and invisibility changes go there."""
        addr = self.instance.broker_address(mq.broker_name)
        if addr is None:
            # a pop retry topic has no route of its own: its broker is the one of the topic it stands for
            await self.instance.update_route(mq.topic if mq.topic in self._subs else self._pop_topics[0])
            addr = self.instance.broker_address(mq.broker_name)
        if addr is None:
            raise BrokerNotFoundError(f"broker {mq.broker_name} has no known address")
        return addr

    # ----------------------------------------------------------------- assignments

    async def refresh_assignments(self) -> bool:
        """QUERY_ASSIGNMENT for every popped topic; True when the pop table changed."""
        changed = False
        for topic in self._pop_topics:
            try:
                found = await self._query_assignment(topic)
            except PopNotSupportedError as exc:
                raise pop_not_supported(topic, exc) from None
            except BrokerError as exc:
                if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise pop_not_supported(topic, exc) from None
                logger.warning("POP assignment of topic {} failed: {}", unwrap(self.config.namespace, topic), exc)
                continue
            except Exception as exc:
                (logger.debug if self.instance.broker.reported(exc) else logger.warning)(
                    "POP assignment of topic {} failed: {}", unwrap(self.config.namespace, topic), exc)
                continue
            if found is not None:
                changed |= self._update_pop_table(topic, found)
        return changed

    async def _query_assignment(self, topic: str) -> list[MessageQueueAssignment] | None:
        """Ask the brokers of ``topic`` in turn (Java asks one broker of the route); None: no answer."""
        return await query_assignment(self.instance, self.assignments, self.config, topic)

    def _update_pop_table(self, topic: str, found: list[MessageQueueAssignment]) -> bool:
        mine = {a.message_queue: a for a in found}
        pull = [a.message_queue for a in found if a.mode is not MessageRequestMode.POP]
        self.mode_watch.note(topic, mode_of(found), pull_queues=len(pull))
        changed = False
        for mq, req in list(self.pop_table.items()):
            if mq.topic == topic and mq not in mine:
                self._drop(mq, req)
                changed = True
        for mq, req in self.pop_table.items():
            if mq.topic == topic:
                req.queues = self._queues_covered(mq)  # a topic updated since: flow control follows
        init_mode = 0 if self.config.consume_from_where == "CONSUME_FROM_FIRST_OFFSET" else 1
        for mq in sorted(set(mine) - set(self.pop_table)):
            req = PopRequest(mq, PopProcessQueue(mq), init_mode, queues=self._queues_covered(mq))
            self.pop_table[mq] = req
            req.task = asyncio.ensure_future(pop_loop(self, req))
            changed = True
            logger.info("POP: popping {} {}", f"{mq.topic}@{mq.broker_name}",
                        f"(every queue: {req.queues})" if mq.queue_id < 0 else f"queue {mq.queue_id}")
        return changed

    def _queues_covered(self, mq: MessageQueue) -> int:
        """How many queues the assignment ``mq`` stands for: 1, or for queue id -1 the readable queues of the
        topic on that broker in the cached route (1 when the route does not say)."""
        if mq.queue_id >= 0:
            return 1
        route = self.instance.route(mq.topic)
        if route is None:
            return 1
        return max([q.read_queue_nums for q in route.queue_datas
                    if q.broker_name == mq.broker_name and is_readable(q.perm)] + [1])

    def _drop(self, mq: MessageQueue, req: PopRequest) -> None:
        """Stop popping ``mq``; jobs not started are skipped (they come back), finished ones are still acked."""
        req.pq.dropped = True
        if req.task is not None:
            req.task.cancel()
        del self.pop_table[mq]
        logger.info("POP: no longer popping {}@{} queue {}", mq.topic, mq.broker_name, mq.queue_id)

    async def _assignment_loop(self) -> None:
        interval = self.config.rebalance_interval_ms / 1000
        while True:
            await wait_event(self._pop_wake, interval)
            self._pop_wake.clear()
            try:
                await self.refresh_assignments()
            except Exception as exc:
                logger.opt(exception=exc).warning("POP assignment failed")
            await asyncio.sleep(1.0)

    def wake_rebalance(self) -> None:
        super().wake_rebalance()
        self._pop_wake.set()

    async def _on_ids_changed(self, header: Any) -> None:
        await super()._on_ids_changed(header)
        self._pop_wake.set()

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await super().start()
        await self.refresh_assignments()
        self.pop_service.start()
        self._pop_tasks = [asyncio.ensure_future(self._assignment_loop())]

    def stop_pulling(self) -> None:
        super().stop_pulling()
        for req in self.pop_table.values():
            if req.task is not None:
                req.task.cancel()
                self._pop_tasks.append(req.task)
        for task in self._pop_tasks:
            task.cancel()

    async def shutdown(self, grace: float = 30.0) -> None:
        """Graceful stop: no new pops; finished messages are acked within ``grace``, the rest come back."""
        if self._running:
            self.stop_pulling()
            tasks, self._pop_tasks = self._pop_tasks, []
            await cancel_and_wait(tasks)
            loop = asyncio.get_running_loop()
            started = loop.time()
            await self.pop_service.stop(grace)
            grace = max(0.0, grace - (loop.time() - started))
        else:
            await self.pop_service.stop(0)
        await super().shutdown(grace)
        for req in self.pop_table.values():
            req.pq.dropped = True

    # ----------------------------------------------------------------- running info

    async def _on_running_info(self, header: Any) -> dict[str, Any]:
        body = await super()._on_running_info(header)
        topics = list(self._subs)
        body["mqPopTable"] = {mq: {"waitAckCount": req.pq.wait_ack_count, "droped": req.pq.dropped,
                                   "lastPopTimestamp": req.pq.last_pop_ms}
                              for mq, req in sorted(self.pop_table.items())}
        body["statusTable"] = self.status.to_json(topics)
        body["subscriptionSet"] = [self._subs[t].to_json() for t in topics]
        props = body["properties"]
        s = self.pop_stats
        props.update({"consumeMode": "POP", "popInvisibleTime": str(self.config.pop_invisible_time_ms),
                      "popThresholdForQueue": str(self.config.pop_threshold_for_queue),
                      "popBatchNums": str(self.config.pop_batch_size),
                      "popUnacked": str(self.unacked), "popAcks": str(s.acks), "popNacks": str(s.nacks),
                      "popInvisibleExtensions": str(s.extensions), "popRevived": str(s.revived)})
        return body
