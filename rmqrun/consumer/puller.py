"""Long-polling pulls for one message queue (Java ``DefaultMQPushConsumerImpl.pullMessage``).

One task per assigned queue loops: check flow control, pull with a 15 s
broker suspend, cache what came in the queue's :class:`ProcessQueue`, hand
it to the consume service, repeat. The order of the checks and the delays
are the Java client's:

1. cached messages > pullThresholdForQueue, or cached body MiB >
   pullThresholdSizeForQueue: retry in 50 ms;
2. concurrent and order_by key: offset span > consumeConcurrentlyMaxSpan: retry in 50 ms;
3. orderly (clustering) only: the queue must be locked; the first pull after
   a lock re-reads the offset from the broker; after a lock gap the consume
   service settles where to go on first (``lock_gap.py``); a pull broken by a
   lost connection leaves the lock
   unconfirmed until the broker grants it again (a restarted broker has
   forgotten every lock), and the offset is committed with a pull only while
   the lock is held without a gap;
4. pull errors back off 1 s (20 ms for broker flow control).

OFFSET_ILLEGAL drops the process queue, stores the broker's next offset and
lets the next rebalance take the queue again, as Java does.

A whole pull's messages (``submit_run``: concurrent and orderly by queue) are
handed to the consume service two loop steps after the answer was read: the
answer is cached at once (flow control counts it), the queue's next pull is
queued in the same step, and the connection's end-of-turn write, which carries
the pulls of every answer read together, runs before the hand-overs. So the
broker serves the next pulls while this process hands the last answers to the
workers, where it used to sit idle until that work was done (issue #38, same
tree A/B of 100k no-op drains: orderly on 4 queues +13 %, concurrent on 8 +5 %,
CPU per message unchanged). A queue still has one pull in flight, as Java's.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, cast

from loguru import logger

from rmqrun.aio import call_after_writes
from rmqrun.client.broker import PullStatus, PullTemplate
from rmqrun.consumer import defaults as d
from rmqrun.consumer.context import OrderedConsumeService, PullContext
from rmqrun.consumer.queued import QueuedRun
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.remoting.errors import (
    ConnectionClosedError, FlowControlError, ProtocolError, SubscriptionError, TopicNotExistError,
)
from rmqrun.remoting.message import RecordHead, scan_columns, scan_records
from rmqrun.remoting.message_props import PROPERTY_TAGS

if TYPE_CHECKING:
    from collections.abc import Callable

    from rmqrun.consumer.config import ConsumerConfig
    from rmqrun.consumer.process_queue import ProcessQueue
    from rmqrun.protocol.subscription import SubscriptionData

#: a queue held by flow control is not pulled, so its max offset (the lag) is asked for this often
MAX_OFFSET_REFRESH_S = 5.0
#: how long a puller held by flow control waits at most before it looks again when no message left the
#: cache: for what no ``made_room`` reports (limits changed by a rebalance or a reload, a queue dropped
#: without its task cancelled, the max-offset refresh above)
FLOW_CONTROL_RECHECK_S = 1.0

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4


def _now_ms() -> int:
    return int(time.time() * 1000)


def _mib(n: int) -> float:
    return n / (1024 * 1024)


async def pull_loop(engine: PullContext, req: PullRequest) -> None:
    """Pull ``req.mq`` until its process queue is dropped or the task is cancelled."""
    cfg = engine.config
    pq = req.pq
    mq = req.mq
    exception_delay = cfg.pull_time_delay_ms_when_exception / 1000
    flow_logged = 0
    refreshed_at = 0.0
    while not pq.dropped:
        pq.last_pull_timestamp = _now_ms()
        if engine.paused:
            await asyncio.sleep(d.PULL_TIME_DELAY_MS_WHEN_SUSPEND / 1000)
            continue
        limit_count, limit_mib = engine.queue_thresholds()
        if pq.msg_count > limit_count or _mib(pq.msg_size) > limit_mib:
            flow_logged += 1
            if flow_logged % 1000 == 1:
                logger.warning("flow control on {}: {} messages / {:.1f} MiB cached (limits {} / {} MiB)",
                               mq, pq.msg_count, _mib(pq.msg_size), limit_count, limit_mib)
            refreshed_at = await _refresh_max_offset(engine, req, refreshed_at)
            await wait_for_room(pq)
            continue
        if not cfg.orderly or cfg.order_by_key:  # key mode keeps finished-out-of-order messages cached too
            if pq.max_span() > cfg.consume_concurrently_max_span:
                flow_logged += 1
                if flow_logged % 1000 == 1:
                    logger.warning("flow control on {}: offset span {} over consume_concurrently_max_span {}",
                                   mq, pq.max_span(), cfg.consume_concurrently_max_span)
                refreshed_at = await _refresh_max_offset(engine, req, refreshed_at)
                await wait_for_room(pq)
                continue
        if cfg.orderly and cfg.clustering:
            if not pq.locked:
                await asyncio.sleep(exception_delay)
                continue
            if pq.lock_lapsed:  # locked again after a gap: the consume service checks the broker's offset first
                await asyncio.sleep(d.PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL / 1000)
                continue
            if not req.previously_locked:
                try:
                    offset = await engine.compute_pull_from_where(mq)
                except Exception as exc:
                    logger.warning("cannot read the offset of {} after locking it: {}", mq, exc)
                    await asyncio.sleep(exception_delay)
                    continue
                if offset < 0:
                    await asyncio.sleep(exception_delay)
                    continue
                if offset != req.next_offset:
                    logger.info("{}: first pull after lock starts at the broker's offset {} (was {})",
                                mq, offset, req.next_offset)
                req.previously_locked = True
                req.next_offset = offset
        sub = engine.subscription(mq.topic)
        if sub is None:
            logger.warning("no subscription for {}; pulling it later", mq)
            await asyncio.sleep(exception_delay)
            continue
        await _pull_and_settle(engine, req, sub, exception_delay)


async def wait_for_room(pq: "ProcessQueue", timeout: float = FLOW_CONTROL_RECHECK_S) -> None:
    """Wait, while ``pq`` is over its flow-control limits, until messages leave its cache (or ``timeout``).

    Java's puller sleeps 50 ms and looks again; that is the latest it resumes, and this resumes
    sooner: :meth:`ProcessQueue.made_room` wakes it in the same loop turn the cache shrank in, so
    it pulls as soon as there is room and never wakes the loop for nothing. A puller held for an
    hour by a stuck handler used to wake 72,000 times; now 3,600 (the ``timeout``).
    """
    waiter = pq.room
    if waiter is None or waiter.done():
        waiter = pq.room = asyncio.get_running_loop().create_future()
    recheck = asyncio.get_running_loop().call_later(timeout, _release, waiter)
    try:
        await waiter
    finally:
        recheck.cancel()
        if pq.room is waiter:
            pq.room = None


def _release(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _pull_and_settle(engine: PullContext, req: PullRequest, sub,  # type: ignore[no-untyped-def]
                           exception_delay: float) -> None:
    """One pull of ``req``, then the wait its outcome calls for: a broker's flow control, a subscription the broker
    has not heard yet, a deleted topic, any other failure (logged as this queue's incident unless the broker client
    already reports its address as unreachable), or the configured pull interval after a success."""
    cfg = engine.config
    mq = req.mq
    try:
        await _pull_once(engine, req, sub)
    except asyncio.CancelledError:
        raise
    except FlowControlError:
        await asyncio.sleep(d.PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL / 1000)
    except SubscriptionError as exc:
        # the broker has not seen our heartbeat for this subscription yet
        logger.debug("pull {} refused ({}); heartbeat and retry", mq, exc)
        engine.request_heartbeat()
        await asyncio.sleep(exception_delay)
    except TopicNotExistError:
        # deleted? the rebalance asks the name server and drops the topic's queues, with one warning
        logger.debug("pull {}: the broker has no topic {}", mq, mq.topic)
        engine.topic_refused(mq.topic)
        await asyncio.sleep(exception_delay)
    except Exception as exc:
        if cfg.orderly and cfg.clustering and isinstance(exc, ConnectionClosedError):
            _lock_unconfirmed(engine, req)
        # an unreachable broker is the broker client's one incident; any other cause is this queue's
        if engine.instance.broker.reported(exc):
            logger.debug("pull {} from offset {} failed: {}", mq, req.next_offset, exc)
        else:
            engine.pull_failures.failed(mq, f"pulls of {mq}", f"from offset {req.next_offset}: {exc}")
        await asyncio.sleep(exception_delay)
    else:
        engine.pull_failures.recovered(mq)
        if cfg.pull_interval_ms:
            await asyncio.sleep(cfg.pull_interval_ms / 1000)


async def _pull_once(engine: PullContext, req: PullRequest, sub) -> None:  # type: ignore[no-untyped-def]
    cfg = engine.config
    mq = req.mq
    pq = req.pq
    addr = await engine.pull_address(mq)
    # an orderly queue's offset in memory is ours to commit only while its lock is held without a gap
    mine = cfg.clustering and (not cfg.orderly or pq.holds_lock())
    commit_offset = engine.offset_store.read_memory(mq) if mine else -1
    sys_flag = FLAG_SUSPEND
    # offsets are committed on the master only: a pull sent to a slave (a broker's suggestion)
    # carries no commit-offset flag, as Java's PullAPIWrapper clears it there
    if commit_offset > 0 and addr == engine.instance.broker_address(mq.broker_name):
        sys_flag |= FLAG_COMMIT_OFFSET
    if cfg.post_subscription_when_pull:
        sys_flag |= FLAG_SUBSCRIPTION
    pull_started = time.monotonic()
    epoch = req.epoch
    result = await engine.instance.broker.pull(
        addr, _pull_template(cfg, req, sub).fill(req.next_offset, sys_flag, max(commit_offset, 0)),
        timeout=(cfg.broker_suspend_max_time_ms + 15_000) / 1000)
    if pq.dropped or req.epoch != epoch:  # dropped, or restarted after a lock gap while the pull was out
        return
    engine.note_suggested_broker(mq, result.suggest_which_broker_id)
    req.broker_max_offset = result.max_offset
    req.broker_max_offset_at = time.monotonic()
    status = result.status
    if status is PullStatus.FOUND:
        prev = req.next_offset
        req.next_offset = result.next_begin_offset
        run = _pulled_run(engine, req, sub, result.body, prev, time.monotonic() - pull_started)
        if not run.offsets:
            pq.note_pulled_to(req.next_offset)
            _correct_offset_when_idle(engine, req)
            return
        service = engine.consume_service
        submit_run = getattr(service, "submit_run", None)
        entries = None
        if submit_run is not None:  # a service that consumes whole pulls: cached as one unit
            pq.put_run(run, result.max_offset)
        else:
            entries = run.entries()
            pq.put(entries, result.max_offset)
        pq.note_pulled_to(req.next_offset)  # after the put: what the pull brought is cached
        if entries is None:  # handed over after the next pulls are written (the module's note)
            call_after_writes(_hand_over, submit_run, req, run)
        else:
            service.submit(req, entries)
    elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
        req.next_offset = result.next_begin_offset
        pq.note_pulled_to(req.next_offset)
        _correct_offset_when_idle(engine, req)
    elif status is PullStatus.OFFSET_ILLEGAL:
        logger.warning("{}: offset {} is illegal ({}); moving to {} and dropping the queue",
                       mq, req.next_offset, result.remark, result.next_begin_offset)
        req.next_offset = result.next_begin_offset
        pq.dropped = True
        await engine.handle_offset_illegal(req)


def _hand_over(submit_run: Callable[[PullRequest, QueuedRun], None], req: PullRequest, run: QueuedRun) -> None:
    """A pull's run handed to the consume service two loop steps after its answer was read, when the queue's next
    pull has been written (the module's note). Still before that pull's answer can be read, which takes a later
    step, so a queue's runs reach the service in the order they came. The engine's stop awaits
    :func:`rmqrun.aio.after_writes_done` before it stops the consume service: a pull task that had already ended
    in the step that read its last answer (a dropped queue, a failure) is found done by ``cancel_and_wait``,
    which then waits no step, and its run must still reach a service that waits for its jobs."""
    try:
        submit_run(req, run)
    except Exception as exc:  # as a failure of the pull that brought them: logged, the pulls go on
        logger.opt(exception=exc).error("handing the messages pulled from {} to the consume service failed: {}",
                                        req.mq, exc)


def _pull_template(cfg: "ConsumerConfig", req: PullRequest, sub: "SubscriptionData") -> PullTemplate:
    """The queue's pull header but for the offsets and the flag, made again only when what it holds changed
    (the subscription's version or expression, a reloaded setting)."""
    post = cfg.post_subscription_when_pull
    key = (cfg.group, cfg.pull_batch_size, cfg.broker_suspend_max_time_ms, post and sub.sub_string,
           sub.sub_version, sub.expression_type)
    template = req.pull_template
    if template is None or template.key != key:
        mq = req.mq
        template = req.pull_template = PullTemplate(key, PullMessageRequestHeader(
            consumer_group=cfg.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=0,
            max_msg_nums=cfg.pull_batch_size, sys_flag=0, commit_offset=0,
            suspend_timeout_millis=cfg.broker_suspend_max_time_ms, subscription=sub.sub_string if post else None,
            sub_version=sub.sub_version, expression_type=sub.expression_type, bname=mq.broker_name))
    return template


async def _refresh_max_offset(engine: PullContext, req: PullRequest, asked_at: float) -> float:
    """While flow control holds a queue (its handlers are slow or stuck), no pull answer brings its max
    offset: ask for it now and then, so its lag stays a current number while it grows (the lag matters
    most then). Returns when it was last asked."""
    now = time.monotonic()
    if now - max(asked_at, req.broker_max_offset_at) < MAX_OFFSET_REFRESH_S:
        return asked_at
    try:
        addr = await engine.pull_address(req.mq)
        high = await engine.instance.broker.get_max_offset(addr, req.mq)
    except Exception as exc:  # the pulls report a broker's failures; this is a best effort for the lag only
        logger.debug("max offset of {} not refreshed: {}", req.mq, exc)
        return now
    req.broker_max_offset = high
    req.broker_max_offset_at = time.monotonic()
    return now


def _lock_unconfirmed(engine: PullContext, req: PullRequest) -> None:
    """The connection to the queue's broker broke: whether the broker still holds our lock is unknown
    (a restarted broker has none), so no new job starts until it grants the lock again, which
    :meth:`ProcessQueue.note_locked` then takes for a gap. The consume service asks for it at once."""
    pq = req.pq
    if pq.locked:
        logger.info("{}: the connection to its broker broke; its lock is confirmed before consuming on", req.mq)
        pq.locked = False
        cast(OrderedConsumeService, engine.consume_service).kick(req)  # orderly mode: an orderly service


def _correct_offset_when_idle(engine: PullContext, req: PullRequest) -> None:
    """Java correctTagsOffset: with nothing cached, the next offset is safe to commit."""
    if req.pq.msg_count == 0:
        engine.offset_store.update(req.mq, req.next_offset, True)


def _pulled_run(engine: PullContext, req: PullRequest, sub: "SubscriptionData", body: bytes, prev: int,
                pull_seconds: float) -> QueuedRun:
    """A FOUND pull's records as one run (offsets, body sizes, record views), re-filtered by tag unless the
    subscription takes every tag; counted as pulled before the re-filter, as Java counts them."""
    mq = req.mq
    if sub.is_sub_all:
        # the hot path: the run's lists (and the store times the statistics read) in one pass, no object per record
        offsets, sizes, views, stamps = scan_columns(body)
        engine.status.on_pulled(mq.topic, len(offsets), pull_seconds)
        if offsets and offsets[0] < prev:
            logger.warning("{}: broker returned offset {} below the requested {}", mq, offsets[0], prev)
        return QueuedRun(offsets, sizes, views, stamps)
    view = memoryview(body)
    heads = scan_records(body)
    engine.status.on_pulled(mq.topic, len(heads), pull_seconds)
    if heads and heads[0].queue_offset < prev:
        logger.warning("{}: broker returned offset {} below the requested {}", mq, heads[0].queue_offset, prev)
    kept = [h for h in heads if _tag_matches(sub, h)]
    return QueuedRun([h.queue_offset for h in kept], [h.body_size for h in kept],
                     [view[h.start:h.start + h.size] for h in kept])


def _tag_matches(sub: "SubscriptionData", head: RecordHead) -> bool:
    """Java's client-side tag re-filter. A record whose properties do not decode is kept: the
    worker reports it undecodable and it goes to the DLQ, instead of stopping this queue's pulls."""
    try:
        tags = head.properties.get(PROPERTY_TAGS)
    except ProtocolError:
        return True
    return sub.matches_tag(tags)
