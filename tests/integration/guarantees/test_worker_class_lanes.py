"""A threads / asyncio worker runs batches of different queues or keys at once (issue #36, lanes).

An orderly batch runs one call at a time; with one batch at a time per worker, an orderly worker of
concurrency N would run one call whatever N is. Here 2 workers x 8 (queues) or x 32 (keys) calls, a
handler waiting 50 ms: every message once, each queue's (key's) order kept, and calls of different
queues (keys) in progress at one moment in one worker, which only lanes allow (orderly POP too). Concurrent batches run
at once too, and every lane's calls stay within the one bound of N calls in flight per worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.handlers import classes_handler
from tests.integration.guarantees.mode_kit import CONCURRENT, ORDERLY_KEY, ORDERLY_QUEUE, POP_ORDERLY, Cell, Mode
from tests.integration.guarantees.test_worker_classes import CLASSES, HANDLERS
from tests.integration.signals_kit import Runs, wait_until


def overlapping_keys(path: Path, keys: int) -> int:
    """How many calls of one worker, on messages of different keys (``idx % keys``), overlapped at most."""
    recs = classes_handler.times(path)
    best = 0
    for r in recs:
        at_once = {s[1] % keys for s in recs if s[5] == r[5] and s[3] <= r[3] < s[4]}
        best = max(best, len(at_once))
    return best


@CLASSES
@pytest.mark.parametrize("mode, concurrency, keys",
                         [(ORDERLY_QUEUE, 8, 4), (ORDERLY_KEY, 32, 64), (POP_ORDERLY, 8, 4), (CONCURRENT, 3, 4)],
                         ids=["by-queue", "by-key", "pop-orderly", "concurrent"])
def test_orderly_batches_of_different_queues_or_keys_run_at_once_in_one_worker(
        gb: EmbeddedBroker, runs: Runs, tmp_path: Path, worker_class: str, mode: Mode, concurrency: int,
        keys: int) -> None:
    total = 256
    cell = Cell(gb, runs, tmp_path, mode, f"Lanes{mode}{worker_class}")
    cell.produce(total, keys=keys)
    times = tmp_path / "times.txt"
    run = cell.start(handler=HANDLERS[worker_class],
                     args=["--worker-class", worker_class, "--worker-concurrency", str(concurrency)],
                     env={"PROBE_TIMES": str(times)})
    cell.wait_handled(range(total), 180)
    cell.drain(run)
    cell.assert_once(range(total))
    if mode.order:
        cell.assert_order(keys)
    # 4 queues on 2 workers: one worker holds 2 or more; with many keys each worker holds many
    assert overlapping_keys(times, keys) >= 2, "no two queues (keys) ran at once in one worker"
    most = classes_handler.overlapping(classes_handler.times(times))
    assert most <= concurrency, f"{most} calls at once in one worker, over its {concurrency}"


@CLASSES
def test_a_call_that_kills_a_worker_running_many_keys_fails_alone_and_the_other_keys_keep_their_results(
        gb: EmbeddedBroker, runs: Runs, tmp_path: Path, worker_class: str) -> None:
    """Orderly by key, 64 keys, 32 calls allowed: the poison's worker dies with calls of other keys in flight in
    other lanes. Each lane's finished messages are not run again, none beside the poison is charged a retry, the
    poison is re-run alone until it is dead-lettered, and its key's successors run only after that."""
    total, poison, keys = 128, 9, 64
    cell = Cell(gb, runs, tmp_path, ORDERLY_KEY, f"LanePoison{worker_class}")
    cell.produce(total, keys=keys)
    run = cell.start(handler=HANDLERS[worker_class],
                     args=["--worker-class", worker_class, "--worker-concurrency", "32", "--max-reconsume-times", "1"],
                     env={"PROBE_CRASH_IDX": str(poison), "PROBE_SLEEP_MS": "200"})
    wait_until(lambda: cell.dead_letters() == [poison], 120, "the poison message in the DLQ", interval=0.3)
    others = set(range(total)) - {poison}
    cell.wait_handled(others, 90)
    assert run.poll() is None, run.log()[-3000:]
    cell.drain(run)
    cell.assert_once(others)
    retried = [(d.idx, d.reconsume) for d in cell.deliveries() if d.idx != poison and d.reconsume != 0]
    assert not retried, f"messages in flight beside the poison were charged a retry: {retried}"
    cell.assert_order(keys, moved_on={poison})
