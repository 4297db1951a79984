"""A RUN frame's records as the handler sees them: the retry topic reset per record (issue #38 keeps it exact).

:func:`decode_batch` tests the retry prefix once per topic it sees instead of once per
record; a batch whose records change topic (a retry record after plain ones and back,
a retry record without RETRY_TOPIC, a record that does not decode in between) must
still give every record the topic Java's resetRetryAndNamespace gives it.
"""

from __future__ import annotations

from rmqrun.remoting.message import encode_stored
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.worker.batch_decode import decode_batch


def record(topic: str, offset: int, **props: str) -> bytes:
    return bytes(encode_stored(topic=topic, body=b"b%d" % offset, properties=props, queue_offset=offset))


def test_each_record_gets_its_own_topic_when_a_batch_mixes_retry_and_plain_records() -> None:
    retry = {PROPERTY_RETRY_TOPIC: "ns%Orders"}
    corrupt = bytearray(record("ns%Orders", 4))
    corrupt[4:8] = b"\x00\x00\x00\x07"  # an unknown magic code: the record does not decode
    data = b"".join([record("ns%Orders", 0), record("%RETRY%ns%G", 1, **retry), record("%RETRY%ns%G", 2, **retry),
                     record("%RETRY%ns%G", 3), bytes(corrupt), record("%RETRY%ns%G", 5, **retry),
                     record("ns%Orders", 6)])
    msgs, offsets, errors = decode_batch(data, 0, "b", "ns")
    assert offsets == [0, 1, 2, 3, 4, 5, 6]
    topics = [m.topic if m is not None else None for m in msgs]
    assert topics == ["Orders", "Orders", "Orders", "%RETRY%G", None, "Orders", "Orders"]
    assert [e is not None for e in errors] == [False, False, False, False, True, False, False]
    assert [m.body for m in msgs if m is not None] == [b"b0", b"b1", b"b2", b"b3", b"b5", b"b6"]

    plain, _, _ = decode_batch(record("%RETRY%G", 0, **{PROPERTY_RETRY_TOPIC: "T"}) + record("T", 1), 0, "b", "")
    assert [m.topic for m in plain] == ["T", "T"]
