"""A message that kills its worker fails alone, in every mode.

Message 9 ends its worker (``os._exit(7)``, before its call records anything) every time, among 40
messages handled four per call;
with ``--max-reconsume-times 1`` it dies twice and lands in ``%DLQ%<group>``. The messages that
shared its calls are not failed with it: every other message is handled exactly once at
reconsume 0, rmqrun keeps running, and where the mode orders, the poison's successors run only
once it is dead-lettered.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import CRASH, Cell, Mode, each
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 40
POISON = 9


@each()
def test_a_message_that_kills_its_worker_fails_alone(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                     mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Poison")
    cell.produce(TOTAL)
    run = cell.start(handler=CRASH, args=["--max-reconsume-times", "1", "--batch-size", "4"],
                     env={"PROBE_CRASH_IDX": str(POISON)})
    wait_until(lambda: cell.dead_letters() == [POISON], 120, "the poison message in the DLQ", interval=0.3)
    others = set(range(TOTAL)) - {POISON}
    cell.wait_handled(others, 60)
    assert run.poll() is None, run.log()[-3000:]
    cell.drain(run)
    cell.assert_once(others)
    # a death is recorded when the poison leads its call; its first may be in a call it shared (the pool
    # then re-runs that call's messages one per call, and it dies alone): counted failed only for the
    # deaths it caused alone, it runs at reconsume 0 and 1 and no more
    deaths = [(d.event, d.reconsume) for d in cell.deliveries() if d.idx == POISON]
    assert {e for e, _ in deaths} == {"start"} and [r for _, r in deaths][-1] == 1, deaths
    assert sorted({r for _, r in deaths}) == [0, 1] and len(deaths) <= 4, deaths
    retried = [(d.idx, d.reconsume) for d in cell.deliveries() if d.idx != POISON and d.reconsume != 0]
    assert not retried, f"messages that shared the poison's calls were failed with it: {retried}"
    if mode.order:
        cell.assert_order(moved_on={POISON})
