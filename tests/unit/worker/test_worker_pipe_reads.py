"""The worker reads the pipe into one reused buffer: frames must come out whole whatever the read sizes.

A read returns a view of that buffer, valid until the next read, so each one must
be copied into the frame buffer before the next: a frame larger than the buffer,
several frames in one read, and a frame cut at every byte all come out intact.
"""

from __future__ import annotations

import os
import socket
import threading

from rmqrun.pipe.wire import Batch, ConsumeMode, Run, Stop, encode, encode_run
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.worker.main import Worker, _Pipe


def _run_frame(batch_id: int, bodies: list[bytes]) -> tuple[bytes, list[bytes]]:
    records = [bytes(encode_stored(topic="T", body=b, queue_offset=i)) for i, b in enumerate(bodies)]
    frame = b"".join(bytes(p) for p in encode_run(Batch(batch_id, "q", ConsumeMode.CONCURRENT, "b", records,
                                                        count=len(records))))
    return frame, records


def _worker(sock: socket.socket) -> Worker:
    return Worker(WorkerConfig("workers.noop:handle", batch_size=1, time_limit=900.0), 1, sock)


def _send_in_thread(sock: socket.socket, data: bytes, piece: int) -> threading.Thread:
    def send() -> None:
        for i in range(0, len(data), piece):
            sock.sendall(data[i:i + piece])

    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def test_a_frame_larger_than_the_read_buffer_comes_out_whole() -> None:
    sup, mine = socket.socketpair()
    worker = _worker(mine)
    bodies = [os.urandom(_Pipe.READ_SIZE // 3) for _ in range(5)]  # ~1.7 read buffers
    frame, records = _run_frame(7, bodies)
    sender = _send_in_thread(sup, frame + encode(Stop()), 100_000)
    got = worker._next_frame()
    assert isinstance(got, Run) and got.batch_id == 7 and bytes(got.records) == b"".join(records)
    assert isinstance(worker._next_frame(), Stop)
    sender.join(5)


def test_many_frames_in_one_read_and_frames_cut_at_odd_sizes_come_out_whole() -> None:
    sup, mine = socket.socketpair()
    worker = _worker(mine)
    frames = [_run_frame(i, [os.urandom(n)]) for i, n in enumerate((0, 1, 100, 5000, 70000), start=1)]
    stream = b"".join(f for f, _ in frames) * 3 + encode(Stop())
    for piece in (len(stream), 1, 7, 4093):
        sender = _send_in_thread(sup, stream, piece)
        for _ in range(3):
            for (_, records), batch_id in zip(frames, range(1, 6)):
                got = worker._next_frame()
                assert isinstance(got, Run) and got.batch_id == batch_id, piece
                assert bytes(got.records) == b"".join(records), piece
        assert isinstance(worker._next_frame(), Stop)
        sender.join(5)


def test_a_decoded_run_gives_its_records_as_bytes_without_a_copy_and_a_hand_made_one_as_a_copy() -> None:
    from rmqrun.pipe.wire import FrameBuffer

    frame, records = _run_frame(3, [b"a", b"bb", os.urandom(3000)])
    buf = FrameBuffer()
    buf.feed(frame)
    run = buf.next()
    assert isinstance(run, Run)
    data, at = run.records_in_bytes()
    assert type(data) is bytes and data is run.records.obj  # type: ignore[union-attr]
    assert data[at:] == b"".join(records)
    by_hand = Run(3, ConsumeMode.CONCURRENT, True, "b", memoryview(b"xx" + b"".join(records))[2:])
    data, at = by_hand.records_in_bytes()
    assert (data[at:], at) == (b"".join(records), 0), "a view decode did not make: copied, from its start"
    raw = b"".join(records)
    assert Run(3, ConsumeMode.CONCURRENT, True, "b", raw).records_in_bytes() == (raw, 0)
    assert run == Run(3, ConsumeMode.CONCURRENT, True, "b", b"".join(records)), "records_at is not compared"


def _frames_waiting(sock: socket.socket) -> list[object]:
    """The frames the worker has sent so far, read without blocking."""
    from rmqrun.pipe.wire import FrameBuffer

    buf, out = FrameBuffer(), []
    while True:
        try:
            data = sock.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        buf.feed(data)
    while (frame := buf.next()) is not None:
        out.append(frame)
    return out


def _ready_worker(mine: socket.socket) -> Worker:
    from rmqrun.handler.loading import load_handler

    worker = _worker(mine)
    worker.handler = load_handler("workers.noop:handle")
    return worker


def test_a_done_leaves_with_the_started_of_a_run_already_waiting() -> None:
    """A pipelined RUN is read before the DONE of the batch ahead of it is flushed: both go in one send, so
    the supervisor wakes once per batch, not once for the DONE and again for the next STARTED."""
    from rmqrun.pipe.wire import Done, Started

    sup, mine = socket.socketpair()
    mine.settimeout(10)  # a RUN lost on the way fails the test here instead of blocking it
    worker = _ready_worker(mine)
    sup.sendall(_run_frame(1, [b"a", b"b"])[0])
    first = worker._next_frame()
    assert isinstance(first, Run)
    worker._run_batch(first)
    assert [type(f) for f in _frames_waiting(sup)] == [Started], "STARTED at once; the DONE waits"
    sup.sendall(_run_frame(2, [b"c"])[0])  # pipelined behind it
    second = worker._next_frame()
    assert isinstance(second, Run) and second.batch_id == 2
    assert _frames_waiting(sup) == [], "the DONE of batch 1 waits for batch 2's STARTED"
    worker._run_batch(second)
    sent = _frames_waiting(sup)
    assert [(type(f), f.batch_id) for f in sent] == [(Done, 1), (Started, 2)]  # type: ignore[attr-defined]
    assert bytes(sent[0].statuses) == bytes(2)  # type: ignore[attr-defined]


def test_with_nothing_waiting_the_done_is_flushed_before_the_worker_blocks() -> None:
    from rmqrun.pipe.wire import Done, Started

    sup, mine = socket.socketpair()
    worker = _ready_worker(mine)
    sup.sendall(_run_frame(1, [b"a"])[0])
    first = worker._next_frame()
    assert isinstance(first, Run)
    worker._run_batch(first)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(worker._next_frame()), daemon=True)
    reader.start()  # blocks in its read: the DONE must be out before it does
    from rmqrun.pipe.wire import FrameBuffer

    buf, frames = FrameBuffer(), []
    sup.settimeout(30)
    while len(frames) < 2:
        buf.feed(sup.recv(1 << 16))
        while (frame := buf.next()) is not None:
            frames.append(frame)
    assert [type(f) for f in frames] == [Started, Done]
    sup.sendall(encode(Stop()))
    reader.join(30)
    assert len(got) == 1 and isinstance(got[0], Stop)
