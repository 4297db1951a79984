"""Long-polling pops for one assignment (Java ``DefaultMQPushConsumerImpl.popMessage``).

Per assignment, :func:`pops_in_flight` loops (one for orderly POP, as Java has for
every assignment) repeat: flow control, pop with a ``pop_poll_time_ms`` long
poll, hand what came to the consume service. Java's one pop at a time makes a
pop's round trip the pace of the whole assignment (32 messages per round trip,
with the workers idle while the answer travels); pull has a request in flight
per queue. Several pops in flight keep the workers fed the same way.

An assignment of queue id -1 (the usual POP one) stands for every readable
queue of the topic on its broker, so it gets what that many one-queue
assignments would: the flow-control threshold of each queue and a pop on the
wire per queue (``MAX_POPS_IN_FLIGHT`` at most), as a pulling client has a
process queue and a pull in flight per queue. With Java's single threshold for
the whole topic (96 messages), the pace of a no-op drain is 96 messages per pop
round trip whatever the topic's size (issue #32).

1. un-acked messages of the assignment, plus what the pops in flight may bring,
   > :func:`window` (Java's ``popThresholdForQueue``, default 96, per queue the
   assignment covers once the handler is known to be quick enough): wait until
   acks (or a short answer) bring it back under
   (Java retries every 50 ms; so does this loop, at the latest). So the un-acked
   count stays within the window plus one pop, as with Java's single loop;
2. POP_MESSAGE with ``pop_batch_size`` messages at most, ``pop_invisible_time_ms``,
   the subscription's expression (tags or SQL, as a pull sends it) and the
   init mode from ``consume_from_where``;
3. messages whose tags do not match are acked at once (the broker's tag-hash
   filter can let a colliding tag through; the 5.x proxy acks NO_MATCH ones);
4. nothing found: pop again at once; POLLING_FULL, or a failure: wait
   ``pull_time_delay_ms_when_exception``.
"""

from __future__ import annotations

import asyncio
from operator import attrgetter
from typing import TYPE_CHECKING, Protocol

from loguru import logger

from rmqrun.client.pop_api import PopClient, PoppedMessage, PopStatus
from rmqrun.consumer import defaults as d
from rmqrun.consumer.pop_queue import PopEntry, PopRequest, now_ms
from rmqrun.consumer.pop_retry_drain import as_original
from rmqrun.protocol.pop import RETRY_FLAG_NORMAL
from rmqrun.remoting.errors import FlowControlError, SubscriptionError, TopicNotExistError

if TYPE_CHECKING:
    from rmqrun.client.failure_log import FailureLog
    from rmqrun.client.instance import ClientInstance
    from rmqrun.consumer.config import ConsumerConfig
    from rmqrun.consumer.pop_consume import PopConsumeService
    from rmqrun.consumer.pop_stats import PopStats
    from rmqrun.model import MessageQueue
    from rmqrun.protocol.subscription import SubscriptionData


class PopLoopContext(Protocol):
    config: "ConsumerConfig"
    instance: "ClientInstance"
    pop_client: PopClient
    pop_service: "PopConsumeService"
    pop_stats: "PopStats"
    paused: bool
    pull_failures: "FailureLog"

    def subscription(self, topic: str) -> "SubscriptionData | None": ...

    def request_heartbeat(self) -> None: ...

    async def broker_addr(self, mq: "MessageQueue") -> str: ...


_RETRY_FLAG = attrgetter("receipt.retry_flag")

#: pops on the wire at once per assignment (not orderly) at the least; flow control bounds what they may bring
POPS_IN_FLIGHT = 3
#: pops on the wire at most for an assignment of many queues (queue id -1): one per queue up to this
MAX_POPS_IN_FLIGHT = 16
#: handler seconds (per worker) the popped messages of a many-queue assignment may hold beyond Java's threshold:
#: many pop round trips' worth (and a few jobs of ``JOB_TARGET_S``), little beside the least invisible time
#: (5 s) and a stop's grace
QUEUED_WORK_S = 0.5


def pops_in_flight(config: "ConsumerConfig", req: PopRequest) -> int:
    """How many pops ``req`` keeps on the wire: one for orderly POP; else one per queue it covers, within
    ``POPS_IN_FLIGHT`` .. ``MAX_POPS_IN_FLIGHT``."""
    if config.orderly:
        return 1
    return max(POPS_IN_FLIGHT, min(req.queues, MAX_POPS_IN_FLIGHT))


def window(config: "ConsumerConfig", req: PopRequest, handler_s_per_msg: float | None, workers: int) -> int:
    """The flow-control threshold of ``req``: ``pop_threshold_for_queue`` for each queue it covers, as far as
    the ``workers`` get through that many within ``QUEUED_WORK_S`` of handler time.

    Java's threshold (for the whole assignment) until a job has measured the handler's time per message,
    and always for orderly POP or an assignment of one queue. So only quick handlers, whose pace is a pop's
    round trip, get the wider window: what waits for a worker is never much work, so it neither lapses (a
    popped message is not extended before its call starts) nor holds up a stop within its grace."""
    base = config.pop_threshold_for_queue
    if config.orderly or req.queues <= 1 or handler_s_per_msg is None:
        return base
    wide = base * req.queues
    if handler_s_per_msg > 0:
        wide = min(wide, int(workers * QUEUED_WORK_S / handler_s_per_msg))
    return max(base, wide)


async def pop_loop(engine: PopLoopContext, req: PopRequest) -> None:
    """Pop ``req.mq`` until its process queue is dropped, the request is stopping or the task is cancelled."""
    loops = pops_in_flight(engine.config, req)
    if loops == 1:
        await _one_loop(engine, req)
        return
    async with asyncio.TaskGroup() as group:  # one cancelled (the assignment dropped): all are
        for _ in range(loops):
            group.create_task(_one_loop(engine, req))


