"""Handler return values -> per-message statuses, in both consume modes.

The pure mapping functions first, then the worker's batch loop run in this
process over a real socket pair (decode, chunking, orderly stop, RETRY_TOPIC),
so every return type is checked where it is actually turned into a DONE frame.
"""

from __future__ import annotations

import signal
import socket
from typing import Any, Callable

import pytest

import rmqrun
from rmqrun.remoting.message import encode_stored
from rmqrun.pipe.wire import ConsumeMode, Done, FrameBuffer, Run, Started, Status
from rmqrun.handler.loading import Handler, batch
from rmqrun.handler.outcome import BadResultError, ConcurrentOutcome, map_concurrent
from rmqrun.worker.handler import OrderlyOutcome, map_orderly
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.worker.main import Worker

S = Status


# --------------------------------------------------------------------------- pure mapping

@pytest.mark.parametrize("value, expected", [
    (None, ConcurrentOutcome(4, 0)),
    (rmqrun.ReconsumeLater(), ConcurrentOutcome(0, 0)),
    (rmqrun.ReconsumeLater(delay_level=5), ConcurrentOutcome(0, 5)),
    (rmqrun.ReconsumeLater(delay_level=-1), ConcurrentOutcome(0, -1)),
    (rmqrun.AckIndex(1), ConcurrentOutcome(2, 0)),
    (rmqrun.AckIndex(-1, delay_level=2), ConcurrentOutcome(0, 2)),
    (rmqrun.AckIndex(99), ConcurrentOutcome(4, 0)),  # clamped like Java's ackIndex
    # returning normally is success, whatever the value (a Celery task's rule); False alone means "not done"
    (True, ConcurrentOutcome(4, 0)),
    ("ok", ConcurrentOutcome(4, 0)),
    (0, ConcurrentOutcome(4, 0)),
    (7, ConcurrentOutcome(4, 0)),
    ({"saved": 3}, ConcurrentOutcome(4, 0)),
    (False, ConcurrentOutcome(0, 0)),
])
def test_map_concurrent(value: Any, expected: ConcurrentOutcome) -> None:
    assert map_concurrent(value, 4, "m:f") == expected


@pytest.mark.parametrize("value, auto, expected", [
    (None, True, OrderlyOutcome(S.SUCCESS)),
    (rmqrun.SuspendCurrentQueue(), True, OrderlyOutcome(S.SUSPEND, -1)),
    (rmqrun.SuspendCurrentQueue(ms=250), False, OrderlyOutcome(S.SUSPEND, 250)),
    (rmqrun.Commit(), False, OrderlyOutcome(S.COMMIT)),
    (rmqrun.Rollback(), False, OrderlyOutcome(S.ROLLBACK)),
    (True, True, OrderlyOutcome(S.SUCCESS)),
    ("ok", True, OrderlyOutcome(S.SUCCESS)),
    (0, True, OrderlyOutcome(S.SUCCESS)),
    (False, True, OrderlyOutcome(S.SUSPEND, -1)),
])
def test_map_orderly(value: Any, auto: bool, expected: OrderlyOutcome) -> None:
    assert map_orderly(value, "m:f", auto_commit=auto) == expected


def test_commit_and_rollback_with_automatic_commit_are_success_with_a_warning() -> None:
    for value in (rmqrun.Commit(), rmqrun.Rollback()):
        out = map_orderly(value, "m:f", auto_commit=True)
        assert out.status is S.SUCCESS
        assert out.warning is not None and "commits automatically" in out.warning and "'m:f'" in out.warning


