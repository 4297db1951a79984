"""Fakes for the push engine, built on the protocols of ``rmqrun/consumer/context.py``.

The rebalancer, the consume services (every mode) and the POP engine each take a narrow view of the
push consumer; these fakes implement those views in memory, so a unit test drives the real logic and
reads what it did: which jobs an executor was handed and when, which queues were taken and dropped,
which offsets were committed to "the broker", which messages were sent back, acked or delayed.

Nothing here decides a behaviour: each fake records the calls it gets and answers what the test set.

* :class:`FakeExecutor`: jobs wait until the test :meth:`~FakeExecutor.finish` es them (or are answered
  at once by an ``answer`` function); it counts jobs running per dispatch key, so "one at a time per
  queue / per key" is a number to assert.
* :class:`FakeBroker` / :class:`FakeClient`: the broker client and client instance the rebalancer and
  the engines use (consumer list, queue locks, offsets, routes).
* :class:`FakeSendBack`, :class:`FakeCounters`, :class:`FakeStatusSink`, :class:`FakeLocks`: the
  send-back, the statistics, the status table and the rebalancer as a consume service sees them.
* :class:`FakeEngine`: a ``ConsumeContext`` and ``RebalanceContext`` in one, holding a real
  :class:`~rmqrun.consumer.offsets.RemoteOffsetStore` whose commits go to the :class:`FakeBroker`.
* :class:`FakePopClient` / :class:`FakeAssignments`: POP_MESSAGE, ACK, BATCH_ACK,
  CHANGE_MESSAGE_INVISIBLETIME and QUERY_ASSIGNMENT, recorded.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from rmqrun.client.pop_api import AckStatus, PoppedMessage, PopResult, PopStatus
from rmqrun.client.route import QueueData, TopicRouteData
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.consume_services import pop_service, pull_service
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.consumer.offsets import ReadOffsetType, RemoteOffsetStore
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue, PopRequest, now_ms
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.model import MessageQueue, RecordData, Status
from rmqrun.protocol.assignment import MessageQueueAssignment
from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.remoting.message import encode_stored, scan_records

NAMESRV = "127.0.0.1:9876"
BROKER = "broker-a"
BROKER_ADDR = "127.0.0.1:10911"


def config(**kw: Any) -> ConsumerConfig:
    """A validated consumer config of group ``G`` on topic ``T`` (``kw`` overrides)."""
    kw.setdefault("group", "G")
    kw.setdefault("namesrv", NAMESRV)
    kw.setdefault("subscriptions", {"T": "*"})
    return ConsumerConfig(**kw).validate()


def record(offset: int, *, topic: str = "T", key: str | None = None, reconsume_times: int = 0,
           queue_id: int = 0) -> bytes:
    """A stored record (what a pull brings) at ``offset``; ``key`` is its sharding key."""
    props = {"KEYS": str(offset)}
    if key is not None:
        props["__SHARDINGKEY"] = key
    return bytes(encode_stored(topic=topic, body=b"m%d" % offset, properties=props, queue_offset=offset,
                               queue_id=queue_id, reconsume_times=reconsume_times))


def queued(offsets: Iterable[int], *, keys: dict[int, str] | None = None, topic: str = "T") -> list[QueuedMessage]:
    """Cached messages at ``offsets`` (``keys``: a sharding key per offset), as the puller makes them."""
    out = []
    for o in offsets:
        payload = record(o, topic=topic, key=(keys or {}).get(o))
        out.append(QueuedMessage(o, len(payload), payload))
    return out


# --------------------------------------------------------------------------- executor

Answer = Callable[[ConsumeJob], "JobResult | Any"]


class FakeExecutor:
    """An :class:`~rmqrun.consumer.executor.Executor` whose jobs the test finishes.

    Without ``answer`` each job waits in :attr:`pending` until :meth:`finish`; with it, ``answer(job)``
    (a function or coroutine function) gives the result at once. Jobs running at the same time are
    counted per dispatch key (the job's ``dispatch_key``, else its queue): :attr:`most_at_once`."""

    enforces_time_limit = True  # no consume-timeout sweep task (the worker pool with a time limit)
    runs_chains = False

    def __init__(self, answer: Answer | None = None, *, parallelism: int = 4) -> None:
        self.answer = answer
        self.parallelism = parallelism
        self.started: list[ConsumeJob] = []
        self.pending: list[tuple[ConsumeJob, asyncio.Future[JobResult]]] = []
        self.running: Counter[Hashable] = Counter()
        #: per dispatch key, the most jobs that ever ran at once
        self.most_at_once: Counter[Hashable] = Counter()
        self.fail_with: BaseException | None = None

    @staticmethod
    def key_of(job: ConsumeJob) -> Hashable:
        return job.dispatch_key if job.dispatch_key is not None else job.mq

    async def run(self, job: ConsumeJob) -> JobResult:
        if self.fail_with is not None:
            raise self.fail_with
        if job.pq is not None and getattr(job.pq, "dropped", False):
            return JobResult([Status.NOT_RUN] * len(job))  # as the pool skips a dropped queue's job
        self.started.append(job)
        key = self.key_of(job)
        self.running[key] += 1
        self.most_at_once[key] = max(self.most_at_once[key], self.running[key])
        try:
            if self.answer is not None:
                result = self.answer(job)
                if inspect.isawaitable(result):
                    result = await result
                return result  # type: ignore[no-any-return]
            future: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
            self.pending.append((job, future))
            return await future
        finally:
            self.running[key] -= 1

    def finish(self, verdicts: list[Status] | Status = Status.SUCCESS, *, job: ConsumeJob | None = None,
               **result: Any) -> ConsumeJob:
        """Answer the oldest pending job (or ``job``): one verdict for all its messages, or one each."""
        index = 0 if job is None else next(i for i, (j, _) in enumerate(self.pending) if j is job)
        job, future = self.pending.pop(index)
        if isinstance(verdicts, Status):
            verdicts = [verdicts] * len(job)
        future.set_result(JobResult(list(verdicts), **result))
        return job

    def finish_all(self, verdict: Status = Status.SUCCESS) -> int:
        n = 0
        while self.pending:
            self.finish(verdict)
            n += 1
        return n


def succeed(job: ConsumeJob) -> JobResult:
    """An ``answer`` for :class:`FakeExecutor`: every message succeeds."""
    return JobResult([Status.SUCCESS] * len(job))


# --------------------------------------------------------------------------- what a consume service sees


class SubmittingExecutor(FakeExecutor):
    """A :class:`FakeExecutor` with the pool executor's ``submit`` (a job's future, no task awaiting ``run``),
    which the consume services take when an executor has it."""

    def submit(self, job: ConsumeJob) -> "asyncio.Future[JobResult]":
        return asyncio.ensure_future(self.run(job))


#: the executor a :class:`FakeEngine` makes when given none (the consume-service tests run with each:
#: :func:`each_executor_kind`)
DEFAULT_EXECUTOR: type[FakeExecutor] = FakeExecutor


class FakeSendBack:
    """The send-back (``retry.SendBack``): records each message sent back or re-published; ``accept`` answers."""

    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        #: (queue offset, delay level, max reconsume times) per send-back
        self.sent: list[tuple[int, int, int]] = []
        #: (queue offset, reconsume times) per re-publish (orderly messages at their limit)
        self.republished: list[tuple[int, int]] = []
        self.failures: list[Any] = []

    async def send_back(self, record: RecordData, broker_name: str, delay_level: int, max_reconsume_times: int,
                        failure: Any = None, *, reason: Any = None) -> bool:
        offset = scan_records(bytes(record))[0].queue_offset
        self.sent.append((offset, delay_level, max_reconsume_times))
        self.failures.append(failure)
        return self.accept

    async def republish(self, msg: Any, limit: int, times: int, failure: Any = None) -> bool:
        self.republished.append((msg.queue_offset, times))
        self.failures.append(failure)
        return self.accept

    async def close(self) -> None:
        pass


class FakeCounters:
    """``ConsumeCounters``: the jobs recorded and the failures counted."""

    def __init__(self) -> None:
        self.failed = 0
        self.jobs: list[tuple[int, JobResult]] = []

    def record(self, n: int, elapsed: float, result: JobResult, records: Any = (), stored: Any = None) -> None:
        self.jobs.append((n, result))


class FakeStatusSink:
    """``ConsumeStatusSink``: (topic, result) per job reported."""

    def __init__(self) -> None:
        self.consumed: list[tuple[str, JobResult]] = []

    def on_consumed(self, topic: str, result: JobResult, elapsed_s: float) -> None:
        self.consumed.append((topic, result))


class FakeLocks:
    """``OrderlyQueueLocks``: the rebalancer as an orderly service sees it; ``granted`` answers lock()."""

    def __init__(self, granted: bool = True) -> None:
        self.granted = granted
        self.asked: list[MessageQueue] = []
        self.idle: list[PullRequest] = []

    async def lock(self, mq: MessageQueue) -> bool:
        self.asked.append(mq)
        return self.granted

    def on_orderly_idle(self, req: PullRequest) -> None:
        self.idle.append(req)


# --------------------------------------------------------------------------- broker and client instance


class FakeBroker:
    """The broker client (``client.broker.BrokerClient``) as the rebalancer and the offset store use it.

    ``consumers``: the group's members; ``held_by_others``: queues whose lock another client holds;
    ``offsets``: the committed offsets the broker has (updated by commits)."""

    def __init__(self) -> None:
        self.failures: Any = None
        self.consumers: list[str] = []
        self.held_by_others: set[MessageQueue] = set()
        self.offsets: dict[MessageQueue, int] = {}
        self.max_offsets: dict[MessageQueue, int] = {}
        #: (queue, offset) per offset commit, in order
        self.commits: list[tuple[MessageQueue, int]] = []
        self.lock_calls: list[list[MessageQueue]] = []
        #: (queues, oneway) per unlock
        self.unlocks: list[tuple[list[MessageQueue], bool]] = []

    def reported(self, exc: BaseException) -> bool:
        return False

    async def get_consumer_list(self, addr: str, group: str) -> list[str]:
        return list(self.consumers)

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
        self.lock_calls.append(list(mqs))
        return {mq for mq in mqs if mq not in self.held_by_others}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list[MessageQueue], *,
                              oneway: bool) -> None:
        self.unlocks.append((list(mqs), oneway))

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        self.commits.append((mq, offset))
        self.offsets[mq] = offset

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int | None:
        return self.offsets.get(mq)

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        return self.max_offsets.get(mq, 0)


