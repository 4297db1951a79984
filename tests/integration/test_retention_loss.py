"""Messages retention deletes before a group consumed them: a WARNING at once, a mark in ``rmqrun status``
(issue #33, item 10).

Above ``disk_space_clean_forcibly_ratio`` the embedded broker deletes files
whether they expired or not. That was an INFO line naming files; the group
heard of its loss only when it next pulled, and ``rmqrun status`` showed its
offsets below the queues' min offsets without a word. The disk reading is the
store's seam (as in ``test_broker_retention.py``); the group's offsets are
committed over TCP, and ``rmqrun status`` runs as a real CLI process.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from loguru import logger

from rmqrun.model import MessageQueue
from rmqrun.pull import AsyncPullConsumer
from tests.integration.cli_kit import run_cli
from tests.integration.signals_kit import produce, queue_max_offsets, start_broker, wait_until

pytestmark = pytest.mark.timeout(180)


def _commit(namesrv: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    async def main() -> None:
        async with AsyncPullConsumer(namesrv, group) as c:
            for qid, offset in offsets.items():
                await c.update_consume_offset(MessageQueue(topic, "broker-a", qid), offset)
    asyncio.run(main())


def test_a_forced_deletion_names_the_group_that_loses_messages_and_status_marks_its_queues(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, segment_size=4096, max_message_size=1024, clean_resource_interval_ms=200)
    store = eb.broker.store
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO", format="{level} {message}")
    try:
        store.set_disk_usage(lambda _p: 0.10)
        produce(eb, "LOSS", 120)
        maxes = queue_max_offsets(eb, "LOSS")
        _commit(eb.namesrv_address, "GLOSS", "LOSS", {q: 2 for q in maxes})        # far behind
        _commit(eb.namesrv_address, "GDONE", "LOSS", dict(maxes))                  # consumed everything
        wait_until(lambda: all(store.consumer_offsets.query("GLOSS", "LOSS", q) == 2 for q in maxes), 10,
                   "the offsets stored")
        store.set_disk_usage(lambda _p: 0.88)  # above 85%: unexpired files go
        wait_until(lambda: store.retention.followed_min == store.commit_log_min_offset > 0
                   and any("had not consumed" in ln for ln in lines), 30, "the forced deletion and its line")
        mins = {q: store.min_offset("LOSS", q) for q in maxes}
        lost = {q: mins[q] - 2 for q in maxes if mins[q] > 2}
        assert lost, mins
        loss_lines = [ln for ln in lines if "had not consumed" in ln]
        assert len(loss_lines) == 1 and loss_lines[0].startswith("WARNING "), loss_lines  # GDONE lost nothing
        line = loss_lines[0]
        assert f"retention deleted {sum(lost.values())} message(s) group GLOSS had not consumed (unexpired" in line
        for q, n in lost.items():
            assert f"LOSS queue {q}: {n} (offsets 2..{mins[q] - 1})" in line, line
        assert any(ln.startswith("WARNING retention deleted commit log file(s)") for ln in lines)

        status = run_cli(["status", "--namesrv", eb.namesrv_address, "-g", "GLOSS"])
        assert status.returncode == 0, status.stderr
        assert (f"! {len(lost)} queue(s) with the consumer offset below the queue's min offset: retention deleted "
                f"{sum(lost.values())} message(s)") in status.stdout, status.stdout
        for q in lost:
            assert re.search(rf"LOSS broker-a queue {q}: consumer offset 2 < min offset {mins[q]} ", status.stdout)
        done = run_cli(["status", "--namesrv", eb.namesrv_address, "-g", "GDONE"])
        assert done.returncode == 0 and "!" not in done.stdout, done.stdout
        rows = json.loads(run_cli(["status", "--namesrv", eb.namesrv_address, "-g", "GLOSS", "--json"]).stdout)
        got = {r["queue"]: r["deleted_unconsumed"] for r in rows["queues"] if r["topic"] == "LOSS"}
        assert {q: n for q, n in got.items() if n} == lost
    finally:
        logger.remove(sink)
        eb.stop_in_thread()
