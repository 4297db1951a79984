"""Log labels per call with the threads and asyncio worker classes (issue #36), with real worker processes.

Several calls of two batches run at once in one worker; each line a call logs, before and after its wait,
names its own message (queue and offset), not the batch's first nor another call's.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.handlers import classes_handler
from tests.integration.test_pool_basic import Harness, run
from tests.integration.test_worker_classes_pool import H, HA, bodies, record  # noqa: F401 (record: the fixture)

_SAYS = re.compile(r"call says (before|after) queue=(\d+) offset=(\d+)")


@pytest.mark.parametrize("worker_class,handler", [("threads", H), ("asyncio", HA)])
def test_each_line_a_call_logs_names_its_own_message_across_two_batches_at_once(
        record: Path, worker_class: str, handler: str, capfd: pytest.CaptureFixture[str]) -> None:
    async def main() -> None:
        async with Harness(handler, worker_class=worker_class, concurrency=8) as h:
            a = h.submit(0, bodies(*["log"] * 4, queue_id=1))
            b = h.submit(0, bodies(*["log"] * 4, queue_id=2))
            assert (await h.result(a)).statuses == bytes(4) and (await h.result(b)).statuses == bytes(4)
            recs = classes_handler.records(record)
            assert classes_handler.overlapping(recs) >= 2  # the calls' lines were written while others ran
    run(main())
    lines = [x for x in capfd.readouterr().err.splitlines() if "call says" in x]
    seen: Counter[tuple[int, int]] = Counter()
    for line in lines:
        found = _SAYS.search(line)
        assert found, line
        q, o = int(found.group(2)), int(found.group(3))
        assert f" | T broker-a:{q}@{o} | " in line, line
        seen[(q, o)] += 1
    assert seen == Counter({(q, o): 2 for q in (1, 2) for o in range(4)}), seen
