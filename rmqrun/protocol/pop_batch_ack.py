"""The POP batch-ack body on the wire (RocketMQ 5.x ``BATCH_ACK_MESSAGE``): the bitsets, the entries, the body.

Field names and encodings follow the 5.3.3 Java classes ``body/BatchAck*`` and
``BitSetSerializerDeserializer``: an entry names one checkpoint (retry flag, queue, ck start offset, pop time)
and carries the acked offsets as a bitset relative to the checkpoint's start. The receipt handle the entries
are built from is :mod:`rmqrun.protocol.pop`'s.
"""

from __future__ import annotations

import base64
import binascii
import json
from itertools import groupby
from operator import itemgetter
from typing import Any, Iterable, NamedTuple, Sequence

from rmqrun.remoting import fastjson
from rmqrun.remoting.errors import ProtocolError
from rmqrun.protocol.pop import RETRY_FLAG_NORMAL, ReceiptHandle


def encode_bitset(bits: Iterable[int]) -> str:
    """BitSetSerializerDeserializer: ``BitSet.toByteArray()`` (little-endian, no trailing zero bytes), base64."""
    word = 0
    for i in bits:
        if i < 0:
            raise ValueError(f"negative bit index {i}")
        word |= 1 << i
    # the bytes of one little-endian int, as long as its highest set bit needs: what toByteArray writes
    return _word_base64(word)


def decode_bitset(value: Any) -> frozenset[int]:
    """A bitset as fastjson reads a ``byte[]``: a base64 string, or a JSON array of byte values."""
    word = decode_bitset_word(value)
    width = word.bit_length()
    if word == (1 << width) - 1:  # a whole pop acked at once, the usual batch ack
        return frozenset(range(width))
    return frozenset(i for i in range(width) if word >> i & 1)


#: base64 text -> its word: a consumer's batch acks repeat a few bitsets (a whole pop of 32 is ``/////w==``)
_WORDS: dict[str, int] = {}
_WORDS_KEPT = 1024


def decode_bitset_word(value: Any) -> int:
    """:func:`decode_bitset` as one int (bit i set: index i in the set), the broker's form of it: no set of
    indexes is built per ack entry. The same input is refused with the same error."""
    if isinstance(value, str):
        word = _WORDS.get(value)
        if word is not None:
            return word
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError(f"batch ack bitset {value!r} is not base64") from None
        word = int.from_bytes(raw, "little")  # BitSet.toByteArray is little-endian: bit i is bit i of this int
        if len(_WORDS) >= _WORDS_KEPT:
            _WORDS.clear()
        _WORDS[value] = word
        return word
    if value is None:
        return 0
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) for b in value):
        return int.from_bytes(bytes(b & 0xFF for b in value), "little")
    raise ProtocolError(f"batch ack bitset {value!r} is neither base64 nor a byte array")


#: an ack entry's fields under fastjson's @JSONField names, as rmqrun and the Java client write them
_SHORT_KEYS = frozenset(("b", "c", "it", "pt", "q", "r", "rq", "so", "t"))


