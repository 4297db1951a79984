"""What a dead worker that ran several batches at once (threads / asyncio lanes, issue #36) is said to have lost.

Each begun batch keeps its own lane's progress (its finished messages are never run again); the killer is
named only when exactly one batch was inside a handler call, and a kill for a batch that overran blames
none of the batches beside it.
"""

from __future__ import annotations

from types import SimpleNamespace

from rmqrun.pipe.progress import Progress
from rmqrun.pipe.wire import Batch, ConsumeMode
from rmqrun.supervisor import pool as pool_mod


def _batch(batch_id: int) -> Batch:
    return Batch(batch_id, ("q", batch_id), ConsumeMode.CONCURRENT, "b", b"")


def _prog(batch_id: int, in_call: bool) -> Progress:
    return Progress(batch_id, 1, b"\x00", (0,), in_call, 1, 2, 5.0)


def test_each_begun_batch_keeps_its_lane_and_a_lone_call_names_the_suspect() -> None:
    proc = SimpleNamespace(slot=0, pid=42, kill_reason=None)
    a, b, queued = _batch(1), _batch(2), _batch(3)
    recorded = {1: _prog(1, False), 2: _prog(2, True)}
    lost = pool_mod._lost(proc, -9, "killed", [a, b, queued], [a, b], recorded, [(b, recorded[2])])
    assert set(lost.lanes) == {1, 2} and 3 not in lost.lanes
    assert lost.lanes[1].progress is recorded[1] and lost.lanes[2].progress is recorded[2]
    assert lost.lanes[2].in_call and not lost.lanes[1].in_call
    assert all(lane.suspect for lane in lost.lanes.values())
    # the oldest begun batch is still the WorkerLost's own started batch
    assert lost.started_batch_id == 1 and lost.progress is recorded[1] and not lost.in_call


def test_calls_in_two_lanes_name_no_suspect_and_an_overrun_blames_no_other_batch() -> None:
    proc = SimpleNamespace(slot=0, pid=42, kill_reason=None)
    a, b = _batch(1), _batch(2)
    recorded = {1: _prog(1, True), 2: _prog(2, True)}
    lost = pool_mod._lost(proc, -9, "killed", [a, b], [a, b], recorded, [(a, recorded[1]), (b, recorded[2])])
    assert not any(lane.in_call for lane in lost.lanes.values()) and not lost.in_call
    killed = SimpleNamespace(slot=0, pid=42, kill_reason=pool_mod._KILL_TIME_LIMIT)
    lost = pool_mod._lost(killed, -9, "killed", [b], [b], {2: recorded[2]}, [])
    assert not lost.lanes[2].suspect and not lost.lanes[2].in_call
