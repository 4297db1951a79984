"""Plain data shared by every layer: a message queue and the message a handler sees.

These types carry no behaviour beyond ordering and formatting, so the codec,
the consumer logic, the worker and the embedded broker can all use them
without importing each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any, Union


#: one stored message record as the broker sent it (a slice of a pull answer, or a copy)
RecordData = Union[bytes, bytearray, memoryview]


class Status(enum.IntEnum):
    """The outcome of one message of a batch (the value is its byte on the worker pipe).

    One enum for the consumer engine, the supervisor, the pipe and the worker, so the byte a worker writes is
    the outcome the engine acts on, with no table between them.

    ================  ==========================================================
    SUCCESS           concurrent CONSUME_SUCCESS; orderly SUCCESS (with automatic
                      commit: commit it; with manual commit: consumed, not committed)
    RECONSUME_LATER   concurrent: send back with ``delay_level``
    SUSPEND           orderly: put back and suspend the queue for the batch's
                      ``suspend_ms`` (-1 = consumer default), then deliver it again
    COMMIT            orderly, manual commit: commit everything consumed so far
    ROLLBACK          orderly, manual commit: put back everything since the last
                      commit and suspend
    NOT_RUN           the handler never finished this message (an earlier failure
                      stopped an orderly batch, a soft time limit or shutdown
                      interrupted the batch): redeliver it, without counting a retry
    UNDECODABLE       the record does not decode (unknown compression, corrupt
                      body, bad properties); never given to the handler: the
                      supervisor sends it to the DLQ as stored
    ================  ==========================================================
    """

    SUCCESS = 0
    RECONSUME_LATER = 1
    SUSPEND = 2
    COMMIT = 3
    ROLLBACK = 4
    NOT_RUN = 5
    UNDECODABLE = 6


@total_ordering
@dataclass(frozen=True)
class MessageQueue:
    """One queue of a topic on one broker.

    Sorting follows the Java client (topic, then broker name, then queue id),
    because allocation strategies sort the queue list before splitting it and
    every member of a group must sort the same way.

    Its hash is the dataclass's (of the three fields), made once: a queue is a dict and set key several
    times on every pull and job of the supervisor (about twenty tuple hashes a job before). The slot that
    holds it is not a field (equality, ``repr``, ``fields()``, ``asdict`` see the three), and a pickled
    queue is made again from its fields, so its hash is the receiving process's own (str hashes differ
    between processes).
    """

    __slots__ = ("topic", "broker_name", "queue_id", "_hash")
    topic: str
    broker_name: str
    queue_id: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.topic, self.broker_name, self.queue_id)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type["MessageQueue"], tuple[str, str, int]]:
        return MessageQueue, (self.topic, self.broker_name, self.queue_id)

    def _key(self) -> tuple[str, str, int]:
        return (self.topic, self.broker_name, self.queue_id)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageQueue):
            return NotImplemented
        return self._key() < other._key()

    def __str__(self) -> str:
        # The exact text the Java client hashes in AllocateMessageQueueConsistentHash.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_json(self) -> dict[str, Any]:
        """The field names RocketMQ uses for a MessageQueue in JSON bodies."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "MessageQueue":
        return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))


def message_position(topic: str, broker_name: str, queue_id: int | str, offset: int | str,
                     origin: str | None = None) -> str:
    """Where a message is, for every log line that names one: ``<topic> <broker>:<queue>@<offset>``.

    ``topic`` is the topic whose queue holds the message at that offset: for a redelivery, the retry topic it
    was consumed from (``%RETRY%<group>``, a POP retry topic), never the topic the handler sees, so that
    ``rmqrun read -t <topic> --queue <queue> --from <offset>`` shows this very message. ``origin``: the
    topic it was sent to, when that is another (`` (from <origin>)``)."""
    where = f"{topic} {broker_name}:{queue_id}@{offset}"
    return f"{where} (from {origin})" if origin and origin != topic else where


