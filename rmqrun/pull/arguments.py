"""Checks of the arguments the pull API takes, each failing with one ValueError/TypeError
that names the argument and the value (Java's ``MQClientException("offset < 0")``, made readable)."""

from __future__ import annotations

import math
import os

from rmqrun.model import MessageQueue

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1
NAMESRV_ENV = "NAMESRV_ADDR"


def namesrv_address(namesrv: str | None) -> str:
    """The name-server address given, else ``$NAMESRV_ADDR``; checked as Java's ``a:port;b:port`` list."""
    from rmqrun.client.namesrv import parse_addresses

    value = namesrv if namesrv is not None else os.environ.get(NAMESRV_ENV)
    if value is None or not value.strip():
        raise ValueError(f"no name server: pass namesrv='host:port' or set ${NAMESRV_ENV}")
    parse_addresses(value)  # raises ValueError naming the bad address
    return value.strip()


def positive_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def queue(mq: object) -> MessageQueue:
    if not isinstance(mq, MessageQueue):
        raise TypeError(f"mq must be a rmqrun.MessageQueue, got {type(mq).__name__}: {mq!r}")
    if not mq.topic or not mq.broker_name or mq.queue_id < 0:
        raise ValueError(f"mq {mq!r} needs a topic, a broker name and a queue id >= 0")
    return mq


def offset(value: object, name: str = "offset") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < 0 or value > JAVA_LONG_MAX:
        raise ValueError(f"{name} must be between 0 and {JAVA_LONG_MAX}, got {value}")
    return value


def max_nums(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_nums must be an int, got {type(value).__name__}: {value!r}")
    if not 1 <= value <= JAVA_INT_MAX:
        raise ValueError(f"max_nums must be between 1 and {JAVA_INT_MAX}, got {value}")
    return value


def timestamp_ms(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"timestamp_ms must be an int (epoch milliseconds), got {type(value).__name__}: {value!r}")
    if value < 0:
        raise ValueError(f"timestamp_ms must be >= 0 (epoch milliseconds), got {value}")
    return value


def topic(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"topic must be a non-empty string, got {value!r}")
    return value
