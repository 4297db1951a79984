"""``AsyncPullConsumer``: the pull model of Java's ``DefaultMQPullConsumer`` for asyncio programs.

The program chooses the queues, the offsets and when to commit; nothing here
rebalances, locks or pulls in the background. It stands on the client layer
(one :class:`~rmqrun.client.instance.ClientInstance` for routes and
connections, :class:`~rmqrun.client.broker.BrokerClient` for the calls).

What follows Java, and where it deliberately does not:

* a pull sends the subscription in the request (the subscription flag, tag
  expression, ``subVersion`` 0), never the commit flag, and ``commitOffset`` 0:
  only :meth:`update_consume_offset` + :meth:`persist_consume_offsets` move the
  group's offset;
* the broker filters by the tags' hash codes; the client then keeps only the
  messages whose TAGS string is in the expression's tag set
  (``PullAPIWrapper.processPullResult``), so a FOUND result can hold fewer
  messages than were read, even none;
* a blocking pull (:meth:`pull_block_if_not_found`) sets the suspend flag and
  asks the broker to hold it up to ``timeout``; the client waits
  ``timeout + BLOCK_CLIENT_MARGIN`` before giving up, like Java's 20 s hold
  under a 30 s client timeout;
* like Java's ``DefaultLitePullConsumer``, a consumer that commits heartbeats
  its group (``CONSUME_ACTIVELY``) from its first commit until it closes, so the
  broker creates ``%RETRY%<group>`` and ``mqadmin consumerProgress``, the
  Dashboard and ``rmqrun status`` see the group; unlike Java, not when push
  consumers of the group are online then (a Spark backfill committing for
  ``rmqrun run``'s group would be counted in their rebalance and handed queues
  it never pulls), nor with ``register=False``, nor for the default group
  (:mod:`rmqrun.pull.registration`);
* unlike Java, the offsets persisted are exactly those the program updated
  (Java persists only queues its rebalance holds, so a plain
  ``DefaultMQPullConsumer`` often persists nothing), and each write waits for
  the broker's answer instead of going oneway;
* unlike Java, pulled messages do not get MIN_OFFSET/MAX_OFFSET properties
  added: the result carries both, and the messages keep exactly the properties
  they were stored with;
* :meth:`~AsyncPullConsumer.view_message` takes Java's ``viewMessage(topic, msgId)`` path
  for a client id (the key index of every broker of the topic), but an offset id still needs
  no topic; :meth:`~AsyncPullConsumer.query_message` returns an empty result where Java
  throws, and names a broker that failed instead of skipping it (:mod:`rmqrun.pull.lookup`);
* with a ``namespace`` the program names plain topics and queues, as with
  Java's ``DefaultMQPullConsumer(namespace, group)``: the group, topics and
  queues are wrapped on the wire (``ns%Orders``), and queues, messages and
  offsets come back with the plain topic.
"""

from __future__ import annotations

import dataclasses
import string
from types import TracebackType
from typing import Any

from rmqrun.client.broker import PullResult as WirePullResult
from rmqrun.client.broker import PullStatus
from rmqrun.client.errors import BrokerNotFoundError
from rmqrun.client.instance import DEFAULT_INSTANCE_NAME, ClientInstance
from rmqrun.client.republish import RetryPublisher
from rmqrun.client.route import MASTER_ID, TopicRouteData, subscribe_queues
from rmqrun.model import Message, MessageQueue
from rmqrun.namespace import check_namespace, unwrap, unwrap_queue, wrap, wrap_queue
from rmqrun.protocol.headers import PullMessageRequestHeader, QueryMessageRequestHeader, pull_sys_flag
from rmqrun.protocol.subscription import EXPRESSION_TAG, SubscriptionData
from rmqrun.pull import arguments as check
from rmqrun.pull.errors import (
    FilterNotSupportedError, MessageNotFoundError, NotStartedError, OffsetPersistError, SendBackError,
    TopicNotFoundError,
)
from rmqrun.pull.lookup import (
    END_OF_TIME_MS, UNIQUE_QUERY_MAX, QueryResult, earliest, offset_id_address, query_brokers, unique_query_begin_ms,
)
from rmqrun.pull.offset_table import OffsetTable
from rmqrun.pull.registration import GroupRegistration
from rmqrun.pull.result import PullResult
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, ProtocolError, RemotingError, TopicNotExistError
from rmqrun.remoting.message import decode_messages
from rmqrun.remoting.security import ClientSecurity