class _Marker:
    """A private marker value (never a field's real value): its repr is its name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: What a codec stores in ``properties``, ``offset_msg_id``, ``born_host`` and ``store_host`` of a
#: message whose derived fields it defers; ``msg_id`` then holds ``(PENDING, fill, *raw)``, and
#: ``fill(*raw)`` returns ``(properties, msg_id, offset_msg_id, born_host, store_host)``. A decoder
#: that builds the message slot by slot (``Message.__new__``, :data:`DEFERRED_SLOT`) may instead
#: leave those four slots unset: an unset slot reads as PENDING (four stores fewer per message).
PENDING: Any = _Marker("PENDING")
_NEW_DICT: Any = _Marker("<factory>")  # the default of ``properties``: a fresh dict per message (as dataclass)


@dataclass(slots=True, init=False)
class Message:
    """A consumed message, as a handler receives it.

    ``msg_id`` is the client-visible id: the producer's ``UNIQ_KEY`` when it
    set one, else the broker's offset message id (``offset_msg_id``).

    Five fields are derived from raw bytes of the stored record and many
    handlers never read them: ``properties`` (a dict parsed from text),
    ``msg_id``, ``offset_msg_id``, ``born_host`` and ``store_host``. Building
    them was about a quarter of a no-op worker's CPU per message, so a decoder
    may defer them (:data:`PENDING`): the first read of any of the five computes
    all five, with the values the eager decode gave. Nothing else changes: the
    same dataclass fields, equality, ``repr``, pickling, ``dataclasses.replace``
    and ``asdict`` (they read through the same attributes), and ``properties``
    is a real dict, computed once, that a handler may change. The worker's
    inline decode also defers four rarely read numbers of the record
    (``commit_log_offset``, ``flag``, ``body_crc``,
    ``prepared_transaction_offset``) the same way: read, each is the stored value.
    """

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    msg_id: str = ""
    offset_msg_id: str = ""
    broker_name: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    born_host: str = ""
    store_host: str = ""
    reconsume_times: int = 0
    flag: int = 0
    sys_flag: int = 0
    body_crc: int = 0
    prepared_transaction_offset: int = 0

    # The dataclass __init__, written out: it stores the five derived fields into their slots
    # directly (the public attributes are properties, installed below the class).
    def __init__(self, topic: str, body: bytes, properties: dict[str, str] = _NEW_DICT, msg_id: str = "",
                 offset_msg_id: str = "", broker_name: str = "", queue_id: int = 0, queue_offset: int = 0,
                 commit_log_offset: int = 0, born_timestamp: int = 0, store_timestamp: int = 0,
                 born_host: str = "", store_host: str = "", reconsume_times: int = 0, flag: int = 0,
                 sys_flag: int = 0, body_crc: int = 0, prepared_transaction_offset: int = 0) -> None:
        self.topic = topic
        self.body = body
        _PROPERTIES_SET(self, {} if properties is _NEW_DICT else properties)
        _MSG_ID_SET(self, msg_id)
        _OFFSET_MSG_ID_SET(self, offset_msg_id)
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.born_timestamp = born_timestamp
        self.store_timestamp = store_timestamp
        _BORN_HOST_SET(self, born_host)
        _STORE_HOST_SET(self, store_host)
        self.reconsume_times = reconsume_times
        self.flag = flag
        self.sys_flag = sys_flag
        self.body_crc = body_crc
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> str | None:
        return self.properties.get("KEYS")

    @property
    def key_list(self) -> list[str]:
        """KEYS holds several keys separated by spaces."""
        keys = self.properties.get("KEYS")
        return keys.split(" ") if keys else []

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
            f"queue={self.broker_name}:{self.queue_id}, offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, reconsume_times={self.reconsume_times}, body={len(self.body)} bytes)"
        )


# --------------------------------------------------------------------------- deferred fields
# The slots of the five derived fields keep their member descriptors (read and written from C);
# the public attributes become properties that fill the fields on first read.
_SLOTS = {name: Message.__dict__[name] for name in ("properties", "msg_id", "offset_msg_id", "born_host",
                                                      "store_host")}
_PROPERTIES_GET, _PROPERTIES_SET = _SLOTS["properties"].__get__, _SLOTS["properties"].__set__
_MSG_ID_GET, _MSG_ID_SET = _SLOTS["msg_id"].__get__, _SLOTS["msg_id"].__set__
_OFFSET_MSG_ID_GET, _OFFSET_MSG_ID_SET = _SLOTS["offset_msg_id"].__get__, _SLOTS["offset_msg_id"].__set__
_BORN_HOST_GET, _BORN_HOST_SET = _SLOTS["born_host"].__get__, _SLOTS["born_host"].__set__
_STORE_HOST_GET, _STORE_HOST_SET = _SLOTS["store_host"].__get__, _SLOTS["store_host"].__set__


# Four numbers of the stored record that a handler rarely reads: a slot-by-slot decoder may leave them
# unset too, with a fill that returns them after the five derived fields, in this order
# (``commit_log_offset, flag, body_crc, prepared_transaction_offset``). Four objects and stores fewer
# per message; read, each is the same int the eager decode gave.
_RECORD_NAMES = ("commit_log_offset", "flag", "body_crc", "prepared_transaction_offset")
_RECORD_SLOTS = tuple((Message.__dict__[name].__get__, Message.__dict__[name].__set__) for name in _RECORD_NAMES)

#: msg_id's slot setter, for a decoder that builds a message slot by slot: it stores the deferred
#: state ``(PENDING, fill, *raw)`` there and leaves the other four derived slots unset
DEFERRED_SLOT = _MSG_ID_SET


def _pending(get: Any, msg: Message) -> bool:
    """Whether a derived field still waits for its value: PENDING, or its slot never set."""
    try:
        return get(msg) is PENDING
    except AttributeError:
        return True


def _fill(msg: Message) -> None:
    """Compute the deferred fields; a field set meanwhile (no longer pending) keeps its value."""
    state = _MSG_ID_GET(msg)
    if not _is_deferred(state):  # a derived slot unset without deferred state: a half-built object
        raise AttributeError("Message: derived fields read before the message was built")
    values = state[1](*state[2:])
    properties, msg_id, offset_msg_id, born_host, store_host = values[:5]
    if len(values) > 5:  # a fill that also defers the record's rarely read numbers (_RECORD_SLOTS' order)
        for (get, set_), value in zip(_RECORD_SLOTS, values[5:]):
            if _pending(get, msg):
                set_(msg, value)
    if _pending(_PROPERTIES_GET, msg):
        _PROPERTIES_SET(msg, properties)
    if _pending(_OFFSET_MSG_ID_GET, msg):
        _OFFSET_MSG_ID_SET(msg, offset_msg_id)
    if _pending(_BORN_HOST_GET, msg):
        _BORN_HOST_SET(msg, born_host)
    if _pending(_STORE_HOST_GET, msg):
        _STORE_HOST_SET(msg, store_host)
    _MSG_ID_SET(msg, msg_id)


def _is_deferred(value: Any) -> bool:
    """True for the raw pieces a codec left in msg_id's slot."""
    return type(value) is tuple and len(value) > 1 and value[0] is PENDING


