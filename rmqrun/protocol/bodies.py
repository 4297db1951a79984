"""JSON request and response bodies: heartbeat, lock/unlock, consumer list, offsets tables.

Java writes these with fastjson, which sorts an object's fields by name; the
encoders here emit keys in that order so a body can be byte-identical to a
Java client's. Maps keyed by a MessageQueue are written as fastjson writes
them, with the queue object itself as the key
(``{{"brokerName":"b","queueId":0,"topic":"t"}:5}``), which is not JSON; the
decoders go through :mod:`rmqrun.remoting.fastjson`, so they read that form,
strict JSON, and the C++ client's numeric enums alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping

from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting import fastjson
from rmqrun.remoting.errors import ProtocolError


class _WireEnum(str, Enum):
    """An enum fastjson writes by name; the C++ client writes the ordinal instead."""

    @classmethod
    def parse(cls, value: Any) -> Any:
        if isinstance(value, cls):
            return value
        members = list(cls)
        if isinstance(value, int) and not isinstance(value, bool):
            if 0 <= value < len(members):
                return members[value]
        elif isinstance(value, str):
            if value.isdigit():
                return cls.parse(int(value))
            try:
                return cls[value]
            except KeyError:
                pass
        raise ProtocolError(f"{cls.__name__}: unknown value {value!r}")

    def __str__(self) -> str:
        return self.value


# Member order is the Java declaration order: the C++ client sends ordinals.
class ConsumeType(_WireEnum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
    CONSUME_POP = "CONSUME_POP"


class MessageModel(_WireEnum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(_WireEnum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


# --------------------------------------------------------------------------- encoding helpers

def _mq_json(mq: MessageQueue) -> dict[str, Any]:
    # fastjson's field order (alphabetical), not MessageQueue.to_json's.
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def _dump(obj: Any) -> str:
    if isinstance(obj, MessageQueue):
        return _dump(_mq_json(obj))
    if isinstance(obj, Mapping):
        parts = []
        for k, v in obj.items():
            if isinstance(k, MessageQueue):
                key = _dump(k)
            else:
                key = json.dumps(str(k), ensure_ascii=False)
            parts.append(f"{key}:{_dump(v)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(obj, (list, tuple, set, frozenset)):
        return "[" + ",".join(_dump(v) for v in obj) + "]"
    if isinstance(obj, Enum):
        return json.dumps(obj.value, ensure_ascii=False)
    to_json = getattr(obj, "to_json", None)
    if callable(to_json):
        return _dump(to_json())
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    """Compact fastjson-style JSON: MessageQueue keys become object keys, enums their names."""
    return _dump(obj).encode("utf-8")


def load_object(data: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    """The one JSON-object reader of every body decoder (here, :mod:`.admin` and the admin client)."""
    obj = data if isinstance(data, Mapping) else fastjson.loads(data)
    if not isinstance(obj, dict):
        raise ProtocolError(f"expected a JSON object body, got {type(obj).__name__}")
    return obj


def message_queue_from(obj: Any) -> MessageQueue:
    """A MessageQueue from its JSON object, or from a fastjson object key."""
    try:
        if isinstance(obj, str):
            obj = fastjson.object_key(obj)
        return MessageQueue(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"not a MessageQueue: {obj!r}") from exc


def message_queue_table(obj: Any) -> dict[MessageQueue, int]:
    """A Map<MessageQueue, Long>: fastjson object keys, or a list of [mq, offset] pairs / entries."""
    out: dict[MessageQueue, int] = {}
    if obj is None:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out[message_queue_from(k)] = int(v)
        return out
    if isinstance(obj, list):
        for entry in obj:
            if isinstance(entry, list) and len(entry) == 2:
                out[message_queue_from(entry[0])] = int(entry[1])
            elif isinstance(entry, dict) and "offset" in entry:  # ResetOffsetBodyForC
                out[message_queue_from(entry)] = int(entry["offset"])
            else:
                raise ProtocolError(f"not a queue/offset entry: {entry!r}")
        return out
    raise ProtocolError(f"not a queue/offset table: {obj!r}")


# --------------------------------------------------------------------------- heartbeat

@dataclass(slots=True)
class ProducerData:
    group_name: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ProducerData":
        return cls(str(obj["groupName"]))


def subscription_json(sub: Any) -> dict[str, Any]:
    """A subscription as heartbeat JSON: anything with ``to_json()``, or a plain dict."""
    to_json = getattr(sub, "to_json", None)
    if callable(to_json):
        return to_json()
    if isinstance(sub, Mapping):
        return dict(sub)
    raise TypeError(f"a subscription must have to_json() or be a dict, not {type(sub).__name__}")


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    #: SubscriptionData objects (or plain dicts); from_json yields SubscriptionData.
    subscription_data_set: list[Any] = field(default_factory=list)
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": ConsumeFromWhere.parse(self.consume_from_where).value,
            "consumeType": ConsumeType.parse(self.consume_type).value,
            "groupName": self.group_name,
            "messageModel": MessageModel.parse(self.message_model).value,
            "subscriptionDataSet": [subscription_json(s) for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ConsumerData":
        try:
            return cls(
                group_name=str(obj["groupName"]),
                consume_type=ConsumeType.parse(obj.get("consumeType", "CONSUME_PASSIVELY")),
                message_model=MessageModel.parse(obj.get("messageModel", "CLUSTERING")),
                consume_from_where=ConsumeFromWhere.parse(obj.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET")),
                subscription_data_set=[SubscriptionData.from_json(s) for s in obj.get("subscriptionDataSet") or ()],
                unit_mode=bool(obj.get("unitMode", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed consumer data: {exc!r}") from exc


@dataclass(slots=True)
class HeartbeatData:
    """HEART_BEAT body: who this client is and which groups it serves."""

    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
            "producerDataSet": [p.to_json() for p in self.producer_data_set],
        }

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "HeartbeatData":
        obj = load_object(data)
        try:
            return cls(
                client_id=str(obj["clientID"]),
                producer_data_set=[ProducerData.from_json(p) for p in obj.get("producerDataSet") or ()],
                consumer_data_set=[ConsumerData.from_json(c) for c in obj.get("consumerDataSet") or ()],
            )
        except (KeyError, TypeError) as exc:
            raise ProtocolError(f"malformed heartbeat: {exc!r}") from exc

    decode = from_json


# --------------------------------------------------------------------------- locks

@dataclass(slots=True)
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG body (Java ``CheckClientRequestBody``): a subscription the broker must be able to
    serve, sent before the first heartbeat for one that is not a tag expression (SQL92)."""

    client_id: str
    group: str
    subscription: Mapping[str, Any]  # SubscriptionData.to_json()

    def encode(self) -> bytes:
        return dumps({"clientId": self.client_id, "group": self.group, "subscriptionData": dict(self.subscription)})


