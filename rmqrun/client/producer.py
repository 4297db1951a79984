"""A small but real producer, behaving like the 4.9.8 ``DefaultMQProducer``.

Used by ``rmqrun produce``, the tests and the benchmarks. What it copies from
Java, because brokers and consumers can tell the difference:

* every message gets a UNIQ_KEY (:mod:`rmqrun.client.msgid`) and ``WAIT=true``;
* bodies of 4096 bytes or more are zlib-compressed at level 5 and flagged
  COMPRESSED | ZLIB (sysFlag 0x301 = 769, as in the captures); batches never are;
* a topic without a route is sent with the ``TBW102`` route, its queue count
  capped at ``defaultTopicQueueNums`` (4), so the broker auto-creates it;
* queues are picked round robin, a retry avoiding the broker that just failed;
  a send is tried ``1 + retry_times`` times on retriable failures (connection,
  timeout, and the codes in ``RETRY_CODES``); a send to an explicit queue or by
  sharding key is tried once, as ``send(msg, selector, arg)`` is;
* a sharding key picks ``abs(hash) % n`` with Java's String.hashCode
  (SelectMessageQueueByHash), so every process, Java or Python, agrees;
  it is also recorded in the ``__SHARDINGKEY`` property (as RocketMQ 5's
  clients do), so a consumer with ``order_by: key`` can order by it;
* SEND_MESSAGE_V2 headers (``sendSmartMsg``), SEND_BATCH_MESSAGE for batches;
* the group is announced by the instance's heartbeat and unregistered on close;
* with a ``namespace`` the group and every topic are wrapped on the wire
  (``ns%Orders``), each message carries ``INSTANCE_ID`` = the namespace, and the
  queue in a send result names the plain topic again (``withNamespace`` /
  ``withoutNamespace``).
"""

from __future__ import annotations

from loguru import logger

import asyncio
import random
import re
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from rmqrun.client.broker import SEND_TIMEOUT, SendResult
from rmqrun.client.errors import BrokerNotFoundError, NoRouteError, SendFailedError
from rmqrun.client.instance import ClientInstance
from rmqrun.client.msgid import UniqueIdGenerator
from rmqrun.client.otel_send import send_spans
from rmqrun.client.route import TopicRouteData, limit_queue_nums, publish_queues
from rmqrun.client.trace_dispatch import TraceDispatcher
from rmqrun.model import MessageQueue
from rmqrun.namespace import check_namespace, unwrap, unwrap_queue, wrap, wrap_queue
from rmqrun.protocol.headers import SendMessageRequestHeader
from rmqrun.protocol.trace import (
    DEFAULT_TRACE_TOPIC, TRACE_GROUP_PREFIX, MessageType, TraceBean, TraceContext, TraceType,
)
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import (
    AccessDeniedError,
    BrokerError,
    RemotingError,
    RequestTimeoutError,
    TopicNotExistError,
)
from rmqrun.remoting.compression import COMPRESSION_ZLIB
from rmqrun.remoting.message import SYSFLAG_COMPRESSED
from rmqrun.remoting.message_batch import BatchItem, encode_batch
from rmqrun.remoting.message_props import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    check_properties,
    java_string_hash,
    properties_to_string,
)
from rmqrun.remoting.security import ClientSecurity
from rmqrun.topic_names import AUTO_CREATE_TOPIC, is_retry_topic

DEFAULT_CREATE_TOPIC_KEY = AUTO_CREATE_TOPIC
DEFAULT_TOPIC_QUEUE_NUMS = 4
COMPRESS_OVER = 4096
COMPRESS_LEVEL = 5
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
RETRY_TIMES_WHEN_SEND_FAILED = 2
#: the namespace a message was sent under (Java's MessageConst.PROPERTY_INSTANCE_ID)
PROPERTY_INSTANCE_ID = "INSTANCE_ID"

#: DefaultMQProducer.retryResponseCodes (4.9.8).
RETRY_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
})

_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")


@dataclass(slots=True)
class OutgoingMessage:
    """One message to send. ``keys`` may be a list (joined by spaces, as KEYS holds them)."""

    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: Mapping[str, str] | None = None
    delay_level: int = 0
    flag: int = 0

    def build_properties(self) -> dict[str, str]:
        """The message's properties, every name and value checked (``PropertyTextError`` naming the field)."""
        props = {str(k): str(v) for k, v in (self.properties or {}).items()}
        if self.keys:
            props[PROPERTY_KEYS] = self.keys if isinstance(self.keys, str) else " ".join(self.keys)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        props.setdefault(PROPERTY_WAIT_STORE_MSG_OK, "true")
        check_properties(props)  # before anything connects; properties_to_string checks again at the wire
        return props


