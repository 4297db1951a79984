"""The group's mode in the broker's table (PULL or POP per topic), and one line when this instance disagrees.

RocketMQ 5.x brokers keep a *message request mode* per topic and group
(``rmqrun group mode``, ``mqadmin setConsumeMode``); QUERY_ASSIGNMENT answers
with it, queue by queue. An instance consuming in the other mode does not
fail, it consumes wrongly beside the rest of the group:

* a pull instance (queues allocated by the client, as a 4.x consumer does) in a
  group the broker has in POP mode pulls its share of the queues while the POP
  instances pop every queue: the same messages are handled twice, in silence;
* a POP instance in a group the broker has in PULL mode pops only the queues the
  broker allocates to it (``pop_push.py``): nothing is doubled, but the group does
  not share its queues, which is what POP was chosen for.

Both sides ask the same question (:func:`query_assignment`, one broker of the
topic after another) every rebalance and say the same kind of line
(:class:`ModeWatch`): one WARNING when this instance starts disagreeing (at
start or when the mode changes), with the fix, and one INFO line when they
agree again. A broker without the table (RocketMQ 4.x answers
REQUEST_CODE_NOT_SUPPORTED) has no POP: a pull instance says nothing there
and does not ask it again; a POP instance cannot run at all (``pop_push.py``).
``consume_mode: auto`` follows the table instead of disagreeing with it
(``mode_follow.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from loguru import logger

from rmqrun.client.assignment import AssignmentClient
from rmqrun.namespace import unwrap
from rmqrun.protocol.assignment import MessageQueueAssignment, MessageRequestMode
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError, RequestNotSupportedError, TopicNotExistError
from rmqrun.topic_names import is_retry_topic

if TYPE_CHECKING:
    from rmqrun.client.instance import ClientInstance
    from rmqrun.consumer.config import ConsumerConfig

#: strategies a broker's QUERY_ASSIGNMENT knows (others are asked for as AVG)
BROKER_STRATEGIES = ("AVG", "AVG_BY_CIRCLE")


def not_supported(exc: BaseException) -> bool:
    """The broker has no QUERY_ASSIGNMENT: RocketMQ 4.x (no mode table, no POP)."""
    return isinstance(exc, RequestNotSupportedError) or (
        isinstance(exc, BrokerError) and exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


async def query_assignment(instance: "ClientInstance", client: AssignmentClient, config: "ConsumerConfig",
                           topic: str) -> list[MessageQueueAssignment] | None:
    """This client's queues of ``topic`` and their mode, from the first broker of the topic that answers.

    Java asks one broker of the route. None: no broker had an answer (keep what you have); [] for a topic the
    name server does not know. A broker without QUERY_ASSIGNMENT raises at once (4.x: asking another broker of
    the same cluster tells nothing new); other failures are raised once every broker was tried."""
    try:
        queues = await instance.subscribe_queues(topic)
    except TopicNotExistError:
        return []
    strategy = config.allocate_strategy if config.allocate_strategy in BROKER_STRATEGIES else "AVG"
    last: BaseException | None = None
    for name in sorted({mq.broker_name for mq in queues}):
        addr = instance.broker_address(name)
        if addr is None:
            continue
        try:
            return await client.query_assignment(addr, topic, config.group, instance.client_id,
                                                 strategy_name=strategy)
        except Exception as exc:
            if not_supported(exc):
                raise
            last = exc
    if last is not None:
        raise last
    return None


def mode_of(found: list[MessageQueueAssignment] | None) -> MessageRequestMode | None:
    """The group's mode for the topic as one answer says it; None when the answer cannot tell (no answer, or no
    queue for this client: a PULL allocation may give a client none)."""
    if not found:
        return None
    if any(a.mode is MessageRequestMode.POP for a in found):
        return MessageRequestMode.POP
    return MessageRequestMode.PULL


class ModeWatch:
    """Per topic, the broker's mode last seen and whether this instance (``pull`` or ``pop``) disagrees with it.

    One WARNING when a disagreement begins, one INFO line when it ends; nothing in between, however often
    the same answer comes back."""

    def __init__(self, group: str, namespace: str | None, running: str) -> None:
        #: the user's group name (what the fix command takes)
        self.group = group
        self.namespace = namespace
        #: this instance's own mode: ``pull`` or ``pop``
        self.running = running
        #: wire topic -> the broker's mode last seen
        self.modes: dict[str, MessageRequestMode] = {}
        #: wire topics this instance disagrees on (told once)
        self.disagreeing: set[str] = set()

    def disagrees(self, mode: MessageRequestMode) -> bool:
        if self.running == "auto":
            return False  # it follows the table (mode_follow.py)
        return (mode is MessageRequestMode.POP) != (self.running == "pop")

    def note(self, topic: str, mode: MessageRequestMode | None, *, pull_queues: int = 0) -> None:
        """Record the broker's answer for ``topic``; ``pull_queues``: the PULL share a POP instance pops then."""
        if mode is None:
            return
        before = self.modes.get(topic)
        self.modes[topic] = mode
        user_topic = unwrap(self.namespace, topic)
        if not self.disagrees(mode):
            if topic in self.disagreeing:
                self.disagreeing.discard(topic)
                logger.info("topic {} is in {} mode for group {} now, as this instance consumes it",
                            user_topic, mode.value, self.group)
            return
        if topic in self.disagreeing:
            return
        self.disagreeing.add(topic)
        changed = f" (changed from {before.value})" if before is not None and before is not mode else ""
        if self.running == "pop":
            logger.warning("consume_mode=pop, but the broker has group {} in PULL mode for topic {}{}: this "
                           "instance pops only the {} queue(s) the broker allocates to it, like a pull rebalance. "
                           "To share every queue with the whole group: rmqrun group mode --group {} --topic {} "
                           "--mode pop", self.group, user_topic, changed, pull_queues, self.group, user_topic)
        else:
            logger.warning("consume_mode=pull, but the broker has group {} in POP mode for topic {}{}: POP instances "
                           "of the group pop every queue, so this instance's pulls handle the same messages again. "
                           "Run it with --consume-mode pop (or auto), or switch the group back: rmqrun group mode "
                           "--group {} --topic {} --mode pull", self.group, user_topic, changed, self.group,
                           user_topic)


