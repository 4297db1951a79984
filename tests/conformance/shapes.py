"""The shape of a fastjson body: field names and value kinds, with data-keyed maps collapsed.

Admin answers carry values of the moment (offsets, TPS, timestamps, client ids); what must match the
real broker's or the Java consumer's answer is which fields there are and what kind of value each holds.
Maps keyed by data (message queues, topics, client ids) collapse into one ``<entry>`` whose shape is
the union of their entries' shapes.
"""

from __future__ import annotations

from typing import Any

#: Fields that are maps keyed by data rather than objects with named fields.
MAP_FIELDS = {"offsetTable", "consumerTable", "subscriptionTable", "mqTable", "statusTable", "messageQueueTable"}


def merge_shapes(shapes: list[Any]) -> Any:
    if shapes and all(isinstance(x, dict) for x in shapes):
        merged: dict[str, list[Any]] = {}
        for x in shapes:
            for k, v in x.items():
                merged.setdefault(k, []).append(v)
        return {k: merge_shapes(v) for k, v in merged.items()}
    return sorted({repr(x) for x in shapes})


def shape(value: Any, name: str = "") -> Any:
    """Field names and value kinds of a parsed fastjson body."""
    if isinstance(value, dict):
        if name in MAP_FIELDS or (value and all(k.startswith("{") for k in value)):
            return {"<entry>": merge_shapes([shape(v) for v in value.values()])} if value else {}
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [merge_shapes([shape(v) for v in value])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__
