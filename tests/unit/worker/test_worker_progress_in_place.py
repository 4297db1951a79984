"""What the supervisor would read in a process worker's progress block at every handler call (issue #38).

A process worker writes each message's status straight into the block
(``progress.Writer.in_place``) and announces a call with one pack, instead of
copying the previous call's result in first. The promise to the supervisor is
unchanged: were the worker to die inside call k, the block says messages
[0, k) are done with their final statuses and delay levels, and that call k was
running. Each handler here reads the block as the supervisor would after a
death, through the real Worker loop, in both batch modes, for a batch handler,
for back-to-back batches (nothing of the first shows through in the second)
and for a batch past the block's capacity (published call by call as before).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

from rmqrun.handler.loading import Handler
from rmqrun.handler.results import AckIndex, ReconsumeLater
from rmqrun.pipe import progress as p
from rmqrun.pipe.wire import Batch, ConsumeMode, Done, Status, encode_run
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.remoting.message import encode_stored
from rmqrun.worker.main import Worker
from tests.unit.worker.done_frames import read_done

S = Status


def _worker(handler: Any, batch_size: int = 1) -> tuple[Worker, socket.socket, Any]:
    sup, mine = socket.socketpair()
    fd = p.create_fd()
    mm = p.map_fd(fd)
    os.close(fd)
    worker = Worker(WorkerConfig("unused:handle", batch_size=batch_size, time_limit=900.0), 1, mine, p.Writer(mm))
    worker.handler = Handler("test:handle", handler, batch_size > 1)
    return worker, sup, mm


def _batch(worker: Worker, sup: socket.socket, batch_id: int, bodies: list[bytes],
           mode: ConsumeMode = ConsumeMode.CONCURRENT) -> Done:
    records = [bytes(encode_stored(topic="T", body=b, queue_offset=100 * batch_id + i)) for i, b in enumerate(bodies)]
    frame = b"".join(bytes(x) for x in encode_run(Batch(batch_id, "q", mode, "b", records, count=len(records))))
    sender = threading.Thread(target=sup.sendall, args=(frame,))  # a large frame fills the socket's buffer
    sender.start()
    run = worker._next_frame()
    sender.join()
    worker._run_batch(run)  # type: ignore[arg-type]
    worker.pipe.flush()
    return read_done(sup)


def _seen(mm: Any) -> tuple[Any, ...]:
    got = p.read(mm)
    return got.done, got.statuses, got.delay_levels, got.in_call, got.call_start, got.call_end


def _by_body(mm: Any, seen: list[tuple[Any, ...]]) -> Any:
    def handle(msg: Any) -> Any:
        seen.append(_seen(mm))
        if msg.body == b"later":
            return ReconsumeLater(delay_level=3)
        if msg.body == b"raise":
            raise ValueError("no")
        if msg.body == b"false":
            return False
        return None
    return handle


def test_each_call_sees_every_earlier_result_and_its_delay_as_a_death_would_leave_them() -> None:
    seen: list[tuple[Any, ...]] = []
    worker, sup, mm = _worker(None)
    worker.handler = Handler("test:handle", _by_body(mm, seen), False)
    done = _batch(worker, sup, 1, [b"ok", b"later", b"raise", b"ok", b"false", b"ok"])
    R, O = S.RECONSUME_LATER, S.SUCCESS
    assert done.statuses == bytes([O, R, R, O, R, O]) and done.delay_levels == (0, 3, 0, 0, 0, 0)
    assert seen == [
        (0, b"", (), True, 0, 1),
        (1, bytes([O]), (0,), True, 1, 2),
        (2, bytes([O, R]), (0, 3), True, 2, 3),
        (3, bytes([O, R, R]), (0, 3, 0), True, 3, 4),
        (4, bytes([O, R, R, O]), (0, 3, 0, 0), True, 4, 5),
        (5, bytes([O, R, R, O, R]), (0, 3, 0, 0, 0), True, 5, 6),
    ]
    assert _seen(mm) == (6, done.statuses, done.delay_levels, False, 0, 0)

    # the next batch starts clean: no status or delay of the first one shows through
    seen.clear()
    done = _batch(worker, sup, 2, [b"ok", b"ok", b"later"])
    assert seen == [(0, b"", (), True, 0, 1), (1, bytes([O]), (0,), True, 1, 2),
                    (2, bytes([O, O]), (0, 0), True, 2, 3)]
    assert _seen(mm) == (3, bytes([O, O, R]), (0, 0, 3), False, 0, 0)


def test_an_orderly_batch_stops_at_its_failure_and_the_block_says_so() -> None:
    seen: list[tuple[Any, ...]] = []
    worker, sup, mm = _worker(None)
    worker.handler = Handler("test:handle", _by_body(mm, seen), False)
    done = _batch(worker, sup, 1, [b"ok", b"raise", b"ok"], ConsumeMode.ORDERLY)
    assert done.statuses == bytes([S.SUCCESS, S.SUSPEND, S.NOT_RUN])
    assert seen == [(0, b"", (), True, 0, 1), (1, bytes([S.SUCCESS]), (0,), True, 1, 2)]
    assert _seen(mm)[:2] == (3, done.statuses)


def test_a_batch_handler_call_covers_its_chunk_and_an_ack_index_delay_is_in_the_block() -> None:
    seen: list[tuple[Any, ...]] = []
    worker, sup, mm = _worker(None, batch_size=3)

    def handle(msgs: list[Any]) -> Any:
        seen.append(_seen(mm))
        return AckIndex(0) if len(seen) == 1 else None

    worker.handler = Handler("test:handle", handle, True)
    done = _batch(worker, sup, 1, [b"a", b"b", b"c", b"d", b"e"])
    R = S.RECONSUME_LATER
    assert done.statuses == bytes([S.SUCCESS, R, R, S.SUCCESS, S.SUCCESS])
    assert seen == [(0, b"", (), True, 0, 3), (3, bytes([S.SUCCESS, R, R]), (0, 0, 0), True, 3, 5)]


def test_a_batch_past_the_blocks_capacity_is_published_call_by_call() -> None:
    seen: list[tuple[Any, ...]] = []
    worker, sup, mm = _worker(None)

    def handle(msg: Any) -> None:
        if msg.queue_offset - 100 in (0, 1, p.CAPACITY + 2):
            seen.append(_seen(mm)[:1] + _seen(mm)[3:])

    worker.handler = Handler("test:handle", handle, False)
    done = _batch(worker, sup, 1, [b"x"] * (p.CAPACITY + 3))
    assert done.statuses == bytes(p.CAPACITY + 3)
    assert seen == [(0, True, 0, 1), (1, True, 1, 2), (p.CAPACITY, True, p.CAPACITY + 2, p.CAPACITY + 3)]
    assert _seen(mm)[0] == p.CAPACITY


@pytest.mark.parametrize("lanes", [1, 2])
def test_in_place_is_for_lane_0_and_batches_within_capacity_only(lanes: int) -> None:
    fd = p.create_fd(lanes)
    mm = p.map_fd(fd)
    os.close(fd)
    w = p.Writer(mm)
    w.begin(1)
    assert w.in_place(p.CAPACITY + 1) is None and not w.placed
    view = w.in_place(4)
    assert view is not None and w.placed and bytes(view) == bytes([S.NOT_RUN]) * 4
    view[0] = S.SUCCESS
    w.set_delays(1, 3, 300)  # an int8 in the block: capped as the copy path caps it
    w.set_delays(p.CAPACITY - 1, p.CAPACITY + 5, 2)
    w.publish(view, [], 4)
    got = p.read(mm)
    assert (got.done, got.statuses, got.delay_levels) == (4, bytes([0, 5, 5, 5]), (0, 127, 127, 0))
    assert mm[p.DELAY_AT + p.CAPACITY - 1] == 2
    w.begin(2)
    assert not w.placed
    if lanes > 1:
        assert w.lane(1).in_place(4) is None


def test_a_cut_asked_during_a_call_stops_the_batch_at_the_cut() -> None:
    """The supervisor took messages [2, n) back while call 0 ran long: they do not run here."""
    calls: list[int] = []
    worker, sup, mm = _worker(None)

    def handle(msg: Any) -> None:
        calls.append(msg.queue_offset - 100)
        if len(calls) == 1:
            p.ask_cut(mm, 1, 2)

    worker.handler = Handler("test:handle", handle, False)
    done = _batch(worker, sup, 1, [b"x"] * 5)
    assert calls == [0, 1] and done.statuses == bytes([S.SUCCESS, S.SUCCESS] + [S.NOT_RUN] * 3)
    p.clear_cut(mm)
