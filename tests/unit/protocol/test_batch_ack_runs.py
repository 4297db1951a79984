"""``batch_ack_words`` reads a batch ack's receipts run by run (a job's messages go queue by queue in offset
order, so a checkpoint's are side by side): whatever the runs, it must say what one step per receipt says,
the checkpoints in the order they first appear, each with every one of its offsets' bits and no other."""

from __future__ import annotations

import random

import pytest

from rmqrun.protocol.pop import ReceiptHandle
from rmqrun.protocol.pop_batch_ack import batch_ack_words, build_batch_acks


def _receipt(ck: int, offset: int, queue: int = 0, pop_time: int = 1000, flag: str = "0") -> ReceiptHandle:
    return ReceiptHandle(ck, pop_time, 60_000, 0, flag, "broker-a", queue, offset)


def _expected(receipts: list[ReceiptHandle]) -> list[tuple[ReceiptHandle, int]]:
    """The checkpoints and words, one receipt at a time, as the Java ack names a message: bit (offset - start)."""
    words: dict[tuple[str, int, int, int], int] = {}
    firsts: dict[tuple[str, int, int, int], ReceiptHandle] = {}
    for r in receipts:
        key = (r.retry_flag, r.queue_id, r.ck_start_offset, r.pop_time)
        firsts.setdefault(key, r)
        words[key] = words.get(key, 0) | 1 << (r.queue_offset - r.ck_start_offset)
    return [(firsts[k], w) for k, w in words.items()]


def test_a_checkpoint_met_in_two_runs_acks_both_runs_offsets() -> None:
    a1 = [_receipt(10, o) for o in (10, 11)]
    b = [_receipt(50, o, queue=1) for o in (50, 51, 52)]
    a2 = [_receipt(10, o) for o in (12, 13)]
    got = batch_ack_words(a1 + b + a2)
    assert got == [(a1[0], 0b1111), (b[0], 0b111)]


def test_a_run_acks_every_offset_from_its_lowest_to_its_highest_and_no_other() -> None:
    run = [_receipt(100, o) for o in (102, 103, 104)]
    assert batch_ack_words(run) == [(run[0], 0b11100)]
    assert batch_ack_words(run[:1]) == [(run[0], 0b100)]


def test_a_run_with_a_gap_leaves_the_gap_unacked() -> None:
    run = [_receipt(0, o) for o in (0, 1, 3)]
    (only,) = batch_ack_words(run)
    assert only == (run[0], 0b1011), "offset 2 (another job's, maybe failed) must not be acked"


def test_an_offset_before_its_checkpoints_start_is_refused() -> None:
    with pytest.raises(ValueError, match="before its checkpoint's start"):
        batch_ack_words([_receipt(10, 10), _receipt(10, 11), _receipt(10, 9)])
    with pytest.raises(ValueError, match="before its checkpoint's start"):
        batch_ack_words([_receipt(20, 20, queue=1), _receipt(10, 9)])


def test_pop_times_and_retry_flags_are_checkpoints_of_their_own() -> None:
    rs = [_receipt(0, 0), _receipt(0, 1, pop_time=2000), _receipt(0, 2, flag="1"), _receipt(0, 3)]
    assert batch_ack_words(rs) == _expected(rs)
    assert len(build_batch_acks("G", "T", rs)) == 3


def test_any_mix_of_checkpoints_says_what_one_step_per_receipt_says() -> None:
    rng = random.Random(32)
    for _ in range(3000):
        receipts: list[ReceiptHandle] = []
        for _ck in range(rng.randint(1, 10)):
            start, queue = rng.randint(0, 40), rng.randint(0, 3)
            pop_time, flag = rng.choice((1000, 2000)), rng.choice("01")
            offsets = list(range(start + rng.randint(0, 3), start + rng.randint(1, 40)))
            if len(offsets) > 2 and rng.random() < 0.2:
                offsets.pop(1)
            receipts += [_receipt(start, o, queue, pop_time, flag) for o in offsets]
        order = rng.random()
        if order < 0.4:
            rng.shuffle(receipts)
        elif order < 0.7:
            receipts.sort(key=lambda r: (r.queue_id, r.queue_offset))
        assert batch_ack_words(receipts) == _expected(receipts)
