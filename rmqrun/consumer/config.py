"""The push consumer's settings, with the Java client's defaults and range checks.

One dataclass the engine reads. The CLI/YAML/environment settings table
builds it; tests build it directly. :meth:`ConsumerConfig.validate` applies
``DefaultMQPushConsumerImpl.checkConfig``'s ranges and says which setting,
which value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from rmqrun.consumer import defaults as d
from rmqrun.consumer.allocate_nearby import DEFAULT_BROKER_ROOMS, DEFAULT_CONSUMER_ROOMS, is_nearby
from rmqrun.consumer.allocate_nearby import NAME as NEARBY
from rmqrun.consumer.allocate_settings import configured_strategy
from rmqrun.consumer.consume_mode import ConsumeMode, mode_of
from rmqrun.consumer.key_order import ORDER_BY, ORDER_KEYS, valid_order_key
from rmqrun.errors import ConfigError
from rmqrun.namespace import check_namespace, wrap, wrapped_length_error
from rmqrun.protocol.subscription import EXPRESSION_TAG, EXPRESSION_TYPES, SubscriptionData
from rmqrun.remoting.security import ClientSecurity
from rmqrun.topic_names import retry_topic
from rmqrun.setting_rules import at_least, between, check_fields, one_of, positive, ruled, words

MESSAGE_MODELS = ("CLUSTERING", "BROADCASTING")
CONSUME_FROM = (
    "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP",
    # deprecated spellings that behave like LAST_OFFSET in the Java client
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST", "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET",
)


#: Java's ``int``: the upper bound of the counts and times the client sends as one
JAVA_INT_MAX = 2**31 - 1


def _off_or(ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """-1 (the limit is off) or what ``ok`` accepts."""
    return lambda v: (v == -1 and not isinstance(v, bool)) or ok(v)


def default_consume_timestamp() -> str:
    """Half an hour ago, as ``yyyyMMddHHmmss`` local time (the Java default)."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - d.CONSUME_TIMESTAMP_OFFSET_MS / 1000))


