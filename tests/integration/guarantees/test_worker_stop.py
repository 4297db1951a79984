"""One worker stopped with SIGSTOP while messages flow, in every mode: its batches run elsewhere, one
warning names it, nothing is lost, nothing runs twice beyond the call it was in.

The bounds are shortened from their defaults (``worker_liveness_timeout`` 20 s to 2 s,
``stuck_worker_kill_after`` 60 s to 3 s), so "stopped for 60 s" is "stopped past the kill": the
batches it had not begun move to the other worker when it is found stuck, it is then killed and
replaced, and what it had begun runs again. Every message is handled, at most one (the call it
was in; one message per call) twice, in order where the mode orders.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.guarantees.mode_kit import Cell, Mode, each, stop_worker
from tests.integration.liveness_kit import BOUND, STUCK
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 120
LIVENESS = {"RMQRUN_WORKER_LIVENESS_TIMEOUT": str(BOUND), "RMQRUN_STUCK_WORKER_KILL_AFTER": "3"}


@each()
def test_a_stopped_worker_s_batches_run_elsewhere(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                  mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Stop")
    cell.produce(TOTAL)
    run = cell.start(env={"PROBE_SLEEP_MS": "20"}, settings=LIVENESS)
    workers = set(run.worker_pids())

    def busy() -> int | None:
        counts = Counter(d.pid for d in cell.deliveries() if d.pid in workers)
        return next((pid for pid, n in counts.items() if n >= 2), None)
    wait_until(busy, 60, "a worker handling messages")
    victim = busy()
    assert victim is not None
    stop_worker(victim)
    wait_until(lambda: any(f"(pid {victim})" in ln for ln in run.log().splitlines() if STUCK in ln), 60,
               "the warning naming the stopped worker")
    cell.wait_handled(range(TOTAL), 90, "every message, the stopped worker's included")
    assert run.poll() is None, run.log()[-3000:]
    cell.drain(run)
    warnings = [ln for ln in run.log().splitlines() if STUCK in ln]
    assert len(warnings) == 1 and f"(pid {victim})" in warnings[0], warnings
    counts = cell.ok_counts()
    assert set(counts) == set(range(TOTAL)), "nothing lost"
    twice = {i: c for i, c in counts.items() if c > 1}
    assert len(twice) <= 1 and all(c == 2 for c in twice.values()), f"more than the victim's call twice: {twice}"
    if mode.order:
        cell.assert_order()