DEFAULT_GROUP = "DEFAULT_CONSUMER"
BLOCK_TIMEOUT = 20.0          # DefaultMQPullConsumer.brokerSuspendMaxTimeMillis
BLOCK_CLIENT_MARGIN = 10.0    # consumerTimeoutMillisWhenSuspend (30 s) minus the 20 s hold
MAX_RECONSUME_TIMES = 16      # DefaultMQPullConsumer.maxReconsumeTimes


class AsyncPullConsumer:
    """Pull messages from queues and offsets the program chooses; commit when it says so.

    ``namesrv`` is ``"host:port"`` or ``"a:9876;b:9876"`` (``None``: ``$NAMESRV_ADDR``).
    ``group`` is the consumer group the offsets are stored under. ``timeout`` is the
    per-request timeout in seconds. Use ``async with`` or ``await start()`` /
    ``await close()``; ``close()`` persists the offsets updated since the last persist.
    ``namespace`` (a managed cluster's instance id) puts the group and every topic
    under it on the wire; the program keeps using the plain names.
    ``security`` (a :class:`~rmqrun.remoting.security.ClientSecurity`) signs every request
    with ACL credentials and/or connects with TLS. ``register`` (default True): from its first
    commit on, heartbeat the group like Java's lite pull consumer, so admin tools list it.
    """

    def __init__(self, namesrv: str | None = None, group: str = DEFAULT_GROUP, *,
                 timeout: float = 3.0, instance_name: str | None = None, namespace: str | None = None,
                 security: ClientSecurity | None = None, register: bool = True) -> None:
        self.namesrv = check.namesrv_address(namesrv)
        if not isinstance(group, str) or not group.strip():
            raise ValueError(f"group must be a non-empty string, got {group!r}")
        try:
            self.namespace = check_namespace(namespace)
        except ValueError as exc:
            raise ValueError(f"namespace {namespace!r} is invalid: {exc}") from None
        self.group = group
        #: the group as the brokers know it (under the namespace)
        self.wire_group = wrap(self.namespace, group)
        self.timeout = check.positive_seconds("timeout", timeout)
        if instance_name is not None and (not isinstance(instance_name, str) or not instance_name.strip()):
            raise ValueError(f"instance_name must be a non-empty string or None, got {instance_name!r}")
        self.instance_name = instance_name
        if security is not None and not isinstance(security, ClientSecurity):
            raise TypeError(f"security must be a rmqrun.ClientSecurity or None, got {type(security).__name__}")
        self.security = security
        #: heartbeat the group from the first commit on (never for the default group, as Java refuses it)
        self.register = bool(register) and group != DEFAULT_GROUP
        self._registration: GroupRegistration | None = None
        self._instance: ClientInstance | None = None
        self._offsets = OffsetTable()
        self._suggested: dict[MessageQueue, int] = {}  # pullFromWhichNodeTable
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "started" if self._instance else "new"
        ns = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"AsyncPullConsumer(namesrv={self.namesrv!r}, group={self.group!r}{ns}, {state})"

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Open the client instance (idempotent). No network call yet: the first call asks the name server."""
        if self._closed:
            raise NotStartedError(f"{self!r} is closed; create a new consumer")
        if self._instance is not None:
            return
        instance = ClientInstance(self.namesrv, instance_name=self.instance_name or DEFAULT_INSTANCE_NAME,
                                  api_timeout=self.timeout, connect_timeout=self.timeout, security=self.security)
        await instance.start()
        self._instance = instance
        if self.register:
            self._registration = GroupRegistration(instance, self.wire_group)

    async def close(self) -> None:
        """Persist the updated offsets, then close every connection (idempotent).

        A failed persist is raised after the connections are closed, so nothing
        leaks and the caller still learns that offsets were not written.
        """
        instance, self._instance = self._instance, None
        if instance is None:
            self._closed = True
            return
        try:
            if self._offsets.updated():
                self._instance = instance
                try:
                    await self.persist_consume_offsets()
                finally:
                    self._instance = None
        finally:
            self._closed = True
            registration, self._registration = self._registration, None
            try:
                if registration is not None:
                    await registration.close()
            finally:
                await instance.close()

    def mark_closed(self) -> None:
        """Refuse further use without touching the network (for a consumer that never started)."""
        if self._instance is None:
            self._closed = True

    async def __aenter__(self) -> "AsyncPullConsumer":
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    @property
    def client_id(self) -> str | None:
        return self._instance.client_id if self._instance else None

    def _client(self) -> ClientInstance:
        if self._instance is None:
            raise NotStartedError(
                f"{self!r} is not started: use it as a context manager or call start() first")
        return self._instance

    # ----------------------------------------------------------------- routes and addresses

    def _wire(self, mq: MessageQueue) -> MessageQueue:
        """The queue as the brokers name it (its topic under the namespace)."""
        return wrap_queue(self.namespace, mq)

    async def _route(self, topic: str, *, refresh: bool) -> TopicRouteData:
        try:
            return await self._client().get_route(wrap(self.namespace, topic), refresh=refresh)
        except TopicNotExistError as exc:
            raise TopicNotFoundError(
                topic, f"topic {topic!r} does not exist (name server {self.namesrv} has no route for it)") from exc

    async def _address(self, mq: MessageQueue, *, broker_id: int = MASTER_ID) -> str:
        """The address for ``mq``'s broker (``broker_id`` preferred, else the master, else any member),
        refreshing the topic's route once when the broker is unknown (Java's findBroker... then update)."""
        instance = self._client()
        found = instance.find_broker(mq.broker_name, broker_id=broker_id)
        if found is None:
            await self._route(mq.topic, refresh=True)
            found = instance.find_broker(mq.broker_name, broker_id=broker_id)
        if found is None:
            raise BrokerNotFoundError(
                f"broker {mq.broker_name!r} of {mq} is not in the route of topic {mq.topic!r} "
                f"(name server {self.namesrv})")
        return found.address

    # ----------------------------------------------------------------- queues

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, fresh from the name server, sorted (Java
        ``fetchSubscribeMessageQueues``); :class:`TopicNotFoundError` when there are none."""
        check.topic(topic)
        route = await self._route(topic, refresh=True)
        queues = [unwrap_queue(self.namespace, mq) for mq in subscribe_queues(route, wrap(self.namespace, topic))]
        if not queues:
            raise TopicNotFoundError(topic, f"topic {topic!r} has no readable queue (name server {self.namesrv})")
        return queues

    async def fetch_topic_list(self) -> list[str]:
        """The name server's topic list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted: the plain names of
        this namespace's topics (all topics outside any namespace without one); retry, DLQ and broker
        system topics left out. A name server with ``enableAllTopicList=false`` refuses (BrokerError)."""
        from rmqrun.client.admin import AdminClient
        from rmqrun.namespace import SEPARATOR, is_system, split_prefix

        instance = self._client()
        names = await AdminClient(instance.pool, instance.namesrv, timeout=self.timeout).topic_list()
        out = set()
        for name in names:
            if is_system(name) or split_prefix(name)[0]:
                continue
            plain = unwrap(self.namespace, name)
            if (self.namespace and plain == name) or (not self.namespace and SEPARATOR in name):
                continue  # another namespace's topic (or, with one, a topic under none)
            out.add(plain)
        return sorted(out)

    # ----------------------------------------------------------------- pulling

    async def pull(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int = 32, *,
                   timeout: float | None = None, expression_type: str = EXPRESSION_TAG) -> PullResult:
        """Read up to ``max_nums`` messages of ``mq`` from ``offset`` now (no hold).

        ``sub_expression`` is a tag expression (``"*"``, ``"TagA || TagB"``), or with
        ``expression_type="SQL92"`` an SQL92 selector on the message properties
        (``"a > 1 AND region = 'eu'"``, Java's ``MessageSelector.bySql``), which the
        broker evaluates: :class:`FilterNotSupportedError` from a broker without
        property filtering (Java's ``enablePropertyFilter=false``, rmqrun's embedded broker).
        The broker answers at most its transfer limit (32 by default) per pull.
        """
        wait = self.timeout if timeout is None else check.positive_seconds("timeout", timeout)
        return await self._pull(mq, sub_expression, offset, max_nums, hold=None, wait=wait,
                                expression_type=expression_type)

    async def pull_undecoded(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int = 32,
                             ) -> tuple[WirePullResult, SubscriptionData]:
        """:meth:`pull` with the records left as the broker sent them, and the subscription whose
        ``matches_tag`` re-filters them: for a reader that decodes records its own way (the Spark
        source decodes them straight into Arrow columns, no :class:`Message` per record)."""
        return await self._pull_wire(mq, sub_expression, offset, max_nums, hold=None, wait=self.timeout)

    async def pull_block_if_not_found(self, mq: MessageQueue, sub_expression: str | None, offset: int,
                                      max_nums: int = 32, *, timeout: float = BLOCK_TIMEOUT,
                                      expression_type: str = EXPRESSION_TAG) -> PullResult:
        """Like :meth:`pull`, but when ``offset`` is the queue's end the broker holds the
        request until a message arrives or ``timeout`` seconds pass (then NO_NEW_MSG)."""
        hold = check.positive_seconds("timeout", timeout)
        return await self._pull(mq, sub_expression, offset, max_nums, hold=hold, wait=hold + BLOCK_CLIENT_MARGIN,
                                expression_type=expression_type)

    async def _pull(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int, *,
                    hold: float | None, wait: float, expression_type: str = EXPRESSION_TAG) -> PullResult:
        wire, sub = await self._pull_wire(mq, sub_expression, offset, max_nums, hold=hold, wait=wait,
                                          expression_type=expression_type)
        return self._result(mq, offset, sub, wire, self.namespace)

    async def _pull_wire(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int, *,
                         hold: float | None, wait: float, expression_type: str = EXPRESSION_TAG
                         ) -> tuple[WirePullResult, SubscriptionData]:
        check.queue(mq)
        check.offset(offset)
        check.max_nums(max_nums)
        if sub_expression is not None and not isinstance(sub_expression, str):
            raise TypeError(f"sub_expression must be an expression string, got {sub_expression!r}")
        wire_topic = wrap(self.namespace, mq.topic)
        sub = SubscriptionData.build(wire_topic, sub_expression, expression_type, sub_version=0)
        addr = await self._address(mq, broker_id=self._suggested.get(mq, MASTER_ID))
        if self._registration is not None:
            self._registration.use_topic(wire_topic, sub.sub_string)
        header = PullMessageRequestHeader(
            consumer_group=self.wire_group, topic=wire_topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=pull_sys_flag(commit_offset=False, suspend=hold is not None, subscription=True),
            commit_offset=0,
            suspend_timeout_millis=int((hold if hold is not None else BLOCK_TIMEOUT) * 1000),
            subscription=sub.sub_string, sub_version=0, expression_type=sub.expression_type,
            bname=mq.broker_name)
        try:
            wire = await self._client().broker.pull(addr, header, timeout=wait)
        except TopicNotExistError as exc:
            raise TopicNotFoundError(
                mq.topic, f"topic {mq.topic!r} does not exist on broker {mq.broker_name} ({addr}): "
                          f"{exc.remark or exc}") from exc
        except BrokerError as exc:
            if sub.is_tag_type or exc.code != ResponseCode.SYSTEM_ERROR or "not support" not in (exc.remark or ""):
                raise
            raise FilterNotSupportedError(
                f"broker {mq.broker_name} ({addr}) does not filter by {sub.expression_type} ({exc.remark}); "
                f"a Java broker needs enablePropertyFilter=true, rmqrun's embedded broker filters by tag "
                f"only") from exc
        self._suggested[mq] = wire.suggest_which_broker_id
        return wire, sub

    @staticmethod
    def _result(mq: MessageQueue, offset: int, sub: SubscriptionData, wire: WirePullResult,
                namespace: str | None = None) -> PullResult:
        """PullAPIWrapper.processPullResult: decode, re-filter by tag string, stamp broker and queue."""
        messages: list[Message] = []
        if wire.status is PullStatus.FOUND and wire.body:
            try:
                decoded = decode_messages(wire.body, broker_name=mq.broker_name)
            except ProtocolError as exc:
                raise ProtocolError(f"pull of {mq} from offset {offset}: a message does not decode: {exc}") from exc
            for msg in decoded:
                if sub.matches_tag(msg.tags):
                    if namespace:
                        msg.topic = unwrap(namespace, msg.topic)
                    msg.broker_name = mq.broker_name
                    msg.queue_id = mq.queue_id
                    messages.append(msg)
        return PullResult(wire.status, wire.next_begin_offset, wire.min_offset, wire.max_offset, messages,
                          wire.remark)

    # ----------------------------------------------------------------- queue offsets (MQAdminImpl)

    async def min_offset(self, mq: MessageQueue) -> int:
        """The smallest offset still stored in ``mq``."""
        check.queue(mq)
        return await self._client().broker.get_min_offset(await self._address(mq), self._wire(mq),
                                                          timeout=self.timeout)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The next offset to be written in ``mq`` (one past the last message)."""
        check.queue(mq)
        return await self._client().broker.get_max_offset(await self._address(mq), self._wire(mq),
                                                          timeout=self.timeout)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The broker's offset for ``timestamp_ms`` (Java ``searchOffset``).

        A RocketMQ 4.x broker answers the first message stored exactly then if there
        is one, otherwise the message whose store time is *nearest*, which may be
        stored before ``timestamp_ms`` (and the last message for a time past the
        end). Callers wanting "stored at or after" skip messages older than the time.
        """
        check.queue(mq)
        check.timestamp_ms(timestamp_ms)
        return await self._client().broker.search_offset(await self._address(mq), self._wire(mq), timestamp_ms,
                                                         timeout=self.timeout)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """Store time (epoch ms) of the oldest message still in ``mq``."""
        check.queue(mq)
        return await self._client().broker.earliest_msg_store_time(await self._address(mq), self._wire(mq),
                                                                   timeout=self.timeout)

    async def view_message(self, msg_id: str, topic: str | None = None) -> Message:
        """The stored message with this id: an offset id (``Message.offset_msg_id``) or, given the
        ``topic``, a client id (``Message.msg_id``, the producer's UNIQ_KEY) too.

        Java's ``viewMessage(topic, msgId)``: an id that decodes as an offset id is
        asked of the store address it holds; any other id (or, with ``topic``, an
        offset lookup that fails or answers another topic) is looked up in the
        topic's key index on every broker (QUERY_MESSAGE by unique key) and the
        copy stored first is returned. :class:`MessageNotFoundError` when no broker
        has it; ValueError for a client id without ``topic``.
        """
        if not isinstance(msg_id, str) or not msg_id.strip():
            raise ValueError(f"msg_id must be a message id (offset or client id), got {msg_id!r}")
        msg_id = msg_id.strip()
        if topic is not None:
            check.topic(topic)
        if any(ch not in string.hexdigits for ch in msg_id):
            raise ValueError(f"msg_id {msg_id!r} is not a broker (offset) message id nor a client id (hex digits); "
                             f"the topic comes second: view_message(msg_id, topic=...), unlike Java's "
                             f"viewMessage(topic, msgId)")
        first_error: RemotingError | None = None
        if offset_id_address(msg_id) is not None:
            try:
                msg = await self._client().broker.view_message(msg_id, timeout=self.timeout)
            except RemotingError as exc:
                if topic is None or isinstance(exc, AccessDeniedError):
                    raise
                first_error = exc
            else:
                if self.namespace:
                    msg.topic = unwrap(self.namespace, msg.topic)
                if topic is None or msg.topic == topic:
                    return msg
        elif topic is None:
            raise ValueError(f"msg_id {msg_id!r} is not a broker (offset) message id; a client id (UNIQ_KEY, "
                             f"Message.msg_id) is found through its topic: view_message(msg_id, topic=...)")
        found = await self._query(topic, msg_id, UNIQUE_QUERY_MAX, unique_query_begin_ms(msg_id), END_OF_TIME_MS,
                                  unique_key=True)
        msg = earliest(found.messages)
        if msg is None:
            raise MessageNotFoundError(msg_id, f"no broker of topic {topic!r} has message {msg_id}") from first_error
        return msg

    async def query_message(self, topic: str, key: str, max_num: int = UNIQUE_QUERY_MAX, begin_ms: int = 0,
                            end_ms: int = END_OF_TIME_MS) -> QueryResult:
        """Messages of ``topic`` with ``key`` among their KEYS, stored between ``begin_ms`` and ``end_ms``
        (epoch ms, both included), oldest first (Java ``queryMessage``).

        Every broker of the topic is asked for up to ``max_num``; their index is a
        hash index, so each answer is re-checked against the key. Nothing found is
        an empty result (Java throws); a broker that did not answer is raised when
        no other found anything, else named in ``QueryResult.errors``.
        """
        check.topic(topic)
        if not isinstance(key, str) or not key.strip() or " " in key:
            raise ValueError(f"key must be one non-empty key without spaces, got {key!r}")
        if isinstance(max_num, bool) or not isinstance(max_num, int) or not 1 <= max_num <= check.JAVA_INT_MAX:
            raise ValueError(f"max_num must be an int between 1 and {check.JAVA_INT_MAX}, got {max_num!r}")
        check.timestamp_ms(begin_ms)
        check.timestamp_ms(end_ms)
        if begin_ms > end_ms:
            raise ValueError(f"begin_ms {begin_ms} is after end_ms {end_ms}")
        return await self._query(topic, key, max_num, begin_ms, end_ms, unique_key=False)

    async def _query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *,
                     unique_key: bool) -> QueryResult:
        route = await self._route(topic, refresh=True)
        brokers = [(b.broker_name, addr) for b in route.broker_datas if (addr := b.select_address())]
        header = QueryMessageRequestHeader(topic=wrap(self.namespace, topic), key=key, max_num=max_num,
                                           begin_timestamp=begin_ms, end_timestamp=end_ms)
        # MQAdminImpl waits three API timeouts for all the answers: an index query scans
        found = await query_brokers(self._client().broker, brokers, header, unique_key=unique_key,
                                    timeout=self.timeout * 3)
        if self.namespace:
            for msg in found.messages:
                msg.topic = unwrap(self.namespace, msg.topic)
        return found

    async def send_message_back(self, msg: Message, delay_level: int = 0, broker_name: str | None = None,
                                consumer_group: str | None = None, *,
                                max_reconsume_times: int = MAX_RECONSUME_TIMES) -> None:
        """Return a message this program could not handle for a later retry (Java ``sendMessageBack``).

        The broker that holds it (``broker_name``, else ``msg.broker_name``, else the
        store address in the message) moves it to ``%RETRY%<group>`` after the delay
        of ``delay_level`` (0: the broker picks it from the reconsume count; -1:
        straight to ``%DLQ%<group>``), or to the DLQ once ``max_reconsume_times``
        is reached. ``consumer_group`` defaults to this consumer's group. If the
        broker refuses, a copy is published to the retry topic instead, as Java
        does; :class:`SendBackError` when both fail. Someone must consume the retry
        topic: a pull program pulls ``%RETRY%<group>`` itself.
        """
        if not isinstance(msg, Message):
            raise TypeError(f"msg must be a rmqrun.Message (as pulled), got {type(msg).__name__}")
        if isinstance(delay_level, bool) or not isinstance(delay_level, int) or delay_level < -1:
            raise ValueError(f"delay_level must be an int >= -1, got {delay_level!r}")
        if isinstance(max_reconsume_times, bool) or not isinstance(max_reconsume_times, int) \
                or not 0 <= max_reconsume_times <= check.JAVA_INT_MAX:
            raise ValueError(f"max_reconsume_times must be an int >= 0, got {max_reconsume_times!r}")
        group = consumer_group if consumer_group is not None else self.group
        if not isinstance(group, str) or not group.strip():
            raise ValueError(f"consumer_group must be a non-empty string or None, got {consumer_group!r}")
        instance = self._client()
        name = broker_name or msg.broker_name
        addr = await self._send_back_address(msg, name)
        wire_group, wire_topic = wrap(self.namespace, group), wrap(self.namespace, msg.topic)
        try:
            await instance.broker.consumer_send_msg_back(
                addr, group=wire_group, commit_log_offset=msg.commit_log_offset, delay_level=delay_level,
                origin_msg_id=msg.msg_id, origin_topic=wire_topic, max_reconsume_times=max_reconsume_times,
                broker_name=name or None)
            return
        except RemotingError as exc:
            first = exc
        publisher = RetryPublisher(instance, wire_group)
        try:
            stored = await publisher.republish(dataclasses.replace(msg, topic=wire_topic), max_reconsume_times,
                                               msg.reconsume_times + 1)
        finally:
            await publisher.close()
        if not stored:
            raise SendBackError(f"message {msg.msg_id} was not sent back to group {group}: the broker at {addr} "
                                f"refused ({first}) and re-publishing to its retry topic failed too") from first

    async def _send_back_address(self, msg: Message, broker_name: str) -> str:
        """The named broker's master (Java findBrokerAddressInPublish), else the message's store host."""
        if broker_name:
            instance = self._client()
            addr = instance.broker_address(broker_name)
            if addr is None and msg.topic:
                try:
                    await self._route(msg.topic, refresh=True)
                except TopicNotFoundError:
                    pass
                addr = instance.broker_address(broker_name)
            if addr is not None:
                return addr
        if not msg.store_host:
            raise ValueError(f"cannot tell which broker holds message {msg.msg_id}: give broker_name")
        return msg.store_host

    # ----------------------------------------------------------------- group offsets

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's offset of ``mq``: -1 when the group has none.

        ``from_store`` asks the broker (READ_FROM_STORE); otherwise the local table
        answers first, falling back to the broker (MEMORY_FIRST_THEN_STORE). Broker
        errors raise: an unreachable broker never looks like "no offset".
        """
        check.queue(mq)
        if not from_store:
            known = self._offsets.get(mq)
            if known is not None:
                return known
        offset = await self._client().broker.query_consumer_offset(await self._address(mq), self.wire_group,
                                                                   self._wire(mq), timeout=self.timeout)
        if offset is None:
            return -1
        self._offsets.cache(mq, offset)
        return offset

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Set the group's offset of ``mq`` in the local table (the next offset to consume).
        It reaches the broker with :meth:`persist_consume_offsets` or :meth:`close`."""
        check.queue(mq)
        check.offset(offset)
        self._client()
        self._offsets.update(mq, offset)
        if self._registration is not None:
            self._registration.use_topic(wrap(self.namespace, mq.topic))

    async def persist_consume_offsets(self) -> None:
        """Write every offset updated since the last persist to its broker, waiting for each answer.

        Raises :class:`OffsetPersistError` naming each queue that failed (those stay
        pending and are tried again by the next persist).
        """
        instance = self._client()
        failures: dict[MessageQueue, BaseException] = {}
        if self._registration is not None and self._offsets.updated():
            await self._registration.on_commit()
        for mq, offset in self._offsets.updated().items():
            try:
                addr = await self._address(mq)
                await instance.broker.update_consumer_offset(addr, self.wire_group, self._wire(mq), offset,
                                                             oneway=False, timeout=self.timeout)
            except (RemotingError, BrokerNotFoundError, TopicNotFoundError) as exc:
                failures[mq] = exc
            else:
                self._offsets.persisted(mq, offset)
        if failures:
            detail = "; ".join(f"{mq.topic}/{mq.broker_name}/{mq.queue_id}: {exc}" for mq, exc in failures.items())
            raise OffsetPersistError(f"group {self.group}: {len(failures)} offset(s) not persisted: {detail}",
                                     failures)

    def updated_offsets(self) -> dict[MessageQueue, int]:
        """The offsets updated and not yet persisted (a copy)."""
        return self._offsets.updated()

    def __getstate__(self) -> Any:
        raise TypeError("a pull consumer holds connections and cannot be pickled; create one per process")
