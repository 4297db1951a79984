"""POP_MESSAGE, NOTIFICATION and POLLING_INFO (RocketMQ 5.3.3 ``PopMessageProcessor``, ``NotificationProcessor``,
``PollingInfoProcessor``).

Refusals in the real broker's order and wording: the poll already too late for its born time
(POLLING_TIMEOUT), an unreadable broker, more than 32 messages (INVALID_PARAMETER), an unknown or unreadable
topic, a queue id past the readable queues (INVALID_PARAMETER), an unknown or disabled group, an unparsable
or non-TAG expression (refused as the pull path refuses SQL92: this broker filters by tag only). A pop that
finds nothing is held for ``pollTime`` (see :mod:`rmqrun.broker.pop.polling`) and answered POLLING_TIMEOUT
if nothing arrives, POLLING_FULL if too many wait already. In SYNC flush mode the answer waits until the
pop's checkpoints are on disk.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loguru import logger

from rmqrun.broker.longpoll import HeldPull
from rmqrun.broker.pop.service import PopRequest, now_ms
from rmqrun.broker.processors.common import FAQ_SUFFIX, BadRequest, answer, answer_text, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.topics import is_readable
from rmqrun.protocol.pop import (
    POP_MAX_MSG_NUMS,
    NotificationRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand

#: A pop whose born time + poll time lies further back than this is answered POLLING_TIMEOUT at once.
TIMEOUT_TOO_MUCH_MS = 500
#: A woken request with less poll time left than this is answered instead of held again.
MIN_REHOLD_MS = 20
#: Tag filters kept built (see PopProcessor._subscription); the table starts afresh when full.
SUBSCRIPTIONS_KEPT = 1024


class PopProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._sending: set[asyncio.Task[object]] = set()
        self._subs: dict[tuple[str, str | None, str | None], SubscriptionData] = {}

    # ------------------------------------------------------------------ handlers

    async def pop_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        resp = self.process_pop(conn, cmd, first=True, hold_ms=None)
        if resp is not None and resp.code == ResponseCode.SUCCESS:
            await self.broker.pop.ck_log.durable()
        return resp

    async def notification(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        return self.process_notification(conn, cmd, hold_ms=None)

    async def polling_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = parse_header(cmd, PollingInfoRequestHeader)
        except BadRequest as bad:
            return bad.response
        refused = self._topic_refusal(cmd, header.topic, header.queue_id, conn)
        if refused is not None:
            return refused
        num = self.broker.pop_polling.polling_num(header.topic, header.consumer_group, header.queue_id)
        return answer(cmd, header={"pollingNum": num})

    # ------------------------------------------------------------------ long polling

    def replay(self, held: HeldPull) -> None:
        """A held POP or NOTIFICATION woke (an arrival, or its time is up): run it again and send the answer."""
        if held.conn.closed:
            self.broker.pop_polling.take_deadline(held.request, held.conn)
            return
        deadline = self.broker.pop_polling.take_deadline(held.request, held.conn)
        left_ms = int((deadline - time.monotonic()) * 1000)
        hold_ms = left_ms if left_ms >= MIN_REHOLD_MS else 0
        try:
            if held.request.code == RequestCode.NOTIFICATION:
                resp = self.process_notification(held.conn, held.request, hold_ms=hold_ms)
            else:
                resp = self.process_pop(held.conn, held.request, first=False, hold_ms=hold_ms)
        except Exception as exc:  # pragma: no cover - a bug must still answer the client
            logger.opt(exception=exc).error("replaying a held POP request failed")
            resp = held.request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is None:
            return
        resp.opaque = held.request.opaque
        task = asyncio.get_running_loop().create_task(self._send_after_durable(held.conn, resp))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send_after_durable(self, conn: Connection, resp: RemotingCommand) -> None:
        if resp.code == ResponseCode.SUCCESS:
            await self.broker.pop.ck_log.durable()
        await conn.send_response(resp)

    # ------------------------------------------------------------------ POP_MESSAGE

    def process_pop(self, conn: Connection, cmd: RemotingCommand, *, first: bool,
                    hold_ms: int | None) -> RemotingCommand | None:
        """One pop; None when held. ``hold_ms`` None: the request's own poll time (first pass)."""
        try:
            header = parse_header(cmd, PopMessageRequestHeader, fast=_fast_pop_header)
        except BadRequest as bad:
            return bad.response
        broker = self.broker
        host = broker.config.store_host
        if first and header.born_time > 0 and now_ms() - header.born_time - header.poll_time > TIMEOUT_TOO_MUCH_MS:
            return answer(cmd, ResponseCode.POLLING_TIMEOUT, f"the broker[{host}] pop message is timeout too much")
        if not is_readable(broker.config.broker_permission):
            return answer(cmd, ResponseCode.NO_PERMISSION, f"the broker[{host}] pop message is forbidden")
        if header.max_msg_nums > POP_MAX_MSG_NUMS:
            return answer(cmd, ResponseCode.INVALID_PARAMETER,
                          f"the broker[{host}] pop message's num is greater than {POP_MAX_MSG_NUMS}")
        refused = self._topic_refusal(cmd, header.topic, header.queue_id, conn, pop=True)
        if refused is None:
            refused = self._group_refusal(cmd, header.consumer_group)
        if refused is not None:
            return refused
        sub = self._subscription(cmd, header.topic, header.exp, header.exp_type)
        if isinstance(sub, RemotingCommand):
            return sub
        if header.order and broker.pop.orders is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "this broker does not serve order-mode POP")
        req = PopRequest(group=header.consumer_group, topic=header.topic, queue_id=header.queue_id,
                         max_msgs=max(1, header.max_msg_nums), invisible_time=header.invisible_time,
                         init_mode=header.init_mode, subscription=sub, order=header.order,
                         attempt_id=header.attempt_id)
        result = broker.pop.pop(req)
        fields = result.header_fields(header.order)
        if result.records:
            return answer_text(cmd, ResponseCode.SUCCESS, "FOUND", fields, b"".join(result.records))
        wait_ms = header.poll_time if hold_ms is None else hold_ms
        if wait_ms > 0:
            deadline = time.monotonic() + wait_ms / 1000
            if broker.pop_polling.suspend(conn, cmd, header.topic, header.consumer_group, header.queue_id, sub,
                                          wait_ms, deadline=deadline):
                if header.order:
                    self._wake_when_unblocked(header.topic, header.consumer_group, header.queue_id, wait_ms)
                return None
            return answer_text(cmd, ResponseCode.POLLING_FULL, "NO_MESSAGE_IN_QUEUE", fields)
        return answer_text(cmd, ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", fields)

    def _wake_when_unblocked(self, topic: str, group: str, queue_id: int, wait_ms: int) -> None:
        """An order-mode pop held on blocked queues: wake it when the first block lapses (no arrival will)."""
        at = self.broker.pop.next_unblock_ms(topic, group, queue_id)
        if at is None:
            return
        delay_ms = at - now_ms() + 1
        if delay_ms < wait_ms:
            asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000, self.broker.pop_polling.wake, topic,
                                                  group, queue_id)

    def _topic_refusal(self, cmd: RemotingCommand, topic: str, queue_id: int, conn: Connection, *,
                       pop: bool = False) -> RemotingCommand | None:
        tc = self.broker.topics.get(topic) if self.broker.topics is not None else None
        if tc is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST,
                          f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if pop and not is_readable(tc.perm):
            return answer(cmd, ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums:
            return answer(cmd, ResponseCode.INVALID_PARAMETER,
                          f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                          f"[{tc.read_queue_nums}] consumer:[{conn.name}]")
        return None

    def _group_refusal(self, cmd: RemotingCommand, group: str) -> RemotingCommand | None:
        assert self.broker.groups is not None
        sgc = self.broker.groups.find(group)
        if sgc is None:
            return answer(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group [{group}] does not exist, {FAQ_SUFFIX}")
        if not sgc.consume_enable:
            return answer(cmd, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return None

    def _subscription(self, cmd: RemotingCommand, topic: str, exp: str | None,
                      exp_type: str | None) -> SubscriptionData | RemotingCommand:
        """The pop's tag filter, built once per (topic, expression, type): a consumer sends the same one with every
        pop, and nothing changes a SubscriptionData once built (a pop only reads it)."""
        key = (topic, exp, exp_type)
        sub = self._subs.get(key)
        if sub is not None:
            return sub
        try:
            sub = SubscriptionData.build(topic, exp if exp else "*", exp_type or "TAG")
        except (ValueError, TypeError):
            return answer(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        if not sub.is_tag_type:
            return answer(cmd, ResponseCode.SYSTEM_ERROR,
                          f"The broker does not support consumer to filter message by {sub.expression_type}")
        if len(self._subs) >= SUBSCRIPTIONS_KEPT:
            self._subs.clear()
        self._subs[key] = sub
        return sub

    # ------------------------------------------------------------------ NOTIFICATION

    def process_notification(self, conn: Connection, cmd: RemotingCommand, *,
                             hold_ms: int | None) -> RemotingCommand | None:
        try:
            header = parse_header(cmd, NotificationRequestHeader)
        except BadRequest as bad:
            return bad.response
        refused = self._topic_refusal(cmd, header.topic, header.queue_id, conn)
        if refused is None:
            refused = self._group_refusal(cmd, header.consumer_group)
        if refused is not None:
            return refused
        pop = self.broker.pop
        has = pop.has_message(header.consumer_group, header.topic, header.queue_id, order=header.order,
                              attempt_id=header.attempt_id)
        if has:
            return answer(cmd, header=_notification(True, False))
        wait_ms = header.poll_time if hold_ms is None else hold_ms
        if wait_ms > 0:
            sub = SubscriptionData.build(header.topic, "*")
            deadline = time.monotonic() + wait_ms / 1000
            if self.broker.pop_polling.suspend(conn, cmd, header.topic, header.consumer_group, header.queue_id,
                                               sub, wait_ms, deadline=deadline):
                return None
            return answer(cmd, header=_notification(False, True))
        return answer(cmd, header=_notification(False, False))


def _notification(has_msg: bool, polling_full: bool) -> dict[str, Any]:
    return {"hasMsg": has_msg, "pollingFull": polling_full}


def _fast_pop_header(ext: dict[str, str]) -> PopMessageRequestHeader | None:
    """POP_MESSAGE's header without the generic parser (the hot path, as pull's): None sends it the slow way, which
    gives the proper error for a missing or malformed field and reads an ``order`` other than "true"/"false" as
    Java's ``Boolean.parseBoolean`` would."""
    try:
        order = ext.get("order")
        if order is not None and order != "false" and order != "true":
            return None
        return PopMessageRequestHeader(
            consumer_group=ext["consumerGroup"], topic=ext["topic"], queue_id=int(ext["queueId"]),
            max_msg_nums=int(ext["maxMsgNums"]), invisible_time=int(ext["invisibleTime"]),
            poll_time=int(ext["pollTime"]), born_time=int(ext["bornTime"]), init_mode=int(ext["initMode"]),
            exp_type=ext.get("expType"), exp=ext.get("exp"), order=order == "true", attempt_id=ext.get("attemptId"),
            bname=ext.get("bname"))
    except (KeyError, ValueError, TypeError):
        return None
