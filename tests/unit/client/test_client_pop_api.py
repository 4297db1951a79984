"""The POP client calls: receipts built from a pop answer as MQClientAPIImpl.processPopResponse builds them,
the requests an ack / change-invisible sends, and a broker without POP refused with a clear error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.client.pop_api import (
    AckStatus, PopClient, PopNotSupportedError, PopStatus, PoppedMessage, pop_result_from_response,
)
from rmqrun.consumer.pop_queue import PopEntry, PopProcessQueue
from rmqrun.model import MessageQueue
from rmqrun.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    ReceiptHandle,
)
from rmqrun.protocol.pop_batch_ack import decode_batch_ack_body
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import encode_stored

GROUP = "CG_pop"
TOPIC = "PopT"


def _answer(records: list[bytes], **ext: str) -> RemotingCommand:
    fields = {"popTime": "1795500243867", "invisibleTime": "60000", "reviveQid": "3", "restNum": "5"}
    fields.update(ext)
    return RemotingCommand(ResponseCode.SUCCESS, fields, body=b"".join(records))


def test_a_normal_topic_message_gets_the_receipt_processPopResponse_builds() -> None:
    records = [bytes(encode_stored(topic=TOPIC, body=b"a", queue_id=1, queue_offset=7, properties={"TAGS": "A"})),
               bytes(encode_stored(topic=TOPIC, body=b"b", queue_id=1, queue_offset=9)),
               bytes(encode_stored(topic=TOPIC, body=b"c", queue_id=2, queue_offset=0, reconsume_times=2))]
    resp = _answer(records, startOffsetInfo="0 1 7;0 2 0", msgOffsetInfo="0 1 7,9;0 2 0")
    result = pop_result_from_response(resp, group=GROUP, broker_name="broker-5x")
    assert result.status is PopStatus.FOUND and result.rest_num == 5
    assert [m.receipt.encode() for m in result.messages] == [
        "7 1795500243867 60000 3 0 broker-5x 1 7", "7 1795500243867 60000 3 0 broker-5x 1 9",
        "0 1795500243867 60000 3 0 broker-5x 2 0"]
    assert [m.ack_topic for m in result.messages] == [TOPIC] * 3
    assert [m.tags for m in result.messages] == ["A", None, None]
    assert result.messages[2].reconsume_times == 2
    # 1ST_POP_TIME absent: this pop's time (the client sets it, as Java's computeIfAbsent)
    assert {m.first_pop_time for m in result.messages} == {1795500243867}
    assert bytes(result.messages[1].record) == records[1], "the record goes to the worker as the broker sent it"


def test_a_normal_message_without_start_offsets_or_missing_from_them() -> None:
    """No startOffsetInfo (a broker that sends none): the receipt's ck offset is the message's own offset, as
    processPopResponse's fallback; an answer whose startOffsetInfo lacks the message's queue is refused."""
    records = [bytes(encode_stored(topic=TOPIC, body=b"a", queue_id=1, queue_offset=7)),
               bytes(encode_stored(topic=TOPIC, body=b"b", queue_id=1, queue_offset=9))]
    result = pop_result_from_response(_answer(records), group=GROUP, broker_name="b")
    assert [m.receipt.encode() for m in result.messages] == ["7 1795500243867 60000 3 0 b 1 7",
                                                             "9 1795500243867 60000 3 0 b 1 9"]
    with pytest.raises(ProtocolError, match="no startOffsetInfo for retry flag 0 queue 1"):
        pop_result_from_response(_answer(records, startOffsetInfo="0 2 7"), group=GROUP, broker_name="b")


def test_a_retried_message_keeps_the_brokers_receipt_and_acks_on_the_retry_topic() -> None:
    ck = "0 1795500566252 60000 1 1 broker-5x 0 4"
    record = bytes(encode_stored(topic=TOPIC, body=b"r", queue_id=0, queue_offset=4, reconsume_times=1,
                                 properties={"POP_CK": ck, "1ST_POP_TIME": "1795500000000"}))
    result = pop_result_from_response(_answer([record], startOffsetInfo="1 0 4", msgOffsetInfo="1 0 4"),
                                      group=GROUP, broker_name="broker-5x")
    (msg,) = result.messages
    assert msg.receipt == ReceiptHandle.parse(ck)
    assert msg.topic == TOPIC and msg.ack_topic == f"%RETRY%{GROUP}_{TOPIC}"
    assert msg.first_pop_time == 1795500000000


def test_the_answer_reads_exactly_the_properties_it_names_and_any_host_layout() -> None:
    """The decoder looks the three properties up in the raw text: a name that merely ends like one (XTAGS) is
    not it, a name given twice counts by its last entry (as the parsed dict), and records with IPv6 hosts
    (another layout of the fixed fields) give the same topic and reconsume count."""
    records = [
        bytes(encode_stored(topic=TOPIC, body=b"a", queue_id=1, queue_offset=7, reconsume_times=3,
                            properties="XTAGS\x01no\x02KEYS\x01k\x02X1ST_POP_TIME\x0112")),
        bytes(encode_stored(topic=TOPIC, body=b"b" * 300, queue_id=1, queue_offset=8, reconsume_times=4,
                            properties="KEYS\x01k\x02TAGS\x01first\x02TAGS\x01last\x02",
                            born_host="[::1]:5", store_host="[::1]:10911", sys_flag=0x10 | 0x20))]
    result = pop_result_from_response(_answer(records, startOffsetInfo="0 1 7", msgOffsetInfo="0 1 7,8"),
                                      group=GROUP, broker_name="broker-5x")
    assert [m.tags for m in result.messages] == [None, "last"]
    assert [m.first_pop_time for m in result.messages] == [1795500243867] * 2
    assert [(m.topic, m.ack_topic, m.reconsume_times) for m in result.messages] == [(TOPIC, TOPIC, 3),
                                                                                     (TOPIC, TOPIC, 4)]
    assert [m.queue_offset for m in result.messages] == [7, 8]


@pytest.mark.parametrize("code,status", [(ResponseCode.POLLING_TIMEOUT, PopStatus.NO_NEW_MSG),
                                         (ResponseCode.PULL_NOT_FOUND, PopStatus.NO_NEW_MSG),
                                         (ResponseCode.POLLING_FULL, PopStatus.POLLING_FULL)])
def test_answers_without_messages(code: int, status: PopStatus) -> None:
    result = pop_result_from_response(RemotingCommand(code, {}), group=GROUP, broker_name="b")
    assert result.status is status and result.messages == []


class _Recorder:
    """A BrokerClient stand-in that keeps the requests and answers each with a canned response."""

    def __init__(self, answer: RemotingCommand) -> None:
        self.answer = answer
        self.sent: list[RemotingCommand] = []

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        self.sent.append(cmd)
        return self.answer


def _retried() -> PoppedMessage:
    receipt = ReceiptHandle.parse("2 1795500566252 60000 1 1 broker-5x 0 4")
    return PoppedMessage(memoryview(b""), TOPIC, f"%RETRY%{GROUP}_{TOPIC}", receipt, 1, 0)


def test_ack_and_change_invisible_name_the_real_topic_and_the_message_offset() -> None:
    async def main() -> None:
        msg = _retried()
        rec = _Recorder(RemotingCommand(ResponseCode.SUCCESS, {"popTime": "1795500600000", "invisibleTime": "30000",
                                                                "reviveQid": "5"}))
        client = PopClient(rec)  # type: ignore[arg-type]
        assert await client.ack("addr", group=GROUP, message=msg) is AckStatus.OK
        new = await client.change_invisible("addr", group=GROUP, message=msg, invisible_time_ms=30000)
        ack = AckMessageRequestHeader.from_ext(rec.sent[0].ext_fields)
        assert rec.sent[0].code == RequestCode.ACK_MESSAGE
        assert (ack.topic, ack.queue_id, ack.offset, ack.extra_info) == (
            f"%RETRY%{GROUP}_{TOPIC}", 0, 4, "2 1795500566252 60000 1 1 broker-5x 0 4")
        change = ChangeInvisibleTimeRequestHeader.from_ext(rec.sent[1].ext_fields)
        assert (change.topic, change.offset, change.invisible_time) == (f"%RETRY%{GROUP}_{TOPIC}", 4, 30000)
        # MQClientAPIImpl.changeInvisibleTimeAsync: a one-message checkpoint at the offset, the answer's times
        assert new is not None and new.encode() == "4 1795500600000 30000 5 1 broker-5x 0 4"
        await client.batch_ack("addr", group=GROUP, broker_name="broker-5x", acks=[(msg, msg.receipt)])
        broker_name, acks = decode_batch_ack_body(rec.sent[2].body)
        assert broker_name == "broker-5x" and len(acks) == 1
        assert (acks[0].topic, acks[0].retry, acks[0].start_offset, acks[0].offsets) == (TOPIC, "1", 2, [4])
        rec.answer = RemotingCommand(ResponseCode.NO_MESSAGE, {})
        assert await client.ack("addr", group=GROUP, message=msg) is AckStatus.NO_EXIST
        assert await client.change_invisible("addr", group=GROUP, message=msg, invisible_time_ms=1) is None
    asyncio.run(main())


def test_one_batch_ack_request_names_each_checkpoint_once_whatever_jobs_its_receipts_came_in() -> None:
    """The ack batcher hands the receipts over per job; jobs of one pop (one checkpoint) cut apart, or
    several pops' jobs, go as one entry per checkpoint and topic, each offset acked once, none added."""
    def r(start: int, offset: int, pop_time: int = 1795500243867, queue: int = 1, flag: str = "0") -> ReceiptHandle:
        return ReceiptHandle(start, pop_time, 60000, 3, flag, "broker-5x", queue, offset)

    async def main() -> None:
        rec = _Recorder(RemotingCommand(ResponseCode.SUCCESS, {}))
        client = PopClient(rec)  # type: ignore[arg-type]
        groups = [(TOPIC, [r(10, 10), r(10, 11)]), (TOPIC, [r(10, 13)]),  # one checkpoint, two jobs, a gap
                  (TOPIC, [r(40, 40), r(40, 41)]), (TOPIC, [r(10, 12, pop_time=5)]),  # another pop's checkpoints
                  ("OtherT", [r(10, 14)]), (TOPIC, [r(0, 2, queue=0, flag="1")])]  # another topic; a retried one
        status = await client.batch_ack_receipts("addr", group=GROUP, broker_name="broker-5x", groups=groups)
        assert status is AckStatus.OK and rec.sent[0].code == RequestCode.BATCH_ACK_MESSAGE
        _, acks = decode_batch_ack_body(rec.sent[0].body)
        assert sorted((a.topic, a.retry, a.queue_id, a.start_offset, a.pop_time, tuple(a.offsets)) for a in acks) == [
            ("OtherT", "0", 1, 10, 1795500243867, (14,)),
            (TOPIC, "0", 1, 10, 5, (12,)),
            (TOPIC, "0", 1, 10, 1795500243867, (10, 11, 13)),
            (TOPIC, "0", 1, 40, 1795500243867, (40, 41)),
            (TOPIC, "1", 0, 0, 1795500243867, (2,))]
    asyncio.run(main())


