"""Broker-side assignment calls of RocketMQ 5.x: QUERY_ASSIGNMENT and the message-request-mode table.

``query_assignment`` is what a POP consumer asks instead of rebalancing itself
(``MQClientAPIImpl.queryAssignment``); ``set_message_request_mode`` is what
``mqadmin setConsumeMode`` sends to each master; ``message_request_modes``
reads a broker's whole table (GET_ALL_MESSAGE_REQUEST_MODE, which Java's slave
brokers use to copy it from their master). Each call talks to one broker; a
4.x broker answers REQUEST_CODE_NOT_SUPPORTED, raised as
:class:`~rmqrun.remoting.errors.RequestNotSupportedError` (callers say that
POP needs RocketMQ 5.x).

Stateless, like :class:`rmqrun.client.admin.AdminClient`: it borrows a
connection pool.
"""

from __future__ import annotations

from rmqrun.protocol.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    MessageRequestModeTable,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rmqrun.protocol.bodies import MessageModel
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import ConnectionPool
from rmqrun.remoting.errors import error_for_code
from rmqrun.remoting.frame import RemotingCommand

#: MQClientAPIImpl's timeouts for these calls (setMessageRequestMode: the tool's 5 s; queryAssignment: 3 s).
SET_MODE_TIMEOUT = 5.0
QUERY_ASSIGNMENT_TIMEOUT = 3.0


class AssignmentClient:
    """The three calls, each to one broker address."""

    def __init__(self, pool: ConnectionPool, *, timeout: float = SET_MODE_TIMEOUT) -> None:
        self.pool = pool
        self.timeout = timeout

    async def _call(self, addr: str, code: int, body: bytes | None, timeout: float | None) -> RemotingCommand:
        resp = await self.pool.request(addr, RemotingCommand(code, {}, body=body), timeout or self.timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, code)
        return resp

    async def query_assignment(self, addr: str, topic: str, group: str, client_id: str, *,
                               strategy_name: str = "AVG", message_model: MessageModel = MessageModel.CLUSTERING,
                               timeout: float = QUERY_ASSIGNMENT_TIMEOUT) -> list[MessageQueueAssignment] | None:
        """This client's queues of ``topic`` and how to consume them. None: the broker has no answer
        (unknown topic or strategy, the group has no live client there yet): keep what you have."""
        body = QueryAssignmentRequestBody(topic, group, client_id, strategy_name, message_model).encode()
        resp = await self._call(addr, RequestCode.QUERY_ASSIGNMENT, body, timeout)
        return QueryAssignmentResponseBody.decode(resp.body or b"{}").assignments

    async def set_message_request_mode(self, addr: str, topic: str, group: str, mode: MessageRequestMode, *,
                                       pop_share_queue_num: int = 0, timeout: float | None = None) -> None:
        """Store the group's mode for ``topic`` on one broker (its masters each keep their own table)."""
        body = SetMessageRequestModeRequestBody(topic, group, MessageRequestMode.parse(mode),
                                                pop_share_queue_num).encode()
        await self._call(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, body, timeout)

    async def message_request_modes(self, addr: str, *, timeout: float | None = None) -> MessageRequestModeTable:
        """Every mode one broker was told (an empty table when none was set)."""
        resp = await self._call(addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, None, timeout)
        return MessageRequestModeTable.decode(resp.body) if resp.body else MessageRequestModeTable()