def check_topic(topic: str) -> None:
    """Validators.checkTopic: the broker refuses these anyway, but later and less clearly."""
    if not topic:
        raise ValueError("topic is empty")
    if len(topic) > 127:
        raise ValueError(f"topic {topic!r} is longer than 127 characters")
    if not _TOPIC_RE.match(topic):
        raise ValueError(f"topic {topic!r} may only contain letters, digits, '%', '|', '_' and '-'")
    if topic == DEFAULT_CREATE_TOPIC_KEY:
        raise ValueError(f"{topic} is the auto-create template topic; it cannot take messages")


def select_by_sharding_key(queues: Sequence[MessageQueue], sharding_key: str) -> MessageQueue:
    """SelectMessageQueueByHash with a String argument."""
    return queues[abs(java_string_hash(sharding_key)) % len(queues)]


@dataclass(slots=True)
class _PublishInfo:
    route: TopicRouteData
    queues: list[MessageQueue]
    index: int = field(default_factory=lambda: random.randrange(1 << 16))

    def select(self, avoid_broker: str | None = None) -> MessageQueue:
        """TopicPublishInfo.selectOneMessageQueue(lastBrokerName)."""
        n = len(self.queues)
        if avoid_broker is not None:
            for _ in range(n):
                self.index += 1
                mq = self.queues[self.index % n]
                if mq.broker_name != avoid_broker:
                    return mq
        self.index += 1
        return self.queues[self.index % n]


