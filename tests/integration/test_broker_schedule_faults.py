"""Delayed delivery when a delivery fails, and schedule records that name no real queue.

A due message whose store into its real topic fails is retried (RocketMQ's
DELAY_FOR_A_WHILE) and delivered exactly once, and the level's progress does not
move past it meanwhile. A schedule record without REAL_TOPIC / REAL_QID cannot be
delivered anywhere: ``messageTimeup`` gives nothing and the level moves on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.messages import SCHEDULE_TOPIC, read_stored
from rmqrun.broker.schedule import message_timeup
from rmqrun.broker.store import StoreIOError
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.message import encode_stored
from tests.integration.broker_kit import Client, messages
from tests.waiting import eventually_async


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_a_failed_delivery_is_retried_and_delivered_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels="1s 30s") as eb:
            schedule = eb.broker.schedule
            assert schedule is not None
            real = schedule._deliver
            failures: list[str] = []

            async def flaky(msg):  # type: ignore[no-untyped-def]
                if len(failures) < 2:
                    failures.append(msg.topic)
                    raise StoreIOError("disk went away for a moment (test)")
                return await real(msg)
            schedule._deliver = flaky  # type: ignore[method-assign]
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            try:
                sent = await c.send("Later", b"once", queue_id=0, props={"DELAY": "1"})
                assert sent.code == ResponseCode.SUCCESS
                await eventually_async(lambda: len(failures) == 2, what="two failed deliveries")
                assert schedule.offsets.get(1, 0) == 0, "progress moved past an undelivered message"
                await eventually_async(lambda: eb.broker.store.max_offset("Later", 0) == 1, what="the delivery")
                await eventually_async(lambda: schedule.offsets.get(1) == 1, what="the level's progress")
                assert failures == ["Later", "Later"]
                pulled = await c.pull("G", "Later", 0, 0, subscription="*")
                assert [m.body for m in messages(pulled)] == [b"once"]
            finally:
                await c.close()
    run(main())


def test_schedule_records_that_name_no_real_queue_give_nothing_to_deliver() -> None:
    def stored(props: dict[str, str]):  # type: ignore[no-untyped-def]
        return read_stored(encode_stored(topic=SCHEDULE_TOPIC, body=b"b", properties=props, queue_id=0))

    assert message_timeup(stored({"REAL_QID": "0", "DELAY": "1"})) is None
    assert message_timeup(stored({"REAL_TOPIC": "T", "REAL_QID": "zero", "DELAY": "1"})) is None
    msg = message_timeup(stored({"REAL_TOPIC": "T", "REAL_QID": "2", "DELAY": "1", "WAIT": "true", "k": "v"}))
    assert msg is not None and (msg.topic, msg.queue_id) == ("T", 2)
    assert "DELAY" not in msg.properties and msg.properties.get("WAIT") == "false"
    # what is stored keeps DELAY and the REAL_* properties, as a real broker's delivered copy does
    assert "DELAY\x011" in msg.properties_string and "REAL_TOPIC\x01T" in msg.properties_string
