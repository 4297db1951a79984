"""``consume_mode: auto``: pull or pop each topic as the broker's mode table says, switching live.

A Java 5.x push consumer with ``clientRebalance=false`` asks QUERY_ASSIGNMENT
every rebalance and consumes each queue by the mode the answer gives it (PULL:
a pull request; POP: a pop request), so ``mqadmin setConsumeMode`` (``rmqrun
group mode``) switches a running group. :class:`AutoPushConsumer` does the same
per topic, on the POP engine it extends (which already pulls ``%RETRY%<group>``
and pops by assignment), with one difference that matters: Java drops a pulled
queue at once, so the results of jobs in flight are discarded and those
messages are handled again by the pops; here a switch hands over only what is
finished:

* **pull → POP** (:meth:`AutoPushConsumer._to_pop`): the topic's queues leave
  the pull table under the rebalancer's pass lock (no pass takes them back),
  their pulls stop, the jobs already pulled run to their end and their offsets
  are committed to the broker; only then does the topic pop. A POP starts from
  the group's committed offset, so it takes up exactly where the pulls ended;
* **POP → pull** (:meth:`AutoPushConsumer._to_pull`): the pop loops end after
  the pop on the wire has answered (a cancelled long poll would leave what the
  broker popped for it invisible until revived), what was popped is handled and
  acked (a failure is delayed as usual: it goes to the pop retry topic, see
  below), and only then does the rebalance take the topic's queues, from the
  committed offset the pops advanced.

While the group is PULL for a topic it is pulled with rmqrun's own rebalance
(the allocation the broker would answer with: same strategy, same members),
so auto instances and plain pull instances of a group agree on who owns which
queue. A broker without the table (RocketMQ 4.x) has no POP: auto pulls, and
says so once.

Across instances (``peer_modes.py``): each instance switches at its own next
query, so before it widens an auto instance asks the other clients what they
hold. After a switch to POP it pops only its own pull share, queue by queue,
while another client still pulls the topic; a switch to pull waits until no
other client pops its queues. A client that does not answer is left out.

Messages revived into the pop retry topic ``%RETRY%<group>_<topic>`` (a POP
failure's delay, a pop whose invisible time lapsed) are read only by pops of
the topic; while auto pulls a topic whose pop retry topic exists it pops that
retry topic on its own (``pop_retry_drain.py``), so they are still handled.
docs/pop.md says all this to operators, with its limits.
"""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine

from loguru import logger

from rmqrun.client.pop_api import PopNotSupportedError
from rmqrun.consumer.broker_mode import mode_of, not_supported
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import Executor
from rmqrun.consumer.peer_modes import PeerHoldings, peer_holdings
from rmqrun.consumer.pop_loop import pop_loop
from rmqrun.consumer.pop_push import PopPushConsumer
from rmqrun.consumer.pop_queue import PopProcessQueue, PopRequest
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap
from rmqrun.protocol.assignment import MessageQueueAssignment, MessageRequestMode
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.topic_names import pop_retry_topic

#: how a topic is consumed now
UNKNOWN = "unknown"  # not asked yet: neither pulled nor popped
PULL = "pull"
POP = "pop"
TO_POP = "to-pop"  # pulls stopped, pulled jobs finishing; pops not begun
TO_PULL = "to-pull"  # pops stopped, popped jobs finishing; pulls not begun

#: seconds between looks at a draining queue (its jobs end in their own time; this only notices)
DRAIN_POLL_S = 0.05
#: seconds between asking the other clients, while waiting for them to stop popping
PEER_POLL_S = 1.0


