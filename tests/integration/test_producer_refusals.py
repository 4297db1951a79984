"""The producer refuses bad sends before they reach the wire, each with an error naming what is wrong.

Java's ``Validators`` and ``DefaultMQProducerImpl`` checks: a broker would refuse
most of these too, but later and less clearly, or (a separator inside a property)
store a message whose properties decode differently. Every refused send leaves the
topic empty: checked against the embedded broker over TCP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import OutgoingMessage, Producer
from rmqrun.model import MessageQueue
from rmqrun.client.errors import SendFailedError
from rmqrun.remoting.errors import PropertyTextError
from tests.integration.engine_kit import broker


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _stored(eb, topic: str) -> int:  # type: ignore[no-untyped-def]
    inst = ClientInstance(eb.namesrv_address, instance_name="probe")
    try:
        return sum([await inst.broker.get_max_offset(eb.broker_address, mq)
                    for mq in await inst.subscribe_queues(topic)])
    finally:
        await inst.close()


def test_bad_sends_are_refused_by_name_and_nothing_is_stored(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2, max_message_size=4096) as eb:
            async with Producer(eb.namesrv_address, "PG_refuse", max_message_size=4096) as p:
                await p.send("PR", b"first")  # the topic exists, with two queues
                refusals: list[tuple[object, type[Exception], str]] = [
                    (p.send("", b"x"), ValueError, "topic is empty"),
                    (p.send("T" * 128, b"x"), ValueError, "longer than 127 characters"),
                    (p.send("bad topic", b"x"), ValueError, "may only contain letters, digits"),
                    (p.send("TBW102", b"x"), ValueError, "auto-create template topic"),
                    (p.send("PR", b"x", properties={"a\x01b": "v"}), PropertyTextError,
                     "property name 'a\\x01b' contains the control character \\x01 (U+0001)"),
                    (p.send("PR", b"x", properties={"a": "v\x02"}), PropertyTextError,
                     "property 'a' contains the control character \\x02 (U+0002), which RocketMQ uses to "
                     "separate properties"),
                    # keys and tags are properties on the wire too: a separator in them would add or change one
                    (p.send("PR", b"x", keys="order-1\x02__STARTDELIVERTIME\x019999999999999"), PropertyTextError,
                     "keys contains the control character \\x02 (U+0002)"),
                    (p.send("PR", b"x", keys=["k0", "k1\x02DELAY\x013"]), PropertyTextError, "keys contains"),
                    (p.send("PR", b"x", tags="a\x01b"), PropertyTextError,
                     "tags contains the control character \\x01 (U+0001), which RocketMQ uses to separate a "
                     "property's name from its value"),
                    (p.send("PR", b"x", tags="T\udcff"), PropertyTextError, "tags is not valid UTF-8 text"),
                    (p.send("PR", b"x", sharding_key="s\x02DELAY\x011"), PropertyTextError,
                     "sharding key contains the control character \\x02"),
                    (p.send_oneway("PR", b"x", keys="k\x02DELAY\x013"), PropertyTextError, "keys contains"),
                    (p.send_batch("PR", [b"fine", OutgoingMessage(b"x", tags="t\x02DELAY\x012")]),
                     PropertyTextError, "tags contains the control character \\x02"),
                    (p.send("PR", b""), ValueError, "the message body is empty"),
                    (p.send("PR", "text"), TypeError, "a message body is bytes, not str"),  # type: ignore[arg-type]
                    (p.send("PR", b"x" * 5000), ValueError, "5000 bytes exceeds max_message_size 4096"),
                    (p.send("PR", b"x", queue=7), ValueError, "topic has no writable queue 7"),
                    (p.send("PR", b"x", queue=0, sharding_key="k"), ValueError, "either queue or sharding_key"),
                    (p.send_batch("%RETRY%G", [b"x"]), ValueError, "cannot be sent in a batch"),
                    (p.send_batch("PR", []), ValueError, "at least one message"),
                    (p.send_batch("PR", [OutgoingMessage(b"x", delay_level=2)]), ValueError,
                     "delay levels are not supported in a batch"),
                    (p.send_batch("PR", [b"y" * 3000, b"z" * 3000]), ValueError, "exceeds max_message_size 4096"),
                ]
                for call, kind, words in refusals:
                    with pytest.raises(kind) as err:
                        await call  # type: ignore[misc]
                    assert words in str(err.value), (words, str(err.value))
                # a zero timeout: no attempt was made, and the error says so
                with pytest.raises(SendFailedError, match="timed out after 0s before any attempt"):
                    await p.send("PR", b"late", timeout=0)
                # a queue given as a MessageQueue is used as is
                mq = MessageQueue("PR", eb.config.broker_name, 1)
                result = await p.send("PR", b"pinned", queue=mq)
                assert result.queue == mq
            assert await _stored(eb, "PR") == 2, "a refused send stored something"
    run(main())


def test_a_producer_needs_a_name_server_or_an_instance() -> None:
    with pytest.raises(ValueError, match="needs name server addresses or a ClientInstance"):
        Producer(None, "PG")  # type: ignore[arg-type]


def test_closing_a_producer_that_never_started_closes_only_an_instance_it_owns(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            shared = ClientInstance(eb.namesrv_address, instance_name="shared")
            try:
                await shared.get_route("TBW102")
                borrowing = Producer(instance=shared, group="PG_borrow")
                await borrowing.close()
                assert shared.pool.connections(), "closing a producer closed the instance it was lent"
            finally:
                await shared.close()
            owning = Producer(eb.namesrv_address, "PG_own")
            await owning.instance.get_route("TBW102")
            assert owning.instance.pool.connections()
            await owning.close()
            assert not owning.instance.pool.connections(), "its own instance was left open"
    run(main())