class Producer:
    def __init__(self, namesrv: str | Sequence[str] | None = None, group: str = "DEFAULT_PRODUCER", *,
                 instance: ClientInstance | None = None,
                 send_timeout: float = SEND_TIMEOUT,
                 retry_times: int = RETRY_TIMES_WHEN_SEND_FAILED,
                 compress_over: int = COMPRESS_OVER,
                 compress_level: int = COMPRESS_LEVEL,
                 max_message_size: int = MAX_MESSAGE_SIZE,
                 default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
                 create_topic_key: str = DEFAULT_CREATE_TOPIC_KEY,
                 namespace: str | None = None,
                 security: ClientSecurity | None = None,
                 msg_trace: bool = False,
                 msg_trace_topic: str = DEFAULT_TRACE_TOPIC,
                 otel: bool | None = None) -> None:
        if instance is None and namesrv is None:
            raise ValueError("a Producer needs name server addresses or a ClientInstance")
        if instance is not None and security is not None:
            raise ValueError("give security to the ClientInstance, not beside it")
        self._owns_instance = instance is None
        self.instance = (instance if instance is not None
                         else ClientInstance(namesrv, security=security))  # type: ignore[arg-type]
        #: topics and the group live under it on the wire; None: no namespace
        self.namespace = check_namespace(namespace)
        self.group = wrap(self.namespace, group)
        self._plain_group = group
        self.send_timeout = send_timeout
        self.retry_times = retry_times
        self.compress_over = compress_over
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.ids = UniqueIdGenerator(self.instance.client_ip)
        self._publish: dict[str, _PublishInfo] = {}
        self._provisional: set[str] = set()
        self._started = False
        #: msg_trace: a Pub trace record per message sent (Java's enableMsgTrace), sent off the send path by
        #: a producer of the same client instance in Java's trace group; None when off
        self.tracer: TraceDispatcher | None = None
        #: OpenTelemetry: a send span per message, its W3C context in the message (client/otel_send.py); by
        #: default on when the application uses OpenTelemetry (has imported it), never importing it otherwise
        self._spans = send_spans(otel)
        if msg_trace:
            trace_group = f"{TRACE_GROUP_PREFIX}-{group}-PRODUCER-1"
            self.tracer = TraceDispatcher(lambda: Producer(instance=self.instance, group=trace_group),
                                          msg_trace_topic)

    async def start(self) -> None:
        if self._started:
            return
        self.instance.register_producer(self.group)
        await self.instance.start()
        await self.instance.send_heartbeat()
        self._started = True

    async def close(self) -> None:
        if not self._started:
            if self._owns_instance:
                await self.instance.close()
            return
        self._started = False
        if self.tracer is not None:
            await self.tracer.close()
        await self.instance.unregister_producer(self.group)
        if self._owns_instance:
            await self.instance.close()

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- routes

    async def publish_info(self, topic: str) -> _PublishInfo:
        """The topic's writable queues, from the cached route, the name server, or TBW102."""
        route = self.instance.route(topic)
        if route is None:
            try:
                route = await self.instance.update_route(topic)
            except TopicNotExistError:
                default = await self.instance.get_route(self.create_topic_key)
                route = limit_queue_nums(default, self.default_topic_queue_nums)
                self.instance.set_route(topic, route)
                # The broker creates the topic on the first send, possibly with fewer
                # queues than the template; the real route replaces this one after it.
                self._provisional.add(topic)
        info = self._publish.get(topic)
        if info is None or info.route is not route:
            queues = publish_queues(route, topic)
            if not queues:
                raise NoRouteError(f"no writable queue with a master for topic {topic!r}")
            info = _PublishInfo(route, queues, info.index if info else random.randrange(1 << 16))
            self._publish[topic] = info
        return info

    async def writable_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a send to ``topic`` may go to (plain names, as results name them), sorted; the route of
        TBW102 for a topic the cluster does not have yet, as a first send would use."""
        wire, _ = self._on_wire(topic, None)
        info = await self.publish_info(wire)
        return sorted((unwrap_queue(self.namespace, q) if self.namespace else q for q in info.queues),
                      key=lambda q: (q.broker_name, q.queue_id))

    # ----------------------------------------------------------------- sending

    async def send(self, topic: str, body: bytes, tags: str | None = None, keys: str | Sequence[str] | None = None,
                   properties: Mapping[str, str] | None = None, queue: int | MessageQueue | None = None,
                   sharding_key: str | None = None, delay_level: int = 0, *,
                   timeout: float | None = None) -> SendResult:
        """Send one message and wait for the broker to store it.

        ``queue`` pins the queue (an int picks that queue id on the first broker having it);
        ``sharding_key`` picks a queue by hash so equal keys keep their order.
        """
        msg = OutgoingMessage(body, tags, keys, properties, delay_level)
        return await self._send_one(topic, msg, queue, sharding_key, timeout, oneway=False)  # type: ignore[return-value]

    async def send_oneway(self, topic: str, body: bytes, tags: str | None = None,
                          keys: str | Sequence[str] | None = None, properties: Mapping[str, str] | None = None,
                          queue: int | MessageQueue | None = None, sharding_key: str | None = None,
                          delay_level: int = 0) -> None:
        """Fire and forget: one attempt, no answer (a lost message is not reported)."""
        msg = OutgoingMessage(body, tags, keys, properties, delay_level)
        await self._send_one(topic, msg, queue, sharding_key, None, oneway=True)

    async def send_message(self, topic: str, msg: OutgoingMessage, *, queue: int | MessageQueue | None = None,
                           sharding_key: str | None = None, timeout: float | None = None) -> SendResult:
        return await self._send_one(topic, msg, queue, sharding_key, timeout, oneway=False)  # type: ignore[return-value]

    async def send_batch(self, topic: str, messages: Sequence[OutgoingMessage | bytes], *,
                         queue: int | MessageQueue | None = None, timeout: float | None = None) -> SendResult:
        """Send messages as one SEND_BATCH_MESSAGE to one queue (no delay, never compressed)."""
        topic, queue = self._on_wire(topic, queue)
        check_topic(topic)
        if is_retry_topic(topic):
            raise ValueError("retry group messages cannot be sent in a batch")
        if not messages:
            raise ValueError("a batch needs at least one message")
        items: list[BatchItem] = []
        ids: list[str] = []
        for m in messages:
            msg = m if isinstance(m, OutgoingMessage) else OutgoingMessage(bytes(m))
            if msg.delay_level > 0:
                raise ValueError("delay levels are not supported in a batch")
            self._check_body(msg.body)
            props = msg.build_properties()
            uniq = props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.ids.next_id())
            ids.append(uniq)
            items.append(BatchItem(msg.body, props, msg.flag))
        body = encode_batch(items)
        if len(body) > self.max_message_size:
            raise ValueError(f"batch of {len(body)} bytes exceeds max_message_size {self.max_message_size}")

        batch_props = {PROPERTY_WAIT_STORE_MSG_OK: "true"}
        if self.namespace:
            batch_props[PROPERTY_INSTANCE_ID] = self.namespace
        batch_text = properties_to_string(batch_props)

        def header_for(mq: MessageQueue) -> SendMessageRequestHeader:
            return self._header(topic, mq, sys_flag=0, flag=0, props_text=batch_text, batch=True)
        return await self._dispatch(topic, header_for, body, queue, None, timeout, oneway=False,  # type: ignore[return-value]
                                    msg_id=",".join(ids))

    def _check_body(self, body: bytes) -> None:
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError(f"a message body is bytes, not {type(body).__name__}")
        if len(body) == 0:
            raise ValueError("the message body is empty")
        if len(body) > self.max_message_size:
            raise ValueError(f"message body of {len(body)} bytes exceeds max_message_size {self.max_message_size}")

    async def _send_one(self, topic: str, msg: OutgoingMessage, queue: int | MessageQueue | None,
                        sharding_key: str | None, timeout: float | None, *, oneway: bool) -> SendResult | None:
        topic, queue = self._on_wire(topic, queue)
        check_topic(topic)
        self._check_body(msg.body)
        props = msg.build_properties()
        if self.namespace:
            props[PROPERTY_INSTANCE_ID] = self.namespace
        uniq = props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.ids.next_id())
        if sharding_key is not None:
            # recorded on the message too, so that a consumer can order by it (order_by: key)
            props.setdefault(PROPERTY_SHARDING_KEY, sharding_key)
        body = bytes(msg.body)
        sys_flag = 0
        if len(body) >= self.compress_over:
            body = zlib.compress(body, self.compress_level)
            sys_flag |= SYSFLAG_COMPRESSED | COMPRESSION_ZLIB
        reconsume_times = 0
        max_reconsume: int | None = None
        if is_retry_topic(topic):
            # A consumer re-publishing a message to its retry topic (sendMessageBackAsNormalMessage):
            # these two travel in the header, not as properties.
            if PROPERTY_RECONSUME_TIME in props:
                reconsume_times = int(props.pop(PROPERTY_RECONSUME_TIME))
            if PROPERTY_MAX_RECONSUME_TIMES in props:
                max_reconsume = int(props.pop(PROPERTY_MAX_RECONSUME_TIMES))
        started = time.time()
        # the send span's context travels in the message's properties: started before they are written
        span = self._spans.start(unwrap(self.namespace, topic), props) if self._spans is not None else None
        try:
            # once per send, before the route is looked up: a refused property (the sharding key too) sends nothing
            props_text = properties_to_string(props)

            def header_for(mq: MessageQueue) -> SendMessageRequestHeader:
                return self._header(topic, mq, sys_flag=sys_flag, flag=msg.flag, props_text=props_text,
                                    batch=False, reconsume_times=reconsume_times,
                                    max_reconsume_times=max_reconsume)
            result = await self._dispatch(topic, header_for, body, queue, sharding_key, timeout, oneway=oneway,
                                          msg_id=uniq)
        except BaseException as exc:
            if span is not None:
                self._spans.end(span, uniq, exc)  # type: ignore[union-attr]
            raise
        if span is not None:
            self._spans.end(span, uniq, None)  # type: ignore[union-attr]
        if self.tracer is not None and result is not None:
            self._trace_pub(msg, props, len(msg.body), started, result)
        return result

    def _trace_pub(self, msg: OutgoingMessage, props: dict[str, str], body_length: int, started: float,
                   result: SendResult) -> None:
        """SendMessageTraceHookImpl: a Pub record of a sent message, unless the broker said trace off."""
        if not result.trace_on or self.tracer is None:
            return
        cost = int((time.time() - started) * 1000)
        delayed = PROPERTY_DELAY_TIME_LEVEL in props
        store_host = self.instance.broker_address(result.queue.broker_name)
        bean = TraceBean(msg_id=result.msg_id, topic=result.queue.topic, tags=props.get(PROPERTY_TAGS),
                         keys=props.get(PROPERTY_KEYS), store_host=store_host, body_length=body_length,
                         offset_msg_id=result.offset_msg_id,
                         msg_type=MessageType.DELAY if delayed else MessageType.NORMAL)
        self.tracer.append(TraceContext(TraceType.PUB, timestamp=int(started * 1000), region_id=result.region_id,
                                        group=self._plain_group,
                                        cost_time=cost, success=result.status.value == "SEND_OK", beans=[bean]))

    def _on_wire(self, topic: str, queue: int | MessageQueue | None) -> tuple[str, int | MessageQueue | None]:
        """The topic (and an explicit queue) as the cluster names them, under the namespace."""
        if not self.namespace:
            return topic, queue
        if isinstance(queue, MessageQueue):
            queue = wrap_queue(self.namespace, queue)
        return wrap(self.namespace, topic), queue

    def _header(self, topic: str, mq: MessageQueue, *, sys_flag: int, flag: int, props_text: str,
                batch: bool, reconsume_times: int = 0,
                max_reconsume_times: int | None = None) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.group, topic=topic, default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums, queue_id=mq.queue_id, sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000), flag=flag, properties=props_text,
            reconsume_times=reconsume_times, unit_mode=False, batch=batch,
            max_reconsume_times=max_reconsume_times, bname=mq.broker_name)

    async def _dispatch(self, topic: str, header_for, body: bytes,  # type: ignore[no-untyped-def]
                        queue: int | MessageQueue | None, sharding_key: str | None, timeout: float | None, *,
                        oneway: bool, msg_id: str) -> SendResult | None:
        """sendDefaultImpl: pick a queue, send, retry on another broker if that can help."""
        loop = asyncio.get_running_loop()
        budget = self.send_timeout if timeout is None else timeout
        deadline = loop.time() + budget
        info = await self.publish_info(topic)
        pinned = self._pinned_queue(info, queue, sharding_key)
        attempts = 1 if (oneway or pinned is not None) else 1 + max(0, self.retry_times)
        last_error: BaseException | None = None
        brokers: list[str] = []
        mq: MessageQueue | None = None
        for _ in range(attempts):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            mq = pinned if pinned is not None else info.select(mq.broker_name if mq is not None else None)
            brokers.append(mq.broker_name)
            try:
                addr = self.instance.broker_address(mq.broker_name)
                if addr is None:
                    await self.instance.update_route(topic)
                    addr = self.instance.broker_address(mq.broker_name)
                    if addr is None:
                        raise BrokerNotFoundError(f"broker {mq.broker_name!r} of topic {topic!r} has no master address")
                header = header_for(mq)
                if oneway:
                    await self.instance.broker.send_oneway(addr, header, body)
                    return None
                result = await self.instance.broker.send(addr, header, body, timeout=remaining, msg_id=msg_id)
                if topic in self._provisional:
                    await self._replace_provisional_route(topic)
                if self.namespace:
                    result = replace(result, queue=unwrap_queue(self.namespace, result.queue))
                return result
            except BrokerError as exc:
                if exc.code not in RETRY_CODES or isinstance(exc, AccessDeniedError):
                    raise  # an ACL refusal (SYSTEM_ERROR/NO_PERMISSION) is the same on every broker
                last_error = exc
                if topic in self._provisional:
                    # the broker may have created the topic with fewer queues than the
                    # template route offered: retry on the real route
                    await self._replace_provisional_route(topic)
                    info = await self.publish_info(topic)
                    if pinned is not None and sharding_key is not None:
                        pinned = self._pinned_queue(info, queue, sharding_key)
            except (RemotingError, BrokerNotFoundError) as exc:
                if not exc.retriable:
                    raise
                last_error = exc
                if isinstance(exc, RequestTimeoutError):
                    # The broker may have stored what it answers late: another attempt would store a
                    # second copy (the C++ client's way). The budget is spent anyway, unless a timer
                    # fired a hair early (uvloop rounds to the millisecond); this does not lean on that.
                    break
        if last_error is None:
            raise SendFailedError(f"send to {topic!r} timed out after {budget:.3g}s before any attempt",
                                  0, brokers)
        raise SendFailedError(
            f"send to {topic!r} failed {len(brokers)} time(s) on {', '.join(brokers)}: {last_error}",
            len(brokers), brokers) from last_error

    async def _replace_provisional_route(self, topic: str) -> None:
        """After the send that auto-created ``topic``: use its real route from now on."""
        try:
            await self.instance.update_route(topic)
        except RemotingError as exc:
            logger.debug("route of new topic {} not available yet: {}", topic, exc)
            return
        self._provisional.discard(topic)
        self._publish.pop(topic, None)

    @staticmethod
    def _pinned_queue(info: _PublishInfo, queue: int | MessageQueue | None,
                      sharding_key: str | None) -> MessageQueue | None:
        if queue is not None and sharding_key is not None:
            raise ValueError("give either queue or sharding_key, not both")
        if isinstance(queue, MessageQueue):
            return queue
        if isinstance(queue, int):
            for mq in sorted(info.queues, key=lambda q: (q.broker_name, q.queue_id)):
                if mq.queue_id == queue:
                    return mq
            raise ValueError(f"topic has no writable queue {queue} (queues: {len(info.queues)})")
        if sharding_key is not None:
            return select_by_sharding_key(info.queues, sharding_key)
        return None