class PullModeContext(Protocol):
    config: "ConsumerConfig"
    instance: "ClientInstance"
    mode_watch: ModeWatch

    def subscribed_topics(self) -> list[str]: ...


class PullModeCheck:
    """A pull instance's side: ask the brokers of each pulled topic for the group's mode, tell the watch.

    Brokers that answered REQUEST_CODE_NOT_SUPPORTED (4.x) are not asked again: they have no mode table."""

    def __init__(self, engine: PullModeContext) -> None:
        self.engine = engine
        self.client = AssignmentClient(engine.instance.pool)
        #: broker names that have no QUERY_ASSIGNMENT
        self.without_table: set[str] = set()

    async def check(self) -> None:
        engine = self.engine
        if engine.mode_watch.running != "pull":
            return  # a POP engine asks in its assignment loop; an auto engine follows the answer there
        if not engine.config.clustering:
            return  # broadcasting consumes every queue by design; POP has no such model
        for topic in engine.subscribed_topics():
            if is_retry_topic(topic):
                continue  # retry topics are always PULL
            try:
                if await self._all_without_table(topic):
                    continue
                found = await query_assignment(engine.instance, self.client, engine.config, topic)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not_supported(exc):
                    self.without_table.update(await self._broker_names(topic))
                    logger.debug("the brokers of topic {} have no message request modes (RocketMQ 4.x)", topic)
                else:
                    logger.debug("asking the broker for the mode of topic {} failed: {}", topic, exc)
                continue
            engine.mode_watch.note(topic, mode_of(found))

    async def _broker_names(self, topic: str) -> set[str]:
        try:
            return {mq.broker_name for mq in await self.engine.instance.subscribe_queues(topic)}
        except TopicNotExistError:
            return set()

    async def _all_without_table(self, topic: str) -> bool:
        names = await self._broker_names(topic)
        return bool(names) and names <= self.without_table

    async def run(self, interval: float) -> None:
        """Ask again every ``interval`` s (the rebalance period): a mode changed later is said as well."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.debug("mode check failed: {}", exc)
