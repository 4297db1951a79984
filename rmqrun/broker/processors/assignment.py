"""Broker-side assignment (``QueryAssignmentProcessor``): QUERY_ASSIGNMENT, SET / GET_ALL_MESSAGE_REQUEST_MODE.

QUERY_ASSIGNMENT answers a client's "which queues are mine, and do I pull or
pop them" from the group's request mode (:mod:`rmqrun.broker.request_modes`)
and the group's live clients: in PULL mode the share the named strategy gives
(each queue owned by one client), in POP mode :func:`allocate_for_pop` (queues
shared; queue id -1 = all of them). A ``None`` answer (the field left out)
tells a Java client to keep what it has: unknown topic or strategy, a group
with no live clients, a topic with no readable queue.

The embedded broker answers from its own topic table, so the queues it
assigns are its own: right for the usual one-broker setup; a Java broker asks
the name server for the topic's queues on every broker.

SET_MESSAGE_REQUEST_MODE refuses ``%RETRY%`` topics (NO_PERMISSION, as Java),
unknown topics (TOPIC_NOT_EXIST) and groups that do not exist and cannot be
auto-created (SUBSCRIPTION_GROUP_NOT_EXIST); the table is saved before the
answer. GET_ALL_MESSAGE_REQUEST_MODE returns the whole table in the layout of
Java's ``MessageRequestModeManager`` (Java serves it from AdminBrokerProcessor).
"""

from __future__ import annotations

from loguru import logger

from rmqrun.broker.processors.common import answer
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.queue_allocation import STRATEGIES, allocate_for_pop
from rmqrun.broker.request_modes import RequestModeTable
from rmqrun.broker.topics import is_readable
from rmqrun.model import MessageQueue
from rmqrun.protocol.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rmqrun.protocol.bodies import MessageModel
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.topic_names import is_retry_topic
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand


class AssignmentProcessor:
    def __init__(self, broker: BrokerContext, modes: RequestModeTable | None = None) -> None:
        self.broker = broker
        if modes is None:
            modes = RequestModeTable.in_data_dir(broker.config.data_dir)
            try:
                modes.load()
            except OSError as exc:  # e.g. a data dir that is a file: the store's open refuses it with the right words
                logger.debug("message request mode file not read: {}", exc)
            if modes.problem:
                logger.warning("message request mode file problem: {}", modes.problem)
        #: the persisted topic -> group -> mode table (also read by the POP processor if it wants the mode)
        self.modes = modes

    async def query_assignment(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = QueryAssignmentRequestBody.decode(cmd.body or b"")
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad QueryAssignmentRequestBody: {exc}", typed=False)
        setting = self.modes.effective(req.topic, req.consumer_group)
        queues = self._assign(req, setting)
        assignments = None if queues is None else [MessageQueueAssignment(mq, setting.mode) for mq in queues]
        return answer(cmd, body=QueryAssignmentResponseBody(assignments).encode(), typed=False)

    def _topic_queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues on this broker (None: no such topic)."""
        topics = self.broker.topics
        tc = topics.get(topic) if topics is not None else None
        if tc is None:
            return None
        if not is_readable(tc.perm):
            return []
        name = self.broker.config.broker_name
        return [MessageQueue(topic, name, q) for q in range(tc.read_queue_nums)]

    def _assign(self, req: QueryAssignmentRequestBody,
                setting: SetMessageRequestModeRequestBody) -> list[MessageQueue] | None:
        mqs = self._topic_queues(req.topic)
        if mqs is None:
            if not is_retry_topic(req.topic):
                logger.warning("QUERY_ASSIGNMENT: group {} asked for topic {}, which does not exist",
                               req.consumer_group, req.topic)
            return None
        if req.message_model is MessageModel.BROADCASTING:
            return mqs
        group = self.broker.consumers.group(req.consumer_group)
        strategy = STRATEGIES.get(req.strategy_name)
        if group is None or strategy is None:
            logger.warning("QUERY_ASSIGNMENT: no answer for group {} on topic {} ({})", req.consumer_group, req.topic,
                           "no live clients" if group is None else f"unknown strategy {req.strategy_name!r}")
            return None
        cids = group.client_ids()
        if setting.mode is MessageRequestMode.POP:
            return allocate_for_pop(strategy, req.client_id, mqs, cids, setting.pop_share_queue_num)
        if not mqs or not cids:
            return None  # Java's strategies refuse empty inputs, and the refusal becomes "no answer"
        return strategy(req.client_id, mqs, cids)

    async def set_message_request_mode(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = SetMessageRequestModeRequestBody.decode(cmd.body or b"")
        except ProtocolError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad SetMessageRequestModeRequestBody: {exc}",
                          typed=False)
        if is_retry_topic(req.topic):
            return answer(cmd, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode", typed=False)
        topics = self.broker.topics
        if topics is None or topics.get(req.topic) is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{req.topic}] not exist", typed=False)
        groups = self.broker.groups
        if groups is None or not req.consumer_group or groups.find(req.consumer_group) is None:
            return answer(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist",
                          typed=False)
        try:
            self.modes.put(req)
        except OSError as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR,
                          f"the message request mode could not be saved: {exc.strerror or exc}", typed=False)
        return answer(cmd, typed=False)

    async def get_all_message_request_mode(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return answer(cmd, body=self.modes.snapshot().encode(), typed=False)
