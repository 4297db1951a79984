"""Raw-protocol helpers for the embedded broker's integration tests.

Requests are built by hand (RemotingCommand + ext fields exactly as the Java
client sends them) so the tests pin the broker's wire behaviour, independent
of rmqrun's own client.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Coroutine, TypeVar

import pytest

from rmqrun import event_loop
from rmqrun.errors import ConfigError
from rmqrun.model import Message, MessageQueue
from rmqrun.protocol.bodies import ConsumerData, HeartbeatData, LockBatchRequestBody, LockBatchResponseBody
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages
from rmqrun.remoting.message_props import properties_to_string

TIMEOUT = 5.0
T = TypeVar("T")

#: the loops a broker test that depends on the loop's own machinery (transports, TLS, what one turn serves) runs
#: on: the standard one and uvloop (``rmqrun broker``'s default where installed; CI installs it)
LOOPS = ("asyncio", "uvloop")


def run_on(loop: str, coro: Coroutine[Any, Any, T], timeout: float = 75.0) -> T:
    """``coro`` on the ``loop`` chosen as :mod:`rmqrun.event_loop` chooses, bounded (the bound only ends a
    failure); on uvloop where it is not installed, a skip."""
    try:
        event_loop.loop_factory(loop)
    except ConfigError as exc:  # uvloop, not installed
        coro.close()
        pytest.skip(str(exc))
    return event_loop.run(lambda _name: asyncio.wait_for(coro, timeout), loop)


def send_ext(topic: str, *, queue_id: int = -1, tags: str | None = None, keys: str | None = None,
             props: dict[str, str] | None = None, group: str = "PG_test", reconsume_times: int = 0,
             max_reconsume_times: int | None = None, batch: bool = False) -> dict[str, str]:
    """SEND_MESSAGE_V2 ext fields as the 4.9.8 Java producer fills them."""
    p: dict[str, str] = {}
    if keys:
        p["KEYS"] = keys
    p.update(props or {})
    p["WAIT"] = "true"
    if tags:
        p["TAGS"] = tags
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(p), "j": str(reconsume_times),
           "k": "false", "m": "true" if batch else "false", "n": "broker-a"}
    if max_reconsume_times is not None:
        ext["l"] = str(max_reconsume_times)
    return ext


def pull_ext(group: str, topic: str, queue_id: int, offset: int, *, max_nums: int = 32, suspend_ms: int = 0,
             commit_offset: int | None = None, subscription: str | None = None, sub_version: int = 0) -> dict[str, str]:
    sys_flag = (2 if suspend_ms else 0) | (1 if commit_offset is not None else 0) | (4 if subscription else 0)
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": str(commit_offset or 0),
           "suspendTimeoutMillis": str(suspend_ms), "subVersion": str(sub_version), "expressionType": "TAG"}
    if subscription:
        ext["subscription"] = subscription
    return ext


@dataclass
class Client:
    """One client's connections (name server + broker), with a notify inbox."""

    namesrv: Connection
    broker: Connection
    notifications: list[str] = field(default_factory=list)
    notified: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    async def connect(cls, namesrv_addr: str, broker_addr: str) -> "Client":
        holder: dict[str, Client] = {}

        async def handle(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
            if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                holder["c"].notifications.append(cmd.ext_fields.get("consumerGroup", ""))
                holder["c"].notified.set()
                return None
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)

        ns = await Connection.open(namesrv_addr)
        br = await Connection.open(broker_addr, handler=handle)
        holder["c"] = cls(ns, br)
        return holder["c"]

    async def close(self) -> None:
        for conn in (self.namesrv, self.broker):
            conn.close()
            await conn.wait_closed()

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None, *,
                   timeout: float = TIMEOUT, **kw: Any) -> RemotingCommand:
        return await self.broker.request(RemotingCommand(code, dict(ext or {}), body=body, language="JAVA", **kw), timeout)

    async def route(self, topic: str, version: int = 409) -> RemotingCommand:
        return await self.namesrv.request(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic},
                                                          language="JAVA", version=version), TIMEOUT)

    async def send(self, topic: str, body: bytes, **kw: Any) -> RemotingCommand:
        resp = await self.call(RequestCode.SEND_MESSAGE_V2, send_ext(topic, **kw), body)
        return resp

    async def heartbeat(self, client_id: str, group: str, subs: dict[str, str], *,
                        sub_version: int | None = None) -> RemotingCommand:
        data = HeartbeatData(client_id, consumer_data_set=[ConsumerData(group, subscription_data_set=[
            SubscriptionData.build(t, e, sub_version=sub_version) for t, e in subs.items()])])
        return await self.call(RequestCode.HEART_BEAT, body=data.encode())

    async def pull(self, group: str, topic: str, queue_id: int, offset: int, *, timeout: float = TIMEOUT,
                   **kw: Any) -> RemotingCommand:
        return await self.call(RequestCode.PULL_MESSAGE, pull_ext(group, topic, queue_id, offset, **kw),
                               timeout=timeout)

    async def lock(self, group: str, client_id: str, mqs: list[MessageQueue]) -> list[MessageQueue]:
        resp = await self.call(RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody(group, client_id, mqs).encode())
        assert resp.code == ResponseCode.SUCCESS, resp
        return LockBatchResponseBody.from_json(resp.body or b"{}").lock_ok_mq_set

    async def unlock(self, group: str, client_id: str, mqs: list[MessageQueue]) -> None:
        resp = await self.call(RequestCode.UNLOCK_BATCH_MQ, body=LockBatchRequestBody(group, client_id, mqs).encode())
        assert resp.code == ResponseCode.SUCCESS, resp


def messages(resp: RemotingCommand) -> list[Message]:
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return decode_messages(resp.body or b"")


async def drain(client: Client, group: str, topic: str, queues: int, *, expect: int, deadline_s: float = 15.0,
                to_the_end: bool = False, **pull_kw: Any) -> list[Message]:
    """Pull every queue from offset 0 until ``expect`` messages came back (or the deadline passes).

    With ``to_the_end``, go on until a whole round finds nothing more, however many came
    back: a crash test's store may hold more than was acknowledged (sends the broker stored
    but could not answer), and stopping at the acknowledged count would leave queue tails
    unread.
    """
    got: list[Message] = []
    offsets = [0] * queues
    end = time.monotonic() + deadline_s
    while (len(got) < expect or to_the_end) and time.monotonic() < end:
        progressed = False
        for q in range(queues):
            resp = await client.pull(group, topic, q, offsets[q], **pull_kw)
            if resp.code == ResponseCode.SUCCESS:
                got.extend(decode_messages(resp.body or b""))
                progressed = True
            if resp.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY,
                             ResponseCode.PULL_OFFSET_MOVED):
                offsets[q] = int(resp.ext_fields["nextBeginOffset"])
        if not progressed:
            if to_the_end and len(got) >= expect:
                return got
            await asyncio.sleep(0.05)
    return got
