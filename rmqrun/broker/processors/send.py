"""SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK.

Follows 4.9.8 ``SendMessageProcessor`` / ``AbstractSendMessageProcessor``:

* the topic is checked (name, sendable, exists or auto-created from the
  request's default topic, queue id in range) before anything is stored;
* a send to ``%RETRY%<group>`` that has used up its reconsume times goes to
  ``%DLQ%<group>`` instead (``handleRetryAndDLQ``);
* the stored properties are the producer's plus CLUSTER, minus WAIT, in Java
  HashMap order; born host is the producer's socket address, store host ours;
* the answer carries the offset message id, the queue id and queue offset
  (for a delayed message: its offset in the schedule queue, as in RocketMQ),
  plus MSG_REGION and TRACE_ON on every answer, success or not.

A send-back re-reads the original by commit-log offset and stores a copy in
the group's retry topic with one more reconsume time and a delay level (3 +
reconsume times unless the client chose), or in the DLQ when the client's
maxReconsumeTimes (or the group's) is used up or the level is negative.

Two deliberate choices: the ``batch`` / ``unitMode`` flags are read like
Java's ``Boolean.parseBoolean`` (the C++ client's ``batch=1`` is *not* a batch
for a real 4.9.8 broker either: it stores the whole body as one message), and
a message sent straight into the DLQ loses its DELAY property, which the real
broker forgets to clear (apache/rocketmq#2724: the move to the DLQ lagged by
the delay).
"""

from __future__ import annotations

import random

from loguru import logger

from rmqrun.broker.javamap import JavaPropertyMap
from rmqrun.broker.messages import InnerMessage, read_stored
from rmqrun.broker.processors.common import FAQ_SUFFIX, BadRequest, answer, java_bool, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.store import DiskFullError, MessageTooLargeError, StoreError, StoreIOError
from rmqrun.broker.topics import (
    NOT_ALLOWED_SEND_TOPICS,
    TopicConfig,
    PERM_READ,
    PERM_WRITE,
    is_writeable,
    queue_id_limit,
    topic_problem,
)
from rmqrun.broker.writes import FlushTimeout, Stored
from rmqrun.protocol.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rmqrun.remoting.codes import VERSION_V3_4_9, RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import SYSFLAG_TRANSACTION_ROLLBACK
from rmqrun.remoting.message_batch import decode_batch
from rmqrun.topic_names import dlq_topic, group_of_retry_topic, is_retry_topic, retry_topic
from rmqrun.remoting.message_props import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from rmqrun.remoting.msg_id import offset_msg_id


DLQ_NUMS_PER_GROUP = 1
MAX_TOPIC_LENGTH = 127
PROPERTIES_MAX = 32767


class SendProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ plumbing

    def _answer(self, cmd: RemotingCommand, code: int, remark: str | None = None,
                header: dict[str, object] | None = None) -> RemotingCommand:
        cfg = self.broker.config
        return answer(cmd, code, remark, header=header,
                      extra={"MSG_REGION": cfg.region_id, "TRACE_ON": cfg.trace_on})

    def _illegal(self, cmd: RemotingCommand) -> RemotingCommand:
        limit = self.broker.config.store.max_message_size
        return self._answer(cmd, ResponseCode.MESSAGE_ILLEGAL,
                            "the message is illegal, maybe msg body or properties length not matched. msg body "
                            f"length limit {limit}B, msg properties length limit 32KB.")

    async def send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        header = _fast_v2_header(cmd.ext_fields) if cmd.code != RequestCode.SEND_MESSAGE else None
        if header is None:
            try:
                header = parse_header(cmd, SendMessageRequestHeader)
            except BadRequest as bad:
                return bad.response
        # Boolean.parseBoolean, not the C++ client's 0/1 (see the module docstring).
        raw = cmd.ext_fields
        header.batch = java_bool(raw.get("m" if "b" in raw and "topic" not in raw else "batch"))
        header.unit_mode = java_bool(raw.get("k" if "b" in raw and "topic" not in raw else "unitMode"))
        checked = self._check(conn, cmd, header)
        if isinstance(checked, RemotingCommand):
            return checked
        queue_id = header.queue_id
        topic_config = checked
        if queue_id < 0:
            queue_id = random.randrange(99_999_999) % max(1, topic_config.write_queue_nums)
        try:
            if header.batch:
                return await self._send_batch(conn, cmd, header, queue_id)
            return await self._send_one(conn, cmd, header, queue_id)
        except ProtocolError:
            return self._illegal(cmd)

    def _check(self, conn: Connection, cmd: RemotingCommand,
               header: SendMessageRequestHeader) -> TopicConfig | RemotingCommand:
        """``msgCheck``: the topic config to send to, or the answer that refuses the send."""
        topic = header.topic
        cfg, topics = self.broker.config, self.broker.topics
        assert topics is not None
        existing = topics.get(topic)
        if not is_writeable(cfg.broker_permission) and existing is not None and existing.order:
            # Java refuses only ordered topics here: the route already sends the others elsewhere.
            return self._answer(cmd, ResponseCode.NO_PERMISSION,
                                f"the broker[{cfg.store_host}] sending message is forbidden")
        problem = topic_problem(topic)
        if problem:
            return self._answer(cmd, ResponseCode.SYSTEM_ERROR, problem)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return self._answer(cmd, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        tc = topics.get(topic)
        if tc is None:
            sys_flag = 0
            if header.unit_mode:
                sys_flag = 2 if is_retry_topic(topic) else 1  # TopicSysFlag unit-sub / unit
            logger.info("topic {} not exist, producer {}: creating it from {}", topic, conn.name,
                        header.default_topic)
            tc = topics.create_on_send(topic, header.default_topic, header.default_topic_queue_nums, sys_flag)
            if tc is None and is_retry_topic(topic):
                tc = topics.create_for_send_back(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
            if tc is None:
                return self._answer(cmd, ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{topic}] not exist, apply first please!{FAQ_SUFFIX}")
        if header.queue_id >= queue_id_limit(tc):
            return self._answer(
                cmd, ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, TopicConfig [topicName={tc.topic_name}, "
                f"readQueueNums={tc.read_queue_nums}, writeQueueNums={tc.write_queue_nums}, perm={tc.perm}] "
                f"Producer: {conn.name}")
        return tc

    # ------------------------------------------------------------------ one message

    async def _send_one(self, conn: Connection, cmd: RemotingCommand, header: SendMessageRequestHeader,
                        queue_id: int) -> RemotingCommand:
        broker = self.broker
        topic = header.topic
        reconsume_times = header.reconsume_times or 0
        dlq = False
        if is_retry_topic(topic):  # handleRetryAndDLQ
            group = group_of_retry_topic(topic)
            assert broker.groups is not None and broker.topics is not None
            sgc = broker.groups.find(group)
            if sgc is None:
                return self._answer(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group not exist, {group} {FAQ_SUFFIX}")
            max_times = sgc.retry_max_times
            if cmd.version >= VERSION_V3_4_9 and header.max_reconsume_times is not None:
                max_times = header.max_reconsume_times
            if reconsume_times >= max_times:
                topic = dlq_topic(group)
                queue_id = random.randrange(99_999_999) % DLQ_NUMS_PER_GROUP
                broker.topics.create_for_send_back(topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ)
                dlq = True
        props = JavaPropertyMap.parse(header.properties)
        props.put(PROPERTY_CLUSTER, broker.config.cluster_name)
        if dlq:
            props.put(PROPERTY_DELAY_TIME_LEVEL, "0")
        if PROPERTY_WAIT_STORE_MSG_OK in props:
            wait = props.remove(PROPERTY_WAIT_STORE_MSG_OK)
            stored_props = props.to_string()
            props.put(PROPERTY_WAIT_STORE_MSG_OK, wait or "true")  # isWaitStoreMsgOK reads it later
        else:
            stored_props = props.to_string()
        if len(stored_props.encode("utf-8")) > PROPERTIES_MAX:
            return self._illegal(cmd)
        if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            return self._answer(cmd, ResponseCode.NO_PERMISSION,
                                f"the broker[{broker.config.store_host}] sending transaction message is forbidden")
        msg = InnerMessage(
            topic=topic, queue_id=queue_id, body=cmd.body or b"", properties=props,
            properties_string=stored_props, flag=header.flag, sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp, born_host=conn.name, store_host=broker.address,
            reconsume_times=reconsume_times,
        )
        try:
            stored = await broker.put_message(msg)
        except Exception as exc:
            return self._put_failed(cmd, exc, queue_id)
        broker.stats.on_send(stored.topic, 1, stored.result.size)  # a delayed message: under the schedule topic
        return self._ok(cmd, [stored], queue_id)

    def _ok(self, cmd: RemotingCommand, stored: list[Stored], queue_id: int,
            code: int = ResponseCode.SUCCESS) -> RemotingCommand:
        return self._answer(cmd, code, None, header={
            "msgId": ",".join(s.offset_msg_id for s in stored),
            "queueId": queue_id,
            "queueOffset": stored[0].result.queue_offset,
        })

    def _put_failed(self, cmd: RemotingCommand, exc: Exception, queue_id: int) -> RemotingCommand:
        if isinstance(exc, FlushTimeout):
            # Stored but not yet durable: RocketMQ answers FLUSH_DISK_TIMEOUT with the usual fields.
            stored = [Stored(r, "", queue_id, offset_msg_id(self.broker.address, r.commit_log_offset))
                      for r in exc.results]
            return self._ok(cmd, stored, queue_id, ResponseCode.FLUSH_DISK_TIMEOUT)
        if isinstance(exc, (MessageTooLargeError, ProtocolError)):
            return self._illegal(cmd)
        if isinstance(exc, DiskFullError):
            return self._answer(cmd, ResponseCode.SERVICE_NOT_AVAILABLE, self._disk_full_remark(exc))
        if isinstance(exc, StoreIOError):
            return self._answer(cmd, ResponseCode.SERVICE_NOT_AVAILABLE,
                                f"service not available now: the message store refuses writes ({exc})")
        if isinstance(exc, StoreError):
            return self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"UNKNOWN_ERROR: {exc}")
        raise exc

    def _disk_full_remark(self, exc: DiskFullError) -> str:
        """What a send refused for a full disk is told: the cause and the disk use, in the
        ``[CL: ... CQ: ... INDEX: ...]`` form of a Java broker's answer (shares, rounded up to
        a whole percent; commit log, consume queues and index share one directory here)."""
        store = self.broker.store
        try:
            used = store.disk_used()
        except OSError:
            used = exc.used
        share = f"{used:5.2f}"
        return (f"service not available now: the broker's disk is full [CL: {share} CQ: {share} INDEX: {share}], "
                f"above {exc.limit}% of {store.data_dir}; writes resume once it is back at or under "
                f"{store.config.disk_space_clean_forcibly_ratio}%")

    # ------------------------------------------------------------------ batch

    async def _send_batch(self, conn: Connection, cmd: RemotingCommand, header: SendMessageRequestHeader,
                          queue_id: int) -> RemotingCommand:
        broker = self.broker
        # unreachable (hence the pragma): _check has refused any topic over TOPIC_MAX_LENGTH (127) already, as
        # Java's msgCheck does before sendBatchMessage makes this same test; kept as Java keeps it
        if len(header.topic) > MAX_TOPIC_LENGTH:  # pragma: no cover
            return self._answer(cmd, ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(header.topic)}")
        batch_props = JavaPropertyMap.parse(header.properties)
        batch_props.put(PROPERTY_CLUSTER, broker.config.cluster_name)
        # CommitLog.asyncPutMessages: no transactions and no delay for a batch.
        if header.sys_flag & SYSFLAG_TRANSACTION_ROLLBACK or batch_props.get(PROPERTY_DELAY_TIME_LEVEL, "0") not in ("", "0"):
            return self._illegal(cmd)
        items = decode_batch(cmd.body or b"")
        if not items:
            return self._illegal(cmd)
        suffix = batch_props.to_string()
        msgs = []
        for item in items:
            inner = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in item.properties.items())
            joined = inner + (PROPERTY_SEPARATOR if inner and suffix else "") + suffix
            msgs.append(InnerMessage(
                topic=header.topic, queue_id=queue_id, body=item.body, properties=JavaPropertyMap.parse(joined),
                properties_string=joined, flag=item.flag, sys_flag=header.sys_flag,
                born_timestamp=header.born_timestamp, born_host=conn.name, store_host=broker.address,
                reconsume_times=header.reconsume_times or 0,
            ))
        try:
            stored = await broker.put_messages(msgs)
        except Exception as exc:
            return self._put_failed(cmd, exc, queue_id)
        broker.stats.on_send(header.topic, len(stored), sum(s.result.size for s in stored))
        return self._ok(cmd, stored, queue_id)

    # ------------------------------------------------------------------ send-back

    async def send_back(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = parse_header(cmd, ConsumerSendMsgBackRequestHeader)
        except BadRequest as bad:
            return bad.response
        broker = self.broker
        assert broker.groups is not None and broker.topics is not None
        sgc = broker.groups.find(header.group)
        if sgc is None:
            return answer(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group not exist, {header.group} {FAQ_SUFFIX}", typed=False)
        if sgc.retry_queue_nums <= 0:
            return answer(cmd, typed=False)
        new_topic = retry_topic(header.group)
        queue_id = random.randrange(99_999_999) % sgc.retry_queue_nums
        sys_flag = 2 if java_bool(cmd.ext_fields.get("unitMode")) else 0
        tc = broker.topics.create_for_send_back(new_topic, sgc.retry_queue_nums, PERM_WRITE | PERM_READ, sys_flag)
        if not is_writeable(tc.perm):
            return answer(cmd, ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden",
                          typed=False)
        try:
            record = broker.store.read_at(header.offset)
            original = read_stored(record) if record is not None else None
        except (StoreError, ProtocolError, ValueError):
            original = None
        if original is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}",
                          typed=False)
        props = original.properties
        if props.get(PROPERTY_RETRY_TOPIC) is None:
            props.put(PROPERTY_RETRY_TOPIC, original.topic)
        props.put(PROPERTY_WAIT_STORE_MSG_OK, "false")
        delay_level = header.delay_level
        max_times = sgc.retry_max_times
        if cmd.version >= VERSION_V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if original.reconsume_times >= max_times or delay_level < 0:
            new_topic = dlq_topic(header.group)
            queue_id = random.randrange(99_999_999) % DLQ_NUMS_PER_GROUP
            broker.topics.create_for_send_back(new_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ)
            props.put(PROPERTY_DELAY_TIME_LEVEL, "0")
        else:
            if delay_level == 0:
                delay_level = 3 + original.reconsume_times
            props.put(PROPERTY_DELAY_TIME_LEVEL, str(delay_level))
        origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
        props.put(PROPERTY_ORIGIN_MESSAGE_ID, origin if origin and origin.strip() else original.offset_msg_id)
        msg = InnerMessage(
            topic=new_topic, queue_id=queue_id, body=original.body, properties=props,
            properties_string=props.to_string(), flag=original.flag, sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp, born_host=original.born_host,
            store_host=original.store_host, reconsume_times=original.reconsume_times + 1,
        )
        try:
            await broker.put_message(msg)
        except Exception as exc:
            if isinstance(exc, FlushTimeout):
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "FLUSH_DISK_TIMEOUT", typed=False)
            if isinstance(exc, DiskFullError):  # Java: SYSTEM_ERROR named after the put status
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE", typed=False)
            if isinstance(exc, (StoreError, ProtocolError)):
                return answer(cmd, ResponseCode.SYSTEM_ERROR, type(exc).__name__, typed=False)
            raise
        broker.stats.on_send_back(header.group, props.get(PROPERTY_RETRY_TOPIC) or original.topic)
        return answer(cmd, typed=False)


SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


def _fast_v2_header(ext: dict[str, str]) -> SendMessageRequestHeader | None:
    """SEND_MESSAGE_V2's one-letter header without the generic parser (the hot path). None
    sends it the slow way, which produces the proper error for a missing or malformed field."""
    try:
        reconsume = ext.get("j")
        max_times = ext.get("l")
        return SendMessageRequestHeader(
            producer_group=ext["a"], topic=ext["b"], default_topic=ext["c"], default_topic_queue_nums=int(ext["d"]),
            queue_id=int(ext["e"]), sys_flag=int(ext["f"]), born_timestamp=int(ext["g"]), flag=int(ext["h"]),
            properties=ext.get("i"), reconsume_times=None if reconsume is None else int(reconsume),
            max_reconsume_times=None if max_times is None else int(max_times), bname=ext.get("n"))
    except (KeyError, ValueError):
        return None
