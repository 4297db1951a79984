"""Every message once with no fault, in every mode.

40 keyed messages, two workers: each is handled exactly once, never failed or retried (reconsume
count 0), and the instance drains and exits 0 on SIGTERM. In the pull modes the group's committed
offsets then reach every queue's end (a POP group acks each message instead; a second instance
started afterwards finds nothing left, which covers both).
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import Cell, Mode, each
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 40


@each()
def test_every_message_once_with_no_fault(gb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Once")
    cell.produce(TOTAL)
    run = cell.start(env={"PROBE_SLEEP_MS": "5"})
    cell.wait_handled(range(TOTAL))
    if not mode.pop:
        wait_until(cell.committed_all, 20, "every queue committed to its end", interval=0.2)
    cell.drain(run)
    cell.assert_once(range(TOTAL))
    assert all(d.event == "ok" and d.reconsume == 0 for d in cell.deliveries()), "no message failed or came again"
    # what was handled is acked or committed: a new instance of the group finds nothing, then handles a new one
    again = cell.start("again")
    cell.produce(1, start=TOTAL)
    cell.wait_handled([TOTAL])
    cell.drain(again)
    cell.assert_once(range(TOTAL + 1))