class FakeClient:
    """The client instance (``client.instance.ClientInstance``): routes, broker addresses, the broker client.

    ``routes``: topic -> its readable queues (a topic not in it does not exist on the name server)."""

    def __init__(self, client_id: str = "10.0.0.1@1", broker: FakeBroker | None = None) -> None:
        self.client_id = client_id
        self.broker = broker or FakeBroker()
        self.routes: dict[str, list[MessageQueue]] = {}
        self.addresses: dict[str, str] = {BROKER: BROKER_ADDR}
        self.pool: Any = None
        self.forgotten: list[str] = []
        self.refreshed: list[str] = []

    def queues(self, topic: str, n: int, broker: str = BROKER) -> list[MessageQueue]:
        """Give ``topic`` ``n`` queues on ``broker`` (replacing its route) and return them."""
        self.routes[topic] = [MessageQueue(topic, broker, i) for i in range(n)]
        return self.routes[topic]

    async def subscribe_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        if refresh:
            self.refreshed.append(topic)
        if topic not in self.routes:
            raise TopicNotExistError(f"no route of {topic}")
        return list(self.routes[topic])

    def route(self, topic: str) -> TopicRouteData | None:
        """The cached route: each broker's readable queues as :meth:`queues` gave them (None: no route)."""
        if topic not in self.routes:
            return None
        per_broker = Counter(mq.broker_name for mq in self.routes[topic])
        return TopicRouteData([QueueData(name, n, n) for name, n in sorted(per_broker.items())], topic=topic)

    def forget_route(self, topic: str) -> None:
        self.forgotten.append(topic)

    def broker_address(self, name: str) -> str | None:
        return self.addresses.get(name)

    def broker_addresses(self) -> list[str]:
        return list(self.addresses.values())

    async def update_route(self, topic: str) -> None:
        pass


