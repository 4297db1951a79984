"""Retention in a running embedded broker, seen by real clients over TCP.

The broker runs with short settings (4 KiB commit-log files, 8 entries per consume
queue file, files expire after a few seconds, deletion allowed at every hour, a
check every 200 ms) so its own retention service deletes files while the test
watches. A lagging ``rmqrun run`` consumer and a ``PullConsumer`` then have to
continue at the new minimum, as the Java client does on OFFSET_ILLEGAL.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.pull import PullStatus
from rmqrun.pull.consumer import PullConsumer
from tests.integration.signals_kit import (Runs, committed, oks, per_queue, produce, queue_max_offsets, start_broker,
                                           wait_until)

pytestmark = pytest.mark.timeout(180)

PROBE = "tests.integration.handlers.probe_handler"
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
SHORT = dict(segment_size=4096, max_message_size=1024, consume_queue_entries_per_file=8,
             file_reserved_hours=2 / 3600, delete_when=EVERY_HOUR, clean_resource_interval_ms=200)


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def queue_mins(eb: EmbeddedBroker, topic: str) -> dict[int, int]:
    store = eb.broker.store
    return {qid: store.min_offset(t, qid) for t, qid in store.queues() if t == topic}


def settled(eb: EmbeddedBroker) -> bool:
    """Retention is done: only the commit-log file being written is left, and the queues followed."""
    store = eb.broker.store
    return (len(files(eb.config.data_dir / "commitlog")) == 1
            and store.retention.followed_min == store.commit_log_min_offset)


def test_files_go_and_a_lagging_run_consumer_continues_at_the_new_minimum(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, **SHORT)
    try:
        produce(eb, "RET", 240)
        maxes = queue_max_offsets(eb, "RET")
        assert sum(maxes.values()) == 240
        # Group GRET consumed 1 message per queue long ago (the committed offsets lag).
        with PullConsumer(eb.namesrv_address, "GRET") as pc:
            for mq in pc.fetch_subscribe_message_queues("RET"):
                pc.update_consume_offset(mq, 1)
            pc.persist_consume_offsets()
        assert committed(eb, "GRET", "RET") == {q: 1 for q in maxes}
        # The queues follow right after the files go: wait for both.
        wait_until(lambda: settled(eb), 30, "retention deleting every old commit-log file, the queues following")
        log_min = eb.broker.store.commit_log_min_offset
        assert files(eb.config.data_dir / "commitlog") == [f"{log_min:020d}"] and log_min >= 5 * 4096
        mins = queue_mins(eb, "RET")
        # Every queue lost its head; the file kept holds the newest messages (at least one).
        assert all(1 < mins[q] <= maxes[q] for q in maxes) and any(mins[q] < maxes[q] for q in maxes), (mins, maxes)
        # Consume-queue files wholly below the log's minimum are gone too.
        for q in maxes:
            kept = files(eb.config.data_dir / "consumequeue" / "RET" / str(q))
            assert kept and 0 < int(kept[0]) // 20 <= mins[q], (q, kept, mins)
    finally:
        eb.stop_in_thread()

    # Restarted with the default retention (72 h): the minimum stays put from here on, so
    # what the clients do with it can be checked exactly. It survives the restart too.
    eb = start_broker(tmp_path, segment_size=4096, max_message_size=1024, consume_queue_entries_per_file=8)
    try:
        # (A real disk above 85% used would rightly delete more; the reading is pinned low.)
        eb.broker.store.set_disk_usage(lambda _p: 0.10)
        assert eb.broker.store.commit_log_min_offset == log_min
        assert queue_mins(eb, "RET") == mins
        # A PullConsumer at offset 0 is told OFFSET_ILLEGAL with the new minimum, and is
        # served from there; nothing comes from a deleted file.
        with PullConsumer(eb.namesrv_address, "GPULL") as pc:
            for mq in pc.fetch_subscribe_message_queues("RET"):
                assert pc.min_offset(mq) == mins[mq.queue_id]
                res = pc.pull(mq, "*", 0)
                assert res.status is PullStatus.OFFSET_ILLEGAL
                assert (res.next_begin_offset, res.min_offset) == (mins[mq.queue_id], mins[mq.queue_id])
                res = pc.pull(mq, "*", res.next_begin_offset, 4)
                if mins[mq.queue_id] == maxes[mq.queue_id]:  # every message of this queue was deleted
                    assert res.status is PullStatus.NO_NEW_MSG and not res.messages
                    continue
                assert res.status is PullStatus.FOUND
                assert [m.queue_offset for m in res.messages] == list(
                    range(mins[mq.queue_id], mins[mq.queue_id] + len(res.messages)))

        # The lagging group's `rmqrun run` continues at the new minimum of every queue.
        record = tmp_path / "records.txt"
        run = runs.start("run", f"{PROBE}:record", namesrv=eb.namesrv_address, group="GRET", topic="RET",
                         args=["--workers", "1"], env={"PROBE_RECORD": str(record)})
        wait_until(lambda: committed(eb, "GRET", "RET") == maxes, 60, "the lagging group caught up", interval=0.3)
        got = per_queue(oks(record))
        for q in maxes:
            assert sorted(set(got[q])) == list(range(mins[q], maxes[q])), (q, mins[q], maxes[q], got[q][:5])
        run.signal(15)
        assert run.wait(30) == 0
    finally:
        eb.stop_in_thread()


def test_disk_above_the_forcible_ratio_deletes_fresh_files_at_once(tmp_path: Path) -> None:
    # Default retention (72 h, at 04:00): nothing would go for days ...
    eb = start_broker(tmp_path, segment_size=4096, max_message_size=1024, clean_resource_interval_ms=200)
    try:
        eb.broker.store.set_disk_usage(lambda _p: 0.10)
        produce(eb, "DISK", 120)
        cl = eb.config.data_dir / "commitlog"
        before = files(cl)
        assert len(before) > 3
        time.sleep(0.6)  # three checks at a normal disk reading: nothing may go
        assert files(cl) == before
        # Above diskMaxUsedSpaceRatio (75%) only expired files go: none is.
        eb.broker.store.set_disk_usage(lambda _p: 0.80)
        time.sleep(0.6)
        assert files(cl) == before
        # ... until the disk reads above diskSpaceCleanForciblyRatio (85%) (under the 90% at
        # which sends would be refused: test_broker_disk_full.py).
        eb.broker.store.set_disk_usage(lambda _p: 0.88)
        wait_until(lambda: files(cl) == before[-1:] and settled(eb), 20,
                   "forced clean of every file but the current one, the queues following")
        assert all(m > 0 for m in queue_mins(eb, "DISK").values())
        # Writing and reading go on at the head of the log.
        produce(eb, "DISK", 4)
        with PullConsumer(eb.namesrv_address, "GDISK") as pc:
            for mq in pc.fetch_subscribe_message_queues("DISK"):
                res = pc.pull(mq, "*", pc.min_offset(mq))
                assert res.status is PullStatus.FOUND
    finally:
        eb.stop_in_thread()


def test_the_delay_schedule_follows_the_new_minimum(tmp_path: Path) -> None:
    """Delayed messages whose schedule entries were deleted are skipped; later ones still arrive."""
    import asyncio

    from rmqrun.broker.messages import SCHEDULE_TOPIC
    from rmqrun.client.producer import Producer

    eb = start_broker(tmp_path, segment_size=4096, max_message_size=1024, clean_resource_interval_ms=200,
                      message_delay_levels="4s")
    store = eb.broker.store
    try:
        store.set_disk_usage(lambda _p: 0.10)

        async def send(topic: str, n: int, delay_level: int = 0) -> None:
            async with Producer(eb.namesrv_address, "PG_delay") as producer:
                for i in range(n):
                    await producer.send(topic, f"{topic}-{i}".encode(), delay_level=delay_level, queue=0)

        asyncio.run(send("DLY", 3, delay_level=1))  # due in 4 s
        assert store.max_offset(SCHEDULE_TOPIC, 0) == 3
        produce(eb, "FILLER", 120)  # pushes the schedule records out of the current file
        store.set_disk_usage(lambda _p: 0.88)  # forced clean, sends still accepted
        wait_until(lambda: settled(eb), 20, "forced clean")
        store.set_disk_usage(lambda _p: 0.10)
        assert store.min_offset(SCHEDULE_TOPIC, 0) == 3  # all three schedule entries are gone
        # Once the head message was due, the level moved to the minimum: nothing was delivered
        # from a deleted file, and the next delayed message is delivered as usual.
        assert eb.broker.schedule is not None
        wait_until(lambda: eb.broker.schedule.offsets.get(1) == 3, 20, "the level to move to the new minimum")
        assert store.max_offset("DLY", 0) == 0
        asyncio.run(send("DLY", 1, delay_level=1))
        wait_until(lambda: store.max_offset("DLY", 0) == 1, 20, "the later delayed message delivered")
    finally:
        eb.stop_in_thread()
