"""Operator requests that change the broker: settings and clean-ups (part of ``AdminBrokerProcessor``).

UPDATE_BROKER_CONFIG (``mqadmin updateBrokerConfig -k K -v V``): the body is a properties text. As
in 4.9.8, a name on the black list (``brokerConfigPath``, ``rocketmqHome``, ``configBlackList``) is
NO_PERMISSION and names this broker has no setting for are ignored (Java ignores names its config
lacks, so a script written for a Java broker still runs). Unlike Java, which writes any value into
its config object and so lets ``getBrokerConfig`` show a port it is not listening on, a known
setting that only a restart would apply is refused with SYSTEM_ERROR naming it, and so is a value
of the wrong type; nothing of such a request is applied. What applies at once is :data:`LIVE`:
settings the processors read at every request, the retention settings the store reads at every check
(``fileReservedTime``, the disk ratios), and ``brokerPermission`` (the route's perm, pulls refused when
not readable). Changes last until the broker stops: the embedded broker has no
``broker.conf`` to write them to (give them as settings to keep them).

CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC and DELETE_EXPIRED_COMMITLOG run the store's clean-ups
now instead of at their hour; GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists the topics ``exportMetadata``
leaves out. Every answer is SUCCESS without a remark, as Java's.
"""

from __future__ import annotations

import asyncio
import dataclasses

from loguru import logger

from rmqrun.broker.config import settings_of, with_settings
from rmqrun.broker.config_names import CONFIG_BLACK_LIST, FIELD_BY_JAVA_NAME, parse_setting
from rmqrun.broker.processors.common import answer
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.protocol.admin import TopicList, parse_properties
from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message_props import java_string_hash
from rmqrun.topic_names import SCHEDULE_TOPIC, SYSTEM_TOPICS

#: Retention settings the store reads at every check (``fileReservedTime`` and the disk ratios): handed to
#: the store as well, so ``updateBrokerConfig -k fileReservedTime`` works as on a Java broker.
STORE_LIVE = frozenset({"file_reserved_hours", "disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio",
                        "disk_space_warning_level_ratio"})
#: BrokerConfig fields read at every request (or check): ``updateBrokerConfig`` applies them at once.
LIVE = STORE_LIVE | frozenset({
    "long_polling", "short_polling_ms", "max_transfer_count_in_memory", "max_transfer_bytes_in_memory",
    "max_transfer_count_on_disk", "max_transfer_bytes_on_disk", "retry_max_times", "trace_on", "region_id",
    "sync_flush_timeout_ms", "broker_permission",
})

def system_topic_list() -> list[str]:
    """The system topics in the order Java's ``HashSet`` writes them."""
    return list(java_hash_set_order(SYSTEM_TOPICS, java_string_hash))


class MaintenanceProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ settings

    async def update_broker_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.body is None:
            return answer(cmd, typed=False)  # Java: nothing to do, SUCCESS
        try:
            props = parse_properties(cmd.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}", typed=False)
        if CONFIG_BLACK_LIST & props.keys():
            return answer(cmd, ResponseCode.NO_PERMISSION, "Can not update config in black list.", typed=False)
        cfg = self.broker.config
        current = settings_of(cfg)
        changes, ignored, restart = {}, [], []
        try:
            for key, text in props.items():
                name = FIELD_BY_JAVA_NAME.get(key)
                if name is None:
                    ignored.append(key)
                elif name not in LIVE:
                    restart.append(key)
                else:
                    changes[name] = parse_setting(name, current[name], text)
            if restart:
                raise ValueError(f"{', '.join(restart)} cannot change while the broker runs: restart it with the "
                                 f"new setting (these apply at once: {', '.join(sorted(live_java_names()))})")
            new = dataclasses.replace(cfg, **with_settings(cfg, **changes))
        except ValueError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc), typed=False)
        if ignored:
            logger.warning("updateBrokerConfig from {}: no such setting here, ignored as Java ignores it: {}",
                           conn.name, ", ".join(ignored))
        self.broker.config = new
        if new.store is not cfg.store:  # the store and its retention share the one frozen StoreConfig: swap both
            store = self.broker.store
            store.config = store.retention.config = new.store
        logger.info("updateBrokerConfig from {}: {}", conn.name,
                    ", ".join(f"{k}={props[k]}" for k in props if k not in ignored) or "nothing to change")
        return answer(cmd, typed=False)

    # ------------------------------------------------------------------ clean-ups

    async def clean_expired_consume_queue(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Consume-queue files wholly behind the commit log go, and the queues of deleted topics with nothing
        left to read. A live topic's empty queue keeps its offsets (Java would start it again at 0)."""
        store, topics = self.broker.store, self.broker.topics
        assert topics is not None
        # One regular retention check (serialised with the periodic one): the queues follow the commit log.
        report = await asyncio.to_thread(store.clean_expired_files)
        followed = report.deleted_queue_files if report is not None else 0
        gone = [t for t in _store_topics(store.queues()) if t not in topics and t != SCHEDULE_TOPIC
                and all(store.min_offset(t, q) >= store.max_offset(t, q) for tt, q in store.queues() if tt == t)]
        for topic in gone:
            store.delete_topic_queues(topic)
        logger.warning("cleanExpiredConsumeQueue from {}: {} consume-queue file(s) behind the commit log, "
                       "queues of {} removed", conn.name, followed, gone or "no topic")
        return answer(cmd, typed=False)

    async def clean_unused_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """The consume queues of topics that have no config any more (the schedule topic stays)."""
        store, topics = self.broker.store, self.broker.topics
        assert topics is not None
        unused = [t for t in _store_topics(store.queues()) if t not in topics and t != SCHEDULE_TOPIC]
        for topic in unused:
            store.delete_topic_queues(topic)
        logger.warning("cleanUnusedTopic from {}: consume queues of {} removed", conn.name, unused or "no topic")
        return answer(cmd, typed=False)

    async def delete_expired_commit_log(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Expired commit-log files now, whatever ``delete_when`` says (unexpired ones stay)."""
        deleted = await asyncio.to_thread(self.broker.store.retention.delete_expired_now)
        logger.warning("deleteExpiredCommitLog from {}: {}", conn.name,
                       f"deleted {deleted}" if deleted else "no commit log file has expired")
        return answer(cmd, typed=False)

    async def get_system_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return answer(cmd, body=TopicList(system_topic_list()).encode(), typed=False)


def live_java_names() -> list[str]:
    return [java for java, name in FIELD_BY_JAVA_NAME.items() if name in LIVE]


def _store_topics(queues: list[tuple[str, int]]) -> list[str]:
    return list(dict.fromkeys(t for t, _ in queues))
