"""The supervisor's status line (systemd STATUS=, the log every status_interval): "stopping" while draining.

A drain's ``STATUS=stopping: ...`` used to be replaced by the next plain progress line. The line itself (a recent
rate, the lag, nouns that agree) is :class:`~rmqrun.supervisor.status_line.StatusLine`'s, tested in
``test_status_line.py``; here, what the supervisor adds to it.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from rmqrun.supervisor.supervisor import Supervisor
from tests.unit.supervisor.test_status_line import snap


def supervisor(consumed: int, started: float, phase: str = "consuming") -> Supervisor:
    sup = Supervisor.__new__(Supervisor)  # the status line reads only these; no pool, no loop
    sup.engine = SimpleNamespace(stats=SimpleNamespace(started=started))  # type: ignore[assignment]
    sup.phase = phase
    sup._status_line = None
    sup.status = lambda: snap(consumed, [(10, 10), (5, 3)])  # type: ignore[method-assign]
    return sup


def test_the_first_line_counts_from_the_start_and_the_next_from_the_last_line() -> None:
    sup = supervisor(36000, time.monotonic() - 3600)
    first = sup.status_text()
    assert first.startswith("36000 consumed (10/s now), lag 2, "), first
    time.sleep(0.2)
    assert sup.status_text().startswith("36000 consumed (0/s now), "), "nothing consumed since the last line"


def test_a_drain_keeps_saying_stopping() -> None:
    assert supervisor(5, time.monotonic() - 10, "draining").status_text().startswith("stopping: 5 consumed (")
    assert supervisor(5, time.monotonic() - 10, "stopped").status_text().startswith("stopping: ")
    assert supervisor(0, time.monotonic()).status_text().startswith("0 consumed")
    none = supervisor(0, time.monotonic())
    none.engine = None
    assert none.status_text() == "starting"