@pytest.mark.parametrize("value, orderly, message", [
    ((m for m in ()), False, "handler 'pkg.mod:fn' returned <generator object"),
    ((m for m in ()), True, ": its work never ran (workers call plain functions; do not return a coroutine or a "
                            "generator)"),
    (rmqrun.ReconsumeLater, False, "returned the class ReconsumeLater; return an instance: ReconsumeLater()"),
    (rmqrun.Commit, True, "handler 'pkg.mod:fn' returned the class Commit; return an instance: Commit()"),
    (rmqrun.ReconsumeLater(), True, "a concurrent-mode result, but its queue is consumed orderly"),
    (rmqrun.AckIndex(0), True, "a concurrent-mode result"),
    (rmqrun.SuspendCurrentQueue(), False, "an orderly-mode result, but its queue is consumed concurrently"),
    (rmqrun.Commit(), False, "an orderly-mode result"),
])
def test_bad_results_name_the_handler(value: Any, orderly: bool, message: str) -> None:
    with pytest.raises(BadResultError) as err:
        if orderly:
            map_orderly(value, "pkg.mod:fn")
        else:
            map_concurrent(value, 1, "pkg.mod:fn")
    assert message in str(err.value)


@pytest.mark.parametrize("make", [
    lambda: rmqrun.ReconsumeLater(delay_level=-2),
    lambda: rmqrun.AckIndex(-2),
    lambda: rmqrun.AckIndex("1"),  # type: ignore[arg-type]
    lambda: rmqrun.SuspendCurrentQueue(ms=-5),
])
def test_result_arguments_are_validated(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError):
        make()


# --------------------------------------------------------------------------- the batch loop

def records(specs: list[dict[str, str]], *, topic: str = "T", start: int = 100) -> bytes:
    return b"".join(bytes(encode_stored(topic=topic, body=b"body", properties=props, queue_id=3,
                                        queue_offset=start + i))
                    for i, props in enumerate(specs))


class InProcessWorker:
    """A Worker driven in this process; what it writes is read back from the other end of its socket."""

    def __init__(self, fn: Callable[..., Any], *, is_batch: bool = False, batch_size: int = 1,
                 ref: str = "tests:fn", time_limit: float = 0) -> None:
        self.theirs, ours = socket.socketpair()
        self.worker = Worker(WorkerConfig(handler=ref, batch_size=batch_size, time_limit=time_limit), 0, ours)
        self.worker.handler = Handler(ref, fn, is_batch)
        self.frames = FrameBuffer()

    def run(self, data: bytes, mode: ConsumeMode = ConsumeMode.CONCURRENT, auto_commit: bool = True) -> Done:
        # The worker owns SIGALRM (soft time limit); pytest-timeout uses it too, so lend it and give it back.
        old_handler = signal.signal(signal.SIGALRM, self.worker._on_alarm)
        old_timer, _ = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            self.worker._run_batch(Run(7, mode, auto_commit, "broker-x", memoryview(data)))
            self.itimer_after = signal.getitimer(signal.ITIMER_REAL)
        finally:
            signal.signal(signal.SIGALRM, old_handler)
            if old_timer:
                signal.setitimer(signal.ITIMER_REAL, old_timer)
        self.worker.pipe.flush()
        self.frames.feed(self.theirs.recv(1 << 20))
        done = self.frames.next()
        # a process worker says nothing as a batch begins (the supervisor knows: its batches run in order);
        # a batch under a time limit is announced (STARTED) before a call that begins more than half the
        # limit (or kill grace) after the batch began or was last announced: how many depends on how the
        # scheduler stretched the calls, so count them; what is guaranteed is that Done comes last
        self.announced = 0
        while done == Started(7):
            self.announced += 1
            if not self.frames.has_frame():
                self.frames.feed(self.theirs.recv(1 << 20))
            done = self.frames.next()
        assert isinstance(done, Done) and done.batch_id == 7
        assert not self.frames.has_frame(), "nothing after the batch's DONE"
        return done


def statuses(done: Done) -> list[Status]:
    return [Status(b) for b in done.statuses]


def scripted(*results: str) -> bytes:
    return records([{"RESULT": r} for r in results])


def test_concurrent_plain_handler_every_result_type() -> None:
    from workers.flaky import scripted as fn
    w = InProcessWorker(fn, ref="workers.flaky:scripted")
    done = w.run(scripted("ok", "raise", "reconsume", "reconsume:4", "ackindex:0", "ackindex:-1:2", "bad",
                          "suspend"))
    assert statuses(done) == [S.SUCCESS, S.RECONSUME_LATER, S.RECONSUME_LATER, S.RECONSUME_LATER, S.SUCCESS,
                              S.RECONSUME_LATER, S.RECONSUME_LATER, S.RECONSUME_LATER]
    assert list(done.delay_levels) == [0, 0, 0, 4, 0, 2, 0, 0]
    assert list(done.queue_offsets) == list(range(100, 108))
    assert done.error.startswith("handler 'workers.flaky:scripted' raised FlakyError: scripted failure")
    assert not done.timed_out