@dataclass(slots=True)
class ConsumerConfig:
    group: str
    namesrv: str
    #: topic -> tag expression (``"TagA || TagB"``, ``"*"``), or the SQL92 selector of a topic named in
    #: ``expression_types``
    subscriptions: dict[str, str] = field(default_factory=dict)
    #: topic -> expression type of a subscription that is not a tag expression (``"SQL92"``: Java's
    #: ``MessageSelector.bySql``); a topic not named here is subscribed by tags
    expression_types: dict[str, str] = field(default_factory=dict)
    orderly: bool = False
    message_model: str = ruled(d.MESSAGE_MODEL, ok=one_of(*MESSAGE_MODELS))
    consume_from_where: str = ruled(d.CONSUME_FROM_WHERE, ok=one_of(*CONSUME_FROM))
    consume_timestamp: str = field(default_factory=default_consume_timestamp)
    allocate_strategy: str = d.ALLOCATE_STRATEGY
    # the ranges are DefaultMQPushConsumerImpl.checkConfig's
    pull_threshold_for_queue: int = ruled(d.PULL_THRESHOLD_FOR_QUEUE, ok=between(1, 65535),
                                          allowed="an integer from 1 to 65535")
    pull_threshold_size_for_queue: int = ruled(d.PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB, ok=between(1, 1024),
                                               allowed="an integer from 1 to 1024")
    pull_threshold_for_topic: int = ruled(d.PULL_THRESHOLD_FOR_TOPIC, ok=_off_or(between(1, 6553500)),
                                          allowed="-1 or 1 to 6553500")
    pull_threshold_size_for_topic: int = ruled(d.PULL_THRESHOLD_SIZE_FOR_TOPIC_MIB, ok=_off_or(between(1, 102400)),
                                               allowed="-1 or 1 to 102400")
    pull_interval_ms: int = ruled(d.PULL_INTERVAL_MS, ok=between(0, 65535), allowed="0 to 65535")
    pull_batch_size: int = ruled(d.PULL_BATCH_SIZE, ok=between(1, 1024), allowed="an integer from 1 to 1024")
    consume_message_batch_max_size: int = ruled(d.CONSUME_MESSAGE_BATCH_MAX_SIZE, ok=between(1, 1024),
                                                allowed="an integer from 1 to 1024")
    consume_concurrently_max_span: int = ruled(d.CONSUME_CONCURRENTLY_MAX_SPAN, ok=between(1, 65535),
                                               allowed="1 to 65535")
    post_subscription_when_pull: bool = d.POST_SUBSCRIPTION_WHEN_PULL
    max_reconsume_times: int = ruled(d.MAX_RECONSUME_TIMES, ok=between(-1, JAVA_INT_MAX),
                                     allowed=f"-1 to {JAVA_INT_MAX}")
    suspend_current_queue_time_ms: int = ruled(d.SUSPEND_CURRENT_QUEUE_TIME_MS, ok=between(1, JAVA_INT_MAX),
                                               allowed=f"1 to {JAVA_INT_MAX}")
    consume_timeout_minutes: float = ruled(d.CONSUME_TIMEOUT_MINUTES, ok=positive,
                                           allowed="a positive number of minutes")
    #: orderly only: False means the handler commits with Commit() (Java setAutoCommit)
    auto_commit: bool = True
    instance_name: str = d.INSTANCE_NAME
    unit_name: str | None = None
    client_ip: str | None = None
    heartbeat_interval_ms: int = ruled(d.HEARTBEAT_BROKER_INTERVAL_MS, ok=at_least(100), allowed="at least 100")
    poll_name_server_interval_ms: int = ruled(d.POLL_NAME_SERVER_INTERVAL_MS, ok=at_least(100),
                                              allowed="at least 100")
    persist_offset_interval_ms: int = ruled(d.PERSIST_CONSUMER_OFFSET_INTERVAL_MS, ok=at_least(100),
                                            allowed="at least 100")
    pull_time_delay_ms_when_exception: int = d.PULL_TIME_DELAY_MS_WHEN_EXCEPTION
    rebalance_interval_ms: int = ruled(d.REBALANCE_WAIT_INTERVAL_MS, ok=at_least(100), allowed="at least 100")
    lock_interval_ms: int = d.REBALANCE_LOCK_INTERVAL_MS
    #: broadcasting: where the local offset file lives (Java: ~/.rocketmq_offsets)
    offset_store_dir: str | None = None
    #: the client's long-poll suspend time sent to brokers
    broker_suspend_max_time_ms: int = d.BROKER_SUSPEND_MAX_TIME_MS
    #: the instance namespace topics and the group live under on the wire (``ns%topic``); None: none
    namespace: str | None = None
    #: ACL credentials and TLS for every connection (None: neither); never sent to workers
    security: ClientSecurity | None = field(default=None, repr=False)
    #: orderly unit: "queue" (Java: one job per queue at a time) or "key" (per message key, parallel
    #: across keys; implies orderly, see rmqrun/consumer/consume_keyed.py)
    order_by: str = ruled("queue", ok=words(*ORDER_BY))
    #: where a message's key comes from in key mode: sharding_key, keys, tags or property:NAME
    order_key: str = ruled("sharding_key", ok=valid_order_key, allowed=", ".join(ORDER_KEYS[:-1]) +
                           f" or {ORDER_KEYS[-1]}")
    #: "pull" (queues rebalanced among the group's clients), "pop" (RocketMQ 5.x: the broker hands
    #: messages of any queue to any client; see rmqrun/consumer/pop_push.py) or "auto" (per topic as the
    #: broker's mode table says; see rmqrun/consumer/mode_follow.py)
    consume_mode: str = ruled(d.CONSUME_MODE, ok=words(*d.CONSUME_MODES))
    pop_invisible_time_ms: int = ruled(d.POP_INVISIBLE_TIME_MS, ok=between(d.MIN_POP_INVISIBLE_TIME_MS,
                                                                           d.MAX_POP_INVISIBLE_TIME_MS),
                                       allowed=f"{d.MIN_POP_INVISIBLE_TIME_MS} to {d.MAX_POP_INVISIBLE_TIME_MS} ms")
    pop_poll_time_ms: int = ruled(d.POP_POLL_TIME_MS, ok=between(1000, 60_000), allowed="1000 to 60000 ms")
    pop_batch_size: int = ruled(d.POP_BATCH_NUMS, ok=between(1, 32), allowed="an integer from 1 to 32")
    pop_threshold_for_queue: int = ruled(d.POP_THRESHOLD_FOR_QUEUE, ok=between(1, 65535), allowed="1 to 65535")
    #: MACHINE_ROOM_NEARBY (rmqrun/consumer/allocate_nearby.py): this instance's machine room, the
    #: strategy applied within a room, and how a broker's and a consumer's room are read from their names
    machine_room: str | None = None
    #: CONFIG's queues (``TOPIC@BROKER:QUEUE_ID,...``) and MACHINE_ROOM's rooms (``idc1,idc2``)
    allocate_queues: str | None = None
    allocate_idcs: str | None = None
    nearby_allocate_strategy: str = d.ALLOCATE_STRATEGY
    broker_machine_rooms: str = DEFAULT_BROKER_ROOMS
    consumer_machine_rooms: str = DEFAULT_CONSUMER_ROOMS
    #: write RocketMQ message traces (SubBefore/SubAfter per consumed message) to ``msg_trace_topic``, as a Java
    #: consumer with enableMsgTrace does (rmqrun/consumer/trace_hook.py); customizedTraceTopic
    msg_trace: bool = False
    msg_trace_topic: str = "RMQ_SYS_TRACE_TOPIC"

    def __post_init__(self) -> None:
        if self.order_by == "key":
            self.orderly = True  # ordering by key is an orderly mode: locks, suspend, DLQ as in queue mode

    @property
    def mode(self) -> ConsumeMode:
        """The consume mode these settings name (engine, services, description, cross-checks):
        see rmqrun/consumer/consume_mode.py."""
        return mode_of(orderly=self.orderly, order_by=self.order_by, order_key=self.order_key,
                       consume_mode=self.consume_mode)

    @property
    def order_by_key(self) -> bool:
        return self.order_by == "key"

    @property
    def clustering(self) -> bool:
        return self.message_model == "CLUSTERING"

    @property
    def effective_max_reconsume_times(self) -> int:
        """-1 means 16 when consuming concurrently, Integer.MAX_VALUE when orderly (Java)."""
        if self.max_reconsume_times != -1:
            return self.max_reconsume_times
        if self.orderly:
            return d.MAX_RECONSUME_TIMES_ORDERLY_WHEN_UNSET
        return d.MAX_RECONSUME_TIMES_CONCURRENTLY_WHEN_UNSET

    def all_subscriptions(self) -> dict[str, str]:
        """The user's topics plus, in clustering mode, the group's retry topic (Java copySubscription)."""
        subs = dict(self.subscriptions)
        if self.clustering:
            subs.setdefault(retry_topic(self.group), "*")
        return subs

    def expression_type(self, topic: str) -> str:
        """How ``topic``'s expression is written: ``TAG`` unless ``expression_types`` says otherwise."""
        return self.expression_types.get(topic, EXPRESSION_TAG)

    def subscription_data(self) -> dict[str, SubscriptionData]:
        """Every subscription (the retry topic's included) as the consumer subscribes it, each with its
        expression type: what the engine heartbeats and pulls with, and what ``rmqrun check`` asks the brokers
        about (on the names this config has: :meth:`on_wire` first for the cluster's)."""
        return {topic: SubscriptionData.build(topic, expr, expression_type=self.expression_type(topic))
                for topic, expr in self.all_subscriptions().items()}

    def expression_label(self, topic: str, expression: str) -> str:
        """A subscription's expression as the start-up log and ``rmqrun check`` show it: ``TagA || TagB``, or
        ``SQL92: a > 1``."""
        kind = self.expression_type(topic)
        return expression if kind == EXPRESSION_TAG else f"{kind}: {expression}"

    def on_wire(self) -> "ConsumerConfig":
        """This config with the group and the topics as the cluster names them (under the namespace).

        The engine works on these names throughout (subscriptions, the retry topic, heartbeats,
        offsets, locks, send-back), as Java's consumer does once started; only what a user sees
        (the handler's messages, metrics, status) is unwrapped again. Without a namespace, or
        applied twice, it changes nothing.
        """
        ns = self.namespace
        if not ns:
            return self
        subs = {wrap(ns, topic): expr for topic, expr in self.subscriptions.items()}
        types = {wrap(ns, topic): kind for topic, kind in self.expression_types.items()}
        return dataclasses.replace(self, group=wrap(ns, self.group), subscriptions=subs, expression_types=types)

    def validate(self) -> "ConsumerConfig":
        """Each field's own rule (declared on it, the settings table checks the same), then what depends on
        several: the required names, the consume mode's combinations, the namespace and name lengths."""
        def bad(name: str, value: object, allowed: str) -> ConfigError:
            return ConfigError(f"{name}={value!r} is invalid: {allowed}")

        if not self.group or not isinstance(self.group, str):
            raise bad("group", self.group, "a consumer group name is required")
        if self.group == "DEFAULT_CONSUMER":
            raise bad("group", self.group, "choose a group name of your own (DEFAULT_CONSUMER is reserved)")
        if not self.namesrv:
            raise bad("namesrv", self.namesrv, "give the name server address(es), e.g. 127.0.0.1:9876")
        if not self.subscriptions:
            raise bad("subscriptions", self.subscriptions, "subscribe to at least one topic")
        check_fields(self)
        try:
            time.strptime(self.consume_timestamp, "%Y%m%d%H%M%S")
        except (TypeError, ValueError):
            raise bad("consume_timestamp", self.consume_timestamp, "format yyyyMMddHHmmss") from None
        self._validate_allocation(bad)
        self.mode.validate(self)
        for topic, expr in self.subscriptions.items():
            if not topic or not isinstance(expr, str):
                raise bad("subscriptions", {topic: expr}, "topic -> tag expression, e.g. {'T': 'TagA || TagB'}")
        for topic, kind in self.expression_types.items():
            if topic not in self.subscriptions or kind not in EXPRESSION_TYPES:
                raise bad("expression_types", {topic: kind}, f"a subscribed topic -> one of "
                          f"{', '.join(EXPRESSION_TYPES)}")
            if not self.subscriptions[topic].strip():
                raise bad("subscriptions", {topic: self.subscriptions[topic]}, f"an {kind} expression cannot be "
                          "empty")
        try:
            self.namespace = check_namespace(self.namespace)
        except ValueError as exc:
            raise bad("namespace", self.namespace, str(exc)) from None
        for what, name in [("group", self.group), *(("topic", t) for t in self.subscriptions)]:
            too_long = wrapped_length_error(self.namespace, name, what)
            if too_long:
                raise ConfigError(too_long)
        return self

    def _validate_allocation(self, bad) -> None:  # type: ignore[no-untyped-def]
        if not self.clustering:
            return  # broadcasting consumes every queue: no strategy runs
        configured_strategy(self)
        if is_nearby(self.allocate_strategy) and self.consume_mode == "pop":
            raise bad("allocate_strategy", self.allocate_strategy, f"{NEARBY} allocates pulled queues in the "
                      "client; with POP the broker assigns queues (AVG); use --consume-mode pull")