class BatchAck(NamedTuple):
    """One checkpoint's acks in BATCH_ACK_MESSAGE: the bitset as one int, bit i acking offset
    ``start_offset + i`` (what the client builds, the wire carries and the broker reads)."""

    consumer_group: str
    topic: str  # the original topic; ``retry`` says whether the messages sit in its pop retry topic
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    word: int

    @property
    def bits(self) -> set[int]:
        """The indexes acked (bit i: offset ``start_offset + i``)."""
        word = self.word
        return {i for i in range(word.bit_length()) if word >> i & 1}

    @classmethod
    def for_receipt(cls, group: str, topic: str, f: ReceiptHandle, word: int) -> "BatchAck":
        """The entry of the checkpoint receipt ``f`` belongs to, acking bitset ``word`` (``topic``: the
        original topic of its messages)."""
        return cls(group, topic, f[4], f[0], f[6], f[3], f[1], f[2], word)  # the receipt's fields by index

    def to_json(self) -> dict[str, Any]:
        # fastjson sorts by the @JSONField names.
        return {"b": _word_base64(self.word), "c": self.consumer_group, "it": self.invisible_time,
                "pt": self.pop_time, "q": self.queue_id, "r": self.retry, "rq": self.revive_queue_id,
                "so": self.start_offset, "t": self.topic}

    @property
    def offsets(self) -> list[int]:
        so, word = self.start_offset, self.word
        return [so + i for i in range(word.bit_length()) if word >> i & 1]

    @classmethod
    def from_json(cls, obj: Any) -> "BatchAck":
        """An entry of the body's ``acks``: the short names, or the long ones (``consumerGroup``, ...), a
        short name winning where both are there; ``r``, ``rq``, ``it`` and ``b`` may be absent."""
        if not isinstance(obj, dict):
            raise ProtocolError(f"batch ack entry is not an object: {obj!r}")
        try:
            if obj.keys() == _SHORT_KEYS:  # the usual entry: every field under its short name, nothing else
                return cls(str(obj["c"]), str(obj["t"]), str(obj["r"]), int(obj["so"]), int(obj["q"]),
                           int(obj["rq"]), int(obj["pt"]), int(obj["it"]), decode_bitset_word(obj["b"]))

            def get(short: str, long: str, default: Any = None) -> Any:
                return obj.get(short, obj.get(long, default))
            return cls(str(get("c", "consumerGroup")), str(get("t", "topic")),
                       str(get("r", "retry", RETRY_FLAG_NORMAL)), int(get("so", "startOffset")),
                       int(get("q", "queueId")), int(get("rq", "reviveQueueId", 0)), int(get("pt", "popTime")),
                       int(get("it", "invisibleTime", 0)), decode_bitset_word(get("b", "bitSet")))
        except (TypeError, ValueError):
            raise ProtocolError(f"batch ack entry has a missing or non-numeric field: {obj!r}") from None


def build_batch_acks(group: str, topic: str, receipts: Sequence[ReceiptHandle]) -> list[BatchAck]:
    """The client side of BATCH_ACK_MESSAGE: receipts merged per (retry flag, queue, ck offset, popTime)."""
    return [BatchAck.for_receipt(group, topic, f, word) for f, word in batch_ack_words(receipts)]


#: a receipt's checkpoint (retry flag, queue id, ck start offset, pop time) and its offset, read in C
_CK_KEY = itemgetter(4, 6, 0, 1)
_QUEUE_OFFSET = itemgetter(7)


def batch_ack_words(receipts: Sequence[ReceiptHandle]) -> list[tuple[ReceiptHandle, int]]:
    """The checkpoints ``receipts`` ack, each as (its first receipt, the bitset's word: bit i acks offset
    ck start + i), in the order they first appear. The client's ack path.

    Read run by run: receipts of one checkpoint next to each other (a job's messages go queue by queue, in
    offset order, so each pop's messages of a queue, one checkpoint, are one run) make one step, their word
    worked out from their offsets' min, max and count in C (a run of ones; a gap sets the run's bits one by
    one), not a Python step per message. A checkpoint met in several runs has their words merged."""
    if not receipts:
        return []
    keys = list(map(_CK_KEY, receipts))
    offsets = list(map(_QUEUE_OFFSET, receipts))
    words: dict[tuple[str, int, int, int], int] = {}
    firsts: dict[tuple[str, int, int, int], ReceiptHandle] = {}
    i = 0
    for key, run in groupby(keys):
        j = i + len(list(run))
        picked = set(offsets[i:j])
        low, start = min(picked), key[2]
        if low < start:
            bad = next(r for r in receipts if r[7] < r[0])  # the first of them, as a step per receipt meets it
            raise ValueError(f"receipt {bad.encode()!r}: offset before its checkpoint's start")
        word = run_word(start, picked, low)
        got = words.get(key)
        if got is None:
            firsts[key] = receipts[i]
            words[key] = word
        else:
            words[key] = got | word
        i = j
    return [(firsts[key], word) for key, word in words.items()]


