"""POP requests against the embedded broker, built with :mod:`rmqrun.protocol.pop` as a client builds them.

:func:`popped` turns a POP answer into (message, receipt) pairs the way ``MQClientAPIImpl.processPopResponse``
does: a message that carries ``POP_CK`` (revived, from the retry topic) keeps the broker's receipt, any other
gets one built from the answer's header.
"""

from __future__ import annotations

import time
from typing import Any

from rmqrun.model import Message
from rmqrun.protocol.pop import (
    PROPERTY_POP_CK,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
    receipt_for,
    retry_flag_of,
)
from rmqrun.protocol.pop_batch_ack import build_batch_acks, encode_batch_ack_body
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages
from tests.integration.broker_kit import Client, run_on

BROKER = "broker-a"


def run(coro: Any, timeout: float = 75.0, loop: str = "asyncio") -> Any:
    """A test's coroutine on ``loop`` (broker_kit.LOOPS), bounded (the bound only ends a failure)."""
    return run_on(loop, coro, timeout)


async def connect(eb: Any) -> Client:
    """A client of the embedded broker ``eb`` (its name server and broker)."""
    return await Client.connect(eb.namesrv_address, eb.broker_address)


async def pop_until(client: Client, group: str, topic: str, n: int, deadline_s: float = 60.0,
                    **kw: Any) -> list[Any]:
    """Pop (long polling, 1 s holds) until ``n`` messages came back; the deadline only ends a failure (a revive
    due in 1 s took 14 s at load 19: keep it generous)."""
    got: list[Any] = []
    end = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < end:
        got.extend(await pop_all(client, group, topic, poll_ms=1000, **kw))
    return got


async def pop(client: Client, group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
              invisible_ms: int = 60_000, poll_ms: int = 0, init_mode: int = 0, exp: str | None = None,
              exp_type: str | None = None, order: bool = False, attempt_id: str | None = None,
              timeout: float = 5.0, born_ms: int | None = None) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_nums, invisible_time=invisible_ms,
        poll_time=poll_ms, born_time=int(time.time() * 1000) if born_ms is None else born_ms, init_mode=init_mode,
        exp_type=exp_type if exp_type is not None else ("TAG" if exp else None), exp=exp, order=order,
        attempt_id=attempt_id, bname=BROKER)
    return await client.call(RequestCode.POP_MESSAGE, header.to_ext(), timeout=timeout + poll_ms / 1000)


def popped(resp: RemotingCommand) -> list[tuple[Message, ReceiptHandle]]:
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    header = PopMessageResponseHeader.from_ext(resp.ext_fields)
    out = []
    for msg in decode_messages(resp.body or b""):
        ck = msg.properties.get(PROPERTY_POP_CK)
        if ck is not None:
            receipt = ReceiptHandle.parse(ck)
        else:
            receipt = receipt_for(header, broker_name=BROKER, retry_flag=retry_flag_of(msg.topic),
                                  queue_id=msg.queue_id, queue_offset=msg.queue_offset)
        out.append((msg, receipt))
    return out


async def pop_all(client: Client, group: str, topic: str, **kw: Any) -> list[tuple[Message, ReceiptHandle]]:
    resp = await pop(client, group, topic, **kw)
    if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
        return []
    return popped(resp)


async def ack(client: Client, group: str, topic: str, receipt: ReceiptHandle) -> RemotingCommand:
    header = AckMessageRequestHeader(consumer_group=group, topic=receipt.real_topic(topic, group),
                                     queue_id=receipt.queue_id, extra_info=receipt.encode(),
                                     offset=receipt.queue_offset)
    return await client.call(RequestCode.ACK_MESSAGE, header.to_ext())


async def batch_ack(client: Client, group: str, topic: str, receipts: list[ReceiptHandle]) -> RemotingCommand:
    body = encode_batch_ack_body(BROKER, build_batch_acks(group, topic, receipts))
    return await client.call(RequestCode.BATCH_ACK_MESSAGE, body=body)


async def change_invisible(client: Client, group: str, topic: str, receipt: ReceiptHandle,
                           invisible_ms: int) -> RemotingCommand:
    header = ChangeInvisibleTimeRequestHeader(consumer_group=group, topic=receipt.real_topic(topic, group),
                                              queue_id=receipt.queue_id, extra_info=receipt.encode(),
                                              offset=receipt.queue_offset, invisible_time=invisible_ms)
    return await client.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())


async def send_many(client: Client, topic: str, n: int, *, queue_id: int = 0, prefix: str = "m",
                    tags: str | None = None) -> list[bytes]:
    bodies = []
    for i in range(n):
        body = f"{prefix}{i}".encode()
        resp = await client.send(topic, body, queue_id=queue_id, tags=tags)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
        bodies.append(body)
    return bodies
