"""The per-call time limit (``--consume-timeout``) stops a hung call, which then fails like any
failure and comes again, in every mode.

Message 6's first call hangs for an hour; the limit is 3 s (0.05 min): the call is stopped
(the log says "time limit"), the message comes again at reconsume 1 and succeeds; every other
message is handled once at reconsume 0, in order where the mode orders (its successors wait
for it).
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import PROBE, Cell, Mode, each
from tests.integration.signals_kit import Runs

TOTAL = 20
HUNG = 6


@each()
def test_a_call_past_its_time_limit_is_stopped_and_retried(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                           mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Limit")
    cell.produce(TOTAL)
    run = cell.start(handler=f"{PROBE}:hang", args=["--consume-timeout", "0.05"],
                     env={"PROBE_HANG_IDX": str(HUNG)}, settings={"RMQRUN_KILL_GRACE": "1"})
    cell.wait_handled(range(TOTAL), 90, "every message, the stopped one retried")
    cell.drain(run)
    assert "time limit" in run.log(), run.log()[-3000:]
    hung = [(d.event, d.reconsume) for d in cell.deliveries() if d.idx == HUNG]
    assert hung == [("start", 0), ("ok", 1)], hung
    cell.assert_once(range(TOTAL))
    others = [(d.idx, d.event, d.reconsume) for d in cell.deliveries() if d.idx != HUNG and d.reconsume != 0]
    assert not others, f"only the stopped call's message was retried: {others}"
    if mode.order:
        cell.assert_order()
