"""``/healthz`` and ``/readyz``'s decisions (:mod:`rmqrun.supervisor.health`) on explicit snapshots and clocks.

The endpoints themselves are exercised through a real ``rmqrun run`` in
``tests/integration/test_health_endpoints.py`` and ``test_health_incidents.py``;
the edges of each rule are pinned here.
"""

from __future__ import annotations

import pytest

from rmqrun.supervisor.health import HealthLimits, liveness, readiness
from rmqrun.supervisor.snapshot import HealthSnapshot

LIMITS = HealthLimits(ready_broker_timeout=20.0, stall_timeout=120.0, time_limit=900.0)


def snap(phase: str = "consuming", detail: str = "", last_answer: float | None = 1000.0, **pool: object
         ) -> HealthSnapshot:
    return HealthSnapshot(phase, detail, last_answer, 2, **pool)  # type: ignore[arg-type]


@pytest.mark.parametrize("phase, detail, reason", [
    ("starting", "", "not ready: starting (no rebalance yet)"),
    ("waiting", "name server 127.0.0.1:1 unreachable (attempt 2, next in 2 s)",
     "not ready: name server 127.0.0.1:1 unreachable (attempt 2, next in 2 s)"),
    ("draining", "graceful stop, grace 30 s", "not ready: draining (graceful stop, grace 30 s)"),
    ("stopped", "", "not ready: stopped"),
])
def test_not_ready_outside_consuming(phase: str, detail: str, reason: str) -> None:
    assert readiness(snap(phase, detail, last_answer=None), LIMITS, now=1000.0) == (False, reason)
    assert liveness(snap(phase, detail), LIMITS) == (True, f"alive: {phase}")
    # a drain with stuck workers is the stop's business (its grace), not a wedge
    stuck = snap(phase, detail, workers=1, call_ages=(5000.0,), queued_batches=3, stalled_for=5000.0)
    assert liveness(stuck, LIMITS).ok


def test_ready_while_a_broker_answers_and_not_after_ready_broker_timeout() -> None:
    ok, reason = readiness(snap(), LIMITS, now=1020.0)
    assert ok and reason == "ready: consuming, 2 queues, last broker answer 20 s ago"
    ok, reason = readiness(snap(), LIMITS, now=1021.0)
    assert not ok and reason == "not ready: no broker has answered for 21 s (ready_broker_timeout 20 s)"
    assert readiness(snap(last_answer=0.0), LIMITS, now=5.0) == (
        False, "not ready: no broker has answered ever (ready_broker_timeout 20 s)")
    assert readiness(snap(last_answer=None), LIMITS, now=5.0) == (False, "not ready: consuming, no consumer")


def test_wedged_when_no_call_finishes_while_work_waits() -> None:
    moving = snap(workers=2, call_ages=(100.0, 100.0), queued_batches=127, stalled_for=120.0)
    assert liveness(moving, LIMITS) == (True, "alive: consuming")
    assert readiness(moving, LIMITS, now=1000.0).ok
    stuck = snap(workers=2, call_ages=(121.0, 121.0), queued_batches=127, stalled_for=121.0)
    why = "pool wedged: no handler call has finished for 121 s while 127 batch(es) wait (stall_timeout 120 s)"
    assert liveness(stuck, LIMITS) == (False, f"unhealthy: {why}")
    assert readiness(stuck, LIMITS, now=1000.0) == (False, f"not ready: {why}")
    # nothing waiting: one long call is not a wedge; the rule off: never
    assert liveness(snap(workers=2, call_ages=(500.0,), stalled_for=None), LIMITS).ok
    assert liveness(stuck, HealthLimits(20.0, 0.0, 900.0)).ok


def test_wedged_when_every_worker_is_past_the_consume_time_limit() -> None:
    limits = HealthLimits(20.0, 0.0, 60.0)
    assert liveness(snap(workers=2, call_ages=(61.0, 30.0)), limits).ok  # one worker still free to finish
    assert liveness(snap(workers=3, call_ages=(61.0, 70.0)), limits).ok  # a worker not in a call
    verdict = liveness(snap(workers=2, call_ages=(61.0, 70.0)), limits)
    assert verdict == (False, "unhealthy: pool wedged: every worker (2) has been in one handler call for over "
                              "60 s (the consume time limit; the longest 70 s)")
    assert liveness(snap(workers=2, call_ages=(61.0, 70.0)), HealthLimits(20.0, 0.0, 0.0)).ok  # no limit


def test_not_ready_when_no_worker_can_take_work_and_one_does_not_respond() -> None:
    """Stopped workers (liveness.py): not ready once none is left to take work, and say why."""
    one = snap(workers=2, stuck_workers=1, not_responding=1)
    assert readiness(one, LIMITS, now=1000.0).ok  # the other worker takes the work
    both = snap(workers=2, stuck_workers=2, not_responding=2)
    assert readiness(both, LIMITS, now=1000.0) == (
        False, "not ready: no worker can take work: 2 of 2 not responding (worker_liveness_timeout)")
    mixed = snap(workers=2, stuck_workers=2, not_responding=1)
    assert readiness(mixed, LIMITS, now=1000.0) == (
        False, "not ready: no worker can take work: 1 of 2 not responding (worker_liveness_timeout), "
               "1 in a long handler call")
    slow = snap(workers=2, stuck_workers=2, not_responding=0)  # long calls only: a slow handler is no reason
    assert readiness(slow, LIMITS, now=1000.0).ok
    assert liveness(both, LIMITS).ok  # alive: the pool replaces them itself (stuck_worker_kill_after)
