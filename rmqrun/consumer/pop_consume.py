"""Consuming popped messages (Java ``ConsumeMessagePopConcurrentlyService``), plus invisibility extension.

Popped messages become jobs for the same executor the pull engine uses (per
lane, jobs of ``consume_message_batch_max_size`` messages while handler calls
are slow or not measured yet, up to ``JOB_MAX`` once they are known to take
about 0.1 s in all: ``job_size``), so crash isolation, long-call handling and
dispatch work as in pull mode. A job holds messages of several queues of one
topic on one broker (what the pops of a ``queue_id -1`` assignment bring, as
Java's ConsumeRequest of such an assignment does), each message acked with its
own receipt and its calls tracked by its index in the job. While
:meth:`PopConsumeService.hold` of a lane's jobs are at the executor, what later
pops bring waits and goes as one job when one comes back, so the messages of
several pops share a job (and a worker-pipe round trip) as a pull's do; each
keeps its own receipt and outcome. For each message of a finished job:

* success: ACK_MESSAGE with its newest receipt (the retry topic it came from,
  if it did), coalesced with others that finish within a few ms into one
  BATCH_ACK_MESSAGE (``pop_acks.py``);
* failure: CHANGE_MESSAGE_INVISIBLETIME to the Java client's POP delay for its
  reconsume count (``POP_DELAY_LEVELS_S``; a handler's delay level > 0 picks the
  entry instead). The broker revives it into the pop retry topic when that
  lapses, with ``reconsumeTimes + 1``;
* failure at ``max_reconsume_times`` (or a handler asking for the DLQ with a
  negative delay level): CONSUMER_SEND_MSG_BACK, which stores it in
  ``%DLQ%<group>``, then an ack. The Java 5.x remoting client instead keeps
  delaying such a message until it is two hours old and then acks it
  (``checkNeedAckOrDelay``: a silent drop); rmqrun does what the 5.x proxy does
  for its clients (``forwardMessageToDeadLetterQueue``: send back with delay
  level -1, then ack), so a message that never succeeds ends in the DLQ as in
  pull mode, after the same number of deliveries;
* undecodable: to the DLQ as stored, then an ack;
* not run (shutting down, an assignment dropped): left alone; the broker hands
  it out again when its invisibility lapses.

A message whose invisibility lapsed before its job started is not consumed
(Java ``isPopTimeout``): the broker may have given it to another client.

The same check is made again as the executor is about to start a job (its
:class:`PopJobView` reads as dropped once a message of it has lapsed), as Java
checks ``isPopTimeout`` when a ConsumeRequest starts: a job that waited for a
worker past the invisible time is not run.

Extension: Java lets a call run past the invisible time and the message is
then delivered twice. Here every message *whose handler call has begun* (the
executor says which: ``handler_calls``) and whose invisible time is two thirds
gone gets CHANGE_MESSAGE_INVISIBLETIME for another full invisible time, and the
receipt that answer brings is the one its ack uses, so a long call is never
handed to another client while it runs. Messages still waiting for a worker
are not extended, as Java extends nothing: they keep the broker's clock of
their pop, so what a killed instance held comes back one invisible time after
it was popped (plus the broker's revive delay), not after a later extension
(an extension at two thirds delayed it to 5/3 of the invisible time: the
31-34 s seen with 20 s on a 5.3.3 broker, where Java's came back at 27 s).
An executor that cannot say which calls have begun gets every message in
flight extended, as before. Orderly POP extends every message of its batch:
the ones behind a suspended failure must keep the queue blocked.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

from loguru import logger

from rmqrun.aio import call_after_writes
from rmqrun.client.pop_api import AckStatus, PopClient
from rmqrun.consumer.dead_letters import Failure
from rmqrun.consumer.executor import ConsumeJob, Executor, JobResult
from rmqrun.consumer.pop_acks import AckBatcher
from rmqrun.consumer.pop_queue import (
    OFFSET, ORDER, RUN, VISIBLE_AT, HandedJob, PopEntry, PopJobView, PopProcessQueue, PopRequest, now_ms,
)
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.model import MessageQueue, RecordData, Status
from rmqrun.protocol.pop import POP_DELAY_LEVELS_S

if TYPE_CHECKING:
    from rmqrun.consumer.config import ConsumerConfig
    from rmqrun.consumer.context import ConsumeCounters, ConsumeStatusSink
    from rmqrun.consumer.retry import SendBack

#: an in-flight message is extended once this share of its invisible time has passed
EXTEND_AT = 2 / 3
#: how often the extension sweep looks (at most; shorter invisible times are looked at more often)
EXTEND_TICK_S = 1.0
#: handler time a job aims at once calls are known to be short (see PopConsumeService.job_size)
JOB_TARGET_S = 0.1
#: most messages in one job: several pops' worth once calls are short (an assignment may hold several times
#: that un-acked: ``pop_loop.window``)
JOB_MAX = 256
#: a lane's jobs at the executor at once per worker before its newly popped messages wait to go as one job
HOLD_JOBS = 2
#: handler seconds per message below which a lane holds ONE job per worker at the executor: the workers then
#: spend less per message than the supervisor does (~8 us a popped message), so fewer, bigger jobs are what go
#: faster, and a job's messages are back within a few ms; slower calls keep ``HOLD_JOBS`` per worker
SHORT_CALL_S = 10e-6
#: weight of the newest job in the handler-time average
JOB_TIME_WEIGHT = 0.2


class PopContext(Protocol):
    """What the POP consume service uses of its engine."""

    config: "ConsumerConfig"
    executor: Executor
    pop_client: PopClient
    pop_stats: PopStats
    stats: "ConsumeCounters"
    status: "ConsumeStatusSink"
    send_back: "SendBack"

    def pop_requests(self) -> Iterable[PopRequest]: ...

    async def broker_addr(self, mq: MessageQueue) -> str: ...

    async def dead_letter_undecodable(self, mq: MessageQueue, record: RecordData, offset: int,
                                      error: str | None = None) -> bool: ...


class PopConsumeService:
    #: extend messages waiting behind others too, not only those whose handler call has begun (orderly POP)
    extends_waiting = False

    def __init__(self, engine: PopContext) -> None:
        self.engine = engine
        self.config = engine.config
        self.stats = engine.pop_stats
        self._tasks: set[asyncio.Task[None]] = set()
        self._extender: asyncio.Task[None] | None = None
        #: successes are acked together, a few ms apart at most (pop_acks.py)
        self.acks = AckBatcher(engine, self._ack)
        #: handler seconds per message, averaged over recent jobs (None: none finished yet); sizes jobs and
        #: the pop loops' window (pop_loop.window)
        self.handler_s_per_msg: float | None = None
        #: the jobs handed to the executor and not answered yet (which of their calls began: extension)
        self._views: set[PopJobView] = set()
        #: per lane (topic and broker) of an assignment, its jobs at the executor and the messages waiting
        self._lanes: dict[tuple[PopProcessQueue, tuple[str, str]], _Lane] = {}
        #: set by :meth:`stop`: nothing waits in a lane any more
        self._stopping = False
        #: lanes to flush two loop steps from now (:meth:`_flush_soon`)
        self._due: set[_Lane] = set()
        self._due_scheduled = False

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._extender = asyncio.ensure_future(self._extend_loop())

    async def stop(self, grace: float) -> None:
        """Wait up to ``grace`` s for jobs (their acks included); the rest come back after their invisible time.

        Extensions go on while jobs finish, then stop: what is left unfinished is
        released to the broker's clock."""
        self._stopping = True
        for lane in list(self._lanes.values()):
            self._flush(lane, self.job_size())
        if self._tasks:
            if grace > 0:
                _, pending = await asyncio.wait(list(self._tasks), timeout=grace)
            else:
                pending = set(self._tasks)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._extender is not None:
            self._extender.cancel()
            await asyncio.wait([self._extender])
            self._extender = None

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    # ----------------------------------------------------------------- submission

    def submit(self, req: PopRequest, entries: Sequence[PopEntry], lane_key: tuple[str, str] | None = None) -> None:
        """Consume a pop's messages: per topic (a retry topic apart) and broker, jobs of :meth:`job_size`
        messages, as Java's ConsumeRequests. Smaller than a pull's one job per batch when calls are slow,
        because a job's results come back when all of it is done: each message is acked within ~0.1 s of its
        own call's end, so a stop or a kill redelivers only what had not finished.

        Messages wait in their :class:`_Lane` while :meth:`hold` of its jobs are at the executor and they
        are fewer than a job: those of several pops (of any queues of the topic) then go as one job once a
        job comes back (a pop brings ~30; one job per pop cost the supervisor ~3.5x pull's worker-pipe
        frames per message).

        ``lane_key``: the (ack topic, broker) of every message, when the pop's answer says they share one (the
        usual answer: ``PopResult.plain_topic``), so it is not read per message."""
        req.pq.add(entries)
        by_queue: dict[tuple[str, str], Sequence[PopEntry]]
        if lane_key is not None:
            by_queue = {lane_key: entries}
        elif (keys := list(map(_LANE_KEY, entries))) and keys.count(keys[0]) == len(keys):  # one topic's messages
            by_queue = {keys[0]: entries}
        else:
            by_queue = defaultdict(list)
            for key, entry in zip(keys, entries):
                by_queue[key].append(entry)  # type: ignore[attr-defined]
        lanes = self._lanes
        for key, group in by_queue.items():
            lane = lanes.get((req.pq, key))
            if lane is None:
                lane = lanes[(req.pq, key)] = _Lane(req, (req.pq, key))
            lane.waiting.extend(group)
            self._flush_soon(lane)

    def _flush_soon(self, lane: "_Lane") -> None:
        """Flush ``lane`` two loop steps from now: the pop answers read in one turn (and the jobs back in it)
        make one job, not one each, and the pops that the freed room sends are on the wire before, so the broker
        serves them while the messages are handed over (as in the puller's note)."""
        self._due.add(lane)
        if not self._due_scheduled:
            self._due_scheduled = True
            call_after_writes(self._flush_due)

    def _flush_due(self) -> None:
        self._due_scheduled = False
        due, self._due = self._due, set()
        size = self.job_size()
        for lane in due:
            self._flush(lane, size)

    def _flush(self, lane: "_Lane", size: int) -> None:
        """Hand the lane's waiting messages over, queue by queue in offset order (each pop's messages of a queue,
        one checkpoint, then side by side: its ack's bitset is worked out in C), in jobs of ``size`` at most:
        full jobs at once, the rest only while fewer than :meth:`hold` of the lane's jobs are at the executor
        (or when stopping)."""
        waiting = lane.waiting
        hold = self.hold()
        if waiting and (len(waiting) >= size or lane.out < hold or self._stopping):
            waiting.sort(key=ORDER)  # queue by queue, in offset order: a checkpoint's messages side by side
            while waiting and (len(waiting) >= size or lane.out < hold or self._stopping):
                chunk = waiting[:size]
                del waiting[:size]
                lane.out += 1
                self._spawn_job(lane.req, chunk, lane)
        if not waiting and not lane.out and self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]

    def _job_back(self, lane: "_Lane | None", again: bool = True) -> None:
        """A lane's job is back from the executor (run or not): what waited behind it goes as one job (unless
        not ``again``)."""
        if lane is not None:
            lane.out -= 1
            if again:
                self._flush_soon(lane)

    def hold(self) -> int:
        """A lane's jobs at the executor before newly popped messages wait to join the next one: one per
        worker while calls are known to take under ``SHORT_CALL_S`` a message (the supervisor is then the
        limit, and a held job is back within ms; one job in all left a worker idle while the other ran once the
        window of an assignment of every queue holds several jobs' worth, ``pop_loop.window``), else
        ``HOLD_JOBS`` per worker: one running and one waiting in its pipe.
        A lane is every queue of an assignment, so fewer would leave a worker idle for a pop's round trip
        whenever its job ends (jobs of 1 ms calls: each pop's 32 go at once, as when a lane was one queue)."""
        per_msg = self.handler_s_per_msg
        if per_msg is not None and per_msg < SHORT_CALL_S:
            return self.workers()
        return HOLD_JOBS * self.workers()

    def workers(self) -> int:
        """How many handler calls run at once (the executor's parallelism)."""
        return max(1, int(getattr(self.engine.executor, "parallelism", 1) or 1))

    def job_size(self) -> int:
        """Messages per job: one handler call's worth (``consume_message_batch_max_size``) until calls are known
        to be short, then as many as take about ``JOB_TARGET_S`` of handler time (at most ``JOB_MAX``).

        A job is one round trip to a worker and its results come back together; one-message jobs cost the
        supervisor ~10x pull mode's CPU per message with a no-op handler. Jobs of ~0.1 s (a pull job of 32
        1 ms calls takes a third of that) keep what a job adds to an ack's wait, and what a stop at the end of
        its grace cuts short, that small; a 2 s call still gets a job of its own."""
        base = self.config.consume_message_batch_max_size
        per_msg = self.handler_s_per_msg
        if per_msg is None:
            return base
        fit = int(JOB_TARGET_S / per_msg) if per_msg > 0 else JOB_MAX
        return max(base, min(JOB_MAX, fit))

    def _learn(self, n: int, result: JobResult) -> None:
        """Moving average of the handler time per message (the job's worker-side time)."""
        if result.handler_seconds is None or n <= 0:
            return
        sample = result.handler_seconds / n
        old = self.handler_s_per_msg
        self.handler_s_per_msg = sample if old is None else old + (sample - old) * JOB_TIME_WEIGHT

    def _track(self, task: "asyncio.Task[None]") -> None:
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _spawn_job(self, req: PopRequest, entries: list[PopEntry], lane: "_Lane") -> None:
        """A lane's job, handed to the executor now, in the turn of the loop that made it; a task waits for its
        outcome. From the task's first step the job reached a worker a turn later: a pop's messages hold their
        flow-control slots through that turn too, and with the slots full (a no-op drain) the time a message
        holds one paces the assignment."""
        try:
            handed = self._hand_over(req, entries)
        except Exception as exc:  # not handed over: the lane is not left waiting for it, nor flow control
            logger.opt(exception=exc).error("a POP job could not be handed over; its messages come back after "
                                            "their invisible time")
            self._job_back(lane, again=False)
            self._release(req.pq, entries)
            return
        if handed is None:
            self._job_back(lane)
            return
        self._track(asyncio.ensure_future(self._finish(req, handed, lane)))

    def _task_done(self, task: "asyncio.Task[None]") -> None:
        """A job's task ended: forget it, and log what it raised (one callback per job, not two)."""
        self._tasks.discard(task)
        _log_failure(task)

    async def _finish(self, req: PopRequest, handed: HandedJob, lane: "_Lane | None") -> None:
        """A handed-over job's verdicts and outcomes (acks, delays, the DLQ)."""
        try:
            ran = await self._run_job(req, handed, lane)
            if ran is not None:
                await self._process_result(req, *ran)
        except asyncio.CancelledError:
            self._release(req.pq, handed.live)
            raise

    def _hand_over(self, req: PopRequest, entries: list[PopEntry]) -> "HandedJob | None":
        """The job of the messages that have not lapsed, handed to the executor (its future); None when none is
        left to run (each released)."""
        pq = req.pq
        live = self._not_expired(pq, entries)
        if not live or pq.dropped:
            self._release(pq, live)
            return None
        first = live[0].message
        queue_ids = {run.queue_id for run in set(map(RUN, live))}  # a job of several queues: the assignment's (-1)
        mq = MessageQueue(first.ack_topic, first.run.broker_name, first.queue_id if len(queue_ids) == 1 else -1)
        view = PopJobView(pq, live)
        job = ConsumeJob(mq, False, list(map(_RECORD, live)), list(map(OFFSET, live)), pq=view)
        executor = self.engine.executor
        submit = getattr(executor, "submit", None)  # the pool's: at the executor now; else a task awaiting run()
        future = submit(job) if submit is not None else asyncio.ensure_future(executor.run(job))
        self._views.add(view)
        return HandedJob(mq, live, view, job, future, time.monotonic())

    async def _run_job(self, req: PopRequest, handed: HandedJob,
                       lane: "_Lane | None") -> tuple[MessageQueue, list[PopEntry], JobResult] | None:
        """Wait for the job's verdicts; None when it did not run at all (each message released). Its lane is
        told once the executor has answered, before the acks."""
        pq = req.pq
        live, job, started = handed.live, handed.job, handed.started
        try:
            result = await handed.future
        except Exception as exc:  # not run at all (shutting down): they come back after their invisible time
            logger.debug("job of {} popped messages of {} not run: {}", len(live), req.mq, exc)
            self._release(pq, live)
            return None
        finally:
            self._views.discard(handed.view)
            self._job_back(lane)
        mq = handed.mq
        if result.verdicts.count(Status.NOT_RUN) < len(result.verdicts):  # any run: in C, not a step per message
            self._learn(len(live), result)
            self.engine.stats.record(len(live), time.monotonic() - started, result, job.records,
                                     stored=list(map(_STORED, live)))
            self.engine.status.on_consumed(req.mq.topic, result, time.monotonic() - started)
        return mq, live, result

    def _not_expired(self, pq: PopProcessQueue, entries: list[PopEntry]) -> list[PopEntry]:
        now = now_ms()
        if not entries or now < min(map(VISIBLE_AT, entries)):
            return entries  # none has lapsed: the usual case, read in C
        live = []
        for entry in entries:
            if entry.is_pop_timeout(now):
                self._count_expired(entry)
                pq.done(entry)
            else:
                live.append(entry)
        return live

    def _count_expired(self, entry: PopEntry) -> None:
        self.stats.expired += 1
        logger.warning("a popped message ({} queue {} offset {}) waited past its invisible time before its handler "
                       "call; the broker hands it out again", entry.message.ack_topic, entry.message.queue_id,
                       entry.message.queue_offset)

    @staticmethod
    def _release(pq: PopProcessQueue, entries: list[PopEntry]) -> None:
        for entry in entries:
            pq.done(entry)

    async def _process_result(self, req: PopRequest, mq: MessageQueue, entries: list[PopEntry],
                              result: JobResult) -> None:
        verdicts = result.verdicts
        if len(verdicts) == len(entries) and verdicts.count(Status.SUCCESS) == len(entries):
            await self.acks.ack_all(req.pq, entries)  # the common case, kept cheap: all of them succeeded
            return
        steps = []
        succeeded: list[PopEntry] = []
        whole = mq.queue_id >= 0  # a job of one queue; else each message's own queue (a job of several)
        for i, entry in enumerate(entries):
            verdict = result.verdicts[i] if i < len(result.verdicts) else Status.NOT_RUN
            if verdict is Status.SUCCESS:
                succeeded.append(entry)
            elif verdict is Status.NOT_RUN:
                if entry.is_pop_timeout():  # lapsed while waiting for a worker (PopJobView): not run
                    self._count_expired(entry)
                self._release(req.pq, [entry])
            elif verdict is Status.UNDECODABLE:
                steps.append(self._undecodable(req.pq, mq if whole else _broker_mq(entry), entry,
                                               result.error_of(i)))
            else:
                self.engine.stats.failed += 1
                steps.append(self._failed(req.pq, mq if whole else _broker_mq(entry), entry,
                                          result.delay_level(i), result.error_of(i)))
        if succeeded:
            steps.append(self.acks.ack_all(req.pq, succeeded))
        if len(steps) == 1:
            await steps[0]
        elif steps:
            await asyncio.gather(*steps)

    # ----------------------------------------------------------------- outcomes

    async def _ack(self, pq: PopProcessQueue, entry: PopEntry) -> None:
        receipt = await entry.settle()
        try:
            addr = await self.engine.broker_addr(_broker_mq(entry))
            status = await self.engine.pop_client.ack(addr, group=self.config.group, message=entry.message,
                                                      receipt=receipt)
        except Exception as exc:
            self.stats.ack_failures += 1
            logger.warning("ack of {} queue {} offset {} failed ({}); it comes back after its invisible time",
                           entry.message.ack_topic, entry.message.queue_id, entry.message.queue_offset, exc)
        else:
            if status is AckStatus.OK:
                self.stats.acks += 1
            else:
                self.stats.ack_failures += 1
                logger.warning("ack of {} queue {} offset {}: the broker no longer holds it at that receipt (its "
                               "invisibility lapsed?)", entry.message.ack_topic, entry.message.queue_id,
                               entry.message.queue_offset)
        finally:
            pq.done(entry)

    async def _failed(self, pq: PopProcessQueue, mq: MessageQueue, entry: PopEntry, delay_level: int,
                      error: str | None) -> None:
        msg = entry.message
        limit = self.config.effective_max_reconsume_times
        if delay_level < 0 or msg.reconsume_times >= limit:
            # send back: the broker stores it in %DLQ%<group> (its own count is at the limit, or level -1)
            if await self.engine.send_back.send_back(msg.record, msg.receipt.broker_name, min(delay_level, 0),
                                                     limit, Failure(mq, msg.queue_offset, error)):
                self.stats.dead_lettered += 1
                await self._ack(pq, entry)
                return
        await self._delay(pq, entry, delay_level)

    async def _undecodable(self, pq: PopProcessQueue, mq: MessageQueue, entry: PopEntry, error: str | None) -> None:
        if await self.engine.dead_letter_undecodable(mq, entry.message.record, entry.message.queue_offset, error):
            self.stats.dead_lettered += 1
            await self._ack(pq, entry)
        else:
            await self._delay(pq, entry, 0)

    async def _delay(self, pq: PopProcessQueue, entry: PopEntry, delay_level: int) -> None:
        """Java changePopInvisibleTime: invisible for the delay of its level (0: its reconsume count)."""
        level = delay_level if delay_level > 0 else entry.message.reconsume_times
        delay_s = POP_DELAY_LEVELS_S[min(level, len(POP_DELAY_LEVELS_S) - 1)]
        receipt = await entry.settle()
        try:
            addr = await self.engine.broker_addr(_broker_mq(entry))
            await self.engine.pop_client.change_invisible(addr, group=self.config.group, message=entry.message,
                                                          invisible_time_ms=delay_s * 1000, receipt=receipt)
            self.stats.nacks += 1
        except Exception as exc:
            logger.warning("delaying failed message {} queue {} offset {} failed ({}); it comes back after its "
                           "invisible time", entry.message.ack_topic, entry.message.queue_id,
                           entry.message.queue_offset, exc)
        finally:
            pq.done(entry)

    # ----------------------------------------------------------------- extension

    async def _extend_loop(self) -> None:
        tick = min(EXTEND_TICK_S, self.config.pop_invisible_time_ms / 1000 / 10)
        while True:
            await asyncio.sleep(tick)
            try:
                self.extend_due(now_ms())
            except Exception as exc:  # never let one bad entry stop the sweep
                logger.opt(exception=exc).warning("invisibility extension sweep failed")

    def extend_due(self, now: int) -> int:
        """Start an extension for every message past ``EXTEND_AT`` of its invisible time whose handler call has
        begun (every unsettled one with :attr:`extends_waiting`, or when the executor cannot say)."""
        started = 0
        begun = None if self.extends_waiting else self._begun()
        for req in list(self.engine.pop_requests()):
            for entry in list(req.pq.entries):
                if begun is not None and entry not in begun:
                    continue
                if entry.needs_extension(now, EXTEND_AT) and not entry.is_pop_timeout(now):
                    entry.extending = asyncio.get_running_loop().create_future()
                    asyncio.ensure_future(self._extend(entry))
                    started += 1
        return started

    def _begun(self) -> set[PopEntry] | None:
        """The messages whose handler call has begun (ended ones whose result is on its way included); None when
        the executor cannot say (no ``handler_calls``).

        By index in the job (``handler_call_indexes``): a job of several queues may hold one offset twice. An
        executor that names calls only by offset has each message at such an offset taken as begun."""
        executor = self.engine.executor
        by_index = getattr(executor, "handler_call_indexes", None)
        calls = getattr(executor, "handler_calls", None)
        if by_index is None and calls is None:
            return None
        out: set[PopEntry] = set()
        for view in list(self._views):
            entries = view.entries
            if by_index is not None:
                out.update(entries[i] for i in by_index(view) if 0 <= i < len(entries))
                continue
            offsets = calls(view)  # type: ignore[misc]
            if offsets:
                out.update(e for e in entries if e.message.queue_offset in offsets)
        return out

    async def _extend(self, entry: PopEntry) -> None:
        done = entry.extending
        try:
            addr = await self.engine.broker_addr(_broker_mq(entry))
            new = await self.engine.pop_client.change_invisible(
                addr, group=self.config.group, message=entry.message,
                invisible_time_ms=self.config.pop_invisible_time_ms, receipt=entry.receipt)
            if new is None:
                self.stats.extension_failures += 1
                logger.warning("{} queue {} offset {}: its invisibility could not be extended (the broker no longer "
                               "holds it at that receipt)", entry.message.ack_topic, entry.message.queue_id,
                               entry.message.queue_offset)
            else:
                entry.receipt = new
                entry.extensions += 1
                self.stats.extensions += 1
        except Exception as exc:
            self.stats.extension_failures += 1
            logger.warning("extending the invisibility of {} queue {} offset {} failed: {}",
                           entry.message.ack_topic, entry.message.queue_id, entry.message.queue_offset, exc)
        finally:
            entry.extending = None
            if done is not None and not done.done():
                done.set_result(None)


@dataclass(slots=True, eq=False)
class _Lane:
    """The queues of one topic of an assignment on one broker (ack topic, broker: a retry topic is a lane of its
    own): its jobs at the executor (``out``) and the popped messages waiting to join the next job."""

    req: PopRequest
    key: tuple[PopProcessQueue, tuple[str, str]]
    out: int = 0
    waiting: list[PopEntry] = field(default_factory=list)


#: a popped message's lane: (ack topic, broker); its queue id (a PopEntry is its message: its own slots)
_LANE_KEY = attrgetter("run.ack_topic", "run.broker_name")
_RECORD = attrgetter("record")
#: a popped message's store time, read with the pop's answer (0: unknown)
_STORED = attrgetter("stored")


def _broker_mq(entry: PopEntry) -> MessageQueue:
    """The queue a receipt belongs to, for the broker address."""
    return MessageQueue(entry.message.ack_topic, entry.receipt.broker_name, entry.message.queue_id)


def _log_failure(task: "asyncio.Task[None]") -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.opt(exception=task.exception()).error("a POP consume job failed unexpectedly; its messages come "
                                                     "back after their invisible time")
