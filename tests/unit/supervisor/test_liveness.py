"""The liveness watch's decisions (:mod:`rmqrun.supervisor.liveness`) on explicit clocks and worker states.

Real processes, signals and the broker are in ``tests/integration/test_worker_liveness.py``; here the edges:
the bound, the two steps of a take-back (a claim between them cancels it), a long call is no silent worker,
nothing moves when no worker can take it, one warning, the kill after ``stuck_worker_kill_after``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import pytest
from loguru import logger

from rmqrun.supervisor.dispatch import Dispatcher
from rmqrun.supervisor.liveness import LivenessWatch

BOUND = 20.0


@dataclass
class FakeProc:
    pid: int
    slot: int
    pending: dict[int, object] = field(default_factory=dict)
    state: str = "ready"
    kill_reason: str | None = None
    running: int | None = None
    claim: int = 0
    sent: int = 0
    calling: bool = False
    is_stopped: bool = True
    skips: set[int] = field(default_factory=set)
    cpu: int | None = None  # None: no /proc (the sign alone decides)

    def cpu_time(self) -> int | None:
        return self.cpu

    def life_sign(self) -> tuple[int, bytes, int]:
        return self.sent, bytes([self.calling]), self.claim

    def in_call(self) -> bool:
        return self.calling

    def stopped(self) -> bool:
        return self.is_stopped

    def unclaimed(self) -> list[int]:
        ids = list(self.pending)
        reached = [ids.index(b) for b in (self.running, self.claim) if b in self.pending]
        return ids[max(reached) + 1:] if reached else ids

    def kill(self, reason: str, *, explained: bool = False) -> None:
        self.kill_reason = reason
        assert explained


@dataclass
class Status:
    pid: int
    current: bool = True


class FakePool:
    def __init__(self, procs: list[FakeProc]) -> None:
        self.procs = procs

    def processes(self) -> list[FakeProc]:
        return self.procs

    def workers(self) -> list[Status]:
        return [Status(p.pid) for p in self.procs]

    def skip(self, batch_id: int) -> bool:
        for p in self.procs:
            if batch_id in p.pending:
                p.skips.add(batch_id)
        return True


class FakeExecutor:
    def __init__(self, procs: list[FakeProc]) -> None:
        self.pool = FakePool(procs)
        self.dispatcher = Dispatcher([p.slot for p in procs])
        self.reclaimed: list[int] = []
        self.kicked = 0

    def reclaim(self, batch_id: int) -> bool:
        self.reclaimed.append(batch_id)
        return True

    def dispatch_waiting(self) -> None:
        self.kicked += 1


@pytest.fixture
def logs() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    try:
        yield lines
    finally:
        logger.remove(sink)


def two_workers(kill_after: float = 0.0) -> tuple[FakeProc, FakeProc, FakeExecutor, LivenessWatch]:
    stuck, other = FakeProc(100, 0, {1: None, 2: None, 3: None}), FakeProc(200, 1)
    ex = FakeExecutor([stuck, other])
    return stuck, other, ex, LivenessWatch(ex, BOUND, kill_after)  # type: ignore[arg-type]


def test_silent_for_the_bound_its_unbegun_batches_are_marked_then_moved_a_tick_later_and_it_is_named_once(
        logs: list[str]) -> None:
    proc, _, ex, watch = two_workers()
    proc.running = 1  # it began batch 1: that one stays
    watch._look(0.0)
    watch._look(BOUND - 0.5)
    assert not watch.stuck and not proc.skips
    watch._look(BOUND)
    assert watch.stuck == {0} and ex.dispatcher.stuck == {0}
    assert proc.skips == {2, 3} and ex.reclaimed == []  # asked to skip; not moved before the confirmation
    assert not [m for m in logs if "has not responded" in m]
    watch._look(BOUND + 0.5)  # the same sign: it claimed none of them
    assert ex.reclaimed == [2, 3]
    warnings = [m for m in logs if "has not responded" in m]
    assert len(warnings) == 1 and "worker 0 (pid 100) has not responded for 20.5 s" in warnings[0]
    assert "2 batch(es) moved to other workers, 1 batch(es) stay with it" in warnings[0]
    watch._look(BOUND + 1.0)
    watch._look(BOUND + 1.5)
    assert ex.reclaimed == [2, 3] and len([m for m in logs if "has not responded" in m]) == 1


def test_a_claim_between_the_two_steps_cancels_the_take_back(logs: list[str]) -> None:
    proc, _, ex, watch = two_workers()
    watch._look(0.0)
    watch._look(BOUND)
    assert proc.skips == {1, 2, 3}
    proc.claim = 1  # it went on (SIGCONT) and claimed batch 1: it will answer the skipped ones itself
    watch._look(BOUND + 0.5)
    assert ex.reclaimed == [] and not watch.stuck
    assert not [m for m in logs if "has not responded" in m]


def test_a_long_call_is_not_silence_but_a_stopped_process_in_a_call_is() -> None:
    proc, _, ex, watch = two_workers()
    proc.running, proc.calling, proc.is_stopped = 1, True, False
    watch._look(0.0)
    watch._look(BOUND * 3)
    assert not watch.stuck  # the long-call watch's business
    proc.is_stopped = True
    watch._look(BOUND * 4)
    watch._look(BOUND * 5)
    assert watch.stuck == {0}


def test_nothing_moves_when_no_worker_can_take_it_and_readiness_is_told(logs: list[str]) -> None:
    proc, other, ex, watch = two_workers()
    other.pending = {9: None}
    watch._look(0.0)
    watch._look(BOUND)
    watch._look(BOUND + 0.5)
    assert watch.stuck == {0, 1} and ex.reclaimed == [] and not proc.skips
    warnings = [m for m in logs if "has not responded" in m]
    assert len(warnings) == 2 and all("nothing moved: no other worker can take work" in w for w in warnings)


def test_a_worker_moving_again_gets_its_place_back(logs: list[str]) -> None:
    proc, _, ex, watch = two_workers()
    watch._look(0.0)
    watch._look(BOUND)
    watch._look(BOUND + 0.5)
    assert ex.reclaimed == [1, 2, 3]
    proc.sent += 30  # SIGCONT: it answers the moved batches NOT_RUN
    watch._look(BOUND + 1.0)
    assert not watch.stuck and not ex.dispatcher.stuck
    assert ex.kicked == 1  # work waiting for room may go to it again
    assert any("worker 0 (pid 100) responds again after " in m and "3 batch(es) moved are skipped" in m
               for m in logs)


def test_killed_after_stuck_worker_kill_after_and_never_with_0() -> None:
    proc, _, _, watch = two_workers(kill_after=60.0)
    watch._look(0.0)
    watch._look(BOUND)
    watch._look(BOUND + 59.0)
    assert proc.kill_reason is None
    watch._look(BOUND + 60.0)
    assert proc.kill_reason == "not responding for 80 s"
    assert watch.killed == {100}  # the executor blames no message of its batch for this death
    proc, _, _, watch = two_workers(kill_after=0.0)
    for t in (0.0, BOUND, 10_000.0):
        watch._look(t)
    assert proc.kill_reason is None and watch.stuck == {0}


def test_a_worker_holding_nothing_or_booting_is_not_watched() -> None:
    proc, other, _, watch = two_workers()
    proc.state = "starting"  # boot_timeout is its bound
    for t in (0.0, BOUND, BOUND * 2):
        watch._look(t)
    assert not watch.stuck


def test_a_worker_busy_outside_a_call_is_not_stuck_while_its_cpu_time_moves() -> None:
    """Decoding a huge batch, a long garbage collection: silent on the pipe, but its main thread works."""
    proc, _, ex, watch = two_workers()
    proc.cpu, proc.is_stopped = 100, False
    watch._look(0.0)
    watch._look(BOUND)  # silent for the bound: its CPU time is noted, judged a tick later
    assert not watch.stuck
    proc.cpu = 150
    watch._look(BOUND + 0.5)
    assert not watch.stuck and not proc.skips  # it works: the bound starts again
    watch._look(2 * BOUND + 0.5)
    watch._look(2 * BOUND + 1.0)  # its CPU time did not move in between: stuck
    assert watch.stuck == {0} and proc.skips == {1, 2, 3}
    proc.cpu = 151  # blocked, then working again: it gets its place back
    watch._look(2 * BOUND + 1.5)
    assert not watch.stuck and ex.reclaimed == []
