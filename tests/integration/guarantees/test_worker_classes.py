"""The threads and asyncio worker classes keep every guarantee of the process class (issue #36).

Real ``rmqrun run`` instances on the file's embedded broker, 2 workers x 32 calls at once, the
handler waiting 50 ms per message (``time.sleep`` in a thread, ``asyncio.sleep`` on the loop:
``tests/integration/handlers/classes_handler.py``): every message is handled exactly once and calls overlap;
a failure is retried and a message that always fails is dead-lettered; a call past its time limit is
stopped (a thread: its worker recycles; a coroutine: cancelled) and retried alone; a call that kills
its worker fails alone, the messages in flight beside it never charged a retry; orderly by key keeps
each key's order with 32 calls allowed at once; POP consumes with either class.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.handlers import classes_handler
from tests.integration.guarantees.mode_kit import CONCURRENT, ORDERLY_KEY, POP, Cell
from tests.integration.signals_kit import Runs, wait_until

CLASSES = pytest.mark.parametrize("worker_class", ["threads", "asyncio"])
HANDLERS = {"threads": "tests.integration.handlers.classes_handler:probe_threads",
            "asyncio": "tests.integration.handlers.classes_handler:probe_async"}


def start(cell: Cell, worker_class: str, tmp_path: Path, *, args: list[str] | None = None,
          env: dict[str, str] | None = None, settings: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return cell.start(handler=HANDLERS[worker_class],
                      args=["--worker-class", worker_class, "--worker-concurrency", "32", *(args or [])],
                      env={"PROBE_TIMES": str(tmp_path / "times.txt"), **(env or {})}, settings=settings)


@CLASSES
def test_two_workers_of_32_calls_drain_a_backlog_each_message_once(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                                     worker_class: str) -> None:
    total = 2000
    cell = Cell(gb, runs, tmp_path, CONCURRENT, f"Drain{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path)
    cell.wait_handled(range(total), 240, "the whole backlog")
    wait_until(cell.committed_all, 30, "every queue committed to its end")
    cell.drain(run)
    cell.assert_once(range(total))
    assert classes_handler.overlapping(classes_handler.times(tmp_path / "times.txt")) >= 2


@CLASSES
def test_a_failure_is_retried_and_a_message_that_always_fails_is_dead_lettered(
        gb: EmbeddedBroker, runs: Runs, tmp_path: Path, worker_class: str) -> None:
    total = 40
    cell = Cell(gb, runs, tmp_path, CONCURRENT, f"Retry{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path, args=["--max-reconsume-times", "1"],
                env={"PROBE_FAIL_PLAN": "3:1,5:99"})
    wait_until(lambda: cell.dead_letters() == [5], 120, "idx 5 in the DLQ", interval=0.3)
    cell.wait_handled(set(range(total)) - {5}, 90, "every other message, 3 on its retry")
    cell.drain(run)
    cell.assert_once(set(range(total)) - {5})
    retried = sorted((d.idx, d.event, d.reconsume) for d in cell.deliveries() if d.idx in (3, 5))
    assert retried == [(3, "fail", 0), (3, "ok", 1), (5, "fail", 0), (5, "fail", 1)], retried
    others = [(d.idx, d.reconsume) for d in cell.deliveries() if d.idx not in (3, 5) and d.reconsume]
    assert not others, others


@CLASSES
def test_a_call_past_its_time_limit_is_stopped_and_retried_alone(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                                 worker_class: str) -> None:
    total, hung = 40, 6
    cell = Cell(gb, runs, tmp_path, CONCURRENT, f"Limit{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path, args=["--consume-timeout", "0.05"],
                env={"PROBE_HANG_IDX": str(hung)}, settings={"RMQRUN_KILL_GRACE": "30"})
    cell.wait_handled(range(total), 120, "every message, the stopped one retried")
    cell.drain(run)
    assert "soft time limit (3 s) exceeded" in run.log(), run.log()[-3000:]
    if worker_class == "threads":
        assert "still in a call past the time limit" in run.log(), run.log()[-3000:]  # its worker recycled
    assert [(d.event, d.reconsume) for d in cell.deliveries() if d.idx == hung] == [("start", 0), ("ok", 1)]
    cell.assert_once(range(total))
    others = [(d.idx, d.event, d.reconsume) for d in cell.deliveries() if d.idx != hung and d.reconsume != 0]
    assert not others, f"only the stopped call's message was retried: {others}"


@CLASSES
def test_a_call_that_kills_its_worker_fails_alone(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                  worker_class: str) -> None:
    total, poison = 64, 9
    cell = Cell(gb, runs, tmp_path, CONCURRENT, f"Poison{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path, args=["--max-reconsume-times", "1"],
                env={"PROBE_CRASH_IDX": str(poison), "PROBE_SLEEP_MS": "300"})
    wait_until(lambda: cell.dead_letters() == [poison], 120, "the poison message in the DLQ", interval=0.3)
    others = set(range(total)) - {poison}
    cell.wait_handled(others, 90)
    assert run.poll() is None, run.log()[-3000:]
    cell.drain(run)
    cell.assert_once(others)
    retried = [(d.idx, d.reconsume) for d in cell.deliveries() if d.idx != poison and d.reconsume != 0]
    assert not retried, f"messages in flight beside the poison were charged a retry: {retried}"
    assert "at once" in run.log(), "the death names every call that was in flight"


@CLASSES
def test_orderly_by_key_keeps_each_keys_order_with_32_calls_allowed(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                                     worker_class: str) -> None:
    total = 200
    cell = Cell(gb, runs, tmp_path, ORDERLY_KEY, f"Keyed{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path, env={"PROBE_SLEEP_MS": "5", "PROBE_FAIL_IDX": "21",
                                                   "PROBE_FAIL_TIMES": "1"})
    cell.wait_handled(range(total), 120)
    cell.drain(run)
    cell.assert_once(range(total))
    cell.assert_order()


@CLASSES
def test_pop_consumes_with_the_class(gb: EmbeddedBroker, runs: Runs, tmp_path: Path, worker_class: str) -> None:
    total = 100
    cell = Cell(gb, runs, tmp_path, POP, f"Pop{worker_class}")
    cell.produce(total)
    run = start(cell, worker_class, tmp_path)
    cell.wait_handled(range(total), 120)
    cell.drain(run)
    cell.assert_once(range(total))
