"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (RocketMQ 5.3.3 ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``).

An ack names its message by the real topic (the pop retry topic for a revived message), queue and offset, and
its checkpoint by the receipt (``extraInfo``): ck start offset, pop time, broker name. An unknown topic is
TOPIC_NOT_EXIST, a queue id outside the readable queues MESSAGE_ILLEGAL, an offset outside [min, max] of the
queue NO_MESSAGE (for a change of invisible time, outside [min, max)). An ack of a checkpoint that is gone
(revived already, or acked twice) is SUCCESS, as in Java, where it is a no-op too. A batch ack without acks
is NO_MESSAGE. In SYNC flush mode the answer waits until the change is on disk.
"""

from __future__ import annotations

from rmqrun.broker.processors.common import FAQ_SUFFIX, BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.protocol.pop import AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ReceiptHandle
from rmqrun.protocol.pop_batch_ack import decode_batch_ack_body
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand


class PopAckProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def _queue_refusal(self, cmd: RemotingCommand, topic: str, queue_id: int, offset: int, conn: Connection, *,
                       end_inclusive: bool) -> RemotingCommand | None:
        broker = self.broker
        tc = broker.topics.get(topic) if broker.topics is not None else None
        if tc is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST,
                          f"topic[{topic}] not exist, apply first please! {FAQ_SUFFIX}")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return answer(cmd, ResponseCode.MESSAGE_ILLEGAL,
                          f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                          f"[{tc.read_queue_nums}] consumer:[{conn.name}]")
        lo, hi = broker.store.offset_range(topic, queue_id)
        if offset < lo or offset > hi or (offset == hi and not end_inclusive):
            return answer(cmd, ResponseCode.NO_MESSAGE,
                          f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{lo}~{hi}")
        return None

    @staticmethod
    def _receipt(cmd: RemotingCommand, extra_info: str) -> ReceiptHandle | RemotingCommand:
        try:
            return ReceiptHandle.parse(extra_info)
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc))

    async def ack_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = parse_header(cmd, AckMessageRequestHeader, fast=_fast_ack_header)
        except BadRequest as bad:
            return bad.response
        refused = self._queue_refusal(cmd, header.topic, header.queue_id, header.offset, conn, end_inclusive=True)
        if refused is not None:
            return refused
        receipt = self._receipt(cmd, header.extra_info)
        if isinstance(receipt, RemotingCommand):
            return receipt
        if self.broker.pop.ack(header.consumer_group, header.topic, header.queue_id, header.offset, receipt) < 0:
            return answer(cmd, ResponseCode.MESSAGE_ILLEGAL,
                          f"offset is illegal, key:{header.topic}@{header.consumer_group}@{header.queue_id}, "
                          f"commit:{header.offset}, not in the queue's orderly batch", typed=False)
        await self.broker.pop.ck_log.durable()
        return cmd.response(ResponseCode.SUCCESS)  # answer(cmd, typed=False): no fields, no "extFields":{}

    async def batch_ack_message(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            broker_name, acks = decode_batch_ack_body(cmd.body or b"")
        except ProtocolError as exc:
            if not cmd.body:
                return answer(cmd, ResponseCode.NO_MESSAGE, typed=False)
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc))
        if not acks:
            return answer(cmd, ResponseCode.NO_MESSAGE, typed=False)
        pop = self.broker.pop
        pop.batch_ack(broker_name, acks)
        await pop.ck_log.durable()
        return cmd.response(ResponseCode.SUCCESS)  # answer(cmd, typed=False): no fields, no "extFields":{}

    async def change_invisible_time(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            header = parse_header(cmd, ChangeInvisibleTimeRequestHeader)
        except BadRequest as bad:
            return bad.response
        refused = self._queue_refusal(cmd, header.topic, header.queue_id, header.offset, conn, end_inclusive=False)
        if refused is not None:
            return refused
        receipt = self._receipt(cmd, header.extra_info)
        if isinstance(receipt, RemotingCommand):
            return receipt
        pop = self.broker.pop
        pop_time, invisible_time = pop.change_invisible(header.consumer_group, header.topic, header.queue_id,
                                                        header.offset, header.invisible_time, receipt)
        await pop.ck_log.durable()
        return answer(cmd, header={"popTime": pop_time, "invisibleTime": invisible_time,
                                   "reviveQid": receipt.revive_qid})


def _fast_ack_header(ext: dict[str, str]) -> AckMessageRequestHeader | None:
    """ACK_MESSAGE's header without the generic parser (one per message a Java POP consumer acks): the same
    values (``int()`` as the generic reader uses it); None sends it the slow way, which gives the proper error
    for a missing or malformed field."""
    try:
        topic, group, extra_info = ext["topic"], ext["consumerGroup"], ext["extraInfo"]
        bname = ext.get("bname")
        if (topic.__class__ is not str or group.__class__ is not str or extra_info.__class__ is not str
                or (bname is not None and bname.__class__ is not str)):
            return None
        return AckMessageRequestHeader(consumer_group=group, topic=topic, queue_id=int(ext["queueId"]),
                                       extra_info=extra_info, offset=int(ext["offset"]), bname=bname)
    except (KeyError, ValueError, TypeError):
        return None
