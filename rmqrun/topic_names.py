"""The names RocketMQ derives or reserves: retry, pop retry and dead-letter topics, and the system topics.

Every rule of a topic's name is written here once, below every other part of the package (it imports
nothing of rmqrun), so the codecs, the client, the consumer, the broker and the namespace rules
(:mod:`rmqrun.namespace`, which puts ``ns%`` after a ``%RETRY%`` / ``%DLQ%`` prefix and leaves system names
alone) all name the same topic the same way as Java does:

* a consumer group's retry topic is ``%RETRY%<group>`` and its dead-letter topic ``%DLQ%<group>``
  (``MixAll.getRetryTopic`` / ``getDLQTopic``);
* POP revives a message into the pop retry topic ``%RETRY%<group>_<topic>`` (V1) or ``%RETRY%<group>+<topic>``
  (V2), ``KeyBuilder.buildPopRetryTopic``; :func:`original_topic` reads the topic back out of it;
* the broker's own topics (``TopicValidator``'s system topic set and every ``rmq_sys_*`` topic) and groups
  (``CID_RMQ_SYS_*``) are system names.
"""

from __future__ import annotations

#: The topics RocketMQ derives from a consumer group (Java's MixAll.RETRY_GROUP_TOPIC_PREFIX /
#: DLQ_GROUP_TOPIC_PREFIX).
RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"

#: TopicValidator's system topics
AUTO_CREATE_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
#: ``TopicValidator.getSystemTopicSet()`` of 4.9.8, in the order it adds them (GET_SYSTEM_TOPIC_LIST_FROM_BROKER
#: lists them in the iteration order of a Java HashSet filled in this order)
SYSTEM_TOPICS: tuple[str, ...] = (AUTO_CREATE_TOPIC, SCHEDULE_TOPIC, BENCHMARK_TOPIC, TRANS_HALF_TOPIC, TRACE_TOPIC,
                                  TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
                                  OFFSET_MOVED_EVENT)
#: ... and every topic under this prefix (``TopicValidator.SYSTEM_TOPIC_PREFIX``)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
#: the broker's own consumer groups (Java's MixAll.CID_RMQ_SYS_PREFIX)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

_SYSTEM_TOPIC_SET = frozenset(SYSTEM_TOPICS)


def retry_topic(group: str) -> str:
    """The consumer group's retry topic, ``%RETRY%<group>``."""
    return RETRY_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """The consumer group's dead-letter topic, ``%DLQ%<group>``."""
    return DLQ_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """A retry topic: a group's ``%RETRY%<group>`` or a POP retry topic."""
    return topic.startswith(RETRY_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str:
    """The group a ``%RETRY%<group>`` topic belongs to (``topic`` must be a retry topic)."""
    return topic[len(RETRY_TOPIC_PREFIX):]


def group_of_dlq_topic(topic: str) -> str:
    """The group a ``%DLQ%<group>`` topic belongs to (``topic`` must be a dead-letter topic)."""
    return topic[len(DLQ_TOPIC_PREFIX):]


def pop_retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """KeyBuilder.buildPopRetryTopicV1 / V2: ``%RETRY%<group>_<topic>`` or ``%RETRY%<group>+<topic>``."""
    return f"{RETRY_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_v2(topic: str) -> bool:
    """A retry topic of POP's V2 form (``%RETRY%<group>+<topic>``): ExtraInfoUtil.getRetry's test."""
    return is_retry_topic(topic) and "+" in topic


def original_topic(topic: str, group: str) -> str:
    """KeyBuilder.parseNormalTopic(topic, group): the topic a pop retry topic stands for (else ``topic``)."""
    for sep in ("+", "_"):
        prefix = f"{RETRY_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


def is_system_topic(name: str) -> bool:
    """One of the broker's own topics (TopicValidator.isSystemTopic)."""
    return name in _SYSTEM_TOPIC_SET or name.startswith(SYSTEM_TOPIC_PREFIX)


def is_system_group(name: str) -> bool:
    """One of the broker's own consumer groups."""
    return name.startswith(SYSTEM_GROUP_PREFIX)
