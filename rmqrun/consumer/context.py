"""The narrow views of the push consumer that its parts are handed.

The puller, the rebalancer and the two consume services each need a handful
of the push consumer's attributes and methods. They used to take the
:class:`~rmqrun.consumer.push.PushConsumer` itself, so each of them imported
``push.py`` while ``push.py`` imported them: a cycle. Each part now names here
exactly what it uses, as a structural :class:`~typing.Protocol`; the push
consumer satisfies all of them without inheriting anything, and a test can hand
a part a small fake instead of a whole engine.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from rmqrun.client.failure_log import FailureLog
from rmqrun.client.instance import ClientInstance
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import Executor, JobResult
from rmqrun.consumer.offsets import OffsetStore
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.retry import SendBack
from rmqrun.model import MessageQueue, RecordData
from rmqrun.protocol.subscription import SubscriptionData


#: what a service is handed: a pulled queue's request and its messages, or a pop's request and its entries
Req = TypeVar("Req", contravariant=True)
Entry = TypeVar("Entry", contravariant=True)


class ConsumeService(Protocol[Req, Entry]):
    """What an engine asks of a consume service, in every mode (concurrent, orderly by queue or by key, POP,
    orderly POP): the one protocol every service implements (``consume_services.py`` builds them).

    ``submit`` hands over messages the engine has just cached for the request (``req.pq``): the service
    decides when and how they run. Pulled services take a :class:`PullRequest` and
    :class:`QueuedMessage` s, POP services a ``PopRequest`` and ``PopEntry`` s."""

    @property
    def in_flight(self) -> int: ...

    def start(self) -> None: ...

    async def stop(self, grace: float) -> None: ...

    def submit(self, req: Req, entries: Sequence[Entry]) -> None: ...


#: a service of pulled queues, as the puller and the rebalancer see it
PullConsumeService = ConsumeService[PullRequest, QueuedMessage]


class OrderedConsumeService(PullConsumeService, Protocol):
    """An orderly service (by queue or by key), as the rebalancer sees it: a queue with a job in flight
    is unlocked only once the job is over, and a relocked queue is kicked to consume again."""

    def is_busy(self, mq: MessageQueue) -> bool: ...

    def kick(self, req: PullRequest) -> None: ...


class OrderlyQueueLocks(Protocol):
    """The rebalancer as the orderly service sees it: broker queue locks and idle queues."""

    async def lock(self, mq: MessageQueue) -> bool: ...

    def on_orderly_idle(self, req: PullRequest) -> None: ...


class ConsumeCounters(Protocol):
    """The consume statistics a service updates."""

    failed: int

    def record(self, n: int, elapsed: float, result: JobResult, records: Sequence[Any] = (),
               stored: Sequence[int] | None = None) -> None: ...


class ConsumeStatusSink(Protocol):
    """The per-topic TPS/RT table a service reports each job to (GET_CONSUMER_RUNNING_INFO's statusTable)."""

    def on_consumed(self, topic: str, result: JobResult, elapsed_s: float) -> None: ...


@runtime_checkable
class HandlerCalls(Protocol):
    """An executor that can say whose handler call has begun: what the consume-timeout sweep needs.

    Java's cleanExpireMsg sends back only messages stamped with consumeStartTimeStamp,
    which is set just before the listener runs; a message handed to an executor may still
    wait (in a worker's pipe, behind a stuck call) and must not be swept. An executor
    without this method gets the fallback: a message counts as started when handed over.
    """

    def handler_calls(self, pq: ProcessQueue) -> Mapping[int, float | None]:
        """Queue offset -> ``time.monotonic()`` its handler call began, or None once that call
        has ended (its result not yet back); offsets whose call has not begun are absent."""
        ...


class ConsumeContext(Protocol):
    """What a consume service uses of the push consumer."""

    config: ConsumerConfig
    executor: Executor
    offset_store: OffsetStore
    send_back: SendBack
    stats: ConsumeCounters
    status: ConsumeStatusSink
    rebalancer: OrderlyQueueLocks

    def pull_requests(self) -> Iterable[PullRequest]: ...

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool: ...


class PullContext(Protocol):
    """What the puller uses of the push consumer."""

    config: ConsumerConfig
    instance: ClientInstance
    offset_store: OffsetStore
    consume_service: PullConsumeService
    paused: bool
    #: a queue whose pulls fail for a cause other than an unreachable broker: one incident per queue
    pull_failures: FailureLog

    def subscription(self, topic: str) -> SubscriptionData | None: ...

    def queue_thresholds(self) -> tuple[int, float]: ...

    def request_heartbeat(self) -> None: ...

    def topic_refused(self, topic: str) -> None: ...

    def note_suggested_broker(self, mq: MessageQueue, broker_id: int) -> None: ...

    async def pull_address(self, mq: MessageQueue) -> str: ...

    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...

    async def handle_offset_illegal(self, req: PullRequest) -> None: ...


class RebalanceContext(Protocol):
    """What the rebalancer uses of the push consumer: its queue table and how to change it."""

    config: ConsumerConfig
    instance: ClientInstance
    offset_store: OffsetStore
    consume_service: PullConsumeService
    table: dict[MessageQueue, PullRequest]
    removing: set[MessageQueue]

    def subscribed_topics(self) -> list[str]: ...

    def add_request(self, req: PullRequest) -> None: ...

    def stop_pull(self, mq: MessageQueue) -> None: ...

    def remove_request(self, mq: MessageQueue) -> None: ...

    def wake_rebalance(self) -> None: ...

    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...
