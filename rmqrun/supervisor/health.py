"""What "alive" and "ready" mean for ``rmqrun run``, and the watch that says when either changes.

The endpoints (``/healthz``, ``/readyz``), the ``rmqrun_ready`` gauge and the
systemd watchdog all ask the same two questions, answered here from one
:class:`~rmqrun.supervisor.snapshot.HealthSnapshot` so they can never
disagree.

**Alive** (``/healthz``; the watchdog pings only while alive) fails when the
pool is wedged, the incident a restart cures and a turning event loop hides:

* every worker has been in one handler call for longer than the consume time
  limit (the pool's own soft and hard limits did not free it), or
* work is waiting (batches not yet in a handler call) and no batch has
  finished for ``stall_timeout`` seconds: every worker is stuck, whatever
  the limit says. A handler whose single call may legitimately take longer
  needs a larger ``stall_timeout`` (0 turns this rule off).

**Ready** (``/readyz``, ``rmqrun_ready``) fails before the first rebalance,
while draining or stopped, while wedged, when no worker can take work (each
one is stuck: not responding for ``worker_liveness_timeout`` seconds, see
:mod:`rmqrun.supervisor.liveness`, or in a long handler call, and at least one
not responding: a pool of slow calls alone is no reason), and when no broker
has answered any request for ``ready_broker_timeout`` seconds. A healthy consumer hears from a
broker every few seconds (offset commits every 5 s, long polls answered
within 15 s); an idle member with no queue only at its rebalance and
heartbeat, so :class:`HealthWatch` sends a heartbeat when the brokers have
been quiet for a third of the limit: silence then means they are gone, not
that there was nothing to say.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from loguru import logger

from rmqrun.client.failure_log import FailureLog
from rmqrun.supervisor.snapshot import HealthSnapshot, health_of

#: how often the watch looks
WATCH_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class HealthLimits:
    """The run's limits the verdicts apply (their defaults are RunSettings', written there once)."""

    ready_broker_timeout: float
    #: 0: the stall rule is off
    stall_timeout: float
    #: the consume time limit of one handler call (0: none)
    time_limit: float


class Verdict(NamedTuple):
    """(ok, reason): unpacks like the ``(bool, str)`` the endpoints answered with before."""

    ok: bool
    #: one line of plain text saying why (the endpoints' body)
    reason: str


def wedged(h: HealthSnapshot, limits: HealthLimits) -> str | None:
    """Why the pool is wedged, or None. Judged only while consuming (a stop has its own grace)."""
    if h.phase != "consuming":
        return None
    ages = h.call_ages
    if limits.time_limit > 0 and h.workers and len(ages) >= h.workers and min(ages) > limits.time_limit:
        return (f"pool wedged: every worker ({h.workers}) has been in one handler call for over "
                f"{limits.time_limit:g} s (the consume time limit; the longest {max(ages):.0f} s)")
    if limits.stall_timeout > 0 and h.stalled_for is not None and h.stalled_for > limits.stall_timeout:
        return (f"pool wedged: no handler call has finished for {h.stalled_for:.0f} s while "
                f"{h.queued_batches} batch(es) wait (stall_timeout {limits.stall_timeout:g} s)")
    return None


def liveness(h: HealthSnapshot, limits: HealthLimits) -> Verdict:
    why = wedged(h, limits)
    if why is not None:
        return Verdict(False, f"unhealthy: {why}")
    return Verdict(True, f"alive: {h.phase}")


def readiness(h: HealthSnapshot, limits: HealthLimits, *, now: float | None = None) -> Verdict:
    phase, detail = h.phase, h.phase_detail
    if phase == "starting":
        return Verdict(False, "not ready: starting (no rebalance yet)")
    if phase == "waiting":
        return Verdict(False, f"not ready: {detail}" if detail else "not ready: waiting for the cluster")
    if phase in ("draining", "stopped"):
        return Verdict(False, f"not ready: {phase}" + (f" ({detail})" if detail else ""))
    last = h.last_broker_answer
    if last is None:  # consuming without an engine cannot happen; say so rather than claim ready
        return Verdict(False, f"not ready: {phase}, no consumer")
    why = wedged(h, limits)
    if why is not None:
        return Verdict(False, f"not ready: {why}")
    if h.workers and h.not_responding and h.stuck_workers >= h.workers:
        others = h.stuck_workers - h.not_responding
        return Verdict(False, f"not ready: no worker can take work: {h.not_responding} of {h.workers} not "
                              f"responding (worker_liveness_timeout)"
                              + (f", {others} in a long handler call" if others else ""))
    now = time.monotonic() if now is None else now
    limit = limits.ready_broker_timeout
    if last <= 0.0 or now - last > limit:
        ago = "ever" if last <= 0.0 else f"for {now - last:.0f} s"
        return Verdict(False, f"not ready: no broker has answered {ago} (ready_broker_timeout {limit:g} s)")
    return Verdict(True, f"ready: consuming, {h.assigned_queues} queues, last broker answer {now - last:.0f} s ago")


class HealthWatch:
    """A task on the supervisor's loop: logs each change of the verdicts (one line when rmqrun stops being
    ready or alive, with why, one when it is again) and asks the brokers for a word when they are quiet."""

    def __init__(self, supervisor: Any, limits: HealthLimits, probe: Callable[[], None]) -> None:
        self.supervisor = supervisor
        self.limits = limits
        self.probe = probe
        self._ready: bool | None = None
        self._alive = True
        self._probed_at = 0.0
        self._failures = FailureLog()

    def check(self, now: float | None = None) -> tuple[Verdict, Verdict]:
        """(alive, ready) now; logs a change since the last check."""
        h = health_of(self.supervisor)
        now = time.monotonic() if now is None else now
        alive, ready = liveness(h, self.limits), readiness(h, self.limits, now=now)
        if h.phase != "consuming":
            return alive, ready
        if alive.ok != self._alive:
            self._alive = alive.ok
            if alive.ok:
                logger.info("the pool moves again: handler calls finish")
            else:
                logger.error("{}; /healthz and /readyz answer 503, rmqrun_ready is 0", alive.reason)
        if ready.ok != self._ready:
            if ready.ok and self._ready is False:
                logger.info("ready again: {}", ready.reason.removeprefix("ready: "))
            elif not ready.ok and alive.ok:  # a wedge's one line above says it
                logger.warning("{}; /readyz answers 503, rmqrun_ready is 0", ready.reason)
            self._ready = ready.ok
        quiet = self.limits.ready_broker_timeout / 3
        last = h.last_broker_answer or 0.0
        if now - last > quiet and now - self._probed_at > quiet:
            self._probed_at = now
            self.probe()
        return alive, ready

    async def run(self) -> None:
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            try:
                self.check()
            except Exception as exc:  # a bug here must not end the supervisor's run, nor flood the log
                self._failures.failed("check", "the health check", exc, level="ERROR")
            else:
                self._failures.recovered("check")
