"""Each failed message's own error in its failure and dead-letter lines, in every mode (issue #31 defect 3).

A job carries several messages; the worker reports each failed message's error
(DONE frame), and every consume service names a message by
``JobResult.error_of`` (the POP services: ``tests/unit/consumer/test_pop_consume_results.py``).
Eight messages on one queue, pulled at once, run as one concurrent job (one
call per message), three of them raise, and with ``--max-reconsume-times 0``
each goes straight to the DLQ: each line must name the failure of *that*
message, not the job's first.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from tests.integration.pop_run_kit import HANDLER
from tests.integration.signals_kit import Runs, produce, start_broker, topic_messages, wait_until

FAILING = (1, 3, 5)


def test_each_dead_letter_line_names_its_own_error(tmp_path: Path, runs: Runs) -> None:
    mode = "pull"
    eb = start_broker(tmp_path, auto_create_queue_nums=1)
    try:
        group, topic = f"GErr{mode}", f"Err{mode}"
        produce(eb, topic, 8)
        p = runs.start("e", HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic,
                       args=["--consume-mode", mode, "--workers", "1", "--max-reconsume-times", "0"],
                       env={"PROBE_RECORD": str(tmp_path / "records.txt"),
                            "PROBE_FAIL_IDX": ",".join(map(str, FAILING)), "PROBE_FAIL_TIMES": "100"})
        wait_until(lambda: len(topic_messages(eb, f"%DLQ%{group}")) >= len(FAILING), 60, "the dead letters",
                   interval=0.3)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        lines = [line for line in p.log().splitlines() if "dead-lettered message" in line]
        assert len(lines) == len(FAILING), lines
        named = {}
        for line in lines:
            offset = int(re.search(r" offset (\d+), attempts", line).group(1))  # type: ignore[union-attr]
            named[offset] = line
            assert f"failing idx {offset} on purpose" in line, line
        assert sorted(named) == list(FAILING)
    finally:
        eb.stop_in_thread()
