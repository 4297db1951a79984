"""``/readyz``'s decision: the supervisor's phase and how long ago a broker last answered.

The endpoints themselves are exercised through a real ``rmqrun run`` in
``tests/integration/test_health_endpoints.py``; the broker-silence rule needs
a minute of silence there, so its edges are pinned here with explicit clocks.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmqrun.cli.health import BROKER_SILENCE_S, liveness, readiness


def supervisor(phase: str, detail: str = "", last_answer: float | None = 1000.0) -> SimpleNamespace:
    engine = None if last_answer is None else SimpleNamespace(
        instance=SimpleNamespace(broker=SimpleNamespace(last_answer=last_answer)), table={1: None, 2: None})
    return SimpleNamespace(phase=phase, phase_detail=detail, engine=engine)


@pytest.mark.parametrize("phase, detail, reason", [
    ("starting", "", "not ready: starting (no rebalance yet)"),
    ("waiting", "name server 127.0.0.1:1 unreachable (attempt 2, next in 2 s)",
     "not ready: name server 127.0.0.1:1 unreachable (attempt 2, next in 2 s)"),
    ("draining", "graceful stop, grace 30 s", "not ready: draining (graceful stop, grace 30 s)"),
    ("stopped", "", "not ready: stopped"),
])
def test_not_ready_outside_consuming(phase: str, detail: str, reason: str) -> None:
    assert readiness(supervisor(phase, detail, last_answer=None), now=1000.0) == (False, reason)
    assert liveness(supervisor(phase, detail)) == (True, f"alive: {phase}")


def test_ready_while_a_broker_answers_and_not_after_the_silence_limit() -> None:
    sup = supervisor("consuming", last_answer=1000.0)
    ok, reason = readiness(sup, now=1000.0 + BROKER_SILENCE_S)
    assert ok and reason == f"ready: consuming, 2 queues, last broker answer {BROKER_SILENCE_S:.0f} s ago"
    ok, reason = readiness(sup, now=1000.0 + BROKER_SILENCE_S + 1)
    assert not ok and reason == (f"not ready: no broker has answered for {BROKER_SILENCE_S + 1:.0f} s "
                                 f"(limit {BROKER_SILENCE_S:g} s)")
    assert readiness(supervisor("consuming", last_answer=0.0), now=5.0)[0] is False
    assert readiness(supervisor("consuming", last_answer=None), now=5.0) == (False, "not ready: consuming, no consumer")
