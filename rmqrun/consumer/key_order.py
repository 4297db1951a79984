"""What "the key of a message" means in ``order_by: key`` mode, and the lane a key runs in.

Pure functions, no I/O. The keyed consume service (``consume_keyed.py``) asks
:func:`key_of` for each pulled record and runs each :class:`KeyLane` one job
at a time. Which property holds the key is the ``order_key`` setting:

* ``sharding_key`` (default): the ``__SHARDINGKEY`` property that
  ``rmqrun produce --sharding-key`` and ``Producer.send(sharding_key=...)``
  record, falling back to the first of the message's ``keys``;
* ``keys``: the first of the message's keys (space separated, as Java joins them);
* ``tags``: the message's tag;
* ``property:NAME``: any user property.

A record with no key (or whose properties do not decode) gets ``None``: such
messages share one lane per queue, so they keep their queue order among
themselves, as in ``order_by: queue``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Optional

from rmqrun.model import MessageQueue
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import scan_records
from rmqrun.remoting.message_props import PROPERTY_KEYS, PROPERTY_SHARDING_KEY, PROPERTY_TAGS

ORDER_BY = ("queue", "key")
ORDER_KEYS = ("sharding_key", "keys", "tags", "property:NAME")

KeyReader = Callable[[dict[str, str]], Optional[str]]


def _first_key(props: dict[str, str]) -> str | None:
    keys = props.get(PROPERTY_KEYS)
    if not keys:
        return None
    first = keys.split(" ", 1)[0]
    return first or None


def parse_order_key(spec: str) -> KeyReader:
    """The function reading a key from a message's properties; ValueError says what is allowed."""
    if not isinstance(spec, str):
        raise ValueError(f"one of {', '.join(ORDER_KEYS)}")
    if spec == "sharding_key":
        return lambda props: props.get(PROPERTY_SHARDING_KEY) or _first_key(props)
    if spec == "keys":
        return _first_key
    if spec == "tags":
        return lambda props: props.get(PROPERTY_TAGS) or None
    if spec.startswith("property:"):
        name = spec[len("property:"):]
        if not name:
            raise ValueError("property: needs a property name, e.g. property:orderId")
        return lambda props: props.get(name) or None
    raise ValueError(f"one of {', '.join(ORDER_KEYS)}")


def valid_order_key(spec: str) -> bool:
    """Whether ``spec`` is an order_key the service understands (for the settings table)."""
    try:
        parse_order_key(spec)
    except ValueError:
        return False
    return True


def key_of(record: bytes | bytearray | memoryview, reader: KeyReader) -> str | None:
    """The order key of one raw stored record; None when it has none or its properties do not decode."""
    try:
        heads = scan_records(record)
        return reader(heads[0].properties) if heads else None
    except ProtocolError:
        return None


@dataclass(frozen=True, slots=True)
class KeyLane:
    """One key of one queue: the unit that runs one job at a time.

    It is the dispatch key the executor pins and serialises on. ``str()`` is
    the key itself (or the queue, for messages without a key), so the worker
    a key runs on is ``crc32(key) % workers`` whatever queue it came from.
    """

    mq: MessageQueue
    key: str | None

    def __str__(self) -> str:
        return str(self.mq) if self.key is None else self.key


def lane_slot(lane: KeyLane, workers: int) -> int:
    """Which of ``workers`` a lane runs on: the index the dispatcher pins it to (crc32 of ``str(lane)``
    mod the number of workers, its stable rule), so that lanes of one slot can share a job."""
    return zlib.crc32(str(lane).encode("utf-8")) % workers
