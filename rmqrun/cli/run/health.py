"""``/healthz`` and ``/readyz``: what a service manager or Kubernetes asks rmqrun.

Both answer from the supervisor's own verdicts (:mod:`rmqrun.supervisor.health`,
which the ``rmqrun_ready`` gauge and the systemd watchdog read too, so none of
them can disagree):

* ``/healthz`` is 503 while the pool is wedged (every worker in one handler
  call past the consume time limit, or no handler call finished for
  ``stall_timeout`` while work waits): a restart is what helps. Both endpoints
  are served on the supervisor's loop, so a stuck loop does not answer at all
  and the probe's own timeout is the verdict.
* ``/readyz`` is 503 before the first rebalance, while draining or stopped,
  while wedged, and when no broker has answered for ``ready_broker_timeout``.

The body is one line of plain text saying why, so ``curl`` shows the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqrun.supervisor.supervisor import Supervisor


def liveness(supervisor: "Supervisor") -> tuple[bool, str]:
    verdict = supervisor.liveness()
    return verdict.ok, verdict.reason


def readiness(supervisor: "Supervisor", *, now: float | None = None) -> tuple[bool, str]:
    verdict = supervisor.readiness(now)
    return verdict.ok, verdict.reason
