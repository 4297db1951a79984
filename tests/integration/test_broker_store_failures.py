"""What the broker answers when durability is slow or fails, and pull refusals.

The store's commit-log fsync is replaced (``MessageStore.set_commit_log_fsync``) by a
gate the test holds closed or makes fail, so "a SYNC-flush send is answered only
after its fsync" is checked by order of events, not by timing: while the fsync is
held, the message is already stored and readable and the broker answers other
requests, yet the send gets no answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.schedule import SCHEDULE_TOPIC
from rmqrun.broker.store import MessageStore
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client, messages, pull_ext
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 75))


class FsyncGate:
    """An fsync that blocks until the test allows it (one call per permit, or all once
    opened), then syncs or raises ``error``; it counts the calls that entered it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.calls = 0
        self.permits = 0
        self.opened = False
        self.error: OSError | None = None

    def __call__(self, fd: int) -> None:
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: self.opened or self.permits > 0, 60):
                raise OSError(110, "test gate never released")
            if not self.opened:
                self.permits -= 1
        if self.error is not None:
            raise self.error
        os.fdatasync(fd)

    def allow(self, n: int = 1) -> None:
        with self.cond:
            self.permits += n
            self.cond.notify_all()

    def open(self) -> None:
        with self.cond:
            self.opened = True
            self.cond.notify_all()

    async def wait_calls(self, n: int) -> None:
        def wait() -> bool:
            with self.cond:
                return self.cond.wait_for(lambda: self.calls >= n, 30)

        assert await asyncio.to_thread(wait), f"the flusher never made fsync call #{n}"


@contextlib.contextmanager
def gated(store: MessageStore) -> Iterator[FsyncGate]:
    """Install a gate as the commit log's fsync; on the way out (also on failure) open it."""
    gate = FsyncGate()
    store.set_commit_log_fsync(gate)
    try:
        yield gate
    finally:
        gate.open()
        store.set_commit_log_fsync(None)


