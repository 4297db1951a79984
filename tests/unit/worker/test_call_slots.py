"""The progress block's slots for calls at once (threads / asyncio worker classes, issue #36).

What the supervisor reads back from the block must say, at any moment, which calls are in flight
(each in its own slot), which messages finished (past the prefix too), and, in the head, the oldest
call and the end of the furthest one.
"""

from __future__ import annotations

import pytest

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import Status
from rmqrun.worker.call_slots import CallSlots, NoFreeSlot


def block() -> tuple[progress_mem.Writer, bytearray]:
    mm = bytearray(progress_mem.SIZE)
    writer = progress_mem.Writer(mm)  # type: ignore[arg-type]
    writer.begin(7)
    return writer, mm


def test_calls_in_flight_each_have_a_slot_and_finished_ones_are_kept_past_the_prefix() -> None:
    writer, mm = block()
    slots = CallSlots(3, writer)
    slots.begin_batch(5)
    statuses = bytearray([Status.NOT_RUN]) * 5
    delays = [0] * 5
    a = slots.take(0, 1, 10.0)
    b = slots.take(1, 2, 11.0)
    c = slots.take(2, 3, 12.0)
    assert len({a, b, c}) == 3
    with pytest.raises(NoFreeSlot):
        slots.take(3, 4, 13.0)
    prog = progress_mem.read(mm)  # type: ignore[arg-type]
    assert sorted(prog.calls) == [(0, 1, 10.0), (1, 2, 11.0), (2, 3, 12.0)]
    assert (prog.in_call, prog.call_start, prog.call_end, prog.call_began) == (True, 0, 3, 10.0)
    # the middle call ends first: the prefix stays at 0, its result is kept as "later"
    statuses[1], delays[1] = Status.RECONSUME_LATER, 3
    slots.finish(b, statuses, delays)
    prog = progress_mem.read(mm)  # type: ignore[arg-type]
    assert prog.done == 0 and prog.later == ((1, Status.RECONSUME_LATER, 3),)
    assert sorted(prog.calls) == [(0, 1, 10.0), (2, 3, 12.0)]
    # its slot is free again and taken by the next call
    assert slots.take(3, 4, 13.0) == b
    statuses[0] = Status.SUCCESS
    slots.finish(a, statuses, delays)
    prog = progress_mem.read(mm)  # type: ignore[arg-type]
    assert prog.done == 2 and prog.statuses == bytes([Status.SUCCESS, Status.RECONSUME_LATER])
    assert prog.delay_levels == (0, 3)
    assert (prog.call_start, prog.call_end, prog.call_began) == (2, 4, 12.0)  # the oldest left, the furthest end
    assert progress_mem.read_calls(mm) == 2  # type: ignore[arg-type]
    statuses[2] = statuses[3] = Status.SUCCESS
    slots.finish(c, statuses, delays)
    slots.finish(b, statuses, delays)
    prog = progress_mem.read(mm)  # type: ignore[arg-type]
    assert prog.done == 4 and not prog.in_call and prog.calls == ()
    assert slots.in_flight == 0 and sorted(slots.free) == [0, 1, 2]
    slots.end_batch()
    assert progress_mem.read_calls(mm) == 0  # type: ignore[arg-type]


def test_a_cut_stops_a_call_before_it_takes_a_slot() -> None:
    writer, mm = block()
    slots = CallSlots(4, writer)
    slots.begin_batch(6)
    slots.take(0, 1, 1.0)
    progress_mem.ask_cut(mm, 7, 2)  # type: ignore[arg-type]
    slots.take(1, 2, 1.0)
    with pytest.raises(progress_mem.CallCut):
        slots.take(2, 3, 1.0)
    assert slots.in_flight == 2 and len(progress_mem.read(mm).calls) == 2  # type: ignore[arg-type]


def test_a_new_batch_clears_what_the_last_left_and_refuses_calls_still_in_flight() -> None:
    writer, mm = block()
    slots = CallSlots(2, writer)
    slots.begin_batch(3)
    statuses = bytearray([Status.SUCCESS]) * 3
    slot = slots.take(2, 3, 1.0)
    slots.finish(slot, statuses, [0] * 3)
    slots.take(0, 1, 2.0)
    with pytest.raises(NoFreeSlot):
        slots.begin_batch(3)
    slots.end_batch()
    writer.begin(8)
    slots.begin_batch(3)  # message 2 of the last batch finished; nothing of this one has
    assert progress_mem.read(mm).later == () and progress_mem.read(mm).calls == ()  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        CallSlots(progress_mem.MAX_CALLS + 1, writer)



def test_call_slots_in_a_lane_past_zero_leave_lane_zero_alone() -> None:
    """Two batches at once: each lane's calls and results are its own (issue #36, lanes)."""
    mm = bytearray(progress_mem.block_size(2))
    w0 = progress_mem.Writer(mm)  # type: ignore[arg-type]
    w1 = w0.lane(1)
    w0.begin(1)
    w1.begin(2)
    s0, s1 = CallSlots(4, w0), CallSlots(4, w1)
    s0.begin_batch(3)
    s1.begin_batch(3)
    statuses, delays = bytearray([0, 0, 0]), [0, 0, 0]
    a = s1.take(0, 1, 1.0)
    s1.take(1, 2, 2.0)
    s0.take(0, 1, 3.0)
    s1.finish(a, statuses, delays)
    one, zero = progress_mem.read_batch(mm, 2), progress_mem.read_batch(mm, 1)  # type: ignore[arg-type]
    assert one is not None and zero is not None
    assert one.done == 1 and [c[:2] for c in one.calls] == [(1, 2)] and one.call_began == 2.0
    assert zero.done == 0 and [c[:2] for c in zero.calls] == [(0, 1)] and zero.call_began == 3.0
    assert progress_mem.read_calls(mm) == 2  # type: ignore[arg-type]
    s1.end_batch()
    w1.publish(statuses, delays, 3)  # as the worker answers the batch
    assert progress_mem.read_calls(mm) == 1  # type: ignore[arg-type]
