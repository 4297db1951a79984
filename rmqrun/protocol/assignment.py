"""Bodies of broker-side assignment: QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401), GET_ALL (402).

RocketMQ 5.x lets the broker decide which queues a client consumes, and how: a
consumer group's *message request mode* per topic is PULL (one owner per queue,
as with client-side rebalance) or POP (queues shared; queue id -1 means "pop
from every queue"). An admin sets the mode with SET_MESSAGE_REQUEST_MODE; a
client asks for its share with QUERY_ASSIGNMENT. All three travel as JSON
bodies written by fastjson, which orders an object's fields by name and writes
an enum by its name; the encoders here do the same so a body matches a Java
one byte for byte. Decoders accept what Java's fastjson accepts (absent fields
take the Java defaults, the C++ client's enum ordinals).

Java classes: ``MessageRequestMode``, ``SetMessageRequestModeRequestBody``,
``QueryAssignmentRequestBody``, ``QueryAssignmentResponseBody`` /
``MessageQueueAssignment``, and ``MessageRequestModeManager`` (whose JSON is
the GET_ALL_MESSAGE_REQUEST_MODE answer, read back by Java as
``MessageRequestModeSerializeWrapper``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import MessageModel, _WireEnum, dumps, load_object
from rmqrun.remoting.errors import ProtocolError


class MessageRequestMode(_WireEnum):
    """How a group consumes a topic. Declaration order is Java's (the C++ client sends ordinals)."""

    PULL = "PULL"
    POP = "POP"


def _text(obj: Mapping[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    return default if value is None else str(value)


def _int(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"{key}: not an integer: {value!r}") from exc


# --------------------------------------------------------------------------- SET_MESSAGE_REQUEST_MODE

@dataclass(slots=True)
class SetMessageRequestModeRequestBody:
    topic: str
    consumer_group: str
    mode: MessageRequestMode = MessageRequestMode.PULL
    #: POP only: besides its own queues a client pops the queues of the next N clients in the sorted
    #: client list; 0 (and anything >= clients - 1) means every client pops every queue.
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"consumerGroup": self.consumer_group, "mode": MessageRequestMode.parse(self.mode).value,
                "popShareQueueNum": self.pop_share_queue_num, "topic": self.topic}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "SetMessageRequestModeRequestBody":
        if not isinstance(obj, Mapping):
            raise ProtocolError(f"not a message request mode: {obj!r}")
        mode = obj.get("mode")
        return cls(topic=_text(obj, "topic"), consumer_group=_text(obj, "consumerGroup"),
                   mode=MessageRequestMode.PULL if mode is None else MessageRequestMode.parse(mode),
                   pop_share_queue_num=_int(obj, "popShareQueueNum", 0))

    @classmethod
    def decode(cls, data: bytes | str) -> "SetMessageRequestModeRequestBody":
        return cls.from_json(load_object(data))


# --------------------------------------------------------------------------- QUERY_ASSIGNMENT

@dataclass(slots=True)
class QueryAssignmentRequestBody:
    topic: str
    consumer_group: str
    client_id: str
    #: the allocation strategy's Java name ("AVG", "AVG_BY_CIRCLE"); the broker knows only those two
    strategy_name: str = "AVG"
    message_model: MessageModel = MessageModel.CLUSTERING

    def to_json(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "consumerGroup": self.consumer_group,
                "messageModel": MessageModel.parse(self.message_model).value,
                "strategyName": self.strategy_name, "topic": self.topic}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | str) -> "QueryAssignmentRequestBody":
        obj = load_object(data)
        model = obj.get("messageModel")
        return cls(topic=_text(obj, "topic"), consumer_group=_text(obj, "consumerGroup"),
                   client_id=_text(obj, "clientId"), strategy_name=_text(obj, "strategyName"),
                   message_model=MessageModel.CLUSTERING if model is None else MessageModel.parse(model))


@dataclass(frozen=True, slots=True)
class MessageQueueAssignment:
    """One queue of an assignment and how to consume it; queue id -1 in POP mode means every queue."""

    message_queue: MessageQueue
    mode: MessageRequestMode = MessageRequestMode.PULL
    attachments: Mapping[str, str] | None = None

    @property
    def pop_all_queues(self) -> bool:
        return self.mode is MessageRequestMode.POP and self.message_queue.queue_id < 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.attachments is not None:  # fastjson leaves a null field out
            out["attachments"] = dict(self.attachments)
        out["messageQueue"] = {"brokerName": self.message_queue.broker_name,
                               "queueId": self.message_queue.queue_id, "topic": self.message_queue.topic}
        out["mode"] = self.mode.value
        return out

    @classmethod
    def from_json(cls, obj: Any) -> "MessageQueueAssignment":
        if not isinstance(obj, Mapping) or not isinstance(obj.get("messageQueue"), Mapping):
            raise ProtocolError(f"not a MessageQueueAssignment: {obj!r}")
        try:
            mq = MessageQueue.from_json(obj["messageQueue"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"not a MessageQueue: {obj['messageQueue']!r}") from exc
        mode = obj.get("mode")
        attachments = obj.get("attachments")
        return cls(mq, MessageRequestMode.PULL if mode is None else MessageRequestMode.parse(mode),
                   {str(k): str(v) for k, v in attachments.items()} if isinstance(attachments, Mapping) else None)


@dataclass(slots=True)
class QueryAssignmentResponseBody:
    """``None`` assignments: the broker had no answer (unknown topic or strategy, client list unknown);
    Java's client then keeps what it has. An empty list: drop every queue."""

    assignments: list[MessageQueueAssignment] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.assignments is None:
            return {}
        return {"messageQueueAssignments": [a.to_json() for a in self.assignments]}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes | str) -> "QueryAssignmentResponseBody":
        raw = load_object(data).get("messageQueueAssignments")
        if raw is None:
            return cls(None)
        if not isinstance(raw, list):
            raise ProtocolError(f"messageQueueAssignments is not a list: {raw!r}")
        return cls([MessageQueueAssignment.from_json(a) for a in raw])


# --------------------------------------------------------------------------- GET_ALL_MESSAGE_REQUEST_MODE

@dataclass(slots=True)
class MessageRequestModeTable:
    """Every mode a broker was told: topic -> group -> the SET body it stored (also its config file)."""

    modes: dict[str, dict[str, SetMessageRequestModeRequestBody]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"messageRequestModeMap": {
            topic: {group: body.to_json() for group, body in groups.items()}
            for topic, groups in self.modes.items()}}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> "MessageRequestModeTable":
        if not isinstance(obj, Mapping):
            raise ProtocolError(f"not a message request mode table: {obj!r}")
        raw = obj.get("messageRequestModeMap") or {}
        if not isinstance(raw, Mapping):
            raise ProtocolError(f"messageRequestModeMap is not an object: {raw!r}")
        modes: dict[str, dict[str, SetMessageRequestModeRequestBody]] = {}
        for topic, groups in raw.items():
            if not isinstance(groups, Mapping):
                raise ProtocolError(f"modes of topic {topic!r} are not an object: {groups!r}")
            modes[str(topic)] = {str(g): SetMessageRequestModeRequestBody.from_json(b) for g, b in groups.items()}
        return cls(modes)

    @classmethod
    def decode(cls, data: bytes | str) -> "MessageRequestModeTable":
        return cls.from_json(load_object(data))

    def rows(self) -> list[SetMessageRequestModeRequestBody]:
        """Every entry, sorted by topic then group (what a listing shows)."""
        return [self.modes[t][g] for t in sorted(self.modes) for g in sorted(self.modes[t])]