def _deferred_field(get: Any, set_: Any, doc: str) -> property:
    def read(self: Message) -> Any:
        try:
            value = get(self)
        except AttributeError:  # left unset by a slot-by-slot decoder: pending (see PENDING)
            value = PENDING
        if value is PENDING:
            _fill(self)
            value = get(self)
        return value

    # writing before the first read needs no fill: _fill skips a field that is no longer PENDING
    return property(read, set_, doc=doc)


def _read_msg_id(self: Message) -> str:
    value = _MSG_ID_GET(self)
    if _is_deferred(value):
        _fill(self)
        value = _MSG_ID_GET(self)
    return value  # type: ignore[no-any-return]


def _write_msg_id(self: Message, value: str) -> None:
    # msg_id's slot holds the raw pieces of a deferred message: compute the others before they go
    try:
        current = _MSG_ID_GET(self)
    except AttributeError:  # not set yet (unpickling)
        current = None
    if _is_deferred(current):
        _fill(self)
    _MSG_ID_SET(self, value)


for _name, (_get, _set) in zip(_RECORD_NAMES, _RECORD_SLOTS):
    setattr(Message, _name, _deferred_field(_get, _set, f"The stored record's {_name} (read on first use)."))
del _name, _get, _set

Message.properties = _deferred_field(  # type: ignore[assignment]
    _PROPERTIES_GET, _PROPERTIES_SET, "The message's properties (a dict; parsed on first read).")
Message.msg_id = property(_read_msg_id, _write_msg_id,  # type: ignore[assignment]
                          doc="UNIQ_KEY when the producer set one, else offset_msg_id.")
Message.offset_msg_id = _deferred_field(  # type: ignore[assignment]
    _OFFSET_MSG_ID_GET, _OFFSET_MSG_ID_SET, "The broker's message id: store host and commit-log offset, in hex.")
Message.born_host = _deferred_field(  # type: ignore[assignment]
    _BORN_HOST_GET, _BORN_HOST_SET, "``ip:port`` of the producer that sent the message.")
Message.store_host = _deferred_field(  # type: ignore[assignment]
    _STORE_HOST_GET, _STORE_HOST_SET, "``ip:port`` of the broker that stored the message.")
