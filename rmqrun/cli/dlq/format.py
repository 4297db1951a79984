"""What ``rmqrun dlq`` prints: one line (or JSON object) per dead letter, one message in full.

Plain functions over a decoded :class:`~rmqrun.model.Message`, kept apart from
the command so they are tested without a broker. Times are UTC with
milliseconds, as ``rmqrun read`` prints them.
"""

from __future__ import annotations

import json
from typing import Any

from rmqrun.cli.read.format import escape, json_line, preview
from rmqrun.model import Message
from rmqrun.pull.dead_letters import UndecodableRecord, keys_of, origin_topic
from rmqrun.remoting import message_props as codec
from rmqrun.time_text import iso_ms


def summary(msg: Message, namespace: str | None, redriven_to: int) -> dict[str, Any]:
    """The fields ``dlq list`` shows: when, which message, from where, how often tried, how big."""
    return {
        "dead_lettered_at": iso_ms(msg.store_timestamp),
        "store_timestamp": msg.store_timestamp,
        "broker": msg.broker_name,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "msg_id": msg.msg_id,
        "offset_msg_id": msg.offset_msg_id,
        "origin_msg_id": msg.properties.get(codec.PROPERTY_ORIGIN_MESSAGE_ID),
        "origin_topic": origin_topic(msg, namespace),
        "keys": keys_of(msg),
        "tags": msg.tags,
        "reconsume_times": msg.reconsume_times,
        "size": len(msg.body),
        "redriven": 0 <= redriven_to and msg.queue_offset < redriven_to,
    }


def list_line(record: dict[str, Any]) -> str:
    """One readable line of :func:`summary`."""
    keys = ",".join(escape(k) for k in record["keys"]) or "-"
    return " ".join([
        record["dead_lettered_at"],
        f"{record['broker']}:{record['queue_id']}@{record['queue_offset']}",
        f"id={record['msg_id']}",
        f"keys={keys}",
        f"topic={record['origin_topic'] or '-'}",
        f"reconsumed={record['reconsume_times']}",
        f"size={record['size']}",
        "redriven" if record["redriven"] else "pending",
    ])


def undecodable_record(item: UndecodableRecord, redriven_to: int) -> dict[str, Any]:
    return {"broker": item.mq.broker_name, "queue_id": item.mq.queue_id, "queue_offset": item.queue_offset,
            "undecodable": item.error, "redriven": 0 <= redriven_to and item.queue_offset < redriven_to}


def undecodable_line(record: dict[str, Any]) -> str:
    return (f"{record['broker']}:{record['queue_id']}@{record['queue_offset']} does not decode "
            f"({record['undecodable']})")


def as_json(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def show_json(msg: Message, namespace: str | None) -> str:
    """Every field (``rmqrun read --format json``'s object) plus the original topic and message id."""
    record = json.loads(json_line(msg))
    record["origin_topic"] = origin_topic(msg, namespace)
    record["origin_msg_id"] = msg.properties.get(codec.PROPERTY_ORIGIN_MESSAGE_ID)
    return as_json(record)


def show_text(msg: Message, namespace: str | None, body_chars: int) -> str:
    """The message in full: where, ids, times, properties (sorted), then the start of the body."""
    lines = [
        f"dead letter     {msg.broker_name}:{msg.queue_id}@{msg.queue_offset} of {msg.topic}",
        f"msg id          {msg.msg_id}",
        f"offset msg id   {msg.offset_msg_id}",
        f"origin msg id   {msg.properties.get(codec.PROPERTY_ORIGIN_MESSAGE_ID) or '-'}",
        f"origin topic    {origin_topic(msg, namespace) or '-'}",
        f"dead-lettered   {iso_ms(msg.store_timestamp)}",
        f"born            {iso_ms(msg.born_timestamp)} at {msg.born_host}",
        f"reconsume times {msg.reconsume_times}",
        f"size            {len(msg.body)} bytes",
        "properties",
    ]
    lines += [f"  {escape(k)} = {escape(v)}" for k, v in sorted(msg.properties.items())]
    lines.append("body")
    lines.append(f"  {preview(msg.body, body_chars)}")
    return "\n".join(lines)
