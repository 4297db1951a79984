"""What a request processor may use of the broker it serves, and nothing more.

The processors used to import :class:`rmqrun.broker.broker.Broker`, which in turn registers them: nine modules
in one import circle. They now name this :class:`typing.Protocol` instead. ``Broker`` satisfies it structurally
(nothing subclasses it), so the broker can import its processors at module level and a processor can be handed
any object with these members (a test double, a future second broker role) without the broker's lifecycle.

Each member is listed because a processor reads it; adding one is a deliberate widening of what processors see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from rmqrun.broker.config import BrokerConfig
    from rmqrun.broker.groups import ConsumerManager
    from rmqrun.broker.locks import RebalanceLockManager
    from rmqrun.broker.longpoll import PullHoldService
    from rmqrun.broker.messages import InnerMessage
    from rmqrun.broker.pop.polling import PopPolling
    from rmqrun.broker.pop.service import PopService
    from rmqrun.broker.stats import BrokerStats
    from rmqrun.broker.store import MessageStore
    from rmqrun.broker.subscription_groups import SubscriptionGroupTable
    from rmqrun.broker.topics import TopicTable
    from rmqrun.broker.writes import Stored
    from rmqrun.remoting.server import RemotingServer


@runtime_checkable
class BrokerContext(Protocol):
    """The broker as its processors see it: its tables and services, and the one door to the commit log."""

    #: the settings (names, limits, flush and polling modes); ``updateBrokerConfig`` replaces the whole
    #: frozen value while the broker runs, so read it at each use rather than keep a copy
    config: BrokerConfig
    #: the commit log, consume queues, consumer offsets, topic and group config files
    store: MessageStore
    #: topic configs (None until the broker has started; processors only run after that)
    topics: TopicTable | None
    #: subscription group configs (None until started, like ``topics``)
    groups: SubscriptionGroupTable | None
    #: connected producers and consumers, by group (heartbeats)
    consumers: ConsumerManager
    #: queue locks of orderly consumers
    locks: RebalanceLockManager
    #: pulls held for long polling
    hold: PullHoldService
    #: POP consumption: checkpoints, acks, revive (None until the broker has started)
    pop: PopService
    #: POP and NOTIFICATION requests held for long polling
    pop_polling: PopPolling
    #: put/get counters for the runtime-info answers and the named statistics of ``statsAll``
    stats: BrokerStats
    #: the remoting server: the registry registers handlers on it, the inspect answers show its port
    server: RemotingServer
    #: the name server this broker is known by, when whoever started both said so
    namesrv_address: str | None

    @property
    def address(self) -> str:
        """host:port that clients connect to and every stored message names as its store host."""
        ...

    async def put_message(self, msg: InnerMessage) -> Stored:
        """Store one message (a delay level diverts it to the schedule topic)."""
        ...

    async def put_messages(self, msgs: Sequence[InnerMessage]) -> list[Stored]:
        """Store messages of one queue back to back (a batch)."""
        ...

    def in_disk(self, commit_log_offset: int) -> bool:
        """Whether an offset lies further behind the log's end than memory would hold."""
        ...
