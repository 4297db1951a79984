"""Send-back of failed records that do not read cleanly: never dropped, never a crash.

The consumer's :class:`~rmqrun.consumer.retry.SendBack` gets the raw stored record
of a failed message. A record whose properties do not decode is still named by its
fixed fields (commit-log offset, offset message id, topic), so the broker can copy
its own stored bytes; but it cannot be re-published as a copy, so when the broker
refuses the send-back the answer is False (the caller keeps it cached). A record
too damaged to name at all is never sent anywhere. Real embedded broker over TCP;
the records are the broker's own bytes, damaged in the test's copy only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.processors.common import answer
from rmqrun.client.instance import ClientInstance
from rmqrun.consumer.retry import SendBack, undecodable_label
from rmqrun.model import MessageQueue
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.remoting import message as codec
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.engine_kit import broker, produce
from tests.integration.test_guarantees_retry import dlq_messages

GROUP = "GSBD"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _stored_record(inst: ClientInstance, addr: str, topic: str) -> tuple[bytes, codec.Message]:
    """The first stored record of ``topic`` queue 0, as the broker serves it, and its decoding."""
    header = PullMessageRequestHeader(consumer_group="probe", topic=topic, queue_id=0, queue_offset=0,
                                      max_msg_nums=1, sys_flag=4, commit_offset=0, suspend_timeout_millis=0,
                                      sub_version=0, subscription="*", expression_type="TAG")
    result = await inst.broker.pull(addr, header)
    (head,) = codec.scan_records(result.body)
    raw = bytes(result.body[head.start:head.start + head.size])
    msg, _ = codec.decode_message(raw)
    return raw, msg


def _break_properties(raw: bytes) -> bytes:
    """The same record with its properties no longer UTF-8 (the fixed fields and topic intact)."""
    out = bytearray(raw)
    out[-1] = 0xFF  # the last byte of the properties string
    return bytes(out)


def test_a_record_with_broken_properties_is_sent_back_by_its_fixed_fields(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SBD1", 1)
            inst = ClientInstance(eb.namesrv_address, instance_name="sbd1")
            sender = SendBack(inst, GROUP)
            try:
                await inst.subscribe_queues("SBD1")
                raw, original = await _stored_record(inst, eb.broker_address, "SBD1")
                damaged = _break_properties(raw)
                try:
                    codec.decode_message(damaged)
                except ProtocolError:
                    pass
                else:
                    raise AssertionError("the damaged copy still decodes: the test damages nothing")
                # max_reconsume_times 0: the broker moves it straight to the DLQ, where the test can read it
                assert await sender.send_back(damaged, eb.config.broker_name, 0, 0) is True
                dlq = await dlq_messages(eb, GROUP)
                assert [m.body for m in dlq] == [b"msg-0"]
                # the broker copied its own stored record: the real topic and message id survive
                assert dlq[0].properties.get(PROPERTY_RETRY_TOPIC) == "SBD1"
                assert dlq[0].msg_id == original.msg_id
            finally:
                await sender.close()
                await inst.close()
    run(main())


def test_a_refused_send_back_of_an_undecodable_record_keeps_it(tmp_path: Path) -> None:
    """Send-back refused and no decodable copy to re-publish: False, and nothing reaches a retry topic."""
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SBD2", 1)
            refused: list[int] = []
            sent: list[str] = []
            real_send = eb.broker.processors.send.send

            async def send_back(conn, cmd):  # type: ignore[no-untyped-def]
                refused.append(cmd.code)
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "refused by the test")

            async def send(conn, cmd):  # type: ignore[no-untyped-def]
                sent.append(cmd.ext_fields.get("topic") or cmd.ext_fields.get("b") or "")
                return await real_send(conn, cmd)
            eb.broker.server.register(RequestCode.CONSUMER_SEND_MSG_BACK, send_back)
            for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
                eb.broker.server.register(code, send)
            inst = ClientInstance(eb.namesrv_address, instance_name="sbd2")
            sender = SendBack(inst, GROUP)
            try:
                await inst.subscribe_queues("SBD2")
                raw, _ = await _stored_record(inst, eb.broker_address, "SBD2")
                assert await sender.send_back(_break_properties(raw), eb.config.broker_name, 0, 16) is False
                assert refused == [RequestCode.CONSUMER_SEND_MSG_BACK], "the send-back was tried once"
                assert sent == [], "an undecodable record cannot be re-published"
                # the same record, intact: refused send-back, then re-published to the retry topic
                assert await sender.send_back(raw, eb.config.broker_name, 0, 16) is True
                # (the first send may be refused while the broker creates the retry topic; the producer retries)
                assert sent and set(sent) == {f"%RETRY%{GROUP}"}
            finally:
                await sender.close()
                await inst.close()
    run(main())


def test_a_record_too_damaged_to_name_is_sent_nowhere(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SBD3", 1)
            calls: list[int] = []
            real_back = eb.broker.processors.send.send_back

            async def send_back(conn, cmd):  # type: ignore[no-untyped-def]
                calls.append(cmd.code)
                return await real_back(conn, cmd)
            eb.broker.server.register(RequestCode.CONSUMER_SEND_MSG_BACK, send_back)
            inst = ClientInstance(eb.namesrv_address, instance_name="sbd3")
            sender = SendBack(inst, GROUP)
            try:
                await inst.subscribe_queues("SBD3")
                raw, _ = await _stored_record(inst, eb.broker_address, "SBD3")
                torn = raw[:40]  # cut inside the hosts: no store host, no topic
                mq = MessageQueue("SBD3", eb.config.broker_name, 0)
                assert await sender.send_back(torn, eb.config.broker_name, 0, 16) is False
                assert await sender.dead_letter_as_stored(torn, eb.config.broker_name, 16) is False
                assert calls == [], "nothing is sent for a record that cannot be named"
                assert undecodable_label(torn, mq) == f"an unreadable record of {mq}"
                ids = codec.record_ids(raw)
                assert undecodable_label(raw, mq) == (
                    f"message {ids.offset_msg_id} ({mq}, queue offset {ids.queue_offset})")
                assert await dlq_messages(eb, GROUP) == []
            finally:
                await sender.close()
                await inst.close()
    run(main())