def test_a_pop_request_carries_what_the_java_client_sends() -> None:
    async def main() -> None:
        rec = _Recorder(RemotingCommand(ResponseCode.POLLING_TIMEOUT, {}))
        result = await PopClient(rec).pop("addr", group=GROUP, topic=TOPIC, broker_name="b1",  # type: ignore[arg-type]
                                          max_msg_nums=16, invisible_time_ms=20000, poll_time_ms=5000, init_mode=0,
                                          exp_type="TAG", exp="A || B")
        assert result.status is PopStatus.NO_NEW_MSG
        header = PopMessageRequestHeader.from_ext(rec.sent[0].ext_fields)
        assert rec.sent[0].code == RequestCode.POP_MESSAGE
        assert (header.consumer_group, header.topic, header.queue_id, header.max_msg_nums, header.invisible_time,
                header.poll_time, header.init_mode, header.exp_type, header.exp, header.order) == (
            GROUP, TOPIC, -1, 16, 20000, 5000, 0, "TAG", "A || B", False)
        assert header.born_time > 0
    asyncio.run(main())


def test_an_ack_waits_for_an_extension_on_the_wire_and_uses_its_receipt() -> None:
    async def main() -> None:
        msg = _retried()
        entry = PopEntry.of(msg)
        pq = PopProcessQueue(MessageQueue(TOPIC, "broker-5x", -1))
        pq.add([entry])
        start = msg.receipt.pop_time
        assert not entry.needs_extension(start + 39_000, 2 / 3)
        assert entry.needs_extension(start + 40_000, 2 / 3)
        entry.extending = asyncio.get_running_loop().create_future()
        assert not entry.needs_extension(start + 50_000, 2 / 3), "one extension at a time"
        settled = asyncio.ensure_future(entry.settle())
        await asyncio.sleep(0)
        assert not settled.done()
        newer = ReceiptHandle.parse("4 1795500600000 60000 5 1 broker-5x 0 4")
        entry.receipt, done, entry.extending = newer, entry.extending, None
        done.set_result(None)
        assert await settled == newer
        assert not entry.needs_extension(start + 10**9, 2 / 3), "settled: never extended again"
        pq.done(entry)
        assert pq.wait_ack_count == 0
    asyncio.run(main())


