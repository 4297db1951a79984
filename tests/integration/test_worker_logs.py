"""Positions in failure lines are where the message actually is (``rmqrun/worker/logs.py``; issue #31 defect 6).

A message that fails, is sent back and fails again is consumed the second time
from a retry topic (``%RETRY%<group>`` when pulling, ``%RETRY%<group>_<topic>``
with POP), with that queue's offset, while the handler sees the original topic.
The worker's failure line must name the retry topic with that offset and the
original topic as its origin (``%RETRY%G broker-a:0@0 (from T)``), never the
original topic with the retry queue's offset, which names another message.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.integration.pop_run_kit import HANDLER, set_pop_mode
from tests.integration.signals_kit import Runs, produce, read_deliveries, start_broker, wait_until


@pytest.mark.parametrize("mode", ["pull", "pop"])
def test_a_redelivery_s_failure_line_names_the_retry_queue_it_came_from(tmp_path: Path, runs: Runs,
                                                                        mode: str) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=1)
    try:
        group, topic = f"GPos{mode}", f"Pos{mode}"
        produce(eb, topic, 4)
        if mode == "pop":
            set_pop_mode(eb, group, topic)
        record = tmp_path / "records.txt"
        p = runs.start("w", HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic,
                       args=["--consume-mode", mode, "--workers", "1"],
                       env={"PROBE_RECORD": str(record), "PROBE_FAIL_IDX": "2", "PROBE_FAIL_TIMES": "2"})
        wait_until(lambda: any(d.idx == 2 and d.event == "ok" for d in read_deliveries(record)), 90,
                   "message 2 handled on its third delivery", interval=0.3)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        fails = [d for d in read_deliveries(record) if d.event == "fail"]
        assert [d.reconsume for d in fails] == [0, 1]
        # the first failure's line carries the traceback below it, the second one the error inline
        lines = [ln for ln in p.log().splitlines() if "| worker " in ln and "raised RuntimeError" in ln]
        assert len(lines) == 2, lines
        first, again = lines
        assert f" | {topic} broker-a:0@{fails[0].offset} | " in first, first
        retry = f"%RETRY%{group}" if mode == "pull" else f"%RETRY%{group}_{topic}"
        want = f" | {retry} broker-a:{fails[1].queue_id}@{fails[1].offset} (from {topic}) | "
        assert want in again, again
        assert not re.search(rf" \| {topic} broker-a:\d+@{fails[1].offset} \| ", again)
    finally:
        eb.stop_in_thread()
