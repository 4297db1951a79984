"""``kill -9`` of an instance mid-drain loses nothing, in every mode.

Instance A drains a 40-message backlog slowly and is killed with SIGKILL once it has handled
some; instance B of the same group then finishes. Every message is handled; a message handled
twice is one A had handled (its commit or ack died with it), never one only B saw. In the
orderly modes the broker frees A's queue locks after ``lock_max_live_ms`` (3 s here, RocketMQ's
60 s), and per key nothing runs before its predecessor succeeded; a POP instance's un-acked
pops come back after their invisible time (5 s). Messages A never handled run at reconsume 0 in
the pull modes, and in orderly POP only each re-popped queue's head takes the broker's count.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import Cell, Mode, each
from tests.integration.signals_kit import Runs

BROKER_SETTINGS = {"lock_max_live_ms": 3000}
TOTAL = 40


@each()
def test_kill9_mid_drain_loses_nothing(gb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Kill")
    cell.produce(TOTAL)
    a = cell.start("a", env={"PROBE_SLEEP_MS": "60"})
    cell.wait_events(8)
    a.kill9()
    a.wait_group_gone()
    handled_by_a = {d.idx for d in cell.deliveries() if d.event == "ok"}
    assert handled_by_a < set(range(TOTAL)), "A was killed mid-drain"
    b = cell.start("b")
    cell.wait_handled(range(TOTAL), 90, "every message handled after the kill")
    cell.drain(b)
    counts = cell.ok_counts()
    assert set(counts) == set(range(TOTAL)), "nothing lost"
    twice = {i for i, c in counts.items() if c > 1}
    assert twice <= handled_by_a, f"handled twice though A never had them: {sorted(twice - handled_by_a)}"
    assert all(c <= 2 for c in counts.values()), counts
    # what A had not handled never failed: pulled again from the committed offset it runs at reconsume 0. A POP
    # broker counts the pops of what A held (concurrent POP revives them counted, as Java's does); orderly POP
    # hands that count only to the head of each re-popped queue, which may have been in A's call
    fresh = [d for d in cell.deliveries() if d.idx not in handled_by_a]
    if not mode.pop:
        assert [d.idx for d in fresh if d.reconsume] == [], "messages A never handled ran as retries"
    elif mode.order:
        counted = Counter(d.queue_id for d in fresh if d.reconsume)
        assert all(c == 1 for c in counted.values()), f"more than each queue's head counted retried: {fresh}"
    if mode.order:
        cell.assert_order(per_queue=False)
