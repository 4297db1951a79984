"""The shared progress memory: what a worker writes is what the supervisor reads after its death."""

from __future__ import annotations

import os

from rmqrun.pipe import progress as p


def _mapped():  # type: ignore[no-untyped-def]
    fd = p.create_fd()
    mm = p.map_fd(fd)
    os.close(fd)
    return mm


def test_results_before_the_call_and_the_call_in_progress_are_read_back() -> None:
    mm = _mapped()
    w = p.Writer(mm)
    statuses, delays = bytearray([0, 1, 0, 5, 5]), [0, -1, 0, 0, 0]
    w.begin(42)
    for i in range(3):
        w.call(statuses, delays, i, i + 1, 100.0 + i)
    got = p.read(mm)
    assert (got.batch_id, got.done, got.in_call, got.call_start, got.call_end) == (42, 2, True, 2, 3)
    assert got.statuses == bytes([0, 1]) and got.delay_levels == (0, -1)
    assert got.call_began == 102.0
    w.publish(statuses, delays, 5)
    got = p.read(mm)
    assert got.done == 5 and not got.in_call and got.statuses == bytes(statuses)


def test_a_batch_handler_call_covers_several_messages_and_a_new_batch_starts_clean() -> None:
    mm = _mapped()
    w = p.Writer(mm)
    w.begin(1)
    w.call(bytearray(8), [0] * 8, 0, 4, 1.0)
    w.call(bytearray(8), [3] * 8, 4, 8, 2.0)
    got = p.read(mm)
    assert (got.done, got.call_start, got.call_end) == (4, 4, 8) and got.delay_levels == (3, 3, 3, 3)
    w.begin(2)
    got = p.read(mm)
    assert (got.batch_id, got.done, got.in_call) == (2, 0, False)


def test_progress_beyond_capacity_is_not_recorded() -> None:
    mm = _mapped()
    w = p.Writer(mm)
    n = p.CAPACITY + 10
    w.begin(7)
    w.publish(bytearray(n), [0] * n, n)
    assert p.read(mm).done == p.CAPACITY


def test_skip_list_starts_empty_keeps_each_skip_until_answered_and_refuses_when_full() -> None:
    """A skip never falls out while its batch waits (a stopped worker would run a batch moved elsewhere)."""
    mm = _mapped()
    ring = p.SkipRing(mm)
    w = p.Writer(mm)
    assert not w.skipped(0) and not w.skipped(5)
    for batch_id in range(1, p.SKIP_SLOTS + 1):
        assert ring.add(batch_id)
    assert ring.add(3)  # asked again: nothing changes, no slot taken
    assert not ring.add(p.SKIP_SLOTS + 1) and not w.skipped(p.SKIP_SLOTS + 1)  # full: not asked
    assert all(w.skipped(b) for b in range(1, p.SKIP_SLOTS + 1))
    ring.discard(1)  # answered: its slot is free again
    assert not w.skipped(1)
    assert ring.add(p.SKIP_SLOTS + 1) and w.skipped(p.SKIP_SLOTS + 1) and w.skipped(2)


def test_a_claim_is_read_back_by_the_supervisor() -> None:
    mm = _mapped()
    w = p.Writer(mm)
    ring = p.SkipRing(mm)
    assert p.read_claim(mm) == 0
    assert not w.skipped(41)  # the check claims the batch
    assert p.read_claim(mm) == 41
    ring.add(42)
    assert w.skipped(42) and p.read_claim(mm) == 42  # claimed, then found skipped


