"""The connection's half of ACL: every request it sends is signed (two-way and oneway, never a response),
and an answer that is an ACL refusal comes back as one non-retriable AccessDeniedError naming operation,
topic/group and access key, reported once to the pool's listener. A plain server on real TCP records
what arrives and checks the signature from the definition (hmac/hashlib/base64 here)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import (
    AccessDeniedError,
    ConnectionClosedError,
    NoPermissionError,
    TlsError,
    error_for_code,
    is_access_refusal,
)
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.security import ClientSecurity
from rmqrun.remoting.server import RemotingServer
from tests.waiting import eventually_async

AK, SK = "app-key", "s3cr3t-value"
ACL_REMARK = ("org.apache.rocketmq.acl.common.AclException: No default permission for %RETRY%G1, "
              "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:123)")


def expected_signature(ext: dict[str, str], body: bytes | None) -> str:
    content = "".join(ext[k] for k in sorted(ext) if k != "Signature").encode() + (body or b"")
    return base64.b64encode(hmac.new(SK.encode(), content, hashlib.sha1).digest()).decode()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _server(seen: list[RemotingCommand]) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, name="acl-test")

    async def ok(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"echo": "1"})

    async def refuse(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        return cmd.response(ResponseCode.SYSTEM_ERROR, ACL_REMARK)

    server.register(RequestCode.GET_MAX_OFFSET, ok)
    server.register(RequestCode.UPDATE_CONSUMER_OFFSET, ok)
    server.register(RequestCode.HEART_BEAT, refuse)
    server.register(RequestCode.PULL_MESSAGE, refuse)
    await server.start()
    return server


def test_requests_and_oneways_are_signed_and_refusals_raise_once_reported() -> None:
    async def main() -> None:
        seen: list[RemotingCommand] = []
        server = await _server(seen)
        refused: list[AccessDeniedError] = []
        pool = ConnectionPool(security=ClientSecurity(AK, SK), on_refused=refused.append)
        resp = await pool.request(server.address, RemotingCommand(RequestCode.GET_MAX_OFFSET,
                                                                  {"topic": "T", "queueId": "0"}), 5)
        assert resp.code == ResponseCode.SUCCESS and "Signature" not in resp.ext_fields  # answers are not signed
        await pool.oneway(server.address, RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                          {"topic": "T", "consumerGroup": "G1", "queueId": "0",
                                                           "commitOffset": "5"}))
        await eventually_async(lambda: len(seen) == 2, what="the oneway request to reach the server")
        assert [c.code for c in seen] == [RequestCode.GET_MAX_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET]
        for cmd in seen:
            assert cmd.ext_fields["AccessKey"] == AK
            assert cmd.ext_fields["Signature"] == expected_signature(cmd.ext_fields, cmd.body)

        body = json.dumps({"clientID": "c", "consumerDataSet": [{"groupName": "G1"}], "producerDataSet": []}).encode()
        with pytest.raises(AccessDeniedError) as info:
            await pool.request(server.address, RemotingCommand(RequestCode.HEART_BEAT, {}, body=body), 5)
        text = str(info.value)
        assert text == (f"access denied by {server.address}: HEART_BEAT (group G1) with access key {AK}: "
                        "No default permission for %RETRY%G1")
        assert SK not in text and not info.value.retriable and info.value.code == ResponseCode.SYSTEM_ERROR
        with pytest.raises(AccessDeniedError, match=r"PULL_MESSAGE \(topic T, group G1\)"):
            await pool.request(server.address, RemotingCommand(RequestCode.PULL_MESSAGE,
                                                               {"topic": "T", "consumerGroup": "G1"}), 5)
        assert [str(e).split(":")[2].strip() for e in refused] == ["HEART_BEAT (group G1) with access key app-key",
                                                                   "PULL_MESSAGE (topic T, group G1) with access key app-key"]
        await pool.close()
        await server.stop()
    run(main())


def test_without_credentials_the_refusal_says_so_and_the_instance_keeps_the_first() -> None:
    async def main() -> None:
        server = await _server([])
        instance = ClientInstance(server.address)
        heard: list[AccessDeniedError] = []
        instance.refusal_listeners.append(heard.append)
        for _ in range(2):
            with pytest.raises(AccessDeniedError, match="with no access key \\(set access_key and secret_key\\)"):
                await instance.pool.request(server.address, RemotingCommand(RequestCode.PULL_MESSAGE,
                                                                            {"topic": "T", "consumerGroup": "G"}), 5)
        assert instance.refusal is heard[0] and len(heard) == 2
        await instance.close()
        await server.stop()
    run(main())


@pytest.mark.parametrize("code, remark, refusal", [
    (ResponseCode.SYSTEM_ERROR, ACL_REMARK, True),
    (ResponseCode.SYSTEM_ERROR, "java.lang.NullPointerException", False),
    (ResponseCode.NO_PERMISSION, "Authentication failed. Please verify the credentials and try again.", True),
    (ResponseCode.NO_PERMISSION, "check signature failed.", True),
    (ResponseCode.NO_PERMISSION, "the topic[T] sending message is forbidden", False),   # perm set by operators
    (ResponseCode.NO_PERMISSION, "the broker[10.0.0.1] pulling message is forbidden", False),
    (ResponseCode.SUCCESS, "AclException", False),
])
def test_what_counts_as_a_refusal(code: int, remark: str, refusal: bool) -> None:
    assert is_access_refusal(code, remark) is refusal
    error = error_for_code(code, remark) if code != ResponseCode.SUCCESS else None
    if error is not None:
        assert isinstance(error, AccessDeniedError) is refusal
        if code == ResponseCode.NO_PERMISSION and not refusal:
            assert isinstance(error, NoPermissionError) and error.refresh_route  # waits, as before


def test_tls_to_a_plain_port_is_retriable_with_a_hint() -> None:
    """A server that hangs up mid-handshake may be restarting: retried like an outage, but the line says why."""
    async def main() -> None:
        server = await _server([])
        with pytest.raises(ConnectionClosedError) as info:
            await Connection.open(server.address, security=ClientSecurity(tls=True, tls_insecure=True))
        assert info.value.retriable and not isinstance(info.value, TlsError)
        assert "does it speak TLS at this address?" in str(info.value)
        await server.stop()
    run(main())