def test_a_bad_result_is_logged_for_every_message_it_fails_with_the_handler_name() -> None:
    """Once per type per worker hid every later failure (issue #33): each failed call is one ERROR line."""
    from loguru import logger

    from workers.flaky import scripted as fn
    w = InProcessWorker(fn, ref="workers.flaky:scripted")
    logged: list[str] = []
    sink = logger.add(lambda m: logged.append(m.record["message"]), level="ERROR")
    try:
        done = w.run(scripted("bad", "ok", "bad", "badclass"))
    finally:
        logger.remove(sink)
    assert statuses(done) == [S.RECONSUME_LATER, S.SUCCESS, S.RECONSUME_LATER, S.RECONSUME_LATER]
    assert len(logged) == 3, logged
    assert logged[0].endswith("(generator): its work never ran (workers call plain functions; do not return a "
                              "coroutine or a generator): failed, to be retried (queue offset 100)"), logged[0]
    assert logged[1].endswith(": failed, to be retried (queue offset 102)"), logged[1]
    assert "returned the class Commit" in logged[2] and logged[2].endswith("(queue offset 103)"), logged[2]
    assert done.error and done.error.startswith("handler 'workers.flaky:scripted' returned <generator")


def test_plain_return_values_succeed_and_false_is_retried_in_both_modes() -> None:
    """The README's rule: returning normally is success whatever the value, False alone means "not done"."""
    from workers.flaky import scripted as fn
    done = InProcessWorker(fn, ref="workers.flaky:scripted").run(scripted("true", "str", "int", "int:0", "false"))
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.SUCCESS, S.SUCCESS, S.RECONSUME_LATER]
    assert done.error == "handler 'workers.flaky:scripted' returned False"
    done = InProcessWorker(fn, ref="workers.flaky:scripted").run(scripted("true", "str", "int", "false", "ok"),
                                                                 ConsumeMode.ORDERLY)
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.SUCCESS, S.SUSPEND, S.NOT_RUN]
    assert done.suspend_ms == -1 and done.error == "handler 'workers.flaky:scripted' returned False"


def test_concurrent_batch_handler_ack_index_per_chunk() -> None:
    seen: list[list[int]] = []

    @batch
    def fn(msgs):  # type: ignore[no-untyped-def]
        seen.append([m.queue_offset for m in msgs])
        return rmqrun.AckIndex(1, delay_level=3) if len(seen) == 1 else None

    w = InProcessWorker(fn, is_batch=True, batch_size=3)
    done = w.run(records([{}] * 5))
    assert seen == [[100, 101, 102], [103, 104]]
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.RECONSUME_LATER, S.SUCCESS, S.SUCCESS]
    assert list(done.delay_levels) == [0, 0, 3, 0, 0]


def test_concurrent_failure_in_one_chunk_does_not_stop_the_next() -> None:
    calls: list[int] = []

    def fn(msg):  # type: ignore[no-untyped-def]
        calls.append(msg.queue_offset)
        if msg.queue_offset == 101:
            raise ValueError("boom")

    done = InProcessWorker(fn).run(records([{}] * 3))
    assert calls == [100, 101, 102]
    assert statuses(done) == [S.SUCCESS, S.RECONSUME_LATER, S.SUCCESS]
    assert done.error == "handler 'tests:fn' raised ValueError: boom"


def test_orderly_success_then_suspend_stops_the_batch() -> None:
    from workers.flaky import scripted as fn
    w = InProcessWorker(fn, ref="workers.flaky:scripted")
    done = w.run(scripted("ok", "suspend:250", "ok"), ConsumeMode.ORDERLY)
    assert statuses(done) == [S.SUCCESS, S.SUSPEND, S.NOT_RUN]
    assert done.suspend_ms == 250