@dataclass(slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ body. ``only_this_broker`` is 5.x; 4.9.8 leaves it out (None)."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = field(default_factory=list)
    only_this_broker: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": [_mq_json(mq) for mq in self.mq_set],
        }
        if self.only_this_broker is not None:
            out["onlyThisBroker"] = self.only_this_broker
        return out

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "LockBatchRequestBody":
        obj = load_object(data)
        try:
            only = obj.get("onlyThisBroker")
            return cls(str(obj["consumerGroup"]), str(obj["clientId"]),
                       [message_queue_from(m) for m in obj.get("mqSet") or ()],
                       None if only is None else bool(only))
        except (KeyError, TypeError) as exc:
            raise ProtocolError(f"malformed lock body: {exc!r}") from exc

    decode = from_json


class UnlockBatchRequestBody(LockBatchRequestBody):
    """UNLOCK_BATCH_MQ body: the same fields as a lock request."""

    __slots__ = ()


@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": [_mq_json(mq) for mq in self.lock_ok_mq_set]}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "LockBatchResponseBody":
        obj = load_object(data)
        return cls([message_queue_from(m) for m in obj.get("lockOKMQSet") or ()])

    decode = from_json


# --------------------------------------------------------------------------- groups and offsets

@dataclass(slots=True)
class ConsumerListBody:
    """GET_CONSUMER_LIST_BY_GROUP answer (GetConsumerListByGroupResponseBody)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    def encode(self) -> bytes:
        return dumps(self.to_json())

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "ConsumerListBody":
        obj = load_object(data)
        return cls([str(c) for c in obj.get("consumerIdList") or ()])

    decode = from_json


@dataclass(slots=True)
class ResetOffsetBody:
    """RESET_CONSUMER_CLIENT_OFFSET / INVOKE_BROKER_TO_RESET_OFFSET body: queue → new offset."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps({"offsetTable": self.offset_table})

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "ResetOffsetBody":
        return cls(message_queue_table(load_object(data).get("offsetTable")))

    decode = from_json


@dataclass(slots=True)
class GetConsumerStatusBody:
    """GET_CONSUMER_STATUS_FROM_CLIENT answer: this client's offsets, per queue."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps({"consumerTable": self.consumer_table, "messageQueueTable": self.message_queue_table})

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any]) -> "GetConsumerStatusBody":
        obj = load_object(data)
        consumers = obj.get("consumerTable") or {}
        return cls(message_queue_table(obj.get("messageQueueTable")),
                   {str(k): message_queue_table(v) for k, v in consumers.items()})

    decode = from_json


def mq_list(mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    """Distinct queues in a stable (Java-sorted) order, for request bodies built from sets."""
    return sorted(set(mqs))
