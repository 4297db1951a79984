"""The consumer's batch-ack body (``client.pop_batch_ack``) says what ``protocol.pop`` says.

It groups receipts by queue in C and writes the entries as text; what it writes must be what
``batch_ack_words`` + ``BatchAck.for_receipt`` + ``encode_batch_ack_body`` write for the same groups (the
same entries, acking the same offsets), for the usual case and every odd one: several checkpoints of one
queue, gaps, repeats, several topics and retry flags, names JSON must escape, no broker name."""

from __future__ import annotations

import json
import random
from typing import Any, Sequence

import pytest

from rmqrun.client.pop_batch_ack import batch_ack_body, checkpoint_words
from rmqrun.protocol.pop import BatchAck, ReceiptHandle, batch_ack_words, decode_batch_ack_body, encode_batch_ack_body


def _r(start: int, offset: int, *, queue: int = 1, pop_time: int = 1795500243867, flag: str = "0",
       it: int = 60_000, rq: int = 3) -> ReceiptHandle:
    return ReceiptHandle(start, pop_time, it, rq, flag, "broker-a", queue, offset)


def _reference(group: str, broker_name: str | None, groups: Sequence[tuple[str, Sequence[ReceiptHandle]]]) -> bytes:
    """The body as ``protocol.pop`` builds it, group by group, a checkpoint's words merged."""
    merged: dict[tuple[Any, ...], list[Any]] = {}
    for topic, receipts in groups:
        for f, word in batch_ack_words(receipts):
            key = (topic, f[4], f[6], f[0], f[1])
            if key in merged:
                merged[key][2] |= word
            else:
                merged[key] = [topic, f, word]
    return encode_batch_ack_body(broker_name, [BatchAck.for_receipt(group, t, f, w) for t, f, w in merged.values()])


def _same(group: str, broker_name: str | None, groups: Sequence[tuple[str, Sequence[ReceiptHandle]]]) -> None:
    ours, theirs = json.loads(batch_ack_body(group, broker_name, groups)), json.loads(_reference(group, broker_name,
                                                                                                  groups))
    assert sorted(ours["acks"], key=json.dumps) == sorted(theirs["acks"], key=json.dumps)
    assert ours.keys() == theirs.keys() and ours.get("brokerName") == theirs.get("brokerName")


def test_a_jobs_usual_receipts_give_the_protocols_body_byte_for_byte() -> None:
    """One queue's run of one checkpoint: the very bytes encode_batch_ack_body writes."""
    groups = [("T", [_r(32, o) for o in range(32, 64)])]
    assert batch_ack_body("G", "broker-a", groups) == _reference("G", "broker-a", groups)


def test_interleaved_queues_gaps_repeats_and_several_checkpoints_ack_what_the_protocol_acks() -> None:
    groups = [
        ("T", [_r(0, 0, queue=0), _r(32, 32, queue=1), _r(0, 1, queue=0), _r(32, 33, queue=1)]),  # two pops
        ("T", [_r(0, 2, queue=0), _r(0, 5, queue=0), _r(0, 5, queue=0)]),  # the first pop's rest: a gap, a repeat
        ("T", [_r(40, 40, pop_time=7), _r(32, 34), _r(40, 41, pop_time=7)]),  # a queue with two checkpoints
        ("Other", [_r(0, 3, queue=0, flag="1", it=30_000, rq=7)]),  # another topic, from the retry topic
        ('Ü"\\x', [_r(1, 1)]),  # a name JSON escapes
    ]
    _same('G"\\ü', "broker-a", groups)
    _same("G", None, groups)
    _, acks = decode_batch_ack_body(batch_ack_body("G", "broker-a", groups))
    assert sorted((a.topic, a.queue_id, a.pop_time, o) for a in acks for o in a.offsets) == sorted(
        {(t, r.queue_id, r.pop_time, r.queue_offset) for t, rs in groups for r in rs})


def test_random_groups_ack_what_the_protocol_acks() -> None:
    rnd = random.Random(32)
    for _ in range(400):
        receipts = [_r(rnd.randrange(3) * 10, rnd.randrange(30, 60), queue=rnd.randrange(3),
                       pop_time=rnd.choice([5, 7]), flag=rnd.choice("012"), it=rnd.choice([100, 200]),
                       rq=rnd.randrange(2)) for _ in range(rnd.randrange(1, 40))]
        assert sorted(checkpoint_words(receipts)) == sorted(batch_ack_words(receipts))
        cuts = sorted(rnd.sample(range(1, len(receipts) + 1), min(3, len(receipts))))
        groups = [(rnd.choice(["T", "U"]), receipts[a:b]) for a, b in zip([0, *cuts], cuts) if receipts[a:b]]
        _same("G", rnd.choice([None, "broker-a"]), groups)


def test_an_offset_before_its_checkpoints_start_is_refused_as_the_protocol_refuses_it() -> None:
    for receipts in ([_r(10, 9)], [_r(10, 11), _r(10, 9)], [_r(10, 11, queue=2), _r(10, 9), _r(20, 25)]):
        with pytest.raises(ValueError, match="before its checkpoint"):
            batch_ack_words(receipts)
        with pytest.raises(ValueError, match="before its checkpoint"):
            batch_ack_body("G", "b", [("T", receipts)])
