"""A running embedded broker whose disk fills up: sends refused as a Java broker refuses them.

The disk-use reading is injected (``store.set_disk_usage``) and the broker's own retention
check, every 200 ms here, sees it, as a real broker's CleanCommitLogService sees its disk.
Clients talk to it over TCP: a producer is answered SERVICE_NOT_AVAILABLE with the disk use
in the remark and nothing is stored; a consumer's send-back is answered SYSTEM_ERROR
"SERVICE_NOT_AVAILABLE" (what 4.9.8 answers a failed send-back put); pulls go on; once use
is back at or under 85%, sends are stored again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.errors import SendFailedError
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.pull import PullStatus
from rmqrun.pull.consumer import PullConsumer
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError
from tests.integration.signals_kit import (Runs, committed, oks, produce, queue_max_offsets, read_deliveries,
                                           start_broker, wait_until)

pytestmark = pytest.mark.timeout(180)

PROBE = "tests.integration.handlers.probe_handler"


def disk_reads(eb: EmbeddedBroker, used: float) -> None:
    eb.broker.store.set_disk_usage(lambda _p: used)


async def send_once(eb: EmbeddedBroker, topic: str, body: bytes) -> BrokerError:
    """One send attempt (no retry on another broker: there is none); the broker's refusal."""
    async with Producer(eb.namesrv_address, "PG_diskfull", retry_times=0) as producer:
        with pytest.raises(SendFailedError) as info:
            await producer.send(topic, body)
    cause = info.value.__cause__
    assert isinstance(cause, BrokerError), repr(info.value)
    return cause


async def send_batch_once(eb: EmbeddedBroker, topic: str) -> BrokerError:
    async with Producer(eb.namesrv_address, "PG_diskfull", retry_times=0) as producer:
        with pytest.raises(SendFailedError) as info:
            await producer.send_batch(topic, [b"b1", b"b2"])
    cause = info.value.__cause__
    assert isinstance(cause, BrokerError), repr(info.value)
    return cause


async def send_back(eb: EmbeddedBroker, commit_log_offset: int, msg_id: str) -> BrokerError:
    inst = ClientInstance(eb.namesrv_address, instance_name="probe-sendback")
    try:
        with pytest.raises(BrokerError) as info:
            await inst.broker.consumer_send_msg_back(
                eb.broker_address, group="GDF", commit_log_offset=commit_log_offset, delay_level=0,
                origin_msg_id=msg_id, origin_topic="DF", max_reconsume_times=16)
        return info.value
    finally:
        await inst.close()


