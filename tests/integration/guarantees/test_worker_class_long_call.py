"""The long-call watch with the threads and asyncio worker classes (issue #36).

Message 6 hangs in its first call (an hour) while the other calls of its worker run beside it: with
``long_call_seconds`` 1 the warning names that call's own message (its queue offset), not its batch's
first nor a call beside it, and every other message is handled while it still hangs.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import CONCURRENT, Cell
from tests.integration.guarantees.test_worker_classes import CLASSES, start
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 40
HUNG = 6


@CLASSES
def test_a_long_call_is_named_by_its_own_message_and_holds_nothing_else(gb: EmbeddedBroker, runs: Runs,
                                                                         tmp_path: Path, worker_class: str) -> None:
    cell = Cell(gb, runs, tmp_path, CONCURRENT, f"Long{worker_class}")
    cell.produce(TOTAL)
    run = start(cell, worker_class, tmp_path, env={"PROBE_HANG_IDX": str(HUNG), "PROBE_SLEEP_MS": "30"},
                settings={"RMQRUN_LONG_CALL_SECONDS": "1"})
    wait_until(lambda: any(d.event == "start" and d.idx == HUNG for d in cell.deliveries()), 30, "the call hanging")
    free = set(range(TOTAL)) - {HUNG}
    cell.wait_handled(free, 60, "every other message handled while it hangs")
    hung = [d for d in cell.deliveries() if d.idx == HUNG]
    assert [(d.event, d.reconsume) for d in hung] == [("start", 0)], f"the hung call was still running: {hung}"

    def warning() -> str | None:
        return next((x for x in run.log().splitlines() if "has been in one handler call" in x), None)
    wait_until(lambda: warning() is not None, 30, "one warning naming the long call")
    line = warning()
    assert line is not None and f"message at offset {hung[0].offset} of " in line, (line, hung[0])
    assert f"queueId={hung[0].queue_id}]" in line.split("message at", 1)[1], (line, hung[0])
    cell.assert_once(free)