def next_state(state: str, mode: MessageRequestMode | None) -> str:
    """Where a topic in ``state`` goes when the broker answers ``mode`` (None: the answer cannot tell).

    A switch in progress finishes first (the next answer is read after it); an answer that cannot tell
    leaves a known state as it is and starts an unknown one pulling, the broker's default."""
    if state in (TO_POP, TO_PULL):
        return state
    if state == UNKNOWN:
        return POP if mode is MessageRequestMode.POP else PULL
    if state == PULL and mode is MessageRequestMode.POP:
        return TO_POP
    if state == POP and mode is MessageRequestMode.PULL:
        return TO_PULL
    return state


class AutoPushConsumer(PopPushConsumer):
    """The POP engine, pulling or popping each topic as the broker's table says (one state per topic)."""

    running_mode = "auto"

    def __init__(self, config: ConsumerConfig, executor: Executor, **kw: Any) -> None:
        super().__init__(config, executor, **kw)
        #: per user topic (wire name): how it is consumed now
        self.topic_states: dict[str, str] = {t: UNKNOWN for t in self._pop_topics}
        #: pulled queues of a topic switching to POP: out of the table, so no rebalance pass touches them,
        #: their jobs finishing; committed and forgotten before the topic pops
        self.leaving: dict[MessageQueue, PullRequest] = {}
        #: the switch in progress per topic
        self._switches: dict[str, asyncio.Task[None]] = {}
        #: the brokers have no message request modes (4.x): every topic is pulled
        self.without_table = False
        #: switches finished (either way)
        self.switches = 0
        #: pop retry topic -> the topic it stands for, while popped on its own (``pop_retry_drain.py``)
        self.drained: dict[str, str] = {}
        #: POP topics no other client pulls any more: popped as the broker says, without asking the peers again
        self.settled: set[str] = set()
        #: POP topics popped only queue by queue (this instance's pull share) while other clients still pull them
        self.narrowed: set[str] = set()
        #: pop loops of queue-by-queue pops ending (cancelled by a stop)
        self._retiring: list[asyncio.Task[None]] = []

    # ----------------------------------------------------------------- what each side sees

    def subscribed_topics(self) -> list[str]:
        """The pulled topics: ``%RETRY%<group>`` and the user topics in PULL state."""
        return [t for t in self._subs if self.topic_states.get(t, PULL) == PULL]

    def _user(self, topic: str) -> str:
        return unwrap(self.config.namespace, topic)

    def offset_queues(self) -> list[MessageQueue]:
        """Queues handed over to POP keep their offsets (committed each period) until their jobs are done."""
        return [*self.table, *self.leaving]

    def subscription(self, topic: str) -> SubscriptionData | None:
        """A drained pop retry topic is popped with its topic's expression (what was revived there matched it)."""
        return super().subscription(self.drained.get(topic, topic))

    # ----------------------------------------------------------------- following the table

    async def refresh_assignments(self) -> bool:
        """Ask the broker's mode for each topic and follow it; True when something changed."""
        if self.without_table:
            return False
        changed = False
        for topic in self._pop_topics:
            if self.topic_states[topic] in (TO_POP, TO_PULL):
                continue
            try:
                found = await self._query_assignment(topic)
            except Exception as exc:
                if isinstance(exc, PopNotSupportedError) or not_supported(exc):
                    return self._no_table()
                (logger.debug if self.instance.broker.reported(exc) else logger.warning)(
                    "auto: asking the mode of topic {} failed: {}", self._user(topic), exc)
                continue
            changed |= self._follow(topic, found)
            state = self.topic_states[topic]
            if state == POP and found is not None and mode_of(found) is not MessageRequestMode.PULL:
                # the usual refresh of who pops what, as wide as the other clients allow
                changed |= self._update_pop_table(topic, await self._widen_when_settled(topic, found))
            elif state == PULL:
                await self._drain_retry(topic)
        return changed

    def _no_table(self) -> bool:
        """RocketMQ 4.x: no POP, so auto is pull for good."""
        self.without_table = True
        for topic, state in self.topic_states.items():
            if state == UNKNOWN:
                self.topic_states[topic] = PULL
        logger.info("consume_mode=auto: the brokers have no message request modes (RocketMQ 4.x, no POP): "
                    "pulling, as consume_mode=pull")
        self.wake_rebalance()
        return True

    def _follow(self, topic: str, found: list[MessageQueueAssignment] | None) -> bool:
        state = self.topic_states[topic]
        mode = mode_of(found)
        new = next_state(state, mode)
        if new == state:
            return False
        if new == TO_POP:
            self._start_switch(topic, self._to_pop(topic))
            return True
        if new == TO_PULL:
            self._start_switch(topic, self._to_pull(topic))
            return True
        # first answer: nothing to hand over yet
        self.topic_states[topic] = new
        logger.info("consume_mode=auto: the broker has group {} in {} mode for topic {}: {}", self.user_config.group,
                    (mode or MessageRequestMode.PULL).value, self._user(topic),
                    "popping it" if new == POP else "pulling it")
        if new == PULL:
            self.wake_rebalance()
        return True

    def _start_switch(self, topic: str, switch: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(switch)
        self._switches[topic] = task

        def done(t: "asyncio.Task[None]") -> None:
            if self._switches.get(topic) is t:
                del self._switches[topic]
            if not t.cancelled() and t.exception() is not None:
                logger.opt(exception=t.exception()).error("auto: the switch of topic {} failed", self._user(topic))
        task.add_done_callback(done)

    # ----------------------------------------------------------------- the other clients (peer_modes.py)

    async def _peers(self, topic: str) -> tuple[PeerHoldings, set[MessageQueue]] | None:
        """What the group's other clients hold of ``topic``, and this instance's pull share of it; None when the
        broker cannot be asked."""
        try:
            queues = await self.instance.subscribe_queues(topic)
            addrs = [a for a in (self.instance.broker_address(n) for n in sorted({q.broker_name for q in queues}))
                     if a is not None]
            if not addrs:
                return None
            cids = await self.instance.broker.get_consumer_list(addrs[0], self.config.group)
        except Exception as exc:
            logger.debug("auto: the members of {} not read: {}", self.user_config.group, exc)
            return None
        share = set(self.rebalancer.strategy.allocate(self.config.group, self.instance.client_id, sorted(queues),
                                                      sorted(cids))) if cids else set()
        return await peer_holdings(self.instance, addrs[0], self.config.group, topic, cids), share

    async def _widen_when_settled(self, topic: str,
                                  found: list[MessageQueueAssignment]) -> list[MessageQueueAssignment]:
        """The broker's POP answer, or only this instance's pull share while another client still pulls."""
        if topic in self.settled or not any(a.pop_all_queues for a in found):
            return found
        view = await self._peers(topic)
        if view is None:  # the peers cannot be asked now: keep what is popped (the broker's answer at first)
            if topic not in self.narrowed:
                return found
            return [MessageQueueAssignment(mq, MessageRequestMode.POP) for mq in sorted(self.pop_table)
                    if mq.topic == topic]
        holdings, share = view
        pullers = holdings.pullers()
        if not pullers:
            if topic in self.narrowed:
                logger.info("consume_mode=auto: no other client pulls topic {} any more: popping every queue",
                            self._user(topic))
                self._retire_queue_pops(topic)
            self.narrowed.discard(topic)
            self.settled.add(topic)
            return found
        if topic not in self.narrowed:
            logger.info("consume_mode=auto: {} still pull(s) topic {}: popping only this instance's {} queue(s) "
                        "until they stop, so no message they hold is handed out again", ", ".join(pullers),
                        self._user(topic), len(share))
            self.narrowed.add(topic)
        return [MessageQueueAssignment(mq, MessageRequestMode.POP) for mq in sorted(share)]

    def _retire_queue_pops(self, topic: str) -> None:
        """Widening: the queue-by-queue pops end once their pops on the wire answer (dropping them would leave
        what those brought to come back only after the invisible time); what they popped is still handled."""
        for mq, req in list(self.pop_table.items()):
            if mq.topic == topic and mq.queue_id >= 0:
                req.stopping = True
                del self.pop_table[mq]
                if req.task is not None and not req.task.done():
                    self._retiring.append(req.task)

    async def _wait_for_poppers(self, topic: str) -> bool:
        """Before pulling: until no other client pops this instance's queues of ``topic``. False: the broker has
        the group in POP mode for it again meanwhile (the switch is called off)."""
        said = False
        while True:
            view = await self._peers(topic)
            if view is None or not view[0].poppers_of(view[1]):
                return True
            if not said:
                logger.info("consume_mode=auto: {} still pop(s) topic {}: pulling once they stop",
                            ", ".join(view[0].poppers_of(view[1])), self._user(topic))
                said = True
            await asyncio.sleep(PEER_POLL_S)
            try:
                if mode_of(await self._query_assignment(topic)) is MessageRequestMode.POP:
                    return False
            except Exception as exc:
                logger.debug("auto: asking the mode of topic {} failed: {}", self._user(topic), exc)

    # ----------------------------------------------------------------- the pop retry topic while pulled

    async def _drain_retry(self, topic: str) -> None:
        """Pop ``topic``'s pop retry topic on its own while the topic is pulled, if it exists (once per broker)."""
        retry = pop_retry_topic(self.config.group, topic)
        if retry in self.drained:
            return
        try:
            queues = await self.instance.subscribe_queues(retry)
        except TopicNotExistError:
            return  # the group never left anything there (the next refresh looks again)
        except Exception as exc:
            logger.debug("route of {} not read: {}", retry, exc)
            return
        self.drained[retry] = topic
        for name in sorted({mq.broker_name for mq in queues}):
            mq = MessageQueue(retry, name, -1)
            req = PopRequest(mq, PopProcessQueue(mq), 0, original_topic=topic)
            self.pop_table[mq] = req
            req.task = asyncio.ensure_future(pop_loop(self, req))
            req.task.add_done_callback(lambda _t, mq=mq, req=req: self._drain_ended(mq, req))
        logger.info("consume_mode=auto: topic {} is pulled; popping {} on its own, so what POP left there is "
                    "still handled", self._user(topic), retry)

    def _drain_ended(self, mq: MessageQueue, req: PopRequest) -> None:
        if self.pop_table.get(mq) is req and (req.stopping or req.pq.dropped):
            del self.pop_table[mq]

    def _stop_drain(self, topic: str) -> None:
        """The topic pops again (its pops read the retry topic): the drain's pops end once they answer; what they
        brought is still handled and acked."""
        retry = pop_retry_topic(self.config.group, topic)
        if self.drained.pop(retry, None) is None:
            return
        for mq, req in list(self.pop_table.items()):
            if mq.topic == retry:
                req.stopping = True
                if req.task is None or req.task.done():
                    del self.pop_table[mq]

    # ----------------------------------------------------------------- pull -> POP

    async def _to_pop(self, topic: str) -> None:
        """Stop pulling ``topic``, let its pulled jobs finish and commit, then pop it."""
        user = self._user(topic)
        async with self.rebalancer.pass_lock:
            self.topic_states[topic] = TO_POP
            for mq in [mq for mq in self.table if mq.topic == topic]:
                req = self.table.pop(mq)
                if req.task is not None:
                    req.task.cancel()
                self.leaving[mq] = req
        mine = [mq for mq in self.leaving if mq.topic == topic]
        logger.info("consume_mode=auto: the broker has group {} in POP mode for topic {} now: pulls of its {} "
                    "queue(s) stopped; popping once their {} pulled message(s) are handled and committed",
                    self.user_config.group, user, len(mine), sum(self.leaving[mq].pq.msg_count for mq in mine))
        while any(self.leaving[mq].pq.msg_count for mq in mine):
            await asyncio.sleep(DRAIN_POLL_S)
        for mq in mine:
            await self._commit_for_good(mq)
            self.offset_store.remove(mq)
            self.leaving.pop(mq).pq.dropped = True
        self._stop_drain(topic)
        self.settled.discard(topic)
        self.topic_states[topic] = POP
        self.switches += 1
        logger.info("consume_mode=auto: topic {}: pulled work committed; popping from the committed offsets", user)
        self._pop_wake.set()  # the assignment loop asks again at once, and pops what the answer gives

    async def _commit_for_good(self, mq: MessageQueue) -> None:
        """Commit ``mq``'s offset to the broker, retrying until it takes it: a POP starts from there."""
        delay = self.config.pull_time_delay_ms_when_exception / 1000
        while mq in self.offset_store and not await self.offset_store.persist(mq):
            await asyncio.sleep(delay)

    # ----------------------------------------------------------------- POP -> pull

    async def _to_pull(self, topic: str) -> None:
        """Stop popping ``topic`` once the pops on the wire answer, handle and ack what was popped, then pull."""
        user = self._user(topic)
        self.topic_states[topic] = TO_PULL
        reqs = [(mq, req) for mq, req in self.pop_table.items() if mq.topic == topic]
        for _, req in reqs:
            req.stopping = True
        logger.info("consume_mode=auto: the broker has group {} in PULL mode for topic {} now: pops stopping; "
                    "pulling once what was popped is handled and acked", self.user_config.group, user)
        tasks = [req.task for _, req in reqs if req.task is not None and not req.task.done()]
        if tasks:
            await asyncio.wait(tasks)
        while any(req.pq.wait_ack_count for _, req in reqs):
            await asyncio.sleep(DRAIN_POLL_S)
        for mq, req in reqs:
            if self.pop_table.get(mq) is req:
                del self.pop_table[mq]
            req.pq.dropped = True
        self.settled.discard(topic)
        self.narrowed.discard(topic)
        if not await self._wait_for_poppers(topic):
            self.topic_states[topic] = POP
            logger.info("consume_mode=auto: the broker has group {} in POP mode for topic {} again: popping it",
                        self.user_config.group, user)
            self._pop_wake.set()
            return
        self.topic_states[topic] = PULL
        self.switches += 1
        logger.info("consume_mode=auto: topic {}: popped work acked; pulling from the committed offsets", user)
        self.wake_rebalance()
        await self._drain_retry(topic)

    async def _on_ids_changed(self, header: Any) -> None:
        """A client joined or left: ask the peers again before popping every queue (a pull instance may have
        joined a POP group; it is warned, and this instance keeps to its share meanwhile)."""
        self.settled.clear()
        await super()._on_ids_changed(header)

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """As the POP engine; topics the first answer put in PULL are taken now, so "consuming" means it."""
        await super().start()
        if PULL in self.topic_states.values():
            await self.rebalancer.rebalance()

    def stop_pulling(self) -> None:
        """A stop during a switch: the switch ends where it is; pulled queues still leaving go back to the
        table, so the shutdown commits what their jobs finish (popped ones are in the pop table already)."""
        for task in [*self._switches.values(), *self._retiring]:
            task.cancel()
        for mq, req in self.leaving.items():
            self.table.setdefault(mq, req)
        self.leaving.clear()
        super().stop_pulling()

    async def _on_running_info(self, header: Any) -> dict[str, Any]:
        body = await super()._on_running_info(header)
        # queues being handed over still hold pulled messages: the peers' settle step must see them
        body["mqTable"].update({mq: req.pq.info(self.offset_store.read_memory(mq))
                                for mq, req in sorted(self.leaving.items())})
        body["properties"]["consumeMode"] = "AUTO"
        body["properties"]["autoTopicModes"] = ",".join(
            f"{self._user(t)}={s}" for t, s in sorted(self.topic_states.items()))
        return body
