"""The supervisor <-> worker pipe protocol: frames, batches, exit codes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.remoting.message import encode_stored
from rmqrun.pipe.wire import (
    Batch, Boot, BootFailed, ConsumeMode, Done, ExitCode, FrameBuffer, Kind, Ready, Retiring, Run, Started, Status,
    Stop, WireError, decode, describe_exit, encode, encode_run,
)


def rec(offset: int, body: bytes = b"b") -> bytes:
    return bytes(encode_stored(topic="T", body=body, queue_offset=offset))


def split(data: bytes) -> list:
    buf = FrameBuffer()
    buf.feed(data)
    out = []
    while (frame := buf.next()) is not None:
        out.append(frame)
    assert buf.pending_bytes == 0
    return out


def test_every_frame_round_trips() -> None:
    frames = [
        Stop(), Ready(4242), Started(2**64 - 1), Retiring("handled 10 messages"),
        BootFailed(3, "Module 'x' not found"),
        Boot(2, {"handler": "m:f", "time_limit": 1.5}, ["/a", ""]),
        Done(9, bytes([0, 1, 5]), (0, -1, 18), (10, 11, 2**62), suspend_ms=250, timed_out=True, error="é", elapsed_us=7),
        Done(10, b"", (), ()),
        # each failed message's own error (issue #31): index -> text, after the offsets
        Done(11, bytes([1, 0, 1]), (0, 0, 0), (4, 5, 6), error="a", errors=((0, "a"), (2, "b é"))),
    ]
    assert split(b"".join(encode(f) for f in frames)) == frames


def test_a_message_error_that_does_not_add_up_is_refused() -> None:
    good = bytearray(encode(Done(1, bytes([1]), (0,), (1,), error="a", errors=((0, "a"),))))
    good[-4] = 9  # the low byte of the error's index: message 9 of a 1-message batch
    with pytest.raises(WireError):
        split(bytes(good))


def test_run_frame_carries_records_uncopied_and_splits_back() -> None:
    blobs = [rec(5) + rec(6), rec(7, b"x" * 1000)]
    batch = Batch(77, ("q", 1), ConsumeMode.ORDERLY, "broker-é", blobs, auto_commit=False, topic="%RETRY%G")
    parts = encode_run(batch)
    assert parts[1] is blobs[0] and parts[2] is blobs[1]
    (run,) = split(b"".join(parts))
    assert isinstance(run, Run)
    assert (run.batch_id, run.mode, run.auto_commit, run.broker_name) == (77, ConsumeMode.ORDERLY, False, "broker-é")
    assert run.topic == "%RETRY%G", "the topic whose queue holds the records: log positions (issue #31)"
    assert bytes(run.records) == b"".join(blobs)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=97), min_size=1, max_size=20))
def test_frames_survive_any_read_boundaries(chunks: list[int]) -> None:
    frames = [Started(1), Done(1, bytes([0, 1]), (0, 3), (5, 6), error="x"), Ready(9), Stop()]
    data = b"".join(encode(f) for f in frames) + b"".join(encode_run(Batch(3, "k", ConsumeMode.CONCURRENT, "b",
                                                                              rec(1))))
    buf = FrameBuffer()
    got = []
    pos = 0
    i = 0
    while pos < len(data):
        n = chunks[i % len(chunks)]
        buf.feed(data[pos:pos + n])
        pos += n
        i += 1
        while (frame := buf.next()) is not None:
            got.append(frame)
    assert got[:4] == frames and isinstance(got[4], Run) and bytes(got[4].records) == rec(1)


def test_batch_counts_records_and_reads_offsets_without_decoding() -> None:
    b = Batch(1, "k", ConsumeMode.CONCURRENT, "b", [rec(10) + rec(11), memoryview(rec(12))])
    assert b.count == 3 and b.queue_offsets() == [10, 11, 12]


@pytest.mark.parametrize("data", [rec(1)[:-1], rec(1) + b"\x00\x00", b"\x00\x00\x00\x05" + b"\x00" * 40])
def test_batch_rejects_records_whose_sizes_do_not_add_up(data: bytes) -> None:
    with pytest.raises(ValueError):
        Batch(1, "k", ConsumeMode.CONCURRENT, "b", data)


def test_malformed_frames_raise_wire_error() -> None:
    with pytest.raises(WireError, match="unknown frame kind 99"):
        decode(99, memoryview(b""))
    with pytest.raises(WireError, match="does not add up"):
        good = encode(Done(1, bytes([0]), (0,), (1,)))
        decode(Kind.DONE, memoryview(good[5:] + b"\x00"))
    with pytest.raises(WireError, match="does not add up"):
        bad_status = bytearray(encode(Done(1, bytes([0]), (0,), (1,))))
        bad_status[5 + 27] = 200  # the status byte, after the 27-byte DONE head
        decode(Kind.DONE, memoryview(bytes(bad_status[5:])))
    with pytest.raises(WireError, match="malformed frame of kind 12"):
        decode(Kind.STARTED, memoryview(b"\x00"))
    with pytest.raises(WireError, match="frame length 0 out of range"):
        split(struct.pack(">IB", 0, 1))
    with pytest.raises(ValueError, match="differ in length"):
        encode(Done(1, bytes([0, 0]), (0,), (1, 2)))


def test_statuses_and_exit_codes_are_the_documented_numbers() -> None:
    assert [(s.name, s.value) for s in Status] == [("SUCCESS", 0), ("RECONSUME_LATER", 1), ("SUSPEND", 2),
                                                   ("COMMIT", 3), ("ROLLBACK", 4), ("NOT_RUN", 5),
                                                   ("UNDECODABLE", 6)]
    assert [(c.name, c.value) for c in ExitCode] == [("OK", 0), ("UNCAUGHT", 1), ("BOOT_ERROR", 3),
                                                     ("INIT_ERROR", 4), ("LOST_SUPERVISOR", 5)]
    assert describe_exit(3) == "exit code 3 (BOOT_ERROR)"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(7) == "exit code 7"
    assert describe_exit(None) == "still running"


def test_batch_result_views() -> None:
    from rmqrun.pipe.wire import BatchResult
    batch = Batch(4, "k", ConsumeMode.CONCURRENT, "b", rec(7) + rec(8) + rec(9))
    r = BatchResult(batch, 1, 99, bytes([0, 1, 0]), (0, 3, 0), (7, 8, 9))
    assert r.batch_id == 4 and r.queue_key == "k" and r.mode is ConsumeMode.CONCURRENT
    # the supervisor reads the per-message fields as they are: one Status byte, delay and offset each
    assert [Status(b) for b in r.statuses] == [Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS]
    assert r.delay_levels == (0, 3, 0) and r.queue_offsets == (7, 8, 9)


def test_a_suspect_s_rerun_is_marked_to_run_alone_beside_the_auto_commit_flag() -> None:
    """Batch.alone travels as a flag bit of RUN (issue #36, lanes): a worker that runs batches at once runs it
    with nothing beside it; every other field is as without it."""
    for alone, auto_commit in ((True, False), (True, True), (False, True)):
        batch = Batch(5, "k", ConsumeMode.CONCURRENT, "b", [rec(1)], auto_commit=auto_commit, alone=alone)
        (run,) = split(b"".join(encode_run(batch)))
        assert (run.alone, run.auto_commit, run.after) == (alone, auto_commit, 0)