@pytest.mark.parametrize("result", ["raise", "bad", "reconsume", "badclass", "false"])
def test_orderly_failures_suspend_with_the_default_time(result: str) -> None:
    from workers.flaky import scripted as fn
    done = InProcessWorker(fn, ref="workers.flaky:scripted").run(scripted("ok", result, "ok"), ConsumeMode.ORDERLY)
    assert statuses(done) == [S.SUCCESS, S.SUSPEND, S.NOT_RUN]
    assert done.suspend_ms == -1 and done.error


def test_orderly_manual_commit_statuses() -> None:
    from workers.flaky import scripted as fn
    w = InProcessWorker(fn, ref="workers.flaky:scripted")
    done = w.run(scripted("ok", "commit", "ok", "rollback", "ok"), ConsumeMode.ORDERLY, auto_commit=False)
    assert statuses(done) == [S.SUCCESS, S.COMMIT, S.SUCCESS, S.ROLLBACK, S.NOT_RUN]
    auto = w.run(scripted("commit", "rollback"), ConsumeMode.ORDERLY, auto_commit=True)
    assert statuses(auto) == [S.SUCCESS, S.SUCCESS]


def test_orderly_batch_handler_chunks_stop_at_the_failing_chunk() -> None:
    @batch
    def fn(msgs):  # type: ignore[no-untyped-def]
        if msgs[0].queue_offset == 102:
            return rmqrun.SuspendCurrentQueue(ms=40)
        return None

    done = InProcessWorker(fn, is_batch=True, batch_size=2).run(records([{}] * 6), ConsumeMode.ORDERLY)
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.SUSPEND, S.SUSPEND, S.NOT_RUN, S.NOT_RUN]
    assert done.suspend_ms == 40


def test_messages_are_decoded_with_broker_name_and_retry_topic_restored() -> None:
    got: list[rmqrun.Message] = []
    data = (records([{"RETRY_TOPIC": "Orders", "TAGS": "a"}], topic="%RETRY%group1")
            + records([{"RETRY_TOPIC": "Orders"}], topic="%DLQ%group1", start=101)
            + records([{"KEYS": "k1 k2"}], topic="Plain", start=102))
    done = InProcessWorker(got.append).run(data)
    assert statuses(done) == [S.SUCCESS] * 3
    assert [m.topic for m in got] == ["Orders", "%DLQ%group1", "Plain"]  # only retry-topic messages reset
    assert {m.broker_name for m in got} == {"broker-x"}
    assert got[0].tags == "a" and got[2].key_list == ["k1", "k2"] and got[1].queue_offset == 101


def test_a_record_that_does_not_decode_fails_alone() -> None:
    good = records([{}, {}])
    bad = bytearray(records([{}], start=102))
    bad[4:8] = b"\x00\x00\x00\x01"  # wrong magic code
    got: list[int] = []
    done = InProcessWorker(lambda m: got.append(m.queue_offset)).run(good + bytes(bad))
    assert got == [100, 101]
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.UNDECODABLE]
    assert done.queue_offsets[2] == 102
    assert "does not decode" in done.error


def _corrupt_lz4(start: int) -> bytes:
    # COMPRESSED | LZ4 type (MessageSysFlag), a body that is no LZ4 frame
    return bytes(encode_stored(topic="T", body=b"\x00not an lz4 frame", sys_flag=0x1 | 0x100, queue_id=3,
                               queue_offset=start))


def test_an_undecodable_record_is_never_given_to_the_handler_and_the_rest_run() -> None:
    got: list[int] = []
    data = records([{}]) + _corrupt_lz4(101) + records([{}, {}], start=102)
    done = InProcessWorker(lambda m: got.append(m.queue_offset)).run(data)
    assert got == [100, 102, 103]
    assert statuses(done) == [S.SUCCESS, S.UNDECODABLE, S.SUCCESS, S.SUCCESS]


