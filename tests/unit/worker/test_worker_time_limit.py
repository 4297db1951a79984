"""The per-call soft time limit (``rmqrun/worker/time_limit.py``) and the warning the worker logs for it."""

from __future__ import annotations

import signal
import time

import pytest
from loguru import logger

import rmqrun
from rmqrun.handler.results import SoftTimeLimitExceeded
from rmqrun.pipe.wire import Status as S
from rmqrun.worker.time_limit import ALARM_SLACK_S, CallLimit
from tests.unit.worker.test_handler_results import InProcessWorker, records, statuses


@pytest.fixture
def lent_timer():  # type: ignore[no-untyped-def]
    """pytest-timeout may use SIGALRM too: lend the timer for the test and give it back."""
    old_handler = signal.getsignal(signal.SIGALRM)
    old_timer, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old_handler)
    if old_timer:
        signal.setitimer(signal.ITIMER_REAL, old_timer)


def test_a_signal_with_no_call_running_is_ignored(lent_timer) -> None:  # type: ignore[no-untyped-def]
    """The call it was meant for has returned: nobody is interrupted, nothing is reported."""
    limit = CallLimit(5.0)
    limit.on_alarm()
    limit.arm(time.monotonic() - 10, 7)  # a call long past its deadline ...
    limit.deadline = 0.0                 # ... that has returned
    limit.on_alarm()
    assert limit.take_fired() == -1


def test_a_signal_before_the_running_calls_deadline_is_ignored(lent_timer) -> None:  # type: ignore[no-untyped-def]
    """Delivered late, after the next call armed its own timer: not that call's limit."""
    limit = CallLimit(5.0)
    limit.arm(time.monotonic(), 8)
    limit.on_alarm()
    assert limit.take_fired() == -1
    assert signal.getitimer(signal.ITIMER_REAL)[0] > 4  # the call's own timer stays armed
    limit.disarm()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_signal_at_the_deadline_raises_and_is_reported_once(lent_timer) -> None:  # type: ignore[no-untyped-def]
    limit = CallLimit(0.5)
    limit.arm(time.monotonic() - 0.5, 9)
    with pytest.raises(SoftTimeLimitExceeded, match=r"soft time limit \(0.5 s\) exceeded"):
        limit.on_alarm()
    assert limit.take_fired() == 9 and limit.take_fired() == -1


def test_a_call_blocked_in_c_is_cut_at_its_own_deadline() -> None:
    """0.4 s of Python, then a C sleep, under a 1 s limit: a timer armed for the batch would wake the
    C sleep 0.6 s into the second call, which would return early as a success.

    What the code guarantees is asserted, not how late the scheduler lets the alarm in: the second
    call gets a deadline of its own, armed after the first call returned, and is cut no earlier."""
    import ctypes
    libc = ctypes.CDLL(None)
    calls: dict[int, tuple[float, float, float]] = {}  # offset: (deadline seen at entry, entered, left)

    def fn(msg):  # type: ignore[no-untyped-def]
        deadline, start = worker.worker.call_limit.deadline, time.monotonic()
        try:
            if msg.queue_offset == 100:
                while time.monotonic() < start + 0.4:
                    pass
            elif msg.queue_offset == 101:
                libc.sleep(3600)
        finally:
            calls[msg.queue_offset] = (deadline, start, time.monotonic())

    worker = InProcessWorker(fn, time_limit=1.0)
    done = worker.run(records([{}] * 3))
    assert statuses(done) == [S.SUCCESS, S.RECONSUME_LATER, S.NOT_RUN] and done.timed_out
    (_, _, first_left), (deadline, entered, cut) = calls[100], calls[101]
    assert first_left <= deadline - 1.0 <= entered, ("the second call's own deadline", calls)
    assert cut >= deadline - ALARM_SLACK_S, ("cut before its deadline", calls)


