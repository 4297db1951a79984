"""Durable storage of the embedded broker: commit log, consume queues, offsets and configs.

See :mod:`.message_store` for the layout and :class:`MessageStore` for the API.
"""

from .config import FlushMode, StoreConfig
from .consumer_offsets import ConsumerOffsetStore
from .errors import (
    DiskFullError,
    MessageTooLargeError,
    RecordFormatError,
    StoreClosedError,
    StoreError,
    StoreIOError,
    StoreLockedError,
)
from .json_file import JsonLoad, LoadSource
from .message_store import MessageStore
from .recovery import RecoveryReport
from .results import GetMessageStatus, GetResult, PutResult
from .subscription_groups import SubscriptionGroupConfig, SubscriptionGroupStore
from .tags_code import java_string_hash
from .topic_configs import TopicConfig, TopicConfigStore

__all__ = [
    "DiskFullError",
    "ConsumerOffsetStore",
    "FlushMode",
    "GetMessageStatus",
    "GetResult",
    "JsonLoad",
    "LoadSource",
    "MessageStore",
    "MessageTooLargeError",
    "PutResult",
    "RecordFormatError",
    "RecoveryReport",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "SubscriptionGroupConfig",
    "SubscriptionGroupStore",
    "TopicConfig",
    "TopicConfigStore",
    "java_string_hash",
]