def test_orderly_stops_at_an_undecodable_record() -> None:
    got: list[int] = []
    data = records([{}]) + _corrupt_lz4(101) + records([{}], start=102)
    done = InProcessWorker(lambda m: got.append(m.queue_offset)).run(data, ConsumeMode.ORDERLY)
    assert got == [100]
    assert statuses(done) == [S.SUCCESS, S.UNDECODABLE, S.NOT_RUN]


def test_a_batch_handler_gets_calls_cut_around_an_undecodable_record() -> None:
    calls: list[list[int]] = []

    def fn(msgs):  # type: ignore[no-untyped-def]
        calls.append([m.queue_offset for m in msgs])

    data = records([{}, {}]) + _corrupt_lz4(102) + records([{}, {}, {}, {}], start=103)
    done = InProcessWorker(fn, is_batch=True, batch_size=3).run(data)
    assert calls == [[100, 101], [103, 104, 105], [106]]
    assert statuses(done) == [S.SUCCESS, S.SUCCESS, S.UNDECODABLE, S.SUCCESS, S.SUCCESS, S.SUCCESS, S.SUCCESS]


def test_soft_time_limit_interrupts_the_handler_and_leaves_the_rest_not_run() -> None:
    import time
    caught: list[str] = []

    def fn(msg):  # type: ignore[no-untyped-def]
        if msg.queue_offset == 101:
            try:
                time.sleep(5)
            except rmqrun.SoftTimeLimitExceeded as exc:
                caught.append(str(exc))
                raise

    done = InProcessWorker(fn, time_limit=0.2).run(records([{}] * 3))
    assert caught == ["soft time limit (0.2 s) exceeded"]
    assert statuses(done) == [S.SUCCESS, S.RECONSUME_LATER, S.NOT_RUN]
    assert done.timed_out and "soft time limit" in done.error


def test_no_alarm_is_left_armed_after_a_batch() -> None:
    w = InProcessWorker(lambda m: None, time_limit=5)
    done = w.run(records([{}]))
    assert statuses(done) == [S.SUCCESS]
    assert w.itimer_after == (0.0, 0.0)


def test_message_limit_jitter_spreads_recycling_points() -> None:
    a, b = socket.socketpair()
    capped = WorkerConfig(handler="m:f", max_messages=100, max_messages_jitter=10, batch_size=1, time_limit=900.0)
    limits = {Worker(capped, 0, a).message_limit for _ in range(60)}
    assert limits <= set(range(100, 111)) and len(limits) > 3
    assert Worker(WorkerConfig(handler="m:f", batch_size=1, time_limit=900.0), 0, a).message_limit == 0  # no limit
    a.close()
    b.close()


@pytest.mark.parametrize("mode", [ConsumeMode.CONCURRENT, ConsumeMode.ORDERLY])
def test_memory_growth_is_sampled_between_the_calls_of_one_batch(mode: ConsumeMode) -> None:
    """With no memory limit, the growth watch's base is the RSS after the first call, not after the first batch.

    One batch (a job) may carry several calls; sampled only when the batch ended, a job of six calls leaking
    50 MiB each took its base six leaks high and said nothing (the suite saw it on a loaded machine). Every
    consume mode's batch (pull or POP, by queue or by key) runs as one of these two in the worker.
    """
    from loguru import logger

    from rmqrun.worker.memory_watch import GrowthWatch
    rss = [30 << 20]
    now = [0.0]

    def leak(msg: Any) -> None:
        rss[0] += 50 << 20
        now[0] += 1.5  # each call longer than the watch's period
    w = InProcessWorker(leak)
    w.worker._growth = GrowthWatch(lambda: rss[0], clock=lambda: now[0])
    logged: list[str] = []
    sink = logger.add(lambda m: logged.append(m.record["message"]), level="WARNING")
    try:
        done = w.run(records([{}] * 6), mode)
    finally:
        logger.remove(sink)
    assert statuses(done) == [S.SUCCESS] * 6
    warnings = [line for line in logged if "nothing recycles it" in line]
    # base after call 1: 80 MiB; the warning when over 160: after call 3 (180 MiB), inside the batch
    assert warnings and warnings[0].startswith("worker RSS grew from 80 MiB to 180 MiB over 2 messages"), logged
