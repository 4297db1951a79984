"""The broker's topic table: which topics exist, their queue counts and permissions.

Mirrors ``TopicConfigManager`` (4.9.8): the same system topics at start, the
same auto-create rule (a new topic copies TBW102's permission minus INHERIT
and gets min(producer's defaultTopicQueueNums, TBW102's write queues)), and
retry / DLQ topics created with one read-write queue. The name server reads
this table directly (in RocketMQ the broker pushes it with REGISTER_BROKER),
so a route exists the moment a topic does.

The configs themselves are the store's (``topics.json``); this module adds
the broker's rules on top.
"""

from __future__ import annotations

import re
from typing import Callable

from loguru import logger

from rmqrun.broker.config import BrokerConfig
from rmqrun.broker.store.topic_configs import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    TopicConfigStore,
)
from rmqrun.topic_names import (
    AUTO_CREATE_TOPIC, BENCHMARK_TOPIC, OFFSET_MOVED_EVENT, SCHEDULE_TOPIC, SELF_TEST_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, is_dlq_topic, is_retry_topic, is_system_topic,
)

__all__ = ["TopicConfig", "TopicTable", "PERM_READ", "PERM_WRITE", "PERM_INHERIT"]

TOPIC_MAX_LENGTH = 127
#: RocketMQ keeps 18 schedule queues whatever the number of delay levels.
SCHEDULE_TOPIC_QUEUE_NUM = 18

NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
})

_VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def topic_problem(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic``'s remark for a bad name, None when the name is fine."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if not _VALID_TOPIC.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def queue_id_limit(tc: TopicConfig) -> int:
    """Queue ids a send may name: below max(write, read) (AbstractSendMessageProcessor.msgCheck)."""
    return max(tc.read_queue_nums, tc.write_queue_nums)


class TopicTable:
    """Every topic this broker serves, kept in the store's ``topics.json`` table.

    Changes are written through at once (RocketMQ persists topics.json on every
    change too): a topic auto-created by a send must survive a kill -9 right
    after the SEND_OK, or its messages would come back without a route.
    """

    def __init__(self, config: BrokerConfig, store: TopicConfigStore) -> None:
        self._config = config
        self._store = store
        self.system_topics: set[str] = set()
        for tc in self._system_topics(config):
            self.system_topics.add(tc.topic_name)
            if store.get(tc.topic_name) is None:
                store.put(tc)
        #: Called with the topic name whenever a topic is created or changed (the
        #: equivalent of the broker's REGISTER_BROKER to the name server).
        self.listeners: list[Callable[[str], None]] = []

    def is_system(self, topic: str) -> bool:
        """A topic no admin request may create or delete: one this broker made at start (its cluster and broker
        name topics among them), one of Java's system topic set, or one under ``rmq_sys_``."""
        return topic in self.system_topics or is_system_topic(topic)

    @staticmethod
    def _system_topics(config: BrokerConfig) -> list[TopicConfig]:
        rw = PERM_READ | PERM_WRITE
        out = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
        if config.auto_create_topic:
            out.append(TopicConfig(AUTO_CREATE_TOPIC, config.default_topic_queue_nums,
                                   config.default_topic_queue_nums, PERM_INHERIT | rw))
        out += [
            TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(config.cluster_name, perm=PERM_INHERIT | rw),
            TopicConfig(config.broker_name, 1, 1, PERM_INHERIT | rw),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
        ]
        schedule_queues = max(SCHEDULE_TOPIC_QUEUE_NUM, len(config.delay_levels_ms))
        out.append(TopicConfig(SCHEDULE_TOPIC, schedule_queues, schedule_queues))
        if config.trace_topic_enable:
            out.append(TopicConfig(config.msg_trace_topic_name, 1, 1))
        out.append(TopicConfig(f"{config.cluster_name}_REPLY_TOPIC", 1, 1))
        return out

    def adopt_orphan_queues(self, queues: list[tuple[str, int]]) -> list[str]:
        """Give a config to topics that have stored messages but none (a crash lost it)."""
        highest: dict[str, int] = {}
        for topic, queue_id in queues:
            highest[topic] = max(highest.get(topic, -1), queue_id)
        adopted = []
        for topic, top in highest.items():
            if self._store.get(topic) is None and topic_problem(topic) is None:
                nums = max(top + 1, 1 if is_retry_topic(topic) or is_dlq_topic(topic) else 4)
                self._store.put(TopicConfig(topic, nums, nums))
                adopted.append(topic)
        if adopted:
            self._store.flush()
        return adopted

    # ------------------------------------------------------------------ queries

    def get(self, topic: str) -> TopicConfig | None:
        return self._store.get(topic)

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and self._store.get(topic) is not None

    def names(self) -> list[str]:
        return list(self._store.all())

    def all(self) -> list[TopicConfig]:
        return list(self._store.all().values())

    # ------------------------------------------------------------------ changes

    def _changed(self, topic: str) -> None:
        # As Java's ConfigManager.persist: a table that cannot be saved (a full disk) is logged and the change
        # stands in memory; the whole table is written again at the next change and at stop. A heartbeat that
        # creates a %RETRY% topic on a full disk must not fail the client (it used to, with a traceback).
        try:
            self._store.flush()
        except OSError as exc:
            logger.error("topic {} changed, but the topic table could not be saved ({}); it is saved again at the "
                         "next change", topic, exc.strerror or exc)
        for listener in list(self.listeners):
            listener(topic)

    def put(self, tc: TopicConfig) -> TopicConfig:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        self._store.put(tc)
        self._changed(tc.topic_name)
        return tc

    def delete(self, topic: str) -> bool:
        if not self._store.delete(topic):
            return False
        self._changed(topic)
        return True

    def create_on_send(self, topic: str, default_topic: str, client_queue_nums: int,
                       topic_sys_flag: int = 0) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: a producer's first send to an unknown topic.

        None when the default topic is missing or does not carry the INHERIT bit
        (auto-create off), which the send answers with TOPIC_NOT_EXIST.
        """
        existing = self._store.get(topic)
        if existing is not None:
            return existing
        template = self._store.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        if self._config.auto_create_queue_nums is not None:
            queue_nums = self._config.auto_create_queue_nums
        else:
            queue_nums = max(0, min(client_queue_nums, template.write_queue_nums))
        tc = TopicConfig(topic, queue_nums, queue_nums, template.perm & ~PERM_INHERIT,
                         template.topic_filter_type, topic_sys_flag)
        return self.put(tc)

    def create_for_send_back(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE,
                             topic_sys_flag: int = 0) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: retry and DLQ topics, never refused."""
        existing = self._store.get(topic)
        if existing is not None:
            return existing
        return self.put(TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag))
