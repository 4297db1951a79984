"""The pull model: the program picks queues and offsets, and commits when it chooses.

``PullConsumer`` (blocking, usable from any thread) and ``AsyncPullConsumer``
(asyncio) offer what Java's ``DefaultMQPullConsumer`` offers; see
:mod:`rmqrun.pull.async_consumer` for the semantics. The consumers are loaded on
first use, so ``from rmqrun.pull import PullResult`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqrun.pull.errors import (
    FilterNotSupportedError, MessageNotFoundError, NotStartedError, OffsetPersistError, SendBackError,
    TopicNotFoundError, WrongCallerError,
)
from rmqrun.pull.result import PullResult, PullStatus

if TYPE_CHECKING:
    from rmqrun.pull.async_consumer import AsyncPullConsumer
    from rmqrun.pull.consumer import PullConsumer
    from rmqrun.remoting.security import ClientSecurity

__all__ = ["PullConsumer", "AsyncPullConsumer", "PullResult", "PullStatus", "TopicNotFoundError",
           "NotStartedError", "OffsetPersistError", "WrongCallerError", "ClientSecurity", "QueryResult",
           "MessageNotFoundError", "FilterNotSupportedError", "SendBackError"]


def __getattr__(name: str) -> Any:
    if name == "PullConsumer":
        from rmqrun.pull.consumer import PullConsumer
        return PullConsumer
    if name == "AsyncPullConsumer":
        from rmqrun.pull.async_consumer import AsyncPullConsumer
        return AsyncPullConsumer
    if name == "QueryResult":
        from rmqrun.pull.lookup import QueryResult
        return QueryResult
    if name == "ClientSecurity":  # ACL credentials and TLS: PullConsumer(..., security=ClientSecurity(...))
        from rmqrun.remoting.security import ClientSecurity
        return ClientSecurity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
