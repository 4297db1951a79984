"""The pieces behind "handlers cannot stop the service or starve the pool", one process, no workers.

The integration tests (``tests/integration/test_handler_safety.py`` and beside it) show the
behaviour end to end; these pin each part's rule: stuck workers lose new orderly pins, a cut
stops exactly the calls it names, a log line is capped with its marker, growing memory is
warned about once per doubling, and a signal's sender is placed by its process group or parents.
"""

from __future__ import annotations

import mmap
from typing import Any

import pytest

from rmqrun.pipe import procs
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import ConsumeMode
from rmqrun.supervisor.dispatch import Dispatcher, stable_index
from rmqrun.supervisor.lineage import owner_of
from rmqrun.worker import logs
from rmqrun.worker.memory_watch import GrowthWatch
from tests.unit.worker.test_worker_log_streams import records  # noqa: F401 (the fixture: every record logged)


def test_an_orderly_queue_pinned_while_its_worker_is_stuck_goes_elsewhere_and_comes_back_when_idle() -> None:
    d = Dispatcher([0, 1, 2])
    key = next(k for k in (f"q{i}" for i in range(100)) if stable_index(k, 3) == 0)
    assert d.assign(1, key, ConsumeMode.ORDERLY, 1) == 0
    d.set_stuck({0})
    assert d.assign(2, key, ConsumeMode.ORDERLY, 1) is None, "one batch of a queue in flight, stuck or not"
    d.done(1)
    moved = d.assign(3, key, ConsumeMode.ORDERLY, 1)
    assert moved in (1, 2)
    d.done(3)
    d.set_stuck(set())
    assert d.assign(4, key, ConsumeMode.ORDERLY, 1) == 0
    d.set_stuck({0, 1, 2})  # every worker stuck: the pin stays where it was
    d.done(4)
    assert d.assign(5, key, ConsumeMode.ORDERLY, 1) == 0


def test_a_cut_stops_the_calls_it_names_and_only_those() -> None:
    mm = mmap.mmap(-1, progress_mem.SIZE)
    writer = progress_mem.Writer(mm)
    writer.begin(7)
    statuses, delays = bytearray(5), [0] * 5
    progress_mem.ask_cut(mm, 8, 2)  # another batch: no effect
    for i in range(3):
        writer.call(statuses, delays, i, i + 1, 1.0)
    writer.begin(8)
    writer.call(statuses, delays, 0, 1, 1.0)
    writer.call(statuses, delays, 1, 2, 1.0)
    with pytest.raises(progress_mem.CallCut) as cut:
        writer.call(statuses, delays, 2, 3, 1.0)
    assert cut.value.index == 2
    progress_mem.clear_cut(mm)
    writer.call(statuses, delays, 3, 4, 1.0)


def test_a_line_past_the_cap_is_cut_with_a_marker_of_how_much(records: list[Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_RECORD", 100)
    writer = logs.LineWriter("stderr", "WARNING", __import__("sys").__stderr__)
    writer.write("x" * 250)
    writer.write("y" * 50)  # the same line, still growing: nothing more kept
    writer.write("z\nshort\n")
    messages = [r["message"] for r in records]
    assert messages[0] == "x" * 100 + logs.cut_marker(201)
    assert messages[1] == "short"
    assert len(writer._buf) == 0


def test_growing_memory_with_no_limit_is_warned_once_per_doubling(records: list[Any]) -> None:
    rss = [100 << 20]
    now = [0.0]
    watch = GrowthWatch(lambda: rss[0], clock=lambda: now[0])

    def step(mib: int) -> None:
        now[0] += 2
        rss[0] = mib << 20
        watch.sample(0)
    for mib in (100, 150, 190, 210, 300, 390, 430):
        step(mib)
    warnings = [r["message"] for r in records if "nothing recycles it" in r["message"]]
    assert len(warnings) == 2 and "to 210 MiB" in warnings[0] and "to 430 MiB" in warnings[1]


def test_a_sender_is_placed_by_its_group_or_its_parents() -> None:
    workers = {100: 0, 200: 1}
    assert owner_of(workers, 200) == 200
    same_group = (procs.ProcStat(300, "sh", "S", 1, 100),)  # orphaned, still in worker 0's group
    assert owner_of(workers, 300, same_group) == 100
    grandchild = (procs.ProcStat(400, "kill", "R", 350, 400), procs.ProcStat(350, "sh", "S", 200, 350))
    assert owner_of(workers, 400, grandchild) == 200
    outsider = (procs.ProcStat(500, "bash", "S", 1, 500),)
    assert owner_of(workers, 500, outsider) is None
    assert owner_of(workers, 600, ()) is None  # gone before it could be read