def test_a_sync_flush_send_is_answered_only_after_its_fsync(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync") as eb:
            store = eb.broker.store
            producer = await Client.connect(eb.namesrv_address, eb.broker_address)
            other = await Client.connect(eb.namesrv_address, eb.broker_address)
            first = await producer.send("Dur", b"before", queue_id=0)
            assert first.code == ResponseCode.SUCCESS
            with gated(store) as gate:
                send = asyncio.create_task(producer.send("Dur", b"held", queue_id=0))
                await gate.wait_calls(1)
                # Stored (in the page cache and its queue) and visible to a pull on another
                # connection, whose answer comes back ...
                await eventually_async(lambda: store.max_offset("Dur", 0) == 2, what="the second message to be stored")
                pulled = await other.pull("G", "Dur", 0, 1, subscription="*")
                assert [m.body for m in messages(pulled)] == [b"held"]
                assert store.flushed_offset < store.commit_log_max_offset
                # ... while the send, whose fsync has not returned, still has no answer.
                assert not send.done(), "a SYNC-flush send was answered before its fsync returned"
                gate.open()
                resp = await asyncio.wait_for(send, 20)
                assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueOffset"] == "1"
                assert store.flushed_offset == store.commit_log_max_offset
            await producer.close()
            await other.close()

    run(main())


def test_a_send_written_during_an_fsync_waits_for_the_next_one(tmp_path: Path) -> None:
    """Group commit must not wake a waiter whose bytes came after the fsync's snapshot."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync") as eb:
            store = eb.broker.store
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Grp", b"warm", queue_id=0)).code == ResponseCode.SUCCESS
            with gated(store) as gate:
                send_a = asyncio.create_task(c.send("Grp", b"a", queue_id=0))
                await gate.wait_calls(1)  # round 1 snapshotted the log's end with A in it
                send_b = asyncio.create_task(c.send("Grp", b"b", queue_id=0))
                await eventually_async(lambda: store.max_offset("Grp", 0) == 3, what="B to be stored")
                gate.allow(1)
                assert (await asyncio.wait_for(send_a, 20)).code == ResponseCode.SUCCESS
                await gate.wait_calls(2)  # round 1 has woken its waiters; round 2 (for B) is held
                for _ in range(3):  # answers on this connection come back in order behind any for B
                    await c.call(RequestCode.GET_MAX_OFFSET, {"topic": "Grp", "queueId": "0"})
                assert not send_b.done(), "B was answered by the fsync that started before it was written"
                gate.open()
                assert (await asyncio.wait_for(send_b, 20)).code == ResponseCode.SUCCESS
            await c.close()

    run(main())


def test_flush_timeout_answers_flush_disk_timeout_with_the_stored_position(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync", sync_flush_timeout_ms=300) as eb:
            store = eb.broker.store
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Slow", b"warm", queue_id=1)).code == ResponseCode.SUCCESS
            with gated(store) as gate:
                resp = await c.send("Slow", b"late", queue_id=1)
                assert gate.calls >= 1
                # RocketMQ: stored but not known durable -> FLUSH_DISK_TIMEOUT with the usual fields.
                assert resp.code == ResponseCode.FLUSH_DISK_TIMEOUT, (resp.code, resp.remark)
                assert resp.ext_fields["queueId"] == "1" and resp.ext_fields["queueOffset"] == "1"
                assert resp.ext_fields["msgId"]
                gate.open()
                await eventually_async(lambda: store.flushed_offset == store.commit_log_max_offset,
                                       what="the late fsync")
            pulled = await c.pull("G", "Slow", 1, 1, subscription="*")
            assert [m.body for m in messages(pulled)] == [b"late"]
            await c.close()

    run(main())


def test_fsync_failure_answers_service_not_available_and_refuses_later_writes(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", flush_mode="sync") as eb:
            store = eb.broker.store
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Fail", b"ok", queue_id=0)).code == ResponseCode.SUCCESS
            gate = FsyncGate()
            gate.error = OSError(5, "Input/output error")
            gate.open()
            store.set_commit_log_fsync(gate)
            resp = await c.send("Fail", b"unflushed", queue_id=0)
            assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE, (resp.code, resp.remark)
            assert "refuses writes" in resp.remark and "Input/output error" in resp.remark
            # Fenced: after a failed fsync nobody knows what reached the disk.
            again = await c.send("Fail", b"refused", queue_id=0)
            assert again.code == ResponseCode.SERVICE_NOT_AVAILABLE and "fenced" in again.remark
            assert store.max_offset("Fail", 0) == 2  # the refused one was never written
            store.set_commit_log_fsync(None)
            await c.close()

    run(main())


def test_a_record_over_max_message_size_is_message_illegal_and_not_stored(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", max_message_size=2048, segment_size=1 << 20) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Big", b"small", queue_id=0)).code == ResponseCode.SUCCESS
            resp = await c.send("Big", b"x" * 2048, queue_id=0)  # body fits the limit, the record does not
            assert resp.code == ResponseCode.MESSAGE_ILLEGAL, (resp.code, resp.remark)
            assert "msg body length limit 2048B" in resp.remark
            assert eb.broker.store.max_offset("Big", 0) == 1
            assert (await c.send("Big", b"after", queue_id=0)).code == ResponseCode.SUCCESS
            await c.close()

    run(main())


def test_pull_refusals_name_the_problem(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", auto_create_subscription_group=False) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Open", b"m", queue_id=0)).code == ResponseCode.SUCCESS
            created = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "WriteOnly", "readQueueNums": "1", "writeQueueNums": "1", "perm": "2",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", "defaultTopic": "TBW102"})
            assert created.code == ResponseCode.SUCCESS
            for group, enabled in (("Reader", True), ("Disabled", False)):
                body = ('{"groupName":"%s","consumeEnable":%s}' % (group, "true" if enabled else "false")).encode()
                made = await c.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
                assert made.code == ResponseCode.SUCCESS, made.remark

            missing = await c.pull("Nobody", "Open", 0, 0, subscription="*")
            assert missing.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            assert missing.remark.startswith("subscription group [Nobody] does not exist")
            disabled = await c.pull("Disabled", "Open", 0, 0, subscription="*")
            assert (disabled.code, disabled.remark) == (ResponseCode.NO_PERMISSION,
                                                        "subscription group no permission, Disabled")
            forbidden = await c.pull("Reader", "WriteOnly", 0, 0, subscription="*")
            assert (forbidden.code, forbidden.remark) == (ResponseCode.NO_PERMISSION,
                                                          "the topic[WriteOnly] pulling message is forbidden")
            bad_sub = await c.call(RequestCode.PULL_MESSAGE,
                                   dict(pull_ext("Reader", "Open", 0, 0, subscription="*"), expressionType="XPATH"))
            assert (bad_sub.code, bad_sub.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                                      "parse the consumer's subscription failed")
            sql = await c.call(RequestCode.PULL_MESSAGE,
                               dict(pull_ext("Reader", "Open", 0, 0, subscription="a > 1"), expressionType="SQL92"))
            assert (sql.code, sql.remark) == (ResponseCode.SYSTEM_ERROR,
                                              "The broker does not support consumer to filter message by SQL92")
            # Registered subscription: none registered for this group and topic.
            no_sub = await c.pull("Reader", "Open", 0, 0)
            assert no_sub.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            assert no_sub.remark.startswith("the consumer's group info not exist")
            ok = await c.pull("Reader", "Open", 0, 0, subscription="*")
            assert [m.body for m in messages(ok)] == [b"m"]
            await c.close()

    run(main())


def test_delay_queue_progress_is_restored_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "d"

    async def first_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 30s") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            for i in range(3):
                assert (await c.send("Later", b"d%d" % i, queue_id=0, props={"DELAY": "1"})).code == \
                    ResponseCode.SUCCESS
            store = eb.broker.store
            # Waits for the recorded progress: a message is stored in its real topic a flush
            # before the level's offset moves past it, so the target queue's end is no sign
            # that the progress a clean stop saves covers it.
            await eventually_async(lambda: eb.broker.schedule.offsets.get(1) == 3,
                                   what="level 1's progress past three deliveries")
            assert store.max_offset("Later", 0) == 3
            assert store.max_offset(SCHEDULE_TOPIC, 0) == 3
            await c.close()
        # The clean stop saved the level's progress.
        assert '"1":3' in (data / "config" / "delayOffset.json").read_text().replace(" ", "")

    async def second_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 30s") as eb:
            store = eb.broker.store
            assert eb.broker.schedule.offsets[1] == 3
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Later", b"d3", queue_id=0, props={"DELAY": "1"})).code == ResponseCode.SUCCESS
            # The level's queue is in order: had progress been lost, d0..d2 would be
            # delivered again before d3.
            await eventually_async(lambda: store.max_offset("Later", 0) >= 4, what="the new delivery")
            pulled = await c.pull("G", "Later", 0, 0, subscription="*")
            assert [m.body for m in messages(pulled)] == [b"d0", b"d1", b"d2", b"d3"]
            assert store.max_offset("Later", 0) == 4
            await c.close()

    run(first_life())
    run(second_life())


def test_a_stop_during_a_delayed_delivery_saves_the_progress_that_covers_it(tmp_path: Path) -> None:
    """The stop lands while a delivery is stored in its real topic but waits for its SYNC
    flush (the gate holds the fsync): the clean stop must still save the level's offset
    past it, so the next start delivers it no second time."""
    data = tmp_path / "d"

    async def first_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 30s", flush_mode="sync") as eb:
            store, schedule = eb.broker.store, eb.broker.schedule
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Later", b"d0", queue_id=0, props={"DELAY": "1"})).code == ResponseCode.SUCCESS
            await c.close()
            gate = FsyncGate()
            store.set_commit_log_fsync(gate)
            try:
                await gate.wait_calls(1)
                await eventually_async(lambda: store.max_offset("Later", 0) == 1, what="the delivery to be stored")
                assert schedule.offsets.get(1, 0) == 0, "the delivery is still waiting for its fsync"
                level_tasks = list(schedule._tasks)

                async def open_once_the_level_tasks_are_cancelled() -> None:
                    await eventually_async(lambda: all(t.done() for t in level_tasks),
                                           what="stop to cancel the level tasks")
                    gate.open()

                releaser = asyncio.create_task(open_once_the_level_tasks_are_cancelled())
                await eb.broker.stop()
                await releaser
            finally:
                gate.open()
        saved = data / "config" / "delayOffset.json"
        assert saved.exists() and '"1":1' in saved.read_text().replace(" ", ""), \
            "the clean stop did not save level 1's progress past the delivery it waited for"

    async def second_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels="1s 30s") as eb:
            assert eb.broker.schedule.offsets[1] == 1
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Later", b"d1", queue_id=0, props={"DELAY": "1"})).code == ResponseCode.SUCCESS
            await eventually_async(lambda: eb.broker.schedule.offsets.get(1) == 2, what="the new delivery's progress")
            pulled = await c.pull("G", "Later", 0, 0, subscription="*")
            assert [m.body for m in messages(pulled)] == [b"d0", b"d1"]
            await c.close()

    run(first_life())
    run(second_life())


def test_the_highest_delay_level_s_progress_is_restored_after_a_restart(tmp_path: Path) -> None:
    """Level 18 (the last of Java's default 18, 2 h there; 1 s here so the test waits for nothing): its saved
    progress is read back at start like every other level's, so its delivered messages are not delivered again."""
    data = tmp_path / "d"
    levels = " ".join(["1h"] * 17 + ["1s"])

    async def first_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels=levels) as eb:
            assert eb.broker.schedule.max_level == 18
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            for i in range(2):
                assert (await c.send("Latest", b"d%d" % i, queue_id=0, props={"DELAY": "18"})).code == \
                    ResponseCode.SUCCESS
            await eventually_async(lambda: eb.broker.schedule.offsets.get(18) == 2,
                                   what="level 18's progress past both")
            await c.close()
        assert '"18":2' in (data / "config" / "delayOffset.json").read_text().replace(" ", "")

    async def second_life() -> None:
        async with EmbeddedBroker(data, message_delay_levels=levels) as eb:
            store = eb.broker.store
            assert eb.broker.schedule.offsets.get(18) == 2
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            assert (await c.send("Latest", b"d2", queue_id=0, props={"DELAY": "18"})).code == ResponseCode.SUCCESS
            # level 18's queue is in order: had its progress been dropped, d0 and d1 would come again before d2
            await eventually_async(lambda: eb.broker.schedule.offsets.get(18) == 3, what="the new delivery's progress")
            pulled = await c.pull("G", "Latest", 0, 0, subscription="*")
            assert [m.body for m in messages(pulled)] == [b"d0", b"d1", b"d2"]
            assert store.max_offset("Latest", 0) == 3
            await c.close()

    run(first_life())
    run(second_life())