async def _one_loop(engine: PopLoopContext, req: PopRequest) -> None:
    cfg = engine.config
    pq = req.pq
    exception_delay = cfg.pull_time_delay_ms_when_exception / 1000
    flow_logged = 0
    while not pq.dropped and not req.stopping:
        if engine.paused:
            await asyncio.sleep(d.PULL_TIME_DELAY_MS_WHEN_SUSPEND / 1000)
            continue
        service = engine.pop_service  # read per turn: the handler's time is learned, the queues refreshed
        limit = window(cfg, req, service.handler_s_per_msg, service.workers())
        if pq.held > limit:
            if pq.wait_ack_count > limit:
                flow_logged += 1
                if flow_logged % 1000 == 1:
                    logger.warning("flow control on {}: {} popped messages not acked yet (window {}; "
                                   "pop_threshold_for_queue {} per queue)", req.mq, pq.wait_ack_count, limit,
                                   cfg.pop_threshold_for_queue)
            await pq.wait_for_room(limit, d.PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL / 1000)
            continue
        sub = engine.subscription(req.mq.topic)
        if sub is None:
            await asyncio.sleep(exception_delay)
            continue
        pq.reserve(cfg.pop_batch_size)
        try:
            delay = await _pop_once_settled(engine, req, sub, exception_delay)
        finally:
            pq.release(cfg.pop_batch_size)
        if delay:  # a pop that answered has already waited on the wire: no loop turn more before the next
            await asyncio.sleep(delay)


async def _pop_once_settled(engine: PopLoopContext, req: PopRequest, sub: "SubscriptionData",
                            exception_delay: float) -> float:
    """One pop; the seconds to wait before the next."""
    mq = req.mq
    try:
        status = await _pop_once(engine, req, sub)
    except asyncio.CancelledError:
        raise
    except FlowControlError:
        return d.PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL / 1000
    except SubscriptionError as exc:
        logger.debug("pop {} refused ({}); heartbeat and retry", mq, exc)
        engine.request_heartbeat()
        return exception_delay
    except TopicNotExistError:
        logger.debug("pop {}: the broker has no topic {}", mq, mq.topic)
        return exception_delay
    except Exception as exc:
        if engine.instance.broker.reported(exc):
            logger.debug("pop {} failed: {}", mq, exc)
        else:
            engine.pull_failures.failed(mq, f"pops of {mq}", str(exc))
        return exception_delay
    engine.pull_failures.recovered(mq)
    return exception_delay if status is PopStatus.POLLING_FULL else 0.0


async def _pop_once(engine: PopLoopContext, req: PopRequest, sub: "SubscriptionData") -> PopStatus:
    cfg = engine.config
    mq = req.mq
    addr = await engine.broker_addr(mq)
    req.pq.last_pop_ms = now_ms()
    result = await engine.pop_client.pop(
        addr, group=cfg.group, topic=mq.topic, broker_name=mq.broker_name, queue_id=mq.queue_id,
        max_msg_nums=cfg.pop_batch_size, invisible_time_ms=cfg.pop_invisible_time_ms,
        poll_time_ms=cfg.pop_poll_time_ms, init_mode=req.init_mode, exp_type=sub.expression_type,
        exp=sub.sub_string, order=cfg.orderly, message_class=PopEntry)
    if result.status is not PopStatus.FOUND or not result.messages:
        return result.status
    stats = engine.pop_stats
    stats.popped += len(result.messages)
    wanted: list[PopEntry] = []
    unwanted: list[PoppedMessage] = []
    popped: list[PopEntry] = result.messages  # type: ignore[assignment]
    if popped[0].__class__ is not PopEntry:  # a client that makes plain messages (message_class not taken)
        popped = list(map(PopEntry.of, popped))
    # the usual answer (one topic's messages, none from the pop retry topic): one lane, nothing revived
    lane = (result.plain_topic, mq.broker_name) if result.plain_topic is not None and req.original_topic is None \
        else None
    if req.original_topic is not None:  # a pop retry topic popped on its own: its messages as the topic's
        popped = [as_original(msg, req.original_topic) for msg in popped]  # PopEntry still (with_record)
    if lane is None:
        flags = list(map(_RETRY_FLAG, popped))
        stats.revived += len(flags) - flags.count(RETRY_FLAG_NORMAL)  # from the pop retry topic: handed out again
    if sub.matches_tag(None):  # the subscription filters nothing (no tag set): every message is wanted
        wanted = popped  # made as PopEntry by the decoder: nothing more per message
    else:
        for msg in popped:
            if _tag_matches(sub, msg):
                wanted.append(msg)
            else:
                unwanted.append(msg)
    if req.pq.dropped:
        return result.status  # dropped while the pop was out: the messages come back after their invisible time
    if unwanted:
        asyncio.ensure_future(_ack_unwanted(engine, addr, unwanted))
    if wanted:
        engine.pop_service.submit(req, wanted, lane)
    return result.status


def _tag_matches(sub: "SubscriptionData", msg: PoppedMessage) -> bool:
    return sub.matches_tag(msg.tags)


async def _ack_unwanted(engine: PopLoopContext, addr: str, messages: list[PoppedMessage]) -> None:
    """Ack messages the tag re-filter rejects: nobody in this group wants them."""
    for msg in messages:
        try:
            await engine.pop_client.ack(addr, group=engine.config.group, message=msg)
        except Exception as exc:  # they come back after their invisible time and are filtered again
            logger.debug("ack of a filtered-out message failed: {}", exc)
