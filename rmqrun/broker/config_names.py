"""The broker's settings under their Java ``BrokerConfig`` / ``MessageStoreConfig`` names, both ways.

``getBrokerConfig`` shows every setting by its Java name and ``updateBrokerConfig`` names the one to
change the same way, so the mapping lives here once: the Python field name camel-cased, except for
the fields whose Java name is different (:data:`JAVA_NAMES`). Values are written as Java's
``Properties`` would print them (``true``/``false``, ``SYNC_FLUSH``) and read back by the field's type.
"""

from __future__ import annotations

import enum
from typing import Any

from rmqrun.broker.config import BROKER_SETTINGS
from rmqrun.broker.store.config import FlushMode

#: Java names of BrokerConfig fields whose Python name does not camel-case to it.
JAVA_NAMES = {
    "port": "listenPort", "cluster_name": "brokerClusterName", "data_dir": "storePathRootDir",
    "auto_create_topic": "autoCreateTopicEnable", "flush_mode": "flushDiskType",
    "message_delay_levels": "messageDelayLevel", "segment_size": "mappedFileSizeCommitLog",
    "long_polling": "longPollingEnable", "short_polling_ms": "shortPollingTimeMills",
    "max_transfer_count_in_memory": "maxTransferCountOnMessageInMemory",
    "max_transfer_bytes_in_memory": "maxTransferBytesOnMessageInMemory",
    "max_transfer_count_on_disk": "maxTransferCountOnMessageInDisk",
    "max_transfer_bytes_on_disk": "maxTransferBytesOnMessageInDisk",
    "notify_consumer_ids_changed": "notifyConsumerIdsChangedEnable", "sync_flush_timeout_ms": "syncFlushTimeout",
    "retry_max_times": "retryMaxTimes", "file_reserved_hours": "fileReservedTime",
    "clean_resource_interval_ms": "cleanResourceInterval", "host": "bindAddress",
}

#: Names ``updateBrokerConfig`` may not change (Java's fixed part of ``configBlackList``).
CONFIG_BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})

_FLUSH_NAMES = {FlushMode.SYNC: "SYNC_FLUSH", FlushMode.ASYNC: "ASYNC_FLUSH"}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def java_name(field_name: str) -> str:
    return JAVA_NAMES.get(field_name, camel(field_name))


#: Java name → broker setting (a BrokerConfig field, or one of its store's: see config.BROKER_SETTINGS).
FIELD_BY_JAVA_NAME = {java_name(name): name for name in BROKER_SETTINGS}


def config_text(value: Any) -> str:
    """A setting's value as a Java ``Properties`` file shows it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return _FLUSH_NAMES.get(value, value.name) if isinstance(value, FlushMode) else value.name
    return "" if value is None else str(value)


def parse_setting(field_name: str, current: Any, text: str) -> Any:
    """``text`` as a value of the field whose present value is ``current``; ValueError if it is not one."""
    text = text.strip()
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{java_name(field_name)}={text!r} is not true or false")
        return text.lower() == "true"
    if isinstance(current, FlushMode):
        for mode, name in _FLUSH_NAMES.items():
            if text.upper() in (name, mode.name):
                return mode
        raise ValueError(f"{java_name(field_name)}={text!r} is not SYNC_FLUSH or ASYNC_FLUSH")
    try:
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError:
        raise ValueError(f"{java_name(field_name)}={text!r} is not a number") from None
    return None if text == "" and current is None else text