# --------------------------------------------------------------------------- the engine


class FakeEngine:
    """A push engine as its parts see it (``ConsumeContext`` and ``RebalanceContext``).

    Its consume service is the real one of the config's mode (``consume_services.pull_service``), its
    offset store a real ``RemoteOffsetStore`` committing to :attr:`broker`. ``rebalancer`` is a
    :class:`FakeLocks` until a test puts a real :class:`~rmqrun.consumer.rebalance.Rebalancer` there."""

    def __init__(self, cfg: ConsumerConfig | None = None, *, executor: FakeExecutor | None = None,
                 client: FakeClient | None = None) -> None:
        self.config = cfg or config()
        self.executor = executor or DEFAULT_EXECUTOR()
        self.instance = client or FakeClient()
        self.broker = self.instance.broker

        async def commit(mq: MessageQueue, offset: int) -> None:
            await self.broker.update_consumer_offset(BROKER_ADDR, self.config.group, mq, offset)

        async def fetch(mq: MessageQueue) -> int | None:
            return await self.broker.query_consumer_offset(BROKER_ADDR, self.config.group, mq)

        self.offset_store = RemoteOffsetStore(self.config.group, commit, fetch)
        self.send_back = FakeSendBack()
        self.stats = FakeCounters()
        self.status = FakeStatusSink()
        self.rebalancer: Any = FakeLocks()
        self.table: dict[MessageQueue, PullRequest] = {}
        self.removing: set[MessageQueue] = set()
        self.consume_service: Any = pull_service(self.config.mode, self)
        #: what the engine was told to do, in order
        self.added: list[MessageQueue] = []
        self.removed: list[MessageQueue] = []
        self.stopped_pulls: list[MessageQueue] = []
        self.wakes = 0
        #: (queue, offset, error) per undecodable record dead-lettered
        self.undecodable: list[tuple[MessageQueue, int, str | None]] = []
        self.undecodable_accepted = True

    # ConsumeContext
    def pull_requests(self) -> Iterable[PullRequest]:
        return list(self.table.values())

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool:
        self.undecodable.append((mq, offset, error))
        return self.undecodable_accepted

    # RebalanceContext
    def subscribed_topics(self) -> list[str]:
        return list(self.config.all_subscriptions())

    def add_request(self, req: PullRequest) -> None:
        self.table[req.mq] = req
        self.added.append(req.mq)

    def stop_pull(self, mq: MessageQueue) -> None:
        self.stopped_pulls.append(mq)

    def remove_request(self, mq: MessageQueue) -> None:
        req = self.table.pop(mq, None)
        if req is not None:
            req.pq.dropped = True
        self.removed.append(mq)

    def wake_rebalance(self) -> None:
        self.wakes += 1

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The committed offset, else 0 (CONSUME_FROM_FIRST_OFFSET of an empty queue)."""
        offset = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
        return max(offset, 0)

    # helpers for tests
    def request(self, mq: MessageQueue, next_offset: int = 0, *, locked: bool = True) -> PullRequest:
        """A queue in the table (locked, as the rebalancer leaves an orderly one it took)."""
        pq = ProcessQueue(mq)
        if locked:
            pq.note_locked()
            pq.lock_lapsed = False
        req = PullRequest(mq, pq, next_offset)
        self.table[mq] = req
        return req

    def deliver(self, req: PullRequest, entries: list[QueuedMessage]) -> None:
        """What the puller does with a pulled batch: cache it, hand it to the consume service."""
        req.pq.put(entries)
        self.consume_service.submit(req, entries)


# --------------------------------------------------------------------------- POP


def popped(offset: int, *, topic: str = "T", queue_id: int = 0, reconsume_times: int = 0,
           invisible_ms: int = 60_000, order_count: int | None = None, retry: bool = False) -> PoppedMessage:
    """A message as POP_MESSAGE brings it, popped now and invisible for ``invisible_ms``."""
    receipt = ReceiptHandle(ck_start_offset=offset, pop_time=now_ms(), invisible_time=invisible_ms, revive_qid=0,
                            retry_flag="1" if retry else "0", broker_name=BROKER, queue_id=queue_id,
                            queue_offset=offset)
    rec = record(offset, topic=topic, reconsume_times=reconsume_times, queue_id=queue_id)
    return PoppedMessage(record=memoryview(bytearray(rec)), topic=topic, ack_topic=topic, receipt=receipt,
                         reconsume_times=reconsume_times, first_pop_time=receipt.pop_time, order_count=order_count)


@dataclass
class FakePopClient:
    """The POP calls (``client.pop_api.PopClient``), recorded. ``batches``: what each pop answers, in
    order; once they are used up a pop is held (a long poll with nothing to find) until cancelled."""

    batches: list[list[PoppedMessage]] = field(default_factory=list)
    ack_status: AckStatus = AckStatus.OK
    batch_ack_status: AckStatus = AckStatus.OK
    #: False: CHANGE_MESSAGE_INVISIBLETIME answers "no longer held" (None)
    change_ok: bool = True
    pops: list[dict[str, Any]] = field(default_factory=list)
    #: queue offsets acked one by one / in batch acks
    acked: list[int] = field(default_factory=list)
    batch_acked: list[list[int]] = field(default_factory=list)
    #: (queue offset, invisible time ms) per CHANGE_MESSAGE_INVISIBLETIME
    changed: list[tuple[int, int]] = field(default_factory=list)
    #: every receipt acked, single or batched, in order (which queue and offset each ack named)
    acked_receipts: list[ReceiptHandle] = field(default_factory=list)
    #: the receipt each CHANGE_MESSAGE_INVISIBLETIME named
    changed_receipts: list[ReceiptHandle] = field(default_factory=list)

    async def pop(self, addr: str, **kw: Any) -> PopResult:
        self.pops.append(kw)
        if self.batches:
            return PopResult(PopStatus.FOUND, self.batches.pop(0))
        await asyncio.Event().wait()  # held until the loop is cancelled
        raise AssertionError("unreachable")

    async def ack(self, addr: str, *, group: str, message: PoppedMessage, receipt: ReceiptHandle | None = None
                  ) -> AckStatus:
        self.acked.append(message.queue_offset)
        self.acked_receipts.append(receipt or message.receipt)
        return self.ack_status

    async def batch_ack(self, addr: str, *, group: str, broker_name: str,
                        acks: list[tuple[PoppedMessage, ReceiptHandle]]) -> AckStatus:
        self.batch_acked.append([m.queue_offset for m, _ in acks])
        self.acked_receipts.extend(r for _, r in acks)
        return self.batch_ack_status

    async def batch_ack_receipts(self, addr: str, *, group: str, broker_name: str,
                                 groups: list[tuple[str, list[ReceiptHandle]]]) -> AckStatus:
        self.batch_acked.append([r.queue_offset for _topic, receipts in groups for r in receipts])
        self.acked_receipts.extend(r for _topic, receipts in groups for r in receipts)
        return self.batch_ack_status

    async def change_invisible(self, addr: str, *, group: str, message: PoppedMessage, invisible_time_ms: int,
                               receipt: ReceiptHandle | None = None) -> ReceiptHandle | None:
        self.changed.append((message.queue_offset, invisible_time_ms))
        self.changed_receipts.append(receipt or message.receipt)
        if not self.change_ok:
            return None
        r = receipt or message.receipt
        return ReceiptHandle(r.ck_start_offset, now_ms(), invisible_time_ms, r.revive_qid, r.retry_flag,
                             r.broker_name, r.queue_id, r.queue_offset)

    @property
    def all_acked(self) -> list[int]:
        """Every acked offset, single or batched, sorted."""
        return sorted(self.acked + [o for batch in self.batch_acked for o in batch])


class FakeAssignments:
    """QUERY_ASSIGNMENT (``client.assignment.AssignmentClient``): ``answers[topic]`` is what the broker says."""

    def __init__(self) -> None:
        self.answers: dict[str, list[MessageQueueAssignment]] = {}
        self.asked: list[str] = []

    async def query_assignment(self, addr: str, topic: str, group: str, client_id: str, **kw: Any
                               ) -> list[MessageQueueAssignment] | None:
        self.asked.append(topic)
        return list(self.answers.get(topic, []))


class FakePopEngine:
    """A POP engine as its consume services see it (``pop_consume.PopContext``); ``service`` is the real
    service of the config's mode (``consume_services.pop_service``)."""

    def __init__(self, cfg: ConsumerConfig | None = None, *, executor: FakeExecutor | None = None) -> None:
        self.config = cfg or config(consume_mode="pop")
        self.executor = executor or DEFAULT_EXECUTOR()
        self.pop_client = FakePopClient()
        self.pop_stats = PopStats()
        self.stats = FakeCounters()
        self.status = FakeStatusSink()
        self.send_back = FakeSendBack()
        self.requests: list[PopRequest] = []
        self.undecodable: list[tuple[MessageQueue, int, str | None]] = []
        self.undecodable_accepted = True
        self.service: Any = pop_service(self.config.mode, self)

    def pop_requests(self) -> Iterable[PopRequest]:
        return list(self.requests)

    async def broker_addr(self, mq: MessageQueue) -> str:
        return BROKER_ADDR

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool:
        self.undecodable.append((mq, offset, error))
        return self.undecodable_accepted

    def request(self, topic: str = "T") -> PopRequest:
        """An assignment popping every queue of ``topic`` on the broker."""
        mq = MessageQueue(topic, BROKER, -1)
        req = PopRequest(mq, PopProcessQueue(mq))
        self.requests.append(req)
        return req

    def deliver(self, req: PopRequest, messages: list[PoppedMessage]) -> list[PopEntry]:
        """What the pop loop does with a pop's messages: entries handed to the service."""
        entries = [PopEntry.of(m) for m in messages]
        self.service.submit(req, entries)
        return entries


def each_executor_kind(request: Any, monkeypatch: Any) -> str:
    """Body of a module's parametrized autouse fixture: its engines get a :class:`FakeExecutor` (the services
    await ``run`` in a task) or a :class:`SubmittingExecutor` (they take its future), per ``request.param``."""
    monkeypatch.setattr(__import__(__name__, fromlist=["_"]), "DEFAULT_EXECUTOR",
                        SubmittingExecutor if request.param == "submit" else FakeExecutor)
    return str(request.param)
