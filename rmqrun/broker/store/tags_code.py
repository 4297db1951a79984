"""The consume-queue "tags code" of a record, recomputed when a queue is rebuilt.

Normally the caller of ``put`` supplies the tags code. When a consume queue has to
be rebuilt from the commit log the store must recompute it, with the rule RocketMQ's
``CommitLog.checkMessageAndReturnSize`` uses: the Java ``String.hashCode`` of the
TAGS property, except for SCHEDULE_TOPIC_XXXX whose entries carry the delivery time
(store time + the delay of the DELAY level) so the schedule service can scan them.
"""

from __future__ import annotations

from typing import Callable, Mapping

from rmqrun.remoting.message_props import java_string_hash
from rmqrun.topic_names import SCHEDULE_TOPIC

from .config import parse_delay_levels

PROPERTY_TAGS = "TAGS"
PROPERTY_DELAY = "DELAY"

#: (topic, properties, store timestamp ms) -> tags code
TagsCodeFn = Callable[[str, Mapping[str, str], int], int]

def make_tags_code_fn(delay_levels_spec: str) -> TagsCodeFn:
    delays = parse_delay_levels(delay_levels_spec)

    def tags_code(topic: str, properties: Mapping[str, str], store_timestamp: int) -> int:
        if topic == SCHEDULE_TOPIC and properties.get(PROPERTY_DELAY):
            try:
                level = int(properties[PROPERTY_DELAY])
            except ValueError:
                level = 0
            level = min(level, len(delays))
            if level > 0:
                return store_timestamp + delays[level - 1]
        tags = properties.get(PROPERTY_TAGS)
        return java_string_hash(tags) if tags else 0

    return tags_code
