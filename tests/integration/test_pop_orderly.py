"""Orderly POP's reconsume counts and dead letters (``rmqrun/consumer/pop_orderly.py``), with real runs.

The broker's orderCountInfo counts every pop of a batch a message was in; the
handler must see how often *it* failed. Two ``--orderly --consume-mode pop -w 1
--max-reconsume-times 2`` instances on three queues: message 100 fails twice,
103 (next in its queue) once, 50 every time. 103 runs at 0 then 1 (never
at the count of the pops it waited through behind 100), every other message
at 0, and only 50 goes to the DLQ, after three failures, with a line that says
it reached the maximum and the handler's own error.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path

import pytest

from tests.integration.pop_run_kit import deliveries_by_idx, set_pop_mode, start_pop
from tests.integration.signals_kit import Runs, produce, read_deliveries, start_broker, topic_messages, wait_until

needs_pop_broker = pytest.mark.skipif(importlib.util.find_spec("rmqrun.broker.processors.pop") is None,
                                      reason="the embedded broker does not serve POP_MESSAGE in this tree")

TOTAL = 150


@needs_pop_broker
def test_reconsume_times_count_the_message_s_own_failures_not_the_pops_it_waited_through(
        tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=3)
    try:
        produce(eb, "PopOrdCount", TOTAL)
        set_pop_mode(eb, "GPopOrdCount", "PopOrdCount")
        record = tmp_path / "records.txt"
        procs = [start_pop(runs, f"c{i}", eb, "GPopOrdCount", "PopOrdCount", record,
                           args=("--orderly", "--max-reconsume-times", "2"),
                           settings={"RMQRUN_POP_POLL_TIME_MS": "2000"},
                           env={"PROBE_FAIL_PLAN": "100:2,103:1,50:9"}) for i in range(2)]
        wait_until(lambda: len(deliveries_by_idx(record)) >= TOTAL - 1, 120, "every other message handled",
                   interval=0.3)
        wait_until(lambda: len(topic_messages(eb, "%DLQ%GPopOrdCount")) >= 1, 60, "message 50 dead-lettered",
                   interval=0.3)
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(60) == 0, p.log()[-3000:]
        log = read_deliveries(record)
        by_idx: dict[int, list[tuple[str, int]]] = {}
        for d in log:
            by_idx.setdefault(d.idx, []).append((d.event, d.reconsume))
        where = {d.idx: (d.queue_id, d.offset) for d in log}
        assert where[100][0] == where[103][0] and where[103][1] == where[100][1] + 1, \
            f"the scenario needs 103 right behind 100 in one queue: {where[100]}, {where[103]}"
        assert by_idx[100] == [("fail", 0), ("fail", 1), ("ok", 2)]
        assert by_idx[103] == [("fail", 0), ("ok", 1)], "103 counts its own failure only"
        assert by_idx[50] == [("fail", 0), ("fail", 1), ("fail", 2)]
        others = {i: ds for i, ds in by_idx.items() if i not in (50, 100, 103)}
        assert sorted(others) == sorted(set(range(TOTAL)) - {50, 100, 103})
        assert all(ds == [("ok", 0)] for ds in others.values()), \
            {i: ds for i, ds in others.items() if ds != [("ok", 0)]}
        dlq = topic_messages(eb, "%DLQ%GPopOrdCount")
        assert [m.properties.get("idx") for m in dlq] == ["50"], "only the message that failed every time"
        lines = [line for p in procs for line in p.log().splitlines() if "dead-lettered message" in line]
        assert len(lines) == 1, lines
        assert "(max_reconsume)" in lines[0] and "attempts 3" in lines[0], lines[0]
        assert "failing idx 50 on purpose" in lines[0], lines[0]
        assert "asked for the DLQ" not in lines[0]
    finally:
        eb.stop_in_thread()
