"""Long polling: a pull with the suspend bit is held until a matching message arrives or it times out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import ConnectionClosedError
from rmqrun.remoting.frame import SerializeType
from tests.integration.broker_kit import Client, messages, pull_ext
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(60)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 45))


async def _setup(eb: EmbeddedBroker) -> tuple[Client, Client]:
    consumer = await Client.connect(eb.namesrv_address, eb.broker_address)
    producer = await Client.connect(eb.namesrv_address, eb.broker_address)
    await producer.send("LP", b"first", queue_id=0, tags="TagA")
    await consumer.heartbeat("c1@1", "CG", {"LP": "TagA"})
    return consumer, producer


async def _until_held(eb: EmbeddedBroker, pull: "asyncio.Task[object]", topic: str = "LP", queue_id: int = 0) -> None:
    """Wait until the broker holds the pull (a sleep cannot tell a held pull from one still on its way)."""
    def held() -> bool:
        if pull.done():  # answered instead of held: fail now, with the answer
            raise RuntimeError(f"a pull at the end of {topic}:{queue_id} must be held, got {pull.result()!r}")
        return eb.broker.hold.held_on(topic, queue_id) > 0

    await eventually_async(held, what=f"the broker to hold the pull on {topic}:{queue_id}", interval=0.005)
    assert not pull.done()


def test_held_pull_is_woken_by_an_arriving_message(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            consumer, producer = await _setup(eb)
            held = asyncio.create_task(consumer.pull("CG", "LP", 0, 1, suspend_ms=15_000, timeout=20))
            await _until_held(eb, held)
            await producer.send("LP", b"second", queue_id=0, tags="TagA")
            # Woken by the send, not answered by its hold timer (which would find the message too): the broker
            # wakes the held pulls before it answers the send.
            assert eb.broker.hold.held_on("LP", 0) == 0
            resp = await asyncio.wait_for(held, 30)
            assert [m.body for m in messages(resp)] == [b"second"]
            assert resp.ext_fields["nextBeginOffset"] == "2"
            await consumer.close()
            await producer.close()

    run(main())


def test_held_pull_times_out_with_pull_not_found(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            consumer, producer = await _setup(eb)
            pull = asyncio.create_task(consumer.pull("CG", "LP", 0, 1, suspend_ms=600_000, timeout=700))
            await _until_held(eb, pull)  # held, not answered at once
            [held] = eb.broker.hold._held[("LP", 0)]
            loop = asyncio.get_running_loop()
            assert held.timer is not None and held.timer.when() >= loop.time() + 500, "armed for its hold time"
            # its hold time runs out (far past the test's own time): what the broker's timer then does, done now
            eb.broker.hold._expire(held)
            resp = await asyncio.wait_for(pull, 30)
            assert eb.broker.hold.held_on("LP", 0) == 0
            assert (resp.code, resp.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            assert resp.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "maxOffset": "1",
                                       "minOffset": "0"}
            # Without the suspend bit the same pull is not held, however long the hold it names: answered
            # long before that hold's 60 s would end (the bound separates "at once" from "held", not a pace).
            ext = pull_ext("CG", "LP", 0, 1, suspend_ms=60_000)
            ext["sysFlag"] = "0"
            now = await asyncio.wait_for(consumer.call(RequestCode.PULL_MESSAGE, ext, timeout=90), 40)
            assert now.code == ResponseCode.PULL_NOT_FOUND
            await consumer.close()
            await producer.close()

    run(main())


def test_a_message_for_another_tag_does_not_wake_a_filtered_pull(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            consumer, producer = await _setup(eb)
            held = asyncio.create_task(consumer.pull("CG", "LP", 0, 1, suspend_ms=10_000, timeout=15))
            await _until_held(eb, held)
            await producer.send("LP", b"other", queue_id=0, tags="TagB")
            # The send is answered after the broker looked at the held pulls: a wake would have
            # taken this one off the queue already.
            assert eb.broker.hold.held_on("LP", 0) == 1 and not held.done()
            await producer.send("LP", b"mine", queue_id=0, tags="TagA")
            resp = await asyncio.wait_for(held, 30)
            assert [m.body for m in messages(resp)] == [b"mine"]
            assert resp.ext_fields["nextBeginOffset"] == "3"
            await consumer.close()
            await producer.close()

    run(main())


def test_held_binary_pull_is_answered_in_json_and_commit_is_stored_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            consumer, producer = await _setup(eb)
            held = asyncio.create_task(consumer.call(
                RequestCode.PULL_MESSAGE, pull_ext("CG", "LP", 0, 1, suspend_ms=10_000, commit_offset=1),
                serialize_type=SerializeType.ROCKETMQ, timeout=15))
            await _until_held(eb, held)  # type: ignore[arg-type]
            # The commit piggy-backed on the held pull is already stored.
            q = await consumer.call(RequestCode.QUERY_CONSUMER_OFFSET,
                                    {"consumerGroup": "CG", "topic": "LP", "queueId": "0"})
            assert q.ext_fields == {"offset": "1"}
            await producer.send("LP", b"late", queue_id=0, tags="TagA")
            resp = await asyncio.wait_for(held, 30)
            # Like RocketMQ: the answer to a held request uses the default (JSON) serializer.
            assert resp.serialize_type == SerializeType.JSON
            assert [m.body for m in messages(resp)] == [b"late"]
            await consumer.close()
            await producer.close()

    run(main())


def test_closing_the_connection_forgets_its_held_pulls(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            consumer, producer = await _setup(eb)
            # held far longer than the test may run: only the closed connection can take it off the broker
            task = asyncio.create_task(consumer.pull("CG", "LP", 0, 1, suspend_ms=600_000, timeout=40))
            await eventually_async(lambda: len(eb.broker.hold) == 1, what="the pull is held")
            await consumer.close()
            # The client's own pending request fails with the connection, not with a timeout.
            with pytest.raises(ConnectionClosedError):
                await task
            await eventually_async(lambda: len(eb.broker.hold) == 0, what="the broker forgets the held pull")
            # A message for that queue now wakes nobody and costs the broker nothing.
            sent = await producer.send("LP", b"nobody waits", queue_id=0, tags="TagA")
            assert sent.code == ResponseCode.SUCCESS and len(eb.broker.hold) == 0
            await producer.close()

    run(main())
