"""Order per queue or per key, in the modes that promise it (orderly by queue, by key, orderly POP).

40 keyed messages over 4 queues (one key per queue), two workers, and one message failing once
in the middle of its key: per key nothing runs before its predecessor has succeeded (the failed
message comes again before anything after it), per queue in queue order in the queue modes, and
every message ends handled once. Concurrent and POP consumption promise no order (Java's
``MessageListenerConcurrently``): they are not cases here (``docs/testing.md``, the matrix).
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import ORDERED_MODES, Cell, Mode, each
from tests.integration.signals_kit import Runs

TOTAL = 40
FAILS_ONCE = 9  # key 1, after 1 and 5, before 13, 17, ...


@each(ORDERED_MODES)
def test_order_per_queue_or_key(gb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Order")
    cell.produce(TOTAL)
    run = cell.start(env={"PROBE_SLEEP_MS": "20", "PROBE_FAIL_PLAN": f"{FAILS_ONCE}:1"})
    cell.wait_handled(range(TOTAL))
    cell.drain(run)
    cell.assert_once(range(TOTAL))
    cell.assert_order()
    fails = [(d.idx, d.reconsume) for d in cell.deliveries() if d.event == "fail"]
    assert fails == [(FAILS_ONCE, 0)], fails
