"""SIGTERM drains, in every mode: what was handled is committed or acked, nothing is handled twice.

An instance works through 40 slow messages and gets SIGTERM mid-way: it finishes the calls in
flight, exits 0, and the messages it had not started are left for the group. A second instance
then handles exactly those: each message once over both runs (the drain's commit or ack covers
everything the first one finished), in order where the mode orders.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import Cell, Mode, each
from tests.integration.signals_kit import Runs

TOTAL = 40


@each()
def test_sigterm_drains_and_hands_over_exactly_once(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                   mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Term")
    cell.produce(TOTAL)
    # at most 4 messages in flight per worker: the drain finishes those, not the whole backlog
    first = cell.start("first", env={"PROBE_SLEEP_MS": "80"}, settings={"RMQRUN_MAX_INFLIGHT_MESSAGES": "4"})
    cell.wait_events(6)
    cell.drain(first, 30)
    after_first = set(cell.ok_counts())
    assert after_first < set(range(TOTAL)), "SIGTERM came mid-way"
    second = cell.start("second")
    cell.wait_handled(range(TOTAL), 60, "the rest handled by the second instance")
    cell.drain(second)
    cell.assert_once(range(TOTAL))
    if mode.order:
        cell.assert_order()
