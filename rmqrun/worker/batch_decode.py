"""A RUN frame's records, decoded into the messages a handler receives.

Why a module of its own: this loop runs once per message in every worker, and
what it does per record (decode, the queue offset, the retry topic's reset, the
namespace) must stay exactly Java's while costing as little as possible; a
record that does not decode is kept as ``None`` with its reason, never dropped.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

from rmqrun.namespace import unwrap
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import QUEUE_OFFSET_POS, decode_message
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.topic_names import is_retry_topic

_SIZE = struct.Struct(">i")
_OFFSET = struct.Struct(">q")


def decode_batch(data: bytes | memoryview, pos: int, broker_name: str,
                 namespace: str) -> tuple[list[Any], list[int], list[str | None]]:
    """Messages (None where a record does not decode), queue offsets, decode errors (None where it did)."""
    msgs: list[Any] = []
    offsets: list[int] = []
    bad: dict[int, str] = {}
    n = len(data)
    add_msg = msgs.append
    add_offset = offsets.append
    # a batch is one queue, so its records share a topic: the retry-prefix test runs once per topic
    # seen (a string compare per record); only a retry topic's records have their properties read
    last_topic, retry = None, False
    while pos < n:
        try:
            msg, end = decode_message(data, pos, broker_name=broker_name)
        except ProtocolError as exc:
            add_offset(_OFFSET.unpack_from(data, pos + QUEUE_OFFSET_POS)[0])
            add_msg(None)
            bad[len(msgs) - 1] = f"record {len(msgs) - 1} does not decode: {exc}"
            pos += _SIZE.unpack_from(data, pos)[0]
            continue
        add_offset(msg.queue_offset)  # the same field the supervisor reads at QUEUE_OFFSET_POS
        topic = msg.topic
        if topic != last_topic:
            last_topic, retry = topic, is_retry_topic(topic)
        if retry:
            retry_topic = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if retry_topic:
                msg.topic = retry_topic  # Java's resetRetryAndNamespace
        if namespace:
            msg.topic = unwrap(namespace, msg.topic)
        add_msg(msg)
        pos = end  # a record that decodes ends where its size field says
    errors: list[str | None] = [None] * len(msgs)
    for i, text in bad.items():
        errors[i] = text
    return msgs, offsets, errors


def chunks_around(errors: list[str | None], step: int) -> Iterator[tuple[int, int]]:
    """Handler calls of up to ``step`` messages, each record that did not decode alone in its own.

    A batch handler's ``AckIndex`` counts positions in the list it was given, so a
    bad record is cut out of the calls rather than left as a hole in one.
    """
    n = len(errors)
    start = 0
    while start < n:
        end = start + 1
        if not errors[start]:
            while end < n and end - start < step and not errors[end]:
                end += 1
        yield start, end
        start = end
