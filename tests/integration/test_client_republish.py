"""RetryPublisher: the re-publish to %RETRY%<group> that the push consumer's send-back falls back to and the
Spark runner uses for failed messages, against the embedded broker over real TCP."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.instance import ClientInstance
from rmqrun.client.republish import RetryPublisher
from rmqrun.model import Message
from tests.integration.broker_kit import Client, drain

pytestmark = pytest.mark.timeout(90)

FAST = " ".join(["1s"] * 18)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 75))


def test_republish_stores_a_retry_copy_then_the_dead_letter_at_the_maximum(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", message_delay_levels=FAST) as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            await c.send("T", b"payload", tags="TagA", props={"idx": "7"})
            await c.heartbeat("c@1", "G", {"T": "*", "%RETRY%G": "*"})
            [original] = await drain(c, "G", "T", 4, expect=1)

            instance = ClientInstance(eb.namesrv_address, instance_name="republish-test")
            await instance.start()
            publisher = RetryPublisher(instance, "G")
            try:
                assert await publisher.republish(original, 16, original.reconsume_times + 1)
                [retried] = await drain(c, "G", "%RETRY%G", 1, expect=1)
                assert retried.body == b"payload" and retried.reconsume_times == 1
                assert retried.properties["RETRY_TOPIC"] == "T"
                assert retried.properties["ORIGIN_MESSAGE_ID"] == original.msg_id
                assert retried.properties["idx"] == "7" and retried.properties["TAGS"] == "TagA"

                # At the maximum the broker keeps it in the DLQ instead of the retry topic. The handler sees a
                # retried message under its original topic (decode_for_retry), and so it is republished.
                assert retried.msg_id != original.msg_id
                assert await publisher.republish(dataclasses.replace(retried, topic="T"), 3, 3)
                await c.heartbeat("c@1", "G", {"T": "*", "%RETRY%G": "*", "%DLQ%G": "*"})
                [dead] = await drain(c, "G", "%DLQ%G", 1, expect=1)
                assert dead.body == b"payload" and dead.properties["RETRY_TOPIC"] == "T"
                assert dead.properties["ORIGIN_MESSAGE_ID"] == original.msg_id, "the first origin id is kept"
                assert eb.broker.store.max_offset("%RETRY%G", 0) == 1, "nothing more on the retry topic"
            finally:
                await publisher.close()
                await instance.close()
                await c.close()

    run(main())


def test_republish_without_a_broker_is_false_not_an_exception(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            namesrv = eb.namesrv_address
        instance = ClientInstance(namesrv, instance_name="republish-down", api_timeout=0.5, connect_timeout=0.5)
        publisher = RetryPublisher(instance, "G")
        try:
            assert await publisher.republish(Message(topic="T", body=b"x", msg_id="M1"), 16, 1) is False
        finally:
            await publisher.close()
            await instance.close()

    run(main())


def test_republish_refuses_a_property_holding_a_separator_and_says_which(tmp_path: Path) -> None:
    """A message whose property text would be read back as other properties is not re-published (False, never
    an exception), and the error line names the field; nothing reaches the retry topic."""
    from loguru import logger

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), format="{message}", level="ERROR")

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            instance = ClientInstance(eb.namesrv_address, instance_name="republish-sep")
            await instance.start()
            publisher = RetryPublisher(instance, "G")
            try:
                msg = Message(topic="T", body=b"x", msg_id="M1", properties={"TAGS": "a\x01b", "KEYS": "k"})
                assert await publisher.republish(msg, 16, 1) is False
                assert eb.broker.store.max_offset("%RETRY%G", 0) == 0, "nothing was sent"
            finally:
                await publisher.close()
                await instance.close()
    try:
        run(main())
    finally:
        logger.remove(sink)
    assert any("re-publishing M1 to %RETRY%G failed too: tags contains the control character \\x01 (U+0001)" in ln
               for ln in lines), lines
