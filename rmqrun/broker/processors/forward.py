"""Admin requests the broker answers by asking the group's clients (Java ``Broker2Client``).

INVOKE_BROKER_TO_RESET_OFFSET (``mqadmin resetOffsetByTime``, ``rmqrun offsets
reset``): compute each queue's new offset, store it, and tell every connected
member of the group with a oneway RESET_CONSUMER_CLIENT_OFFSET so that running
consumers drop their process queues and continue from there.
INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT to each
member, answers gathered per client id. GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY are passed through to the one client named by
``clientId`` and its answer is returned as it came.

Deliberate differences from 4.9.8, both so that an operator can reset a group
that is not running: the broker also *stores* the new offsets (Java leaves
that to the clients, and answers "Consumer not online" when there are none),
and a group that never committed an offset is reset rather than refused. As in
RocketMQ 5, ``offset`` (with ``queueId``, -1 for every queue) may replace
``timestamp`` to reset to an exact queue offset.
"""

from __future__ import annotations

import asyncio

from loguru import logger

from rmqrun.broker.groups import ClientChannel
from rmqrun.broker.processors.common import answer, java_bool
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.processors.inspect import mq_order
from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import GetConsumerStatusBody, ResetOffsetBody
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ProtocolError, RemotingError, RequestTimeoutError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.msg_id import decode_offset_msg_id

#: How long the broker waits for a client's answer (Java: 5 s for status, 5 s for running info).
CLIENT_TIMEOUT_S = 5.0
#: The remark a Java response keeps when its code is set but its remark never is.
UNSET_REMARK = "not set any response code"


class ForwardProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ reset offsets

    def reset_table(self, group: str, topic: str, timestamp: int, *, force: bool,
                    offset: int | None = None, queue_id: int = -1) -> dict[MessageQueue, int]:
        """New offset per queue of ``topic`` for ``group`` (Broker2Client.resetOffset's computation).

        ``timestamp`` -1 means the end of each queue. Unless ``force``, a queue
        already behind the target keeps its offset.
        """
        b = self.broker
        assert b.topics is not None
        tc = b.topics.get(topic)
        assert tc is not None
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            if queue_id >= 0 and qid != queue_id:
                continue
            current = b.store.consumer_offsets.query(group, topic, qid)
            lo, hi = b.store.min_offset(topic, qid), b.store.max_offset(topic, qid)
            if offset is not None:
                target = min(max(offset, lo), hi)
            elif timestamp == -1:
                target = hi
            else:
                target = b.store.search_offset_by_timestamp(topic, qid, timestamp)
            if current is not None and current >= 0 and not force and target >= current:
                target = current
            table[MessageQueue(topic, b.config.broker_name, qid)] = target
        return {mq: table[mq] for mq in mq_order(list(table))}

    async def invoke_reset_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        topic, group = ext.get("topic"), ext.get("group")
        for name, value in (("topic", topic), ("group", group), ("timestamp", ext.get("timestamp"))):
            if not value and not (name == "timestamp" and ext.get("offset")):
                return answer(cmd, ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null", typed=False)
        assert topic is not None and group is not None
        try:
            timestamp = int(ext.get("timestamp") or -1)
            offset = int(ext["offset"]) if ext.get("offset") not in (None, "") else None
            queue_id = int(ext.get("queueId") or -1)
        except ValueError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad reset request: {exc}", typed=False)
        assert self.broker.topics is not None
        if self.broker.topics.get(topic) is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR,
                          f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}", typed=False)
        force = java_bool(ext.get("isForce", "true"))
        table = self.reset_table(group, topic, timestamp, force=force, offset=offset, queue_id=queue_id)
        for mq, new in table.items():
            self.broker.store.consumer_offsets.commit(group, topic, mq.queue_id, new)
            self.broker.pop.offset_reset(group, topic, mq.queue_id)
        body = ResetOffsetBody(table).encode()
        told = await self._tell_reset(group, topic, timestamp, body)
        logger.info("reset offsets of group {} on {} ({} queue(s), {} client(s) told): {}", group, topic,
                    len(table), told, {mq.queue_id: o for mq, o in table.items()})
        return answer(cmd, ResponseCode.SUCCESS, UNSET_REMARK, body=body, typed=False)

    async def _tell_reset(self, group: str, topic: str, timestamp: int, body: bytes) -> int:
        info = self.broker.consumers.group(group)
        if info is None:
            return 0
        told = 0
        for channel in list(info.channels.values()):
            # Java builds a fresh header whose isForce is left at false.
            note = RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {
                "topic": topic, "isForce": "false", "group": group, "timestamp": str(timestamp)}, body,
                language="JAVA")
            try:
                await channel.conn.oneway(note)
                told += 1
            except RemotingError as exc:
                logger.warning("could not tell {} to reset offsets: {}", channel.client_id, exc)
        return told

    # ------------------------------------------------------------------ consumer status

    async def invoke_get_consumer_status(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        topic, group = ext.get("topic"), ext.get("group")
        if not topic or not group:
            name = "topic" if not topic else "group"
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null", typed=False)
        only = ext.get("clientAddr") or ""
        info = self.broker.consumers.group(group)
        channels = [c for c in (info.channels.values() if info else ()) if not only or c.client_id == only]
        if not channels:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]",
                          typed=False)

        async def ask(channel: ClientChannel) -> tuple[str, dict[MessageQueue, int]] | None:
            req = RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group},
                                  language="JAVA")
            try:
                resp = await channel.conn.request(req, CLIENT_TIMEOUT_S)
                if resp.code != ResponseCode.SUCCESS or not resp.body:
                    return None
                return channel.client_id, GetConsumerStatusBody.from_json(resp.body).message_queue_table
            except (RemotingError, ProtocolError) as exc:
                logger.warning("consumer status from {} failed: {}", channel.client_id, exc)
                return None

        answers = [a for a in await asyncio.gather(*(ask(c) for c in channels)) if a is not None]
        body = GetConsumerStatusBody(consumer_table=dict(answers)).encode()
        return answer(cmd, ResponseCode.SUCCESS, UNSET_REMARK, body=body, typed=False)

    # ------------------------------------------------------------------ pass-through

    async def get_consumer_running_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return await self._call_consumer(cmd, dict(cmd.ext_fields), cmd.body)

    async def consume_message_directly(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ext = dict(cmd.ext_fields)
        ext["brokerName"] = self.broker.config.broker_name
        body = cmd.body
        msg_id = ext.get("msgId")
        if msg_id:
            try:
                _addr, offset = decode_offset_msg_id(msg_id)
                body = self.broker.store.read_at(offset) or body
            except (ProtocolError, ValueError) as exc:
                return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad msgId {msg_id}: {exc}", typed=False)
        return await self._call_consumer(cmd, ext, body)

    async def _call_consumer(self, cmd: RemotingCommand, ext: dict[str, str], body: bytes | None) -> RemotingCommand:
        group, client_id = ext.get("consumerGroup"), ext.get("clientId")
        if not group or not client_id:
            name = "consumerGroup" if not group else "clientId"
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null", typed=False)
        info = self.broker.consumers.group(group)
        channel = info.find_channel(client_id) if info else None
        if channel is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online",
                          typed=False)
        req = RemotingCommand(cmd.code, ext, body, language="JAVA")
        try:
            resp = await channel.conn.request(req, CLIENT_TIMEOUT_S)
        except RequestTimeoutError as exc:
            return answer(cmd, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}",
                          typed=False)
        except RemotingError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
                          typed=False)
        return cmd.response(resp.code, resp.remark, dict(resp.ext_fields), resp.body)

