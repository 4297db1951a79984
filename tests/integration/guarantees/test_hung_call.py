"""A hung call's queued work moves to the other workers, in every mode.

Message 6 hangs in its first call (the probe's ``hang``: an hour, far past anything the test
waits for; the time limit is the default 15 minutes). With ``long_call_seconds`` 1, the batches
queued behind it on its worker go to the other worker, so every other message is handled while
it still hangs, except, where the mode orders, the later messages of its own key (and queue),
which must wait for it.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import KEYS, PROBE, Cell, Mode, each
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 40
HUNG = 6


@each()
def test_a_hung_call_s_queued_work_moves(gb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Hung")
    cell.produce(TOTAL)
    run = cell.start(handler=f"{PROBE}:hang", env={"PROBE_HANG_IDX": str(HUNG), "PROBE_SLEEP_MS": "30"},
                     settings={"RMQRUN_LONG_CALL_SECONDS": "1"})
    waiting = {i for i in range(HUNG + 1, TOTAL) if i % KEYS == HUNG % KEYS} if mode.order else set()
    free = set(range(TOTAL)) - waiting - {HUNG}
    wait_until(lambda: any(d.event == "start" and d.idx == HUNG for d in cell.deliveries()), 30, "the call hanging")
    cell.wait_handled(free, 60, "every message not behind the hung one (in order) handled while it hangs")
    deliveries = cell.deliveries()
    hung = [(d.event, d.reconsume) for d in deliveries if d.idx == HUNG]
    assert hung == [("start", 0)], f"the hung call was still running: {hung}"
    assert not {d.idx for d in deliveries} & waiting, "the hung message's successors waited for it"
    wait_until(lambda: "has been in one handler call" in run.log(), 30, "one warning naming the long call")
    cell.assert_once(free)
    if mode.order:
        cell.assert_order()