def test_a_broker_without_pop_is_refused_with_what_is_needed(tmp_path: Path) -> None:
    """The embedded broker made to answer POP_MESSAGE as a 4.x broker does (REQUEST_CODE_NOT_SUPPORTED)."""
    from rmqrun.broker.app import EmbeddedBroker
    from rmqrun.broker.processors.common import answer
    from rmqrun.client.instance import ClientInstance

    async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
        return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "store") as eb:
            eb.broker.server.register(RequestCode.POP_MESSAGE, not_supported)
            inst = ClientInstance(eb.namesrv_address, client_ip="127.0.0.1")
            try:
                client = PopClient(inst.broker)
                with pytest.raises(PopNotSupportedError, match="POP needs RocketMQ 5.x"):
                    await client.pop(eb.broker_address, group=GROUP, topic=TOPIC, broker_name=eb.config.broker_name,
                                     poll_time_ms=1000)
            finally:
                await inst.close()
    asyncio.run(main())


def test_pop_ack_and_change_invisible_against_the_embedded_broker(tmp_path: Path) -> None:
    """The calls for real: an order-mode pop, a message made visible again at once comes back with its delivery
    count (orderCountInfo), acks with the receipts the client built are taken, and nothing is left to pop."""
    from rmqrun.broker.app import EmbeddedBroker
    from rmqrun.client.instance import ClientInstance
    from rmqrun.client.producer import Producer

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "store", auto_create_queue_nums=1) as eb:
            async with Producer(eb.namesrv_address, "PG_pop_api") as producer:
                for i in range(3):
                    await producer.send(TOPIC, f"m{i}".encode())
            inst = ClientInstance(eb.namesrv_address, client_ip="127.0.0.1")
            try:
                client = PopClient(inst.broker)
                addr, name = eb.broker_address, eb.config.broker_name

                async def pop() -> list[PoppedMessage]:
                    got = await client.pop(addr, group=GROUP, topic=TOPIC, broker_name=name, poll_time_ms=1000,
                                           invisible_time_ms=30_000, init_mode=0, order=True)
                    return got.messages
                first = await pop()
                assert [m.queue_offset for m in first] == [0, 1, 2]
                assert first[0].receipt.is_order and first[0].order_count == 0
                assert await pop() == [], "the queue is blocked while its batch is out"
                assert await client.ack(addr, group=GROUP, message=first[0]) is AckStatus.OK
                for m in first[1:]:
                    assert await client.change_invisible(addr, group=GROUP, message=m, invisible_time_ms=0) \
                        is not None
                again = await pop()
                assert [(m.queue_offset, m.order_count) for m in again] == [(1, 1), (2, 1)]
                for m in again:
                    assert await client.ack(addr, group=GROUP, message=m) is AckStatus.OK
                assert await pop() == []
            finally:
                await inst.close()
    asyncio.run(main())
