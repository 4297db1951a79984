"""A Batch told its count skips the per-record walk, but still refuses blobs that are not one record each."""

from __future__ import annotations

import pytest

from rmqrun.pipe.wire import Batch, ConsumeMode
from rmqrun.remoting.message import encode_stored

C = ConsumeMode.CONCURRENT


def rec(offset: int) -> bytes:
    return bytes(encode_stored(topic="T", body=b"x", properties={}, queue_id=0, queue_offset=offset))


def test_given_count_matches_the_walk() -> None:
    blobs = [rec(1), memoryview(rec(2)), rec(3)]
    assert Batch(1, "k", C, "b", blobs, count=3).count == Batch(2, "k", C, "b", blobs).count == 3
    assert Batch(1, "k", C, "b", blobs, count=3).queue_offsets() == [1, 2, 3]


@pytest.mark.parametrize("blobs, count", [
    ([rec(1), rec(2)], 3),                 # fewer blobs than the count
    ([rec(1) + rec(2)], 1),                # a blob holding two records
    ([rec(1)[:-1]], 1),                    # a truncated record
    ([b"\x00" * 8], 1),                    # shorter than any record
    (rec(1) + rec(2), 2),                  # one concatenated blob: only the walk can count it
])
def test_given_count_refuses_blobs_that_are_not_one_record_each(blobs, count) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        Batch(1, "k", C, "b", blobs, count=count)


def test_blobs_cut_by_a_scan_are_not_checked_again_but_their_number_still_is() -> None:
    """``checked``: the blobs were cut from their records' own size fields (the executor's, from the puller's
    scan), so the batch skips the per-blob check; a count that does not match the blobs still fails."""
    blobs = [rec(1), memoryview(rec(2)), rec(3)]
    assert Batch(1, "k", C, "b", blobs, count=3, checked=True).queue_offsets() == [1, 2, 3]
    with pytest.raises(ValueError):
        Batch(1, "k", C, "b", blobs, count=4, checked=True)
    with pytest.raises(ValueError):
        Batch(1, "k", C, "b", rec(1) + rec(2), count=2, checked=True)
    # and a batch not so marked is checked as before
    with pytest.raises(ValueError):
        Batch(1, "k", C, "b", [rec(1) + rec(2)], count=1)
