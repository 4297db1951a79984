"""The status line (systemd STATUS=, the log every status_interval): a recent rate, and "stopping" while draining.

An average since start said "10/s" an hour after consuming had stopped; a drain's
``STATUS=stopping: ...`` was replaced by the next plain progress line.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from rmqrun.supervisor.supervisor import Supervisor


def supervisor(consumed: int, started: float) -> Supervisor:
    sup = Supervisor.__new__(Supervisor)  # the status line reads only these; no pool, no loop
    sup.engine = SimpleNamespace(stats=SimpleNamespace(consumed=consumed, failed=1, started=started),  # type: ignore[assignment]
                                 table={1: None, 2: None})
    sup.executor = SimpleNamespace(in_flight=3, pool=SimpleNamespace(size=2))  # type: ignore[assignment]
    sup.phase = "consuming"
    sup._rate_mark = None
    return sup


def test_the_rate_is_over_the_last_interval_not_since_start() -> None:
    sup = supervisor(36000, time.monotonic() - 3600)
    first = sup.status_text()
    assert first == "36000 consumed (10/s), 1 failed, 2 queues, 3 batches in flight, 2 workers", first
    time.sleep(0.2)
    assert sup.status_text().startswith("36000 consumed (0/s), "), "nothing consumed since the last line"
    sup.engine.stats.consumed += 100  # type: ignore[union-attr]
    time.sleep(0.5)
    rate = int(sup.status_text().split("(")[1].split("/s")[0])
    assert 20 <= rate <= 200, rate  # 100 in about half a second (a loaded machine: a few), not 36100 / 3600 s


def test_a_drain_keeps_saying_stopping() -> None:
    sup = supervisor(5, time.monotonic() - 10)
    sup.phase = "draining"
    assert sup.status_text().startswith("stopping: 5 consumed (")
    sup.phase = "stopped"
    assert sup.status_text().startswith("stopping: ")
    assert supervisor(0, time.monotonic()).status_text().startswith("0 consumed")
    none = supervisor(0, time.monotonic())
    none.engine = None
    assert none.status_text() == "starting"