def test_a_full_disk_refuses_sends_with_service_not_available_until_space_is_back(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, clean_resource_interval_ms=200)
    store = eb.broker.store
    try:
        disk_reads(eb, 0.10)
        produce(eb, "DF", 8)
        before = queue_max_offsets(eb, "DF")
        assert sum(before.values()) == 8

        disk_reads(eb, 0.93)  # above diskSpaceWarningLevelRatio (90%)
        wait_until(lambda: store.disk_full, 10, "the broker's check marking the disk full")
        log_end = store.commit_log_max_offset
        refused = asyncio.run(send_once(eb, "DF", b"refused"))
        batch_refused = asyncio.run(send_batch_once(eb, "DF"))
        assert (batch_refused.code, batch_refused.remark) == (refused.code, refused.remark)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93]" in refused.remark
        assert str(store.data_dir) in refused.remark and "85%" in refused.remark
        assert queue_max_offsets(eb, "DF") == before  # nothing stored

        # Reads go on: a consumer can drain what is there, and is told where the end is.
        with PullConsumer(eb.namesrv_address, "GDF") as pc:
            queues = pc.fetch_subscribe_message_queues("DF")
            first = None
            for mq in queues:
                res = pc.pull(mq, "*", 0, 32)
                assert [m.queue_offset for m in res.messages] == list(range(before[mq.queue_id]))
                if res.messages and first is None:
                    first = res.messages[0]
            assert first is not None
        # A consumer's send-back cannot be stored either: Java answers SYSTEM_ERROR named after the
        # put status, and the client then re-publishes or retries locally.
        refused_back = asyncio.run(send_back(eb, first.commit_log_offset, first.msg_id))
        assert (refused_back.code, refused_back.remark) == (ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
        assert store.commit_log_max_offset == log_end  # neither refusal wrote a byte

        # Under 90% but above 85%: still refused (the mark is lifted only at or under 85%).
        disk_reads(eb, 0.88)
        wait_until(lambda: store.retention.last_used == 0.88, 10, "a check reading 88%")
        assert store.disk_full
        assert asyncio.run(send_once(eb, "DF", b"still refused")).code == ResponseCode.SERVICE_NOT_AVAILABLE

        disk_reads(eb, 0.80)
        wait_until(lambda: not store.disk_full, 10, "the broker's check clearing the mark")
        produce(eb, "DF", 4)
        after = queue_max_offsets(eb, "DF")
        assert sum(after.values()) == 12
        with PullConsumer(eb.namesrv_address, "GDF2") as pc:
            bodies = []
            for mq in pc.fetch_subscribe_message_queues("DF"):
                res = pc.pull(mq, "*", 0, 32)
                assert res.status is PullStatus.FOUND
                bodies += [m.body for m in res.messages]
        assert sorted(bodies) == sorted(f"msg-{i}".encode() for i in list(range(8)) + list(range(4)))
    finally:
        eb.stop_in_thread()


def test_delayed_messages_wait_for_space_and_are_delivered_once_it_is_back(tmp_path: Path) -> None:
    """A delayed message due while the disk is full is not lost: its level waits (logging that
    once) and delivers it once writes are accepted again."""
    from loguru import logger

    from rmqrun.broker.messages import SCHEDULE_TOPIC

    eb = start_broker(tmp_path, clean_resource_interval_ms=200, message_delay_levels="1s")
    store = eb.broker.store
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")
    try:
        disk_reads(eb, 0.10)

        async def send_delayed() -> None:
            async with Producer(eb.namesrv_address, "PG_delay_full") as producer:
                await producer.send("DFD", b"later", delay_level=1, queue=0)

        produce(eb, "DFD", 1)  # the topic exists (a delayed send stores nothing in it yet)
        q0 = store.max_offset("DFD", 0)
        asyncio.run(send_delayed())
        assert store.max_offset(SCHEDULE_TOPIC, 0) == 1
        disk_reads(eb, 0.95)
        wait_until(lambda: store.disk_full, 10, "the disk marked full")
        # Due after 1 s; it cannot be stored while the disk is full.
        wait_until(lambda: any("delayed messages of level 1 wait" in ln for ln in lines), 15,
                   "the schedule level to hit the full disk")
        time.sleep(1.0)
        assert store.max_offset("DFD", 0) == q0  # not delivered, not lost: still in the schedule queue
        assert eb.broker.schedule is not None and eb.broker.schedule.delivered == 0
        assert sum("delayed messages of level 1 wait" in ln for ln in lines) == 1  # once, not every retry
        disk_reads(eb, 0.80)
        wait_until(lambda: not store.disk_full, 10, "the mark lifted")
        wait_until(lambda: eb.broker.schedule is not None and eb.broker.schedule.delivered == 1, 30,
                   "the delayed message delivered once space is back")
        assert store.max_offset("DFD", 0) == q0 + 1
    finally:
        logger.remove(sink)
        eb.stop_in_thread()


def test_a_running_consumer_loses_nothing_through_a_full_disk(tmp_path: Path, runs: Runs) -> None:
    """`rmqrun run` while the broker refuses writes: its failed messages can be neither sent back
    nor re-published, so they are retried locally and never committed past; once space is back
    they go through the retry topic and everything is handled and committed."""
    eb = start_broker(tmp_path, clean_resource_interval_ms=200)
    store = eb.broker.store
    try:
        disk_reads(eb, 0.10)
        produce(eb, "DFR", 20)
        maxes = queue_max_offsets(eb, "DFR")
        disk_reads(eb, 0.95)
        wait_until(lambda: store.disk_full, 10, "the disk marked full")
        record = tmp_path / "records.txt"
        run = runs.start("run", f"{PROBE}:record", namesrv=eb.namesrv_address, group="GDFR", topic="DFR",
                         args=["--workers", "1"], env={"PROBE_RECORD": str(record), "PROBE_FAIL_IDX": "3,7",
                                                   "PROBE_FAIL_TIMES": "3"})
        wait_until(lambda: {d.idx for d in oks(record)} == set(range(20)) - {3, 7}, 60, "the others handled")
        first = {d.idx: d for d in read_deliveries(record) if d.event == "fail"}
        assert set(first) == {3, 7}
        # Past the 5 s local retry: consumed again locally (one more reconsume time, as Java counts
        # it), failed again, still refused, and never committed past.
        wait_until(lambda: {d.idx for d in read_deliveries(record) if d.event == "fail" and d.reconsume == 1}
                   == {3, 7}, 30, "the local retry of 3 and 7")
        done = committed(eb, "GDFR", "DFR")
        for d in first.values():
            assert done[d.queue_id] <= d.offset, (d, done, run.log()[-3000:])
        assert {d.idx for d in oks(record)} == set(range(20)) - {3, 7}
        assert "SERVICE_NOT_AVAILABLE" in run.log()
        disk_reads(eb, 0.80)
        wait_until(lambda: {d.idx for d in oks(record)} == set(range(20)), 60, "3 and 7 handled once space is back")
        wait_until(lambda: committed(eb, "GDFR", "DFR") == maxes, 30, "every queue committed to its end")
        run.signal(15)
        assert run.wait(30) == 0
    finally:
        eb.stop_in_thread()