def run_word(start: int, picked: set[int], low: int) -> int:
    """The bitset word acking the offsets ``picked`` of the checkpoint that starts at ``start`` (bit i acks
    offset start + i; ``low``: the least of them, not before ``start``): a run of ones worked out from their
    min, max and count in C, or, with a gap, their bits set one by one."""
    if max(picked) - low + 1 == len(picked):
        return ((1 << len(picked)) - 1) << (low - start)
    word = 0  # a gap
    for offset in picked:
        word |= 1 << (offset - start)
    return word


def _word_base64(word: int) -> str:
    return base64.b64encode(word.to_bytes((word.bit_length() + 7) // 8, "little")).decode("ascii")


def encode_batch_ack_body(broker_name: str | None, acks: Iterable[BatchAck]) -> bytes:
    """BatchAckMessageRequestBody as fastjson writes it: ``{"acks":[...],"brokerName":"..."}``."""
    body: dict[str, Any] = {"acks": [a.to_json() for a in acks]}
    if broker_name is not None:
        body["brokerName"] = broker_name
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


#: a JSON string as ``json.dumps(..., ensure_ascii=False)`` writes it (the C encoder)
_JSON_STR = json.encoder.encode_basestring


def encode_batch_ack_checkpoints(broker_name: str | None, group: str,
                                 checkpoints: Iterable[tuple[str, ReceiptHandle, int]]) -> bytes:
    """:func:`encode_batch_ack_body` of ``BatchAck.for_receipt(group, topic, f, word)`` for each (topic, f,
    word) of ``checkpoints``, byte for byte, written as one string: no entry object, dict and
    ``json.dumps`` walk per checkpoint (the client's ack path: a few per job)."""
    c = _JSON_STR(group)
    acks = ",".join([f'{{"b":"{_word_base64(word)}","c":{c},"it":{int(f[2])},"pt":{int(f[1])},"q":{int(f[6])},'
                     f'"r":{_JSON_STR(f[4])},"rq":{int(f[3])},"so":{int(f[0])},"t":{_JSON_STR(topic)}}}'
                     for topic, f, word in checkpoints])
    tail = "}" if broker_name is None else f',"brokerName":{_JSON_STR(broker_name)}}}'
    return f'{{"acks":[{acks}]{tail}'.encode("utf-8")


def decode_batch_ack_body(data: bytes | str) -> tuple[str | None, list[BatchAck]]:
    """(brokerName, acks) of a BATCH_ACK_MESSAGE body (the broker's read of it)."""
    broker, acks = _batch_ack_body(data)
    return broker, [BatchAck.from_json(a) for a in acks]


#: Standard JSON's parser without json.loads's whitespace checks around it (see _batch_ack_body)
_RAW_DECODE = json.JSONDecoder().raw_decode


def _batch_ack_body(data: bytes | str) -> tuple[str | None, list[Any]]:
    if not data:
        raise ProtocolError("BATCH_ACK_MESSAGE without a body")
    obj: Any = None
    try:  # the usual body: one JSON object, nothing around it; anything else goes to fastjson, as it did
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        obj, end = _RAW_DECODE(text)
        if end != len(text):
            obj = None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        obj = None
    if obj is None:
        obj = fastjson.loads(data)
    if not isinstance(obj, dict):
        raise ProtocolError(f"batch ack body is not a JSON object: {obj!r}")
    acks = obj.get("acks") or []
    if not isinstance(acks, list):
        raise ProtocolError(f"batch ack body: 'acks' is not a list: {acks!r}")
    broker = obj.get("brokerName")
    return (None if broker is None else str(broker)), acks


__all__ = [
    "encode_bitset", "decode_bitset", "decode_bitset_word", "BatchAck", "build_batch_acks", "batch_ack_words",
    "run_word", "encode_batch_ack_body", "encode_batch_ack_checkpoints", "decode_batch_ack_body",
]
