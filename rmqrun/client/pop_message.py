"""A popped message as the client hands it on: its record, the run of the pop answer it shares with the
others of its queue (:class:`PopRun`: receipt head, topics, pop and lapse times), and the fields read from
its properties when first asked for. ``pop_api`` makes them (its decoders) and acks them (``RunReceipts``).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from rmqrun.protocol.pop import PROPERTY_FIRST_POP_TIME, ReceiptHandle
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message_props import PROPERTY_TAGS

_B_FIRST_POP_TIME = PROPERTY_FIRST_POP_TIME.encode()
_B_TAGS = PROPERTY_TAGS.encode()
_new_tuple = tuple.__new__
_new_object = object.__new__


def _property(props: bytes, name: bytes) -> str | None:
    """One property of a record's raw properties (``name\x01value\x02...``), read without parsing them all.

    The last entry of that name wins, as in the dict :func:`string_to_properties` builds; None when absent.
    Only the value is decoded, so a record whose other properties are not UTF-8 still pops: its worker
    reports it undecodable, as any popped record that does not decode.
    """
    at = props.rfind(b"\x02" + name + b"\x01")
    if at >= 0:
        at += len(name) + 2
    elif props.startswith(name + b"\x01"):
        at = len(name) + 1
    else:
        return None
    end = props.find(b"\x02", at)
    raw = props[at:] if end < 0 else props[at:end]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"POP answer: property {name.decode()} is not UTF-8: {exc}") from exc


#: a lazily read field not read yet (``UNREAD``: what a subclass's constructor defaults to)
_UNREAD: Any = object()
UNREAD: Any = _UNREAD


class PopRun:
    """What the messages of one pop answer's run share: one queue's records of one checkpoint (the same
    checkpoint start, pop time, invisible time, revive queue, retry flag and broker), of one topic, acked
    under one topic.

    A message's receipt is this run's ``head`` and its own queue offset, built when first asked for (the ack
    path reads a run's offsets instead: no receipt per message), and its lapse time is the run's
    ``visible_at`` until an extension gives the message a receipt of its own. One object per run, not fields
    per message: the decoder made a receipt tuple and several ints per popped message."""

    __slots__ = ("topic", "ack_topic", "head", "pop_time", "visible_at", "order_base", "broker_name", "queue_id")

    def __init__(self, topic: str, ack_topic: str, head: tuple[Any, ...], pop_time: int) -> None:
        #: the topic the messages were sent to, and the one their acks name
        self.topic = topic
        self.ack_topic = ack_topic
        #: the receipt fields but the queue offset: (ck start, pop time, invisible time, revive qid, retry flag,
        #: broker name, queue id)
        self.head = head
        #: the pop's time, the first pop time of a record that carries none
        self.pop_time = pop_time
        self.visible_at = head[1] + head[2]
        #: where the run's messages go in a job: queue by queue (a message's order is this | its offset)
        self.order_base = head[6] << 64
        self.broker_name: str = head[5]
        self.queue_id: int = head[6]

    def receipt(self, offset: int) -> ReceiptHandle:
        return _new_tuple(ReceiptHandle, (*self.head, offset))

    def moved(self, topic: str) -> "PopRun":
        """The same run under another topic (its acks still name ``ack_topic``)."""
        return PopRun(topic, self.ack_topic, self.head, self.pop_time)


class RunReceipts(Sequence[ReceiptHandle]):
    """The receipts of messages of one :class:`PopRun` (at ``offsets``), each made only if read: what the
    ack path hands :meth:`PopClient.batch_ack_receipts`, which reads the offsets instead."""

    __slots__ = ("run", "offsets")

    def __init__(self, run: PopRun, offsets: list[int]) -> None:
        self.run = run
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return RunReceipts(self.run, self.offsets[i])
        return self.run.receipt(self.offsets[i])

    def __iter__(self) -> Iterator[ReceiptHandle]:
        return map(self.run.receipt, self.offsets)

    def __repr__(self) -> str:
        return f"RunReceipts({self.run.head!r}, {self.offsets!r})"


class PoppedMessage:
    """One popped message: its stored record (for a worker) and what acknowledging it takes.

    ``tags`` and ``first_pop_time`` are read from the record's raw properties when first asked for, not as
    the answer is decoded: a POP consumer reads the tags only when its subscription filters by tag, and the
    first pop time never on its hot path (the worker decodes the whole record anyway). What the messages of
    a run share is one :class:`PopRun`; the receipt is built from it when asked for.

    A slotted class for what every message sets as it is made (:meth:`of_run`, the decoder's way); what few
    messages set (their read tags and first pop time, an orderly count, a receipt of their own) lives in an
    instance dict made only when one is set, the class's defaults read until then."""

    __slots__ = ("record", "run", "queue_offset", "reconsume_times", "_props", "stored", "__dict__")

    #: defaults of what a message sets only when it must (its instance dict)
    _first_pop_time: int = _UNREAD
    _tags: "str | None" = _UNREAD
    #: order mode: the broker's delivery count for it (``orderCountInfo``; the Java client makes it the
    #: message's reconsumeTimes when above 0); None outside order mode
    order_count: "int | None" = None
    #: a receipt not built from the run: one an extension brought (a PopEntry's)
    _receipt: "ReceiptHandle | None" = None

    def __init__(self, record: memoryview, topic: str, ack_topic: str, receipt: ReceiptHandle, reconsume_times: int,
                 first_pop_time: int = _UNREAD, tags: str | None = _UNREAD, order_count: int | None = None,
                 props: bytes | int = b"", pop_time: int = 0, stored: int = 0) -> None:
        self._set(record, PopRun(topic, ack_topic, receipt[:7], pop_time), receipt[7], reconsume_times, props,
                  stored)
        self._extras(first_pop_time, tags, order_count)

    def _set(self, record: memoryview, run: PopRun, offset: int, reconsume_times: int, props: bytes | int,
             stored: int) -> None:
        self.record = record
        self.run = run
        self.queue_offset = offset
        self.reconsume_times = reconsume_times
        #: the record's raw properties (``name\x01value\x02...``), for the fields read when asked for; or where
        #: they start in ``record`` (the decoder's way: no copy of them per message until one is read)
        self._props = props
        #: the record's store time (epoch ms; 0: not known), read with the answer while its header is at hand,
        #: so the job's store-to-handler latency needs no second read of every record
        self.stored = stored

    def _extras(self, first_pop_time: int, tags: "str | None", order_count: "int | None") -> None:
        if first_pop_time is not _UNREAD:
            self._first_pop_time = first_pop_time
        if tags is not _UNREAD:
            self._tags = tags
        if order_count is not None:
            self.order_count = order_count

    @classmethod
    def of_run(cls, record: memoryview, run: PopRun, offset: int, reconsume_times: int, props: bytes | int,
               stored: int) -> "PoppedMessage":
        """A message of ``run`` at queue offset ``offset`` (the decoder's constructor: no receipt made; the
        consumer's :class:`PopEntry` has its own, inlined, as its hot path)."""
        self = _new_object(cls)
        self._set(record, run, offset, reconsume_times, props, stored)
        return self

    @property
    def topic(self) -> str:
        """The topic the message was sent to (a retried message carries its original topic)."""
        return self.run.topic

    @property
    def ack_topic(self) -> str:
        """The topic its ack names: the pop retry topic for a retried message, else ``topic``."""
        return self.run.ack_topic

    @property
    def receipt(self) -> ReceiptHandle:
        own = self._receipt
        return self.run.receipt(self.queue_offset) if own is None else own

    @property
    def _pop_time(self) -> int:
        return self.run.pop_time

    def _raw_props(self) -> bytes:
        props = self._props
        if props.__class__ is int:
            props = self._props = bytes(self.record[props:])
        return props

    @property
    def tags(self) -> str | None:
        """Its ``TAGS`` property (None: none). A value that is not UTF-8 raises ProtocolError."""
        if self._tags is _UNREAD:
            props = self._raw_props()
            self._tags = _property(props, _B_TAGS) if _B_TAGS in props else None
        return self._tags

    @tags.setter
    def tags(self, tags: str | None) -> None:
        self._tags = tags

    @property
    def first_pop_time(self) -> int:
        """Epoch ms of its first pop (``1ST_POP_TIME``; this pop's time when the record has none)."""
        if self._first_pop_time is _UNREAD:
            props = self._raw_props()
            first = _property(props, _B_FIRST_POP_TIME) if _B_FIRST_POP_TIME in props else None
            try:
                self._first_pop_time = int(first) if first else self._pop_time
            except ValueError:
                self._first_pop_time = self._pop_time
        return self._first_pop_time

    @first_pop_time.setter
    def first_pop_time(self, first_pop_time: int) -> None:
        self._first_pop_time = first_pop_time

    def with_record(self, record: memoryview, topic: str) -> "PoppedMessage":
        """The same message (of the same class) with another record and topic (its receipt, counts and
        properties kept)."""
        moved = self.of_run(record, self.run.moved(topic), self.queue_offset, self.reconsume_times,
                            self._raw_props(), self.stored)
        moved._extras(self._first_pop_time, self._tags, self.order_count)
        if self._receipt is not None:
            moved._receipt = self._receipt
        return moved

    def __repr__(self) -> str:
        return (f"PoppedMessage(topic={self.topic!r}, ack_topic={self.ack_topic!r}, receipt={self.receipt.encode()!r}, "
                f"reconsume_times={self.reconsume_times})")

    @property
    def queue_id(self) -> int:
        return self.run.queue_id

    def visible_at_ms(self) -> int:
        """When the broker hands the message out again unless it is acked or extended first."""
        r = self.receipt
        return r.pop_time + r.invisible_time
