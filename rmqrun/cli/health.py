"""``/healthz`` and ``/readyz``: what a service manager or Kubernetes asks rmqrun.

Liveness is the supervisor's asyncio loop answering at all: both endpoints
are served on that loop, so a loop stuck in a handler-independent bug (the
pool's work never runs on it) cannot answer and the probe's own timeout is
the verdict. ``/healthz`` therefore always says 200 when it answers.

Readiness says whether this process is doing its job now:

* not before the first rebalance (``rmqrun run`` waits for the cluster at
  start; READY=1 for systemd is sent at the same moment);
* not while draining on SIGTERM/SIGINT (a load balancer or an orchestrator
  should stop counting on it) nor after the stop;
* not when no broker has answered anything (heartbeat, pull, offset, route)
  for :data:`BROKER_SILENCE_S` seconds. A healthy consumer hears from a
  broker at least every heartbeat interval (30 s) and, with queues assigned,
  at every long-poll answer (the broker holds a pull at most 15 s), so two
  heartbeat intervals of silence mean the brokers are gone or unreachable,
  not merely idle.

The body is one line of plain text saying why, so ``curl`` shows the reason.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rmqrun.supervisor.snapshot import HealthSnapshot, health_of

if TYPE_CHECKING:
    from rmqrun.supervisor.supervisor import Supervisor

#: seconds without any answer from any broker after which rmqrun is not ready (two heartbeat intervals)
BROKER_SILENCE_S = 60.0


def liveness(supervisor: "Supervisor") -> tuple[bool, str]:
    """Always alive when asked: answering at all is the proof (see the module docstring)."""
    return True, f"alive: {health_of(supervisor).phase}"


def readiness(supervisor: "Supervisor", *, now: float | None = None,
              silence_s: float = BROKER_SILENCE_S) -> tuple[bool, str]:
    """(ready, reason) from the supervisor's phase and its brokers' latest answer."""
    return decide(health_of(supervisor), now=now, silence_s=silence_s)


def decide(health: HealthSnapshot, *, now: float | None = None,
           silence_s: float = BROKER_SILENCE_S) -> tuple[bool, str]:
    """(ready, reason) from a health snapshot (the supervisor's own, see :mod:`rmqrun.supervisor.snapshot`)."""
    phase, detail = health.phase, health.phase_detail
    if phase == "starting":
        return False, "not ready: starting (no rebalance yet)"
    if phase == "waiting":
        return False, f"not ready: {detail}" if detail else "not ready: waiting for the cluster"
    if phase in ("draining", "stopped"):
        return False, f"not ready: {phase}" + (f" ({detail})" if detail else "")
    last = health.last_broker_answer
    if last is None:  # consuming without an engine cannot happen; say so rather than claim ready
        return False, f"not ready: {phase}, no consumer"
    now = time.monotonic() if now is None else now
    if last <= 0.0 or now - last > silence_s:
        ago = "ever" if last <= 0.0 else f"for {now - last:.0f} s"
        return False, f"not ready: no broker has answered {ago} (limit {silence_s:g} s)"
    return True, f"ready: consuming, {health.assigned_queues} queues, last broker answer {now - last:.0f} s ago"
