"""Typed calls to a broker: send, pull, offsets, heartbeat, locks, send-back.

Each method takes the broker address, builds the request the 4.9.8 Java
client sends (``MQClientAPIImpl``), and turns the answer into a typed
result. A response code the Java client does not map to a result raises
``error_for_code(...)``, whose class says whether retrying helps.

Timeouts default to the Java client's: 30 s for a pull (the broker holds it
up to 15 s), 1 s for lock/unlock, 5 s for a send-back, 3 s for the rest.

Pull bodies are returned as bytes, undecoded: the caller picks between
``message.scan_records`` (hot path) and ``message.decode_messages``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import Iterable

from rmqrun.client.failure_log import FailureLog, cause_of, is_transport
from rmqrun.model import Message, MessageQueue
from rmqrun.protocol.bodies import (
    CheckClientRequestBody,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmqrun.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.acl_sign import UNIQUE_KEY_QUERY
from rmqrun.remoting.codes import RequestCode, ResponseCode, request_name
from rmqrun.remoting.connection import ConnectionPool
from rmqrun.remoting.errors import ProtocolError, error_for_code
from rmqrun.remoting.frame import RemotingCommand, dump_header
from rmqrun.remoting.message import decode_message, decode_messages
from rmqrun.remoting.message_props import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, string_to_properties
from rmqrun.remoting.msg_id import decode_offset_msg_id

API_TIMEOUT = 3.0            # ClientConfig.mqClientApiTimeout
PULL_TIMEOUT = 30.0          # CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND
PULL_SUSPEND_MILLIS = 15000  # BROKER_SUSPEND_MAX_TIME_MILLIS, sent as suspendTimeoutMillis
LOCK_TIMEOUT = 1.0           # RebalanceImpl lock/unlock
SEND_BACK_TIMEOUT = 5.0      # DefaultMQPushConsumerImpl.sendMessageBack
OFFSET_COMMIT_TIMEOUT = 5.0  # RemoteBrokerOffsetStore.updateConsumeOffsetToBroker
SEND_TIMEOUT = 3.0           # DefaultMQProducer.sendMsgTimeout

DEFAULT_REGION = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID


class SendStatus(str, Enum):
    """Stored, but with a caveat for every status except SEND_OK (Java's SendStatus)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class SendResult:
    """``msg_id`` is the client id (UNIQ_KEY; comma-joined for a batch), ``offset_msg_id`` the broker's."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = DEFAULT_REGION
    trace_on: bool = True


class PullStatus(str, Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    """A pull answer with its body undecoded (``b""`` when there is none); ``remark`` is the
    broker's reason, e.g. ``OFFSET_OVERFLOW_ONE``."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes = b""
    remark: str | None = None


def send_result_from_response(resp: RemotingCommand, queue_topic: str, broker_name: str,
                              msg_id: str = "") -> SendResult:
    """MQClientAPIImpl.processSendResponse: a status for the four storing codes, else the error."""
    status = _SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise error_for_code(resp.code, resp.remark, RequestCode.SEND_MESSAGE_V2)
    header = SendMessageResponseHeader.from_ext(resp.ext_fields)
    return SendResult(
        status=status,
        msg_id=msg_id,
        offset_msg_id=header.msg_id,
        queue=MessageQueue(queue_topic, broker_name, header.queue_id),
        queue_offset=header.queue_offset,
        transaction_id=header.transaction_id,
        region_id=header.msg_region or DEFAULT_REGION,
        trace_on=header.trace_on is not False,
    )


def pull_result_from_response(resp: RemotingCommand) -> PullResult:
    """MQClientAPIImpl.processPullResponse.

    The four numbers are read straight from the ext fields (a pull answer is read for every 32 messages); an
    answer they do not read from goes through :class:`PullMessageResponseHeader`, which says what is wrong."""
    status = _PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise error_for_code(resp.code, resp.remark, RequestCode.PULL_MESSAGE)
    ext = resp.ext_fields
    try:
        return PullResult(status, int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"]),
                          int(ext["suggestWhichBrokerId"]), resp.body or b"", resp.remark)
    except (KeyError, ValueError, TypeError):
        pass
    header = PullMessageResponseHeader.from_ext(ext)
    return PullResult(status, header.next_begin_offset, header.min_offset, header.max_offset,
                      header.suggest_which_broker_id, resp.body or b"", resp.remark)


class PullFields(dict):  # type: ignore[type-arg]
    """A pull's ext fields as :meth:`PullTemplate.fill` makes them, with ``text``: the same as JSON, written from
    the template (a frame's header then splices it in instead of encoding the fields; None: encode them). Not
    to be changed once filled: the text would no longer say the same (the request signer drops the text)."""

    __slots__ = ("text",)


#: the three numbers a pull template fills in, in the order they stand in its JSON text (found when it is made)
_FILLED = ("queueOffset", "sysFlag", "commitOffset")


class PullTemplate:
    """A queue's PULL_MESSAGE ext fields worked out once, with the three numbers that change from pull to pull
    (offset, flag, commit offset) filled in per pull: the same fields in the same order as ``header.to_ext()``
    (the Java map order depends only on which fields are present, and these three always are), and their JSON
    text, without a header object and its encoding per pull. ``key`` is what the owner built it from (a new
    one: a new template)."""

    __slots__ = ("key", "_fields", "_text", "_order")

    def __init__(self, key: object, header: PullMessageRequestHeader) -> None:
        self.key = key
        self._fields = header.to_ext()
        # the JSON text cut around the three numbers (each a JSON string of digits: nothing to escape)
        marked = {k: (f"\x00{k}\x00" if k in _FILLED else v) for k, v in self._fields.items()}
        text = dump_header(marked)
        self._order = sorted(_FILLED, key=lambda k: text.find(f"\\u0000{k}\\u0000"))
        for k in self._order:
            text = text.replace(f"\\u0000{k}\\u0000", "\x00")
        parts = text.split("\x00")
        #: None where the cut did not come out as four pieces (a field holding the marker itself): no text then
        self._text = parts if len(parts) == 4 else None

    def fill(self, queue_offset: int, sys_flag: int, commit_offset: int) -> PullFields:
        ext = PullFields(self._fields)  # the order stays: the three keys below are replaced in place
        values = {"queueOffset": str(queue_offset), "sysFlag": str(sys_flag), "commitOffset": str(commit_offset)}
        ext.update(values)
        if self._text is None:
            ext.text = None
            return ext
        head, a, b, tail = self._text
        first, second, third = self._order
        ext.text = f"{head}{values[first]}{a}{values[second]}{b}{values[third]}{tail}"
        return ext


class BrokerClient:
    """Stateless request builders over a shared :class:`ConnectionPool`."""

    def __init__(self, pool: ConnectionPool, *, timeout: float = API_TIMEOUT) -> None:
        self.pool = pool
        self.timeout = timeout
        #: ``time.monotonic()`` of the latest answer from any broker (any response code: the broker is up),
        #: 0.0 before the first; read by ``/readyz`` to tell "no broker answers" from "nothing to do"
        self.last_answer = 0.0
        #: the same per broker address: a lag from a broker that has gone quiet is not shown as current
        self.answered_at: dict[str, float] = {}
        #: set by a long-running owner (``rmqrun run``'s consumer): an unreachable broker is then one incident
        #: per address (start, summaries, end) instead of a line from every request that fails on it
        self.failures: FailureLog | None = None

    def reported(self, exc: BaseException) -> bool:
        """True when ``exc`` is a transport failure this client's incident log reports already: a caller
        then logs it at DEBUG only."""
        return self.failures is not None and is_transport(exc)

    async def _call(self, addr: str, cmd: RemotingCommand, timeout: float | None) -> RemotingCommand:
        try:
            resp = await self.pool.request(addr, cmd, self.timeout if timeout is None else timeout)
        except Exception as exc:
            if self.failures is not None and is_transport(exc):
                self.failures.failed(("broker", addr), f"broker {addr}",
                                     f"{request_name(cmd.code)} failed: {cause_of(exc)}", state="unreachable")
            raise
        self.last_answer = self.answered_at[addr] = time.monotonic()
        if self.failures is not None:
            self.failures.recovered(("broker", addr))
        return resp

    async def request(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Any request, answered with any code (the failure log and answer times kept): for typed calls
        that live beside this class (``pop_api``, ``assignment``)."""
        return await self._call(addr, cmd, timeout)

    async def _expect_success(self, addr: str, cmd: RemotingCommand, timeout: float | None) -> RemotingCommand:
        resp = await self._call(addr, cmd, timeout)
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, cmd.code)
        return resp

    # ----------------------------------------------------------------- send

    async def send(self, addr: str, header: SendMessageRequestHeader, body: bytes, *,
                   timeout: float = SEND_TIMEOUT, v2: bool = True, msg_id: str | None = None) -> SendResult:
        """Send one message, or a batch when ``header.batch`` (SEND_BATCH_MESSAGE, body from
        ``message.encode_batch``). The V2 single-letter header is the Java default
        (``sendSmartMsg``); ``v2=False`` sends SEND_MESSAGE with full names.

        ``msg_id`` defaults to the UNIQ_KEY in ``header.properties``; a batch's ids live in its
        body, so the caller passes them (comma-joined), as the Java client reports them.
        """
        cmd = self._send_command(header, body, v2)
        resp = await self._call(addr, cmd, timeout)
        if msg_id is None:
            msg_id = string_to_properties(header.properties or "").get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        return send_result_from_response(resp, header.topic, header.bname or "", msg_id)

    async def send_oneway(self, addr: str, header: SendMessageRequestHeader, body: bytes, *, v2: bool = True) -> None:
        await self.pool.oneway(addr, self._send_command(header, body, v2))

    @staticmethod
    def _send_command(header: SendMessageRequestHeader, body: bytes, v2: bool) -> RemotingCommand:
        if header.batch:
            return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, header.to_ext(v2=True), body=body)
        if v2:
            return RemotingCommand(RequestCode.SEND_MESSAGE_V2, header.to_ext(v2=True), body=body)
        return RemotingCommand(RequestCode.SEND_MESSAGE, header.to_ext(), body=body)

    # ----------------------------------------------------------------- pull

    async def pull(self, addr: str, header: PullMessageRequestHeader | dict[str, str], *,
                   timeout: float = PULL_TIMEOUT) -> PullResult:
        """One pull; ``header`` is the request's header, or its ext fields as :meth:`PullTemplate.fill` makes them."""
        if isinstance(header, dict):
            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, header, ext_text=getattr(header, "text", None))
        else:
            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, header.to_ext())
        return pull_result_from_response(await self._call(addr, cmd, timeout))

    # ----------------------------------------------------------------- consumer offsets

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, *,
                                    timeout: float | None = None) -> int | None:
        """The group's stored offset, or ``None`` when the broker has none (QUERY_NOT_FOUND).

        Java raises for code 22 and its offset store turns that into -1; ``None`` says the same
        without a magic number. Every other failure raises.
        """
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                  bname=mq.broker_name)
        resp = await self._call(addr, RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext()), timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, RequestCode.QUERY_CONSUMER_OFFSET)
        return OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int, *,
                                     oneway: bool = True, timeout: float = OFFSET_COMMIT_TIMEOUT) -> None:
        """Store the group's offset; oneway like the Java offset store (no answer, no error)."""
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                   commit_offset=offset, bname=mq.broker_name)
        cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        if oneway:
            await self.pool.oneway(addr, cmd)
        else:
            await self._expect_success(addr, cmd, timeout)

    # ----------------------------------------------------------------- queue offsets

    async def get_max_offset(self, addr: str, mq: MessageQueue, *, timeout: float | None = None) -> int:
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name)
        resp = await self._expect_success(addr, RemotingCommand(RequestCode.GET_MAX_OFFSET, header.to_ext()), timeout)
        return OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def get_min_offset(self, addr: str, mq: MessageQueue, *, timeout: float | None = None) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name)
        resp = await self._expect_success(addr, RemotingCommand(RequestCode.GET_MIN_OFFSET, header.to_ext()), timeout)
        return OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp: int, *,
                            timeout: float | None = None) -> int:
        """The queue offset of the first message stored at or after ``timestamp`` (ms)."""
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp,
                                           bname=mq.broker_name)
        resp = await self._expect_success(
            addr, RemotingCommand(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext()), timeout)
        return OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def earliest_msg_store_time(self, addr: str, mq: MessageQueue, *, timeout: float | None = None) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name)
        resp = await self._expect_success(
            addr, RemotingCommand(RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext()), timeout)
        return GetEarliestMsgStoretimeResponseHeader.from_ext(resp.ext_fields).timestamp

    async def view_message(self, offset_msg_id: str, addr: str | None = None, *,
                           timeout: float | None = None) -> Message:
        """The stored message an offset message id points at. The id holds the store
        address and commit-log offset; ``addr`` overrides the address (e.g. behind NAT)."""
        store_addr, offset = decode_offset_msg_id(offset_msg_id)
        header = ViewMessageRequestHeader(offset=offset)
        resp = await self._expect_success(addr or store_addr,
                                          RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext()), timeout)
        if not resp.body:
            raise ProtocolError(f"VIEW_MESSAGE_BY_ID {offset_msg_id} answered with no message")
        msg, _ = decode_message(resp.body)
        return msg

    async def query_message(self, addr: str, header: QueryMessageRequestHeader, *, unique_key: bool,
                            broker_name: str = "", timeout: float | None = None) -> tuple[list[Message], int]:
        """QUERY_MESSAGE to one broker: (the messages its key index holds under the key, the index's last
        update time). QUERY_NOT_FOUND is an empty list, not an error: the caller asks every broker of a
        topic and only "none anywhere" means not found. Java always sends the unique-key flag."""
        ext = {UNIQUE_KEY_QUERY: "true" if unique_key else "false", **header.to_ext()}  # Java's order
        resp = await self._call(addr, RemotingCommand(RequestCode.QUERY_MESSAGE, ext), timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return [], 0
        if resp.code != ResponseCode.SUCCESS:
            raise error_for_code(resp.code, resp.remark, RequestCode.QUERY_MESSAGE)
        answer = QueryMessageResponseHeader.from_ext(resp.ext_fields)
        return decode_messages(resp.body or b"", broker_name=broker_name), answer.index_last_update_timestamp

    # ----------------------------------------------------------------- clients and groups

    async def heartbeat(self, addr: str, data: HeartbeatData, *, timeout: float | None = None) -> int:
        """Register producers/consumers; returns the broker's version (Java uses it to learn broker versions)."""
        resp = await self._expect_success(addr, RemotingCommand(RequestCode.HEART_BEAT, body=data.encode()), timeout)
        return resp.version

    async def unregister_client(self, addr: str, client_id: str, *, producer_group: str | None = None,
                                consumer_group: str | None = None, timeout: float | None = None) -> None:
        header = UnregisterClientRequestHeader(client_id=client_id, producer_group=producer_group,
                                               consumer_group=consumer_group)
        await self._expect_success(addr, RemotingCommand(RequestCode.UNREGISTER_CLIENT, header.to_ext()), timeout)

    async def get_consumer_list(self, addr: str, group: str, *, timeout: float | None = None) -> list[str]:
        """Client ids of the group's live members, as the broker knows them."""
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        resp = await self._expect_success(
            addr, RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext()), timeout)
        if resp.body is None:
            # Java treats a bodiless SUCCESS as a failure too.
            raise ProtocolError(f"GET_CONSUMER_LIST_BY_GROUP for {group!r} answered without a body")
        return ConsumerListBody.from_json(resp.body).consumer_id_list

    async def check_client_config(self, addr: str, group: str, client_id: str, subscription: SubscriptionData, *,
                                  timeout: float | None = None) -> None:
        """CHECK_CLIENT_CONFIG (Java ``checkClientInBroker``): raises the broker's refusal of a subscription it
        cannot serve (a Java broker without ``enablePropertyFilter`` refuses SQL92 so)."""
        body = CheckClientRequestBody(client_id, group, subscription.to_json()).encode()
        await self._expect_success(addr, RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=body), timeout)

    # ----------------------------------------------------------------- orderly locks

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], *,
                            timeout: float = LOCK_TIMEOUT) -> set[MessageQueue]:
        """Ask the broker to lock queues for this client; returns those it locked (held by us)."""
        body = LockBatchRequestBody(group, client_id, list(mqs)).encode()
        resp = await self._expect_success(addr, RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=body), timeout)
        return set(LockBatchResponseBody.from_json(resp.body or b"{}").lock_ok_mq_set)

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], *,
                              oneway: bool = False, timeout: float = LOCK_TIMEOUT) -> None:
        """Java unlocks oneway during a rebalance and two-way at shutdown."""
        body = UnlockBatchRequestBody(group, client_id, list(mqs)).encode()
        cmd = RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, body=body)
        if oneway:
            await self.pool.oneway(addr, cmd)
        else:
            await self._expect_success(addr, cmd, timeout)

    # ----------------------------------------------------------------- retry

    async def consumer_send_msg_back(self, addr: str, *, group: str, commit_log_offset: int, delay_level: int,
                                     origin_msg_id: str, origin_topic: str, max_reconsume_times: int,
                                     broker_name: str | None = None, timeout: float = SEND_BACK_TIMEOUT) -> None:
        """Return a consumed message to the broker for a later retry (or the DLQ).

        ``origin_msg_id`` is the message's client-visible id (UNIQ_KEY) and ``origin_topic`` its
        topic as the handler saw it (Java passes ``msg.getMsgId()`` and ``msg.getTopic()``);
        ``commit_log_offset`` locates it in the broker's store.
        """
        header = ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset, group=group, delay_level=delay_level, origin_msg_id=origin_msg_id,
            origin_topic=origin_topic, max_reconsume_times=max_reconsume_times, bname=broker_name)
        await self._expect_success(addr, RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext()), timeout)