def test_a_living_worker_s_call_is_read_with_its_begin_time_and_publishing_ends_it() -> None:
    """What the consume-timeout sweep reads: since when the call on which messages has been running."""
    mm = _mapped()
    w = p.Writer(mm)
    assert p.read_live(mm) == p.LiveCall(0, 0, False, 0, 0, 0.0)  # a fresh block: no batch, no call
    w.begin(9)
    assert p.read_live(mm) == p.LiveCall(9, 0, False, 0, 0, 0.0)  # started, no call yet
    statuses, delays = bytearray(4), [0] * 4
    w.call(statuses, delays, 0, 1, 50.5)
    w.call(statuses, delays, 1, 3, 51.25)
    assert p.read_live(mm) == p.LiveCall(9, 1, True, 1, 3, 51.25)
    w.publish(statuses, delays, 4)
    live = p.read_live(mm)
    assert live is not None and (live.done, live.in_call) == (4, False)
    w.begin(10)  # a new batch: no call in progress whatever the old begin time
    live = p.read_live(mm)
    assert live is not None and (live.batch_id, live.done, live.in_call) == (10, 0, False)


def test_a_process_worker_s_block_is_one_lane_of_the_fixed_layout_and_the_others_get_one_per_batch() -> None:
    """The process class keeps its layout (and its hot path's fixed offsets); threads/asyncio get a lane per
    batch they may run at once, capped where the pipe could never fill more."""
    assert p.lanes_for("process", 1) == 1 and p.block_size(1) == p.SIZE
    assert p.lanes_for("threads", 8) == 8 and p.lanes_for("asyncio", 256) == p.MAX_LANES
    fd = p.create_fd(3)
    mm = p.map_fd(fd)
    os.close(fd)
    assert len(mm) == p.block_size(3) and p.lanes_of(mm) == 3
    assert p.lanes_of(_mapped()) == 1
    try:
        p.block_size(p.MAX_LANES + 1)
    except ValueError as exc:
        assert "lanes" in str(exc)
    else:
        raise AssertionError("a block past MAX_LANES lanes was sized")


def test_batches_in_different_lanes_are_read_back_by_their_ids_and_their_calls_summed() -> None:
    fd = p.create_fd(3)
    mm = p.map_fd(fd)
    os.close(fd)
    ring = p.SkipRing(mm)
    first = p.Writer(mm)
    third = first.lane(2)
    assert first.lane(0) is first and isinstance(third, p.LaneWriter)
    first.begin(10)
    third.begin(11)
    first.call(bytearray([0, 1, 0]), [0, 0, 0], 0, 1, 5.0)
    first.call(bytearray([0, 1, 0]), [0, 0, 0], 1, 2, 6.0)
    third.call(bytearray([1, 0, 0, 0]), [2, 0, 0, 0], 0, 2, 7.0)
    third.call(bytearray([1, 0, 0, 0]), [2, 0, 0, 0], 2, 3, 8.0)
    a, b = p.read_batch(mm, 10), p.read_batch(mm, 11)
    assert a is not None and b is not None
    assert (a.batch_id, a.done, a.statuses, a.call_start, a.call_began) == (10, 1, bytes([0]), 1, 6.0)
    assert (b.batch_id, b.done, b.statuses, b.delay_levels, b.call_start, b.call_end) == \
        (11, 2, bytes([1, 0]), (2, 0), 2, 3)
    assert p.find_lane(mm, 11) == 2 and p.read_batch(mm, 12) is None
    assert p.read_calls(mm) == 2
    live = p.live_batch(mm, 11)
    assert live is not None and live.in_call and live.call_began == 8.0
    assert p.live_batch(mm, 99) is None
    # the skip list, the claim and the cut stay once per worker: a lane sees them too
    assert ring.add(11) and third.skipped(11) and p.read_claim(mm) == 11
    p.ask_cut(mm, 11, 3)
    try:
        third.call(bytearray(4), [0] * 4, 3, 4, 9.0)
    except p.CallCut as cut:
        assert cut.index == 3
    else:
        raise AssertionError("a lane's call past the cut was announced")
    heads = p.heads(mm)
    third.publish(bytearray([1, 0, 0, 0]), [2, 0, 0, 0], 4)
    assert p.heads(mm) != heads and p.read_calls(mm) == 1
    try:
        first.lane(3)
    except ValueError as exc:
        assert "lane" in str(exc)
    else:
        raise AssertionError("a writer of a lane the block lacks")
