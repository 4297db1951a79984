"""``reconsume_times`` is exact after N failures, in every mode: it counts the handler's failures of
that message, never the deliveries of a batch the message only waited in.

The issue #31 scenario, on one key (so one queue: p-103 is the message right after p-100 in it):
one worker, ``--max-reconsume-times 2``, message 4 fails twice and message 5 once. Message 4 runs
at reconsume 0, 1 (failing) and 2; message 5 at 0 (failing) and 1; every other message once at
0; nothing reaches the DLQ. In orderly POP the broker counts every pop of a batch
(``orderCountInfo``), and a handler shown that count sees messages behind a failed one "retried"
without having failed, and dead-letters them early.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import Cell, Mode, each
from tests.integration.signals_kit import Runs

TOTAL = 12
TWICE, ONCE = 4, 5


@each()
def test_reconsume_times_count_the_message_s_own_failures(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                          mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Recons")
    cell.produce(TOTAL, keys=1)
    run = cell.start(workers=1, args=["--max-reconsume-times", "2"],
                     env={"PROBE_FAIL_PLAN": f"{TWICE}:2,{ONCE}:1"})
    cell.wait_handled(range(TOTAL), timeout=120)
    cell.drain(run)
    runs_of = {i: [(d.event, d.reconsume) for d in cell.deliveries() if d.idx == i] for i in range(TOTAL)}
    assert runs_of[TWICE] == [("fail", 0), ("fail", 1), ("ok", 2)], runs_of[TWICE]
    assert runs_of[ONCE] == [("fail", 0), ("ok", 1)], runs_of[ONCE]
    others = {i: r for i, r in runs_of.items() if i not in (TWICE, ONCE) and r != [("ok", 0)]}
    assert not others, f"messages that never failed ran with a reconsume count or more than once: {others}"
    assert cell.dead_letters() == [], "nothing is dead-lettered below max_reconsume_times"
    if mode.order:
        cell.assert_order(keys=1)
