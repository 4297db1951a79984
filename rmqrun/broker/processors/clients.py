"""Clients and groups: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CHECK_CLIENT_CONFIG.

As in 4.9.8 ``ClientManageProcessor``, a heartbeat also creates the group's
config and its ``%RETRY%<group>`` topic (one read-write queue), so the retry
topic has a route before the first send-back; membership changes trigger
NOTIFY_CONSUMER_IDS_CHANGED through :class:`ConsumerManager`. Queue locks
(LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, AdminBrokerProcessor) are here too: they are
the orderly consumers' half of group membership.
"""

from __future__ import annotations

from rmqrun.broker.groups import ClientChannel
from rmqrun.protocol.java_order import java_hash_set_order, message_queue_hash
from rmqrun.broker.processors.common import BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.topics import PERM_READ, PERM_WRITE
from rmqrun.protocol.bodies import (
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmqrun.protocol.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.topic_names import retry_topic


class ClientProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            data = HeartbeatData.from_json(cmd.body or b"")
        except (ProtocolError, ValueError, TypeError) as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}", typed=False)
        broker = self.broker
        assert broker.groups is not None and broker.topics is not None
        for consumer in data.consumer_data_set:
            sgc = broker.groups.find(consumer.group_name)
            if sgc is not None:
                broker.topics.create_for_send_back(retry_topic(consumer.group_name), sgc.retry_queue_nums,
                                                   PERM_WRITE | PERM_READ, 2 if consumer.unit_mode else 0)
            channel = ClientChannel(conn, data.client_id, cmd.language, cmd.version)
            broker.consumers.register_consumer(consumer, channel)
        for producer in data.producer_data_set:
            broker.consumers.register_producer(producer.group_name,
                                               ClientChannel(conn, data.client_id, cmd.language, cmd.version))
        conn.attributes["client_id"] = data.client_id
        return answer(cmd, typed=False)

    async def unregister_client(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, UnregisterClientRequestHeader)
        except BadRequest as bad:
            return bad.response
        if h.producer_group is not None:
            self.broker.consumers.unregister_producer(h.producer_group, conn)
        if h.consumer_group is not None:
            self.broker.consumers.unregister_consumer(h.consumer_group, conn)
        return answer(cmd)

    async def get_consumer_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, GetConsumerListByGroupRequestHeader)
        except BadRequest as bad:
            return bad.response
        ids = self.broker.consumers.client_ids(h.consumer_group)
        if not ids:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        return answer(cmd, body=ConsumerListBody(ids).encode())

    async def check_client_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            body = fastjson.loads(cmd.body) if cmd.body else {}
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc), typed=False)
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        expression_type = (sub or {}).get("expressionType") or "TAG"
        if sub is None or expression_type == "TAG":
            return answer(cmd, typed=False)
        return answer(cmd, ResponseCode.SYSTEM_ERROR,
                      f"The broker does not support consumer to filter message by {expression_type}", typed=False)

    # ------------------------------------------------------------------ queue locks

    async def lock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = LockBatchRequestBody.from_json(cmd.body or b"")
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc), typed=False)
        requested = list(dict.fromkeys(req.mq_set))
        locked = self.broker.locks.try_lock_batch(req.consumer_group, requested, req.client_id)
        # The answer is a Java HashSet sized for the request: write it in that set's order.
        ordered = java_hash_set_order(locked, lambda mq: message_queue_hash(mq.topic, mq.broker_name, mq.queue_id),
                                 len(requested))
        return answer(cmd, body=LockBatchResponseBody(ordered).encode(), typed=False)  # type: ignore[arg-type]

    async def unlock_batch(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = UnlockBatchRequestBody.from_json(cmd.body or b"")
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, str(exc), typed=False)
        self.broker.locks.unlock_batch(req.consumer_group, req.mq_set, req.client_id)
        return answer(cmd, typed=False)