def test_the_warning_is_logged_when_the_handler_catches_the_limit_and_goes_on() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING", format="{message}")

    def fn(msg):  # type: ignore[no-untyped-def]
        if msg.queue_offset == 100:
            try:
                time.sleep(5)
            except rmqrun.SoftTimeLimitExceeded:
                pass  # cleans up and returns: its result stands, the firing is still logged

    try:
        done = InProcessWorker(fn, time_limit=0.2).run(records([{}]))
    finally:
        logger.remove(sink)
    assert statuses(done) == [S.SUCCESS]
    assert [ln for ln in lines if "soft time limit" in ln] == [
        "handler 'tests:fn': soft time limit (0.2 s) exceeded (queue offset 100)\n"]


def test_calls_within_the_grace_share_a_timer_that_never_fires_before_their_deadlines(
        lent_timer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue #38: one ``setitimer`` for the short calls of a batch, a fresh one for a call that starts later."""
    from rmqrun.worker import time_limit

    armed: list[float] = []
    real = signal.setitimer
    monkeypatch.setattr(time_limit.signal, "setitimer",
                        lambda which, value: (armed.append(value), real(which, value))[1])
    limit = CallLimit(5.0)
    grace = limit.grace
    assert 0 < grace <= time_limit.REARM_GRACE_S
    t = time.monotonic()
    starts = [t, t + grace / 4, t + grace / 2, t + 2 * grace, t + 2 * grace, t + 10.0]
    for i, start in enumerate(starts):
        limit.arm(start, i)
        assert limit.expires >= limit.deadline  # the armed timer fires no earlier than this call's deadline
        assert limit.expires <= limit.deadline + grace  # and at most the grace after it
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        if start == t:
            assert remaining >= limit.deadline - time.monotonic()
        limit.deadline = 0.0
    assert len(armed) == 3, armed  # t, t + 2 grace, t + 10 s: the others kept the timer
    limit.disarm()
    assert limit.expires == 0.0 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    limit.arm(t + 2 * grace, 9)  # after a disarm a call always arms its own
    assert len(armed) == 5  # the disarm's setitimer(0) and this arm
    limit.disarm()


def test_a_call_beginning_past_half_the_limit_is_announced_again_and_the_batch_still_ends_in_done() -> None:
    """The supervisor's hard limit counts from the batch's start or its latest STARTED: a batch whose next call
    begins more than half the limit after that announces itself (the first call runs 0.6 s of a 1 s limit; load
    can only make it longer), and the harness reads past such announcements to the batch's DONE. A batch of
    quick calls says nothing before its DONE: the supervisor knows when a process worker's batch began."""
    def fn(msg):  # type: ignore[no-untyped-def]
        if msg.queue_offset == 100:
            end = time.monotonic() + 0.6
            while time.monotonic() < end:
                pass

    worker = InProcessWorker(fn, time_limit=1.0)
    done = worker.run(records([{}] * 2))
    assert done.statuses == bytes(2), "both calls ran to success"
    assert worker.announced >= 1, "the second call, 0.6 s after the batch began, was announced"
    quick = InProcessWorker(lambda m: None, time_limit=1.0)
    assert quick.run(records([{}] * 3)).statuses == bytes(3)
    assert quick.announced == 0, "no STARTED for a batch whose calls all begin within half the limit"


def test_the_shared_timers_grace_is_a_small_part_of_the_limit_and_of_the_kill_grace() -> None:
    """The soft limit may come the grace after a call's deadline: never a noticeable part of the limit,
    and well before the supervisor's kill (time limit + kill grace after the call's announcement)."""
    from rmqrun.worker import time_limit

    assert CallLimit(900.0).grace == time_limit.REARM_GRACE_S <= 0.05
    assert CallLimit(1.0).grace == 0.01
    assert CallLimit(900.0, kill_grace=0.1).grace == pytest.approx(0.01)
    assert CallLimit(0.3, kill_grace=0.4).grace == pytest.approx(0.003)
