"""The worker reads the pipe into one reused buffer: frames must come out whole whatever the read sizes.

A read returns a view of that buffer, valid until the next read, so each one must
be copied into the frame buffer before the next: a frame larger than the buffer,
several frames in one read, and a frame cut at every byte all come out intact.
"""

from __future__ import annotations

import os
import socket
import threading
import time

from rmqrun.pipe.wire import Batch, ConsumeMode, Run, Stop, encode, encode_run
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.worker.main import Worker
from rmqrun.worker.pipe_end import PipeEnd


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
    bodies = [os.urandom(PipeEnd.READ_SIZE // 3) for _ in range(5)]  # ~1.7 read buffers
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


def _sleeps(tid: int) -> int:
    """How many times a thread of this process went to sleep (voluntary context switches, Linux)."""
    with open(f"/proc/self/task/{tid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))


def test_a_worker_waiting_for_frames_is_not_woken_when_the_supervisor_reads_what_it_sent() -> None:
    """Each read of a worker's frame by the supervisor gives the worker's socket room to write, and a unix
    socket wakes whatever sleeps on it then: a worker asleep in ``recv`` woke for nothing once per DONE the
    supervisor read, and the supervisor paid for each wake-up. Asleep waiting for frames, it wakes for data only."""
    sup, mine = socket.socketpair()
    worker = _worker(mine)
    done = encode(Stop())
    for _ in range(30):  # 30 frames from the worker, each its own piece in the supervisor's receive queue
        mine.sendall(done)
    got: list[object] = []
    tid: list[int] = []
    asleep = threading.Event()

    def wait() -> None:
        tid.append(threading.get_native_id())
        asleep.set()
        got.append(worker._next_frame())

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    asleep.wait(5)
    time.sleep(0.2)  # asleep in the wait by now
    before = _sleeps(tid[0])
    for _ in range(30):
        assert sup.recv(len(done)) == done
        time.sleep(0.005)  # each read's wake-up, if any, has time to happen
    woke = _sleeps(tid[0]) - before
    assert not got and t.is_alive(), "the worker went on without a frame"
    assert woke <= 2, f"the waiting worker woke {woke} times while the supervisor read its 30 frames"
    sup.sendall(encode(Stop()))
    t.join(5)
    assert len(got) == 1 and isinstance(got[0], Stop)
