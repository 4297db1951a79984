"""PULL_MESSAGE: the hot path, mirroring 4.9.8 ``PullMessageProcessor``.

Checks in the real broker's order (group config, topic, queue id, then the
subscription: from the request when the subscription bit is set, as the C++
client and the pull consumers send it, otherwise the one the group's
heartbeat registered, which must be at least as new as the request's
``subVersion``), then reads at most 32 messages (the broker's
``maxTransferCountOnMessageInMemory``; 8 when the batch starts far behind the
log's end, ``...OnDisk``) filtered by tags code, and maps the
store's status to the answer exactly like the real broker: FOUND → SUCCESS
with the stored records as the body; nothing new → PULL_NOT_FOUND (held for a
long poll when the suspend bit is set); out of range → PULL_OFFSET_MOVED;
everything filtered out → PULL_RETRY_IMMEDIATELY. The remark is the store
status and ``nextBeginOffset`` tells the client where to continue.

The commit offset piggybacked on a pull (commit bit) is stored before the
answer, like the real broker, and only on the first pass (not when a held
pull is replayed). A replayed pull is answered with a JSON header even if the
request was binary: RocketMQ writes those answers with its default
serializer, and clients must cope. A PULL_OFFSET_MOVED answer also stores an
OffsetMovedEvent in OFFSET_MOVED_EVENT, as the real broker does (so commit-log
offsets stay aligned with a real broker's for the same traffic).
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time

from loguru import logger

from rmqrun.broker.javamap import JavaPropertyMap
from rmqrun.broker.longpoll import HeldPull
from rmqrun.broker.messages import InnerMessage
from rmqrun.broker.processors.common import FAQ_SUFFIX, BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.store import GetMessageStatus as S
from rmqrun.broker.store import GetResult
from rmqrun.broker.store.subscription_groups import SubscriptionGroupConfig
from rmqrun.broker.topics import is_readable
from rmqrun.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand, SerializeType
from rmqrun.remoting.message import PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS
from rmqrun.remoting.message_props import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS, PROPERTY_TAGS
from rmqrun.topic_names import OFFSET_MOVED_EVENT

_LONG = struct.Struct(">q")
_NOT_FOUND = {S.OFFSET_FOUND_NULL, S.OFFSET_OVERFLOW_ONE}
_MOVED = {S.OFFSET_OVERFLOW_BADLY, S.OFFSET_TOO_SMALL}
_RETRY = {S.NO_MATCHED_MESSAGE, S.MESSAGE_WAS_REMOVING}


class PullProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self._sending: set[asyncio.Task[object]] = set()

    async def pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        return self.process(conn, cmd, allow_suspend=True)

    def replay(self, held: HeldPull) -> None:
        """Answer a held pull now (a message arrived or its time is up)."""
        if held.conn.closed:
            return
        # RocketMQ writes a woken pull's answer with its default (JSON) serializer.
        request = dataclasses.replace(held.request, serialize_type=SerializeType.JSON)
        try:
            resp = self.process(held.conn, request, allow_suspend=False)
        except Exception as exc:  # pragma: no cover - a bug must still answer the client
            logger.opt(exception=exc).error("replaying a held pull failed")
            resp = held.request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is None:
            return
        resp.opaque = held.request.opaque
        task = asyncio.get_running_loop().create_task(held.conn.send_response(resp))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def _offset_moved_event(self, group: str, topic: str, queue_id: int, requested: int, new: int) -> None:
        """``generateOffsetMovedEvent``: a record of the correction in OFFSET_MOVED_EVENT, as RocketMQ keeps."""
        broker = self.broker
        body = fastjson.dumps({"consumerGroup": group, "messageQueue": {
            "brokerName": broker.config.broker_name, "queueId": queue_id, "topic": topic},
            "offsetNew": new, "offsetRequest": requested})
        props = JavaPropertyMap([(PROPERTY_TAGS, group), (PROPERTY_DELAY_TIME_LEVEL, "0"), (PROPERTY_KEYS, group)])
        msg = InnerMessage(topic=OFFSET_MOVED_EVENT, queue_id=0, body=body, properties=props,
                           properties_string=props.to_string(), born_timestamp=int(time.time() * 1000),
                           born_host=broker.address, store_host=broker.address)
        task = asyncio.get_running_loop().create_task(broker.put_message(msg))
        self._sending.add(task)
        task.add_done_callback(self._event_stored)

    def _event_stored(self, task: "asyncio.Task[object]") -> None:
        self._sending.discard(task)  # type: ignore[arg-type]
        if not task.cancelled() and task.exception() is not None:
            logger.warning("storing an OFFSET_MOVED_EVENT failed: {!r}", task.exception())

    def process(self, conn: Connection, cmd: RemotingCommand, *, allow_suspend: bool) -> RemotingCommand | None:
        """One pull, in the real broker's order: parse, refuse, find the subscription, read, answer, commit.

        None means the pull is held (long polling) and answered later by :meth:`replay`.
        """
        try:
            header = parse_header(cmd, PullMessageRequestHeader, fast=_fast_header)
        except BadRequest as bad:
            return bad.response
        if not is_readable(self.broker.config.broker_permission):  # updateBrokerConfig brokerPermission=2
            return answer(cmd, ResponseCode.NO_PERMISSION,
                          f"the broker[{self.broker.config.store_host}] pulling message is forbidden")
        sgc = self._group_and_queue(conn, cmd, header)
        if isinstance(sgc, RemotingCommand):
            return sgc
        sub = self._subscription(cmd, header, sgc)
        if isinstance(sub, RemotingCommand):
            return sub
        result = self._read(header, sub)
        response = self._answer(conn, cmd, header, sub, result, allow_suspend=allow_suspend)
        if allow_suspend and header.sys_flag & PULL_FLAG_COMMIT_OFFSET:
            self.broker.store.consumer_offsets.commit(header.consumer_group, header.topic, header.queue_id,
                                                      header.commit_offset)
        return response

    def _group_and_queue(self, conn: Connection, cmd: RemotingCommand,
                         header: PullMessageRequestHeader) -> SubscriptionGroupConfig | RemotingCommand:
        """The group's config, or the refusal: group unknown or disabled, topic unknown or unreadable, bad queue id."""
        broker = self.broker
        assert broker.groups is not None and broker.topics is not None
        group = header.consumer_group
        sgc = broker.groups.find(group)
        if sgc is None:
            return answer(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group [{group}] does not exist, {FAQ_SUFFIX}")
        if not sgc.consume_enable:
            return answer(cmd, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        topic = header.topic
        tc = broker.topics.get(topic)
        if tc is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST,
                          f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if not is_readable(tc.perm):
            return answer(cmd, ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        queue_id = header.queue_id
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return answer(cmd, ResponseCode.SYSTEM_ERROR,
                          f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                          f"[{tc.read_queue_nums}] consumer:[{conn.name}]")
        return sgc

    def _subscription(self, cmd: RemotingCommand, header: PullMessageRequestHeader,
                      sgc: SubscriptionGroupConfig) -> SubscriptionData | RemotingCommand:
        """The request's own subscription (subscription bit), else the one the group's heartbeat registered."""
        group, topic = header.consumer_group, header.topic
        if header.sys_flag & PULL_FLAG_SUBSCRIPTION:
            try:
                sub = SubscriptionData.build(topic, header.subscription, header.expression_type or "TAG")
            except ValueError:
                return answer(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        else:
            info = self.broker.consumers.group(group)
            if info is None:
                return answer(cmd, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                              f"the consumer's group info not exist{FAQ_SUFFIX}")
            if not sgc.consume_broadcast_enable and info.message_model.value == "BROADCASTING":
                return answer(cmd, ResponseCode.NO_PERMISSION,
                              f"the consumer group[{group}] can not consume by broadcast way")
            found = info.subscriptions.get(topic)
            if found is None:
                return answer(cmd, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                              f"the consumer's subscription not exist{FAQ_SUFFIX}")
            if found.sub_version < header.sub_version:
                return answer(cmd, ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            sub = found
        if not sub.is_tag_type:
            return answer(cmd, ResponseCode.SYSTEM_ERROR,
                          f"The broker does not support consumer to filter message by {sub.expression_type}")
        return sub

    def _read(self, header: PullMessageRequestHeader, sub: SubscriptionData) -> GetResult:
        """At most the in-memory batch, filtered by tags code; smaller when it starts far behind the log's end."""
        broker = self.broker
        cfg = broker.config
        accept = None if sub.is_sub_all or sub.class_filter_mode else sub.matches_tags_code
        max_msgs = min(header.max_msg_nums, cfg.max_transfer_count_in_memory)
        result = broker.store.get(header.topic, header.queue_id, header.queue_offset, max(1, max_msgs),
                                  cfg.max_transfer_bytes_in_memory, accept)
        if result.records and broker.in_disk(_LONG.unpack_from(result.records[0], PHYSICAL_OFFSET_POS)[0]):
            _cap_on_disk(result, cfg.max_transfer_count_on_disk, cfg.max_transfer_bytes_on_disk)
        return result

    def _answer(self, conn: Connection, cmd: RemotingCommand, header: PullMessageRequestHeader,
                sub: SubscriptionData, result: GetResult, *, allow_suspend: bool) -> RemotingCommand | None:
        """The store's status as the real broker answers it (None: held for a long poll)."""
        broker = self.broker
        cfg = broker.config
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        status = result.status
        fields = {
            "suggestWhichBrokerId": 0,
            "nextBeginOffset": result.next_begin_offset,
            "minOffset": result.min_offset,
            "maxOffset": result.max_offset,
        }
        broker.stats.on_get(group, topic, result.message_count if status is S.FOUND else 0,
                            sum(len(r) for r in result.records) if status is S.FOUND else 0)
        if status is S.FOUND:
            return answer(cmd, ResponseCode.SUCCESS, status.value, header=fields, body=b"".join(result.records))
        if status in _NOT_FOUND or (status in (S.NO_MESSAGE_IN_QUEUE, S.NO_MATCHED_LOGIC_QUEUE)
                                    and header.queue_offset == 0):
            if allow_suspend and header.sys_flag & PULL_FLAG_SUSPEND:
                timeout = header.suspend_timeout_millis if cfg.long_polling else cfg.short_polling_ms
                broker.hold.suspend(HeldPull(conn, cmd, topic, queue_id, header.queue_offset, sub), timeout)
                return None
            return answer(cmd, ResponseCode.PULL_NOT_FOUND, status.value, header=fields)
        if status in _MOVED or status in (S.NO_MESSAGE_IN_QUEUE, S.NO_MATCHED_LOGIC_QUEUE):
            logger.info("PULL_OFFSET_MOVED: group={} topic={} queue={} requested={} next={}", group, topic,
                        queue_id, header.queue_offset, result.next_begin_offset)
            response = answer(cmd, ResponseCode.PULL_OFFSET_MOVED, status.value, header=fields)
            if status is S.OFFSET_TOO_SMALL:
                broker.store.retention.count_skipped(group, topic, queue_id, header.queue_offset, result.min_offset)
            self._offset_moved_event(group, topic, queue_id, header.queue_offset, result.next_begin_offset)
            return response
        assert status in _RETRY, status
        return answer(cmd, ResponseCode.PULL_RETRY_IMMEDIATELY, status.value, header=fields)


def _fast_header(ext: dict[str, str]) -> PullMessageRequestHeader | None:
    """The pull header without the generic parser (the hot path); None sends it the slow way,
    which produces the proper error for a missing or malformed field."""
    try:
        return PullMessageRequestHeader(
            consumer_group=ext["consumerGroup"], topic=ext["topic"], queue_id=int(ext["queueId"]),
            queue_offset=int(ext["queueOffset"]), max_msg_nums=int(ext["maxMsgNums"]), sys_flag=int(ext["sysFlag"]),
            commit_offset=int(ext["commitOffset"]), suspend_timeout_millis=int(ext["suspendTimeoutMillis"]),
            subscription=ext.get("subscription"), sub_version=int(ext["subVersion"]),
            expression_type=ext.get("expressionType"), bname=ext.get("bname"))
    except (KeyError, ValueError):
        return None


def _cap_on_disk(result: GetResult, max_count: int, max_bytes: int) -> None:
    """isTheBatchFull's on-disk limits (8 messages, 64 KiB): a consumer far behind gets smaller
    batches, so it cannot flush the page cache the others read from. The pull resumes at the
    first record left out."""
    total = 0
    for i, record in enumerate(result.records):
        if i and (i >= max_count or total + len(record) > max_bytes):
            result.next_begin_offset = _LONG.unpack_from(record, QUEUE_OFFSET_POS)[0]
            del result.records[i:]
            return
        total += len(record)
